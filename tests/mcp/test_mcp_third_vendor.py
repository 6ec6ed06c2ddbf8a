"""svc-monitor mcp takes every registered vendor (docs/mcp.md), driven by the official MCP SDK's stdio
client against a real monitor with the stand-in third vendor "acme" (tests/support/thirdvendor/),
registered by `SVC_VENDORS` only: its `posture`, `advice` and `guard` with `provider: "acme"`, its
resource, and `switch` to one of its accounts, which rewrites acme's export line, not Claude's.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

mcp = pytest.importorskip("mcp")
import anyio  # noqa: E402  (the SDK's own event loop library)
from mcp import Client, StdioServerParameters  # noqa: E402

from tests.support.home import REPO, accounts_path, canary, monitor_env, set_host_name, write_accounts  # noqa: E402
from tests.support.monitor import start_monitor  # noqa: E402
from tests.support.provider import ProviderServer  # noqa: E402
from tests.support.thirdvendor.server import AcmeServer, quota_reply  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

from svcposture.envfile.exportline import active_label  # noqa: E402

CLAUDE_TOKEN = canary("mcpacme")
KEY_ONE = "acme-key-CANARY-mcp-one-" + "5" * 16
KEY_TWO = "acme-key-CANARY-mcp-two-" + "6" * 16
SECRETS = (CLAUDE_TOKEN, KEY_ONE, KEY_TWO)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """A monitor with one Claude account and two acme keys (acme-one active)."""
    home = tmp_path_factory.mktemp("mcp-acme") / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "mcp-acme-node")
    reset_5h, reset_7d = int(time.time()) + 3600, int(time.time()) + 4 * 86400
    extra = ('ACME_KEY_ONE="%s"  # one@acme.example\nACME_KEY_TWO="%s"  # two@acme.example\n'
             'export ACME_KEY="$ACME_KEY_ONE"\n' % (KEY_ONE, KEY_TWO))
    write_accounts(accounts_path(home), [("ACCT1", CLAUDE_TOKEN, "c@x.example")], active="ACCT1", extra=extra)
    with ProviderServer() as provider, AcmeServer() as acme:
        provider.set_account(CLAUDE_TOKEN, five_hour=(0.30, "allowed"), seven_day=(0.10, "allowed"))
        acme.set_reply(KEY_ONE, quota_reply(0.42, 0.20, reset_5h, reset_7d))
        acme.set_reply(KEY_TWO, quota_reply(0.60, 0.05, reset_5h, reset_7d))
        env = monitor_env(home, provider.url, SVC_ACME_URL=acme.url, SVC_PROBE_INTERVAL_S="1",
                          SVC_POSTURE_TTL_S="1", SVC_GUARD_BUDGET_MS="5000", SVC_VENDORS="tests.support.thirdvendor")
        mon = start_monitor(env)
        try:
            wait_until(lambda: (mon.get_json("/api/accounts?provider=acme")[1].get("active") or {}).get("label"),
                       30, message="the acme posture")
            yield {"home": home, "env": dict(env, SVC_MONITOR_PORT=str(mon.port)), "mon": mon}
        finally:
            mon.stop()


def run_client(env: Dict[str, str], args: List[str], body: Callable[[Client], Any]) -> Any:
    """`body(client)` on a session with `svc-monitor mcp ARGS` started by the SDK's stdio client."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "svcposture", "monitor", "mcp", *args],
                                   env=env, cwd=str(REPO))
    out: List[Any] = []

    async def main() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            out.append(await body(client))
    anyio.run(main)
    return out[0]


def payload(result: Any) -> Any:
    assert result.structured_content == json.loads(result.content[-1].text)
    return result.structured_content


def switched_events(home: Path) -> List[Dict[str, Any]]:
    return [event for path in sorted((home / "svc" / "events").glob("*.jsonl"))
            for event in map(json.loads, path.read_bytes().splitlines())
            if event["attributes"]["event.name"] == "account.switched"]


def no_secret(*texts: str) -> None:
    for text in texts:
        assert not any(secret in text for secret in SECRETS), "a key leaked"


