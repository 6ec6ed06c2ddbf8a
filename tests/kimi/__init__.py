"""Tests of svcposture.kimi (docs/testing.md maps each module to its tests)."""
