"""Tests of svcposture.steering (docs/testing.md maps each module to its tests)."""
