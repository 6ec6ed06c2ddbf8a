"""Tests of svcposture.copilot (docs/testing.md maps each module to its tests)."""
