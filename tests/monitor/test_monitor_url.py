"""Every terminal client finds the monitor by one rule (settings.monitor_url) and names the URL it
tried when nothing answers: statusline, HUD, guard and switch, as real children, against a real
monitor that the node's monitor.json names and a port variable that names another place."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from svcposture.settings import DEFAULT_PORT, monitor_url
from tests.support.home import canary, monitor_env, set_host_name, write_json
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer

TOK1 = canary("url1")
TOK2 = canary("url2")


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[Dict[str, str]]:
    """A running monitor whose ~/svc/run/monitor.json records its URL."""
    home = tmp_path_factory.mktemp("urlnode") / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "url-node")
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.10, "allowed"), seven_day=(0.20, "allowed"))
        provider.set_account(TOK2, five_hour=(0.05, "allowed"), seven_day=(0.05, "allowed"))
        env = monitor_env(home, provider.url, accounts=[("ACCT1", TOK1, "one@example.com"),
                                                        ("ACCT2", TOK2, "two@example.com")],
                          active="ACCT1", SVC_GUARD_BUDGET_MS="5000", SVC_STATUSLINE_BUDGET_MS="5000")
        mon = start_monitor(env)
        try:
            record = json.loads((home / "svc" / "run" / "monitor.json").read_text())
            assert record["url"].rstrip("/") == mon.url.rstrip("/"), record
            yield {k: v for k, v in env.items() if not k.startswith("SVC_MONITOR_")}
        finally:
            mon.stop()


def clients() -> List[Tuple[str, ...]]:
    return [("statusline",), ("hud", "--once"), ("guard",), ("switch", "--best", "--dry-run")]


def run(env: Dict[str, str], *args: str) -> Tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("args", clients(), ids=lambda a: a[0])
def test_without_a_port_setting_every_client_reads_the_recorded_monitor(node, args):
    code, text = run(node, *args)
    assert "not running" not in text and "did not answer" not in text and "cannot reach" not in text, text
    assert code in (0, 1), text   # switch --dry-run and guard both answer from the posture


@pytest.mark.parametrize("args", clients(), ids=lambda a: a[0])
def test_a_port_setting_wins_and_the_client_names_the_url_it_tried(node, args):
    port = free_port()
    code, text = run(dict(node, SVC_MONITOR_PORT=str(port)), *args)
    assert "http://127.0.0.1:%d" % port in text, text
    assert "acct1" not in text.lower() or args[0] == "switch", text  # nothing read from the recorded monitor


def test_the_rule_itself(tmp_path: Path):
    assert monitor_url({}) == "http://127.0.0.1:%d" % DEFAULT_PORT
    assert monitor_url({"SVC_MONITOR_PORT": "7455"}) == "http://127.0.0.1:7455"
    assert monitor_url({"SVC_MONITOR_BIND": "0.0.0.0", "SVC_MONITOR_PORT": "7455"}) == "http://127.0.0.1:7455"
    assert monitor_url({"SVC_MONITOR_BIND": "::", "SVC_MONITOR_PORT": "7455"}) == "http://[::1]:7455"
    assert monitor_url({"SVC_MONITOR_BIND": "10.1.2.3"}) == "http://10.1.2.3:%d" % DEFAULT_PORT
    # A port the monitor itself would refuse counts as unset; the recorded URL is not consulted then.
    assert monitor_url({"SVC_MONITOR_PORT": "junk"}) == "http://127.0.0.1:%d" % DEFAULT_PORT
    write_json(tmp_path / "svc" / "run" / "monitor.json", {"pid": 1, "url": "http://127.0.0.1:7777/"})
    assert monitor_url({"HOME": str(tmp_path)}) == "http://127.0.0.1:7777"
    assert monitor_url({"HOME": str(tmp_path), "SVC_MONITOR_PORT": "7455"}) == "http://127.0.0.1:7455"
    for hostile in ({"url": "javascript:alert(1)"}, {"url": 5}, [], {"url": "http://" + "x" * 5000}):
        write_json(tmp_path / "svc" / "run" / "monitor.json", hostile)
        assert monitor_url({"HOME": str(tmp_path)}) == "http://127.0.0.1:%d" % DEFAULT_PORT, hostile
