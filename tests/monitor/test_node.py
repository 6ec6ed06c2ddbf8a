"""node.py: the library's start_server(home) builds a node by the face's home rule
(Paths.for_home), so the node's children see its home, never the caller's $HOME."""
from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

from svcposture.monitor.node import start_server
from tests.support.home import canary, node_env, set_host_name
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

TOKEN = canary("node1")


def _get(url: str):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=30) as resp:
        return json.loads(resp.read().decode("utf-8"))


def test_start_server_gives_the_probe_child_the_nodes_home(tmp_path: Path, monkeypatch) -> None:
    node_home = tmp_path / "node" / "home"
    node_home.mkdir(parents=True, mode=0o700)
    set_host_name(node_home, "lib-node")
    caller_home = tmp_path / "caller"
    caller_home.mkdir()
    with ProviderServer() as provider:
        provider.set_account(TOKEN, five_hour=(0.40, "allowed"))
        env = node_env(node_home, provider.url, [("ACCT1", TOKEN, "one@example.com")], active="ACCT1",
                       extra={"SVC_PROBE_INTERVAL_S": "3600"})
        env["HOME"] = str(caller_home)  # the calling process's own home, which has no accounts
        monkeypatch.chdir(tmp_path)
        server, thread = start_server(os.path.join("node", "home"), environ=env)  # relative: made absolute
        try:
            assert server.node.postures["claude"].environ["HOME"] == str(node_home)
            assert server.node.paths.home == node_home
            assert env["HOME"] == str(caller_home)  # the caller's mapping is left alone
            body = wait_until(lambda: (lambda b: b if b.get("available") else None)(
                _get(server.url + "/api/accounts")), timeout=60)
            assert body["node"] == "lib-node" and body["accounts"][0]["email"] == "one@example.com"
        finally:
            server.shutdown()
            server.server_close()
        thread.join(10)
        assert not thread.is_alive()
