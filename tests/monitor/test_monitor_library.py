"""The monitor as a library: start_server(home) serves the real surface in a thread,
and shutdown() + server_close() stop the server and its posture service."""
from __future__ import annotations

import json
import os
import socket
import urllib.request
from pathlib import Path

from svcposture.monitor.main import start_server


def _get(url: str):
    # Loopback never goes through a proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=30) as resp:
        return resp.status, resp.headers, json.loads(resp.read().decode("utf-8"))


def _write_node_name(home: Path, name: str) -> None:
    config = home / ".config" / "svc"
    config.mkdir(parents=True, mode=0o700)
    fd = os.open(str(config / "node.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"svc": {"host": {"name": name}}}, handle)


def test_start_server_serves_a_home_without_accounts_and_stops_cleanly(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    _write_node_name(home, "lib-node")
    environ = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SVC_PROBE_INTERVAL_S": "120"}

    server, thread = start_server(home, environ=environ)
    port = server.server_port
    try:
        assert thread.daemon and thread.is_alive()
        assert server.url == "http://127.0.0.1:%d" % port

        status, _headers, health = _get(server.url + "/healthz")
        assert status == 200
        assert health["ok"] is True and health["node"] == "lib-node"
        assert health["probeIntervalS"] == 120.0  # what a page needs to tell a stale posture

        status, headers, body = _get(server.url + "/api/accounts")
        assert status == 200
        assert headers["Cache-Control"] == "no-store"
        assert body == {"available": False, "node": "lib-node"}
    finally:
        server.shutdown()
        server.server_close()

    thread.join(10)
    assert not thread.is_alive()
    assert server.node.postures["claude"].broadcast.closed  # the posture service stopped with the server
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.settimeout(5)
    try:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing listens any more
    finally:
        probe.close()
    # Library use leaves no trace of a running monitor process.
    assert not (home / "svc" / "run" / "monitor.json").exists()
    assert not (home / "svc" / "run" / "monitor.instance.lock").exists()
