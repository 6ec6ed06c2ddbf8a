"""schemathesis (`st run --checks all`) over every route the monitor's own OpenAPI
document lists at run time, against a real monitor probing the test provider:
what the document says must be what the server does, SSE events included."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Set, Tuple
from xml.etree import ElementTree

import pytest

from tests.support.home import canary, node_env
from tests.support.provider import ProviderServer

TOK1 = canary("st1")
TOK2 = canary("st2")
MAX_EXAMPLES = "25"          # per operation
REQUEST_TIMEOUT_S = "20"
# An event stream never ends: schemathesis reads it until this many events (or the
# request timeout). The on-connect frame is the one event every stream sends at once.
CONFIG = "max-stream-events = 1\n"
# schemathesis never tests the operation that serves the document it loaded.
SELF = ("GET", "/api/openapi.json")


def _schemathesis_or_skip() -> None:
    try:
        import schemathesis  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("schemathesis missing under CI (scripts/run_tests.sh installs it)")
        pytest.skip("schemathesis not installed (pip install schemathesis, or bash scripts/run_tests.sh)")


def st_run(url: str, workdir: Path) -> Tuple[subprocess.CompletedProcess, Set[Tuple[str, str]]]:
    """Run `st run --checks all`; (the process, the operations its JUnit report lists)."""
    config = workdir / "schemathesis.toml"
    config.write_text(CONFIG)
    junit = workdir / "junit.xml"
    cmd = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
           url + "/api/openapi.json", "--checks", "all", "--max-examples", MAX_EXAMPLES,
           "--request-timeout", REQUEST_TIMEOUT_S, "--report", "junit", "--report-junit-path", str(junit)]
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    done = subprocess.run(cmd, cwd=str(workdir), env=env, capture_output=True, text=True, timeout=400,
                          stdin=subprocess.DEVNULL)
    tested: Set[Tuple[str, str]] = set()
    if junit.exists():
        for case in ElementTree.parse(str(junit)).iter("testcase"):
            method, _, path = case.get("name", "").partition(" ")
            tested.add((method, path))
    return done, tested


@pytest.fixture(scope="module")
def provider():
    with ProviderServer() as p:
        p.set_account(TOK1, five_hour=(0.30, "allowed"))
        p.set_account(TOK2, five_hour=(0.91, "allowed_warning"))
        yield p


@pytest.mark.parametrize("probe", ["probing", "disabled"])
def test_schemathesis_finds_nothing_on_any_route(tmp_path, provider, probe, monitors):
    _schemathesis_or_skip()
    home = tmp_path / "home"
    home.mkdir()
    if probe == "probing":
        env = node_env(home, provider.url, [("ACCT1", TOK1, "one@example.com"), ("ACCT2", TOK2, "two@example.com")],
                       active="ACCT1", extra={"SVC_SSE_KEEPALIVE_S": "1"})
        args = []
    else:
        env = node_env(home, None, extra={"SVC_SSE_KEEPALIVE_S": "1", "SVC_QUOTA_SAMPLER": "0"})
        args = ["--no-probe"]
    monitor = monitors.start(env, args)
    try:
        status, _, body = monitor.get("/api/openapi.json")
        assert status == 200
        listed = {(method.upper(), path) for path, item in json.loads(body)["paths"].items()
                  for method in item if method in ("get", "head", "post", "put", "delete", "patch")}
        done, tested = st_run(monitor.url, tmp_path)
        out = done.stdout + done.stderr
        assert done.returncode == 0, out[-6000:]
        assert "No issues found" in out, out[-6000:]
        # Every operation the document lists (new routes included) was exercised.
        assert tested == listed - {SELF}, (sorted(listed - tested), sorted(tested - listed))
    finally:
        code = monitor.stop()
    log = monitor.stderr_text()
    assert code == 0 and "Traceback" not in log, log
    assert TOK1 not in out + log and TOK2 not in out + log
