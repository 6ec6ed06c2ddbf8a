"""The svcposture test suite (a package so that `tests.support` is importable by name)."""
