"""Tests of svcposture.claude (docs/testing.md maps each module to its tests)."""
