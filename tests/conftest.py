"""Shared fixtures: a throw-away HOME and a clean environment for child processes.

The helpers themselves live in tests/support/ (see its __init__ for how they are imported)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from tests.support.home import clean_env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir(mode=0o700)
    return h


@pytest.fixture
def env(home: Path) -> Dict[str, str]:
    return clean_env(home)


@pytest.fixture
def paths(home: Path):
    from svcposture.paths import Paths
    return Paths(home, environ={"HOME": str(home)})


@pytest.fixture
def browser():
    """A headless chromium WebDriver (1200x800) for the dashboard's tests."""
    from tests.support.browser import chromium

    with chromium(1200, 800) as driver:
        yield driver
