"""Shared fixtures: a throw-away HOME and a clean environment for child processes."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))


def clean_env(home: Path) -> Dict[str, str]:
    """The environment a node process gets in tests: HOME relocated, no stray
    SVC_*/MODEL_* settings from the developer's shell, the repo importable."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SVC_", "MODEL_", "EXECUTION_CORE_"))}
    env["HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("NO_COLOR", None)
    return env


def checker_python() -> str:
    """An interpreter that can run shared/tools/check_vendorable.py.

    The checker knows the stdlib from sys.stdlib_module_names (3.10+); on an
    older interpreter a newer python3 from PATH judges the same files."""
    if hasattr(sys, "stdlib_module_names"):
        return sys.executable
    python = shutil.which("python3")
    if python and subprocess.run([python, "-c", "import sys; sys.stdlib_module_names"],
                                 capture_output=True).returncode == 0:
        return python
    pytest.skip("no interpreter with sys.stdlib_module_names to run the checker")
    raise AssertionError("unreachable")


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
