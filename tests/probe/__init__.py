"""Tests of svcposture.probe (docs/testing.md maps each module to its tests)."""
