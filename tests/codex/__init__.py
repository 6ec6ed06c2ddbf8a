"""Tests of svcposture.codex (docs/testing.md maps each module to its tests)."""
