"""Tests of svcposture.firstrun (docs/testing.md maps each module to its tests)."""
