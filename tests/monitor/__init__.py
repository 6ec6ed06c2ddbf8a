"""Tests of svcposture.monitor (docs/testing.md maps each module to its tests)."""
