"""Tests of svcposture.cluster (docs/testing.md maps each module to its tests)."""
