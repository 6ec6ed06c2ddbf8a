"""scripts/run_tests.sh (what .ci/run runs) says which interpreters ran and how each did: a missing one
fails under CI and is a warning elsewhere, and a pytest run that collects nothing is a failure.

The script runs here with its installs skipped (SVC_TEST_NO_INSTALL) and pytest arguments naming one
small test, so each case costs a pytest start or two, not a suite."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

from tests.support.home import REPO

SCRIPT = REPO / "scripts" / "run_tests.sh"
ONE_TEST = ["tests/test_time.py", "-k", "test_formats"]
NO_SUCH_VERSION = "3.999"


def script_env(tmp_path: Path, **settings: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SVC_TEST_PYTHONS", "PYTEST_XDIST_WORKER")}
    env.update(SVC_TEST_NO_INSTALL="1", PYTHON=sys.executable, TMPDIR=str(tmp_path), **settings)
    return env


def run_script(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=str(REPO), env=script_env(tmp_path, **settings),
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def summary(done: subprocess.CompletedProcess) -> str:
    return done.stdout.partition("run_tests: interpreters")[2]


def test_a_missing_interpreter_fails_under_ci(tmp_path: Path) -> None:
    done = run_script(tmp_path, *ONE_TEST, SVC_TEST_PYTHONS=NO_SUCH_VERSION, CI="true")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = summary(done)
    assert "Python %s: FAILED (no interpreter found" % NO_SUCH_VERSION in lines, lines
    assert "Python %d.%d." % sys.version_info[:2] in lines and ": passed" in lines, lines


def test_a_missing_interpreter_is_a_warning_elsewhere(tmp_path: Path) -> None:
    done = run_script(tmp_path, *ONE_TEST, SVC_TEST_PYTHONS=NO_SUCH_VERSION)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Python %s: not run (no interpreter found" % NO_SUCH_VERSION in summary(done)


def test_quick_runs_the_default_interpreter_only(tmp_path: Path) -> None:
    done = run_script(tmp_path, "--quick", *ONE_TEST, SVC_TEST_PYTHONS=NO_SUCH_VERSION, CI="true")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = summary(done)
    assert NO_SUCH_VERSION not in lines and lines.count(": passed") == 1, lines


def test_a_run_that_collects_no_test_fails(tmp_path: Path) -> None:
    done = run_script(tmp_path, "--quick", "tests/test_time.py", "-k", "no_test_has_this_name")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED (pytest ran no test)" in summary(done)



def test_the_files_the_conftest_names_exist():
    """A renamed or moved file must not silently leave the serial set."""
    from tests.conftest import SERIAL_FILES
    from tests.support.home import REPO

    assert [name for name in SERIAL_FILES if not (REPO / name).is_file()] == []
