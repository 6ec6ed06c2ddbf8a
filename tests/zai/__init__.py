"""Tests of svcposture.zai (docs/testing.md maps each module to its tests)."""
