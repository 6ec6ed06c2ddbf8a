"""Tests of svcposture.envfile (docs/testing.md maps each module to its tests)."""
