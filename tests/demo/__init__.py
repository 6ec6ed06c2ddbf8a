"""Tests of svcposture.demo (docs/testing.md maps each module to its tests)."""
