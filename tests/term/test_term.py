"""The terminal clients live in svcposture.term, node set-up in svcposture.firstrun;
svcposture.monitor is the HTTP side only. The commands are where they were."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.home import REPO, clean_env


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=str(REPO), capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_term_package_imports_nothing_of_its_own():
    added = _fresh("import sys, svcposture; before = set(sys.modules); import svcposture.term; "
                   "print(' '.join(sorted(set(sys.modules) - before)))")
    assert added == "svcposture.term"


def test_a_status_line_render_loads_nothing_of_the_http_side():
    loaded = _fresh("import sys; from svcposture.term import statusline; "
                    "statusline.run(['--url', 'http://127.0.0.1:9'], {}, -1, 0.0); "
                    "print(' '.join(m for m in sys.modules if m.startswith('svcposture.')))").split()
    assert "svcposture.term.statusline" in loaded and "svcposture.term.line" in loaded
    assert not [m for m in loaded if m.startswith("svcposture.monitor")]


@pytest.mark.parametrize("name", ["hud", "statusline", "line", "nodeinit"])
def test_the_monitor_package_holds_no_terminal_client(name):
    assert importlib.util.find_spec("svcposture.monitor." + name) is None


@pytest.mark.parametrize("module", ["svcposture.term.hud", "svcposture.term.statusline", "svcposture.term.line",
                                    "svcposture.firstrun.init"])
def test_each_client_is_at_its_new_home(module):
    assert importlib.util.find_spec(module) is not None


@pytest.mark.parametrize("command,expect", [
    (("monitor", "hud", "--help"), "svc-monitor hud"),
    (("monitor", "statusline", "--help"), "statusline"),
    (("monitor", "init", "--help"), "svc-monitor init"),
])
def test_the_commands_and_their_help_are_unchanged(tmp_path: Path, command, expect):
    done = subprocess.run([sys.executable, "-m", "svcposture", *command], cwd=str(REPO), env=clean_env(tmp_path),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert expect in done.stdout and "Traceback" not in done.stderr
