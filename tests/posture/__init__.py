"""Tests of svcposture.posture (docs/testing.md maps each module to its tests)."""
