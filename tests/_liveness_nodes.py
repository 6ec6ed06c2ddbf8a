"""Test helpers: lay out a node's HOME (host name, roster, anchor, tracker token) and run svc-cluster."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional

from conftest import REPO, clean_env

# A planted token: tests assert it never shows up in any output or log.
CANARY = "lin_oauth_CANARY_5e1f0c9a7b2d4e6f"
BEARER = "Bearer " + CANARY


def _write(path: Path, obj: Any, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    os.chmod(str(path), mode)


def make_node(root: Path, host: Optional[str], roster: Optional[Iterable[str]], anchor: Optional[str] = None,
              token: Optional[str] = CANARY, name: Optional[str] = None) -> Path:
    """A HOME for one host under `root`; returns the HOME path."""
    home = root / (name or host or "node")
    home.mkdir(parents=True, exist_ok=True)
    if host is not None:
        _write(home / ".config" / "svc" / "node.json", {"svc": {"host": {"name": host}}})
    secrets: Dict[str, Any] = {"svc": {}}
    if token is not None:
        secrets["svc"]["tracker"] = {"bot": {"orchestrator": {"accessToken": token}}}
    if anchor is not None:
        secrets["svc"]["cluster"] = {"livenessAnchorIssue": anchor}
    _write(home / ".config" / "svc" / "cluster-secrets.json", secrets)
    if roster is not None:
        _write(home / "svc" / "cluster" / "cluster.json", {"roster": list(roster)}, 0o644)
    return home


def node_env(home: Path, tracker_url: Optional[str] = None, interval_ms: Optional[int] = None,
             **extra: str) -> Dict[str, str]:
    env = clean_env(home)
    if tracker_url:
        env["SVC_TRACKER_URL"] = tracker_url
    if interval_ms:
        env["EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS"] = str(interval_ms)
    env.update(extra)
    return env


def run_cluster(env: Dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "svcposture", "cluster", *args], env=env, cwd=str(REPO),
                          capture_output=True, text=True, timeout=timeout)


def run_json(env: Dict[str, str], *args: str) -> Any:
    proc = run_cluster(env, *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("not JSON (exit %d): %r / %r" % (proc.returncode, proc.stdout, proc.stderr))


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.02) -> Any:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met within %.1f s" % timeout)
        time.sleep(interval)


class ListHandler(logging.Handler):
    """Collects formatted records of one logger (with exception text) for assertions."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter("%(levelname)s %(message)s").format(record))

    def text(self) -> str:
        return "\n".join(self.lines)


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
