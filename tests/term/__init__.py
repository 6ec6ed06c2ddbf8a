"""Tests of svcposture.term (docs/testing.md maps each module to its tests)."""
