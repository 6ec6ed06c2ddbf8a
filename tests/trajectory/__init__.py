"""Tests of svcposture.trajectory (docs/testing.md maps each module to its tests)."""
