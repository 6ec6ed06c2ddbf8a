"""Tests of svcposture.mcp (docs/testing.md maps each module to its tests)."""