def test_the_read_tools_and_the_resource_take_the_third_vendor(node: Dict[str, Any]) -> None:
    async def body(client: Client) -> Any:
        listed = await client.list_tools()
        resources = await client.list_resources()
        calls = [await client.call_tool(name, args) for name, args in (
            ("posture", {"provider": "acme"}), ("advice", {"provider": "acme"}),
            ("guard", {"provider": "acme"}), ("guard", {"provider": "acme", "account": "acme-two", "reserve": 50}))]
        return listed, resources, calls, await client.read_resource("svcposture://posture/acme")
    listed, resources, (posture, advice, go, hold), read = run_client(node["env"], [], body)
    schema = {tool.name: tool.input_schema for tool in listed.tools}["posture"]
    assert schema["properties"]["provider"]["enum"] == ["claude", "codex", "copilot", "zai", "kimi", "acme"]
    assert [str(r.uri) for r in resources.resources] == ["svcposture://posture/" + name for name in (
        "claude", "codex", "copilot", "zai", "kimi", "acme")]
    assert [r.name for r in resources.resources][-1] == "Acme posture"
    assert not any(r.is_error for r in (posture, advice, go, hold))
    body = payload(posture)
    assert body["active"]["label"] == "acme-one" and [a["label"] for a in body["accounts"]] == ["acme-one", "acme-two"]
    assert body["active"]["provider"] == "acme" and body["active"]["fiveHour"]["pct"] == 42.0
    direct = node["mon"].get_json("/api/advice?provider=acme")[1]
    assert payload(advice)["provider"] == direct["provider"] == "acme"
    assert payload(advice)["active"] == direct["active"] == {"label": "acme-one", "email": "one@acme.example",
                                                             "health": "ok", "note": None, "fix": None}
    assert (payload(go)["decision"], payload(go)["account"], payload(go)["provider"]) == ("go", "acme-one", "acme")
    # acme-two's 5-hour window at 60 % holds under a 50 % reserve.
    assert (payload(hold)["decision"], payload(hold)["pct"]) == ("hold", 60.0)
    resource = json.loads(read.contents[0].text)
    assert resource["active"]["label"] == "acme-one" and read.contents[0].mime_type == "application/json"
    no_secret(posture.content[-1].text, advice.content[-1].text, read.contents[0].text)


def test_switch_makes_a_third_vendor_account_active(node: Dict[str, Any]) -> None:
    home, mon = node["home"], node["mon"]
    env_file = accounts_path(home)
    before = len(switched_events(home))

    async def body(client: Client) -> Any:
        return await client.call_tool("switch", {"to": "acme-two"})
    moved = run_client(node["env"], ["--allow-switch"], body)
    try:
        result = payload(moved)
        assert moved.is_error is False, result
        assert (result["switched"], result["from"], result["to"], result["provider"]) == (True, "acme-one",
                                                                                          "acme-two", "acme")
        data = env_file.read_bytes()
        assert data.count(b"export ACME_KEY=") == 1 and b'export ACME_KEY="$ACME_KEY_TWO"' in data
        assert active_label(data, "claude") == "acct1"  # Claude's export line as it was
        switched = switched_events(home)
        assert len(switched) == before + 1
        attributes = switched[-1]["attributes"]
        assert (attributes["account.provider"], attributes["account.to"], attributes["switch.reason"]) == (
            "acme", "acme-two", "manual")
        wait_until(lambda: mon.get_json("/api/accounts?provider=acme")[1]["active"]["label"] == "acme-two", 20,
                   message="the monitor to show acme-two")
        no_secret(moved.content[-1].text)
    finally:
        async def back(client: Client) -> Any:
            return await client.call_tool("switch", {"to": "acme-one"})
        assert payload(run_client(node["env"], ["--allow-switch"], back))["to"] == "acme-one"
        wait_until(lambda: mon.get_json("/api/accounts?provider=acme")[1]["active"]["label"] == "acme-one", 20,
                   message="the monitor to show acme-one again")
