"""Tests of svcposture.keyvendor (docs/testing.md maps each module to its tests)."""
