"""The command-line face under test: `python -m svcposture ...` as a real child
or through the real entry point in this process, and what tests read back
(output checks, captured log records)."""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from .home import REPO


def cli(env: Dict[str, str], *args: str, input: Optional[bytes] = None, timeout: float = 60,
        cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """`python -m svcposture ARGS` as a real child; stdout and stderr as text."""
    done = subprocess.run([sys.executable, "-m", "svcposture", *args], env=env, input=input,
                          capture_output=True, timeout=timeout, cwd=str(cwd) if cwd else None)
    done.stdout = done.stdout.decode("utf-8", "replace")
    done.stderr = done.stderr.decode("utf-8", "replace")
    return done


def run_cluster(env: Dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`svc-cluster ARGS` as a real child, run from the checkout."""
    return cli(env, "cluster", *args, timeout=timeout, cwd=REPO)


def run_json(env: Dict[str, str], *args: str) -> Any:
    """(exit code, parsed stdout) of `svc-cluster ARGS`; no traceback allowed."""
    proc = run_cluster(env, *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("not JSON (exit %d): %r / %r" % (proc.returncode, proc.stdout, proc.stderr))


def run_inproc(monkeypatch: Any, capsys: Any, env: Dict[str, str], *args: str) -> Any:
    """svc-cluster ARGS through the real entry point, in this process (cheaper than a child)."""
    from svcposture.cli import cluster_main

    for key in list(os.environ):
        if key.startswith(("SVC_", "MODEL_", "EXECUTION_CORE_")):
            monkeypatch.delenv(key)
    for key, value in env.items():
        if key == "HOME" or key.startswith(("SVC_", "EXECUTION_CORE_")):
            monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = cluster_main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_clean(done: subprocess.CompletedProcess, *secrets: str) -> None:
    """No traceback and none of `secrets` in a child's output."""
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    for secret in secrets:
        assert secret not in text, "secret leaked into output"


class ListHandler(logging.Handler):
    """Collects formatted records of one logger (with exception text) for assertions."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter("%(levelname)s %(message)s").format(record))

    def text(self) -> str:
        return "\n".join(self.lines)


def checker_python() -> str:
    """An interpreter that can run shared/tools/check_vendorable.py.

    The checker knows the stdlib from sys.stdlib_module_names (3.10+); on an
    older interpreter a newer python3 from PATH judges the same files."""
    import pytest

    if hasattr(sys, "stdlib_module_names"):
        return sys.executable
    python = shutil.which("python3")
    if python and subprocess.run([python, "-c", "import sys; sys.stdlib_module_names"],
                                 capture_output=True).returncode == 0:
        return python
    pytest.skip("no interpreter with sys.stdlib_module_names to run the checker")
    raise AssertionError("unreachable")
