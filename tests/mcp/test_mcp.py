"""svc-monitor mcp (docs/mcp.md) driven by the official MCP Python SDK's stdio client, against a real
monitor probing the stand-in providers (Claude and Codex).

Every tool (posture, advice, guard, fleet_accounts, fleet_owner, switch), both resources, `--allow-switch` and its
absence, and the monitor being down. What the monitor does not serve on this branch's base (the advice
and the fleet by account) is served by a scripted HTTP server with the documented bodies.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

mcp = pytest.importorskip("mcp")
import anyio  # noqa: E402  (the SDK's own event loop library)
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types import ErrorData  # noqa: E402

from tests.support.codex import CodexServer, make_login, usage_reply  # noqa: E402
from tests.support.home import REPO, canary, monitor_env, set_host_name  # noqa: E402
from tests.support.httpserver import StandInServer, send_raw  # noqa: E402
from tests.support.monitor import start_monitor  # noqa: E402
from tests.support.provider import ProviderServer  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

from svcposture.envfile.exportline import active_label  # noqa: E402

TOK1, TOK2, TOK3, CXTOK = canary("mcp1"), canary("mcp2"), canary("mcp3"), canary("mcpcx")
CLOSED_URL = "http://127.0.0.1:9"  # discard port: nothing listens
READ_TOOLS = {"posture", "advice", "guard"}
GUARD_FIELDS = {"decision", "account", "provider", "reason", "window", "pct", "reservePct", "resetsAt", "retryAfterS"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """A monitor with three Claude accounts (acct3's token refused) and one Codex login."""
    root = tmp_path_factory.mktemp("mcp")
    home = root / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "mcp-node")
    make_login(root / "cx", CXTOK, account_id="acct-cx")
    with ProviderServer() as provider, CodexServer() as codex:
        # Fixed resets: each probe would otherwise move them, and the tool's answer is compared with the command's.
        resets = {"reset_5h": time.time() + 3 * 3600, "reset_7d": time.time() + 4 * 86400}
        provider.set_account(TOK1, five_hour=(0.10, "allowed"), seven_day=(0.20, "allowed"), **resets)
        provider.set_account(TOK2, five_hour=(0.60, "allowed"), seven_day=(0.05, "allowed"), **resets)
        provider.set_account(TOK3, http_status=401)
        codex.set_reply(CXTOK, usage_reply(55, 40))
        env = monitor_env(home, provider.url, SVC_CODEX_URL=codex.url, SVC_PROBE_INTERVAL_S="5",
                          SVC_POSTURE_TTL_S="5", SVC_GUARD_BUDGET_MS="5000",
                          accounts=[("ACCT1", TOK1, "one@example.com"), ("ACCT2", TOK2, "two@example.com"),
                                    ("ACCT3", TOK3, "three@example.com")], active="ACCT1")
        env_file = home / ".config" / "svc" / "model-accounts.env"
        with open(str(env_file), "a") as fh:
            fh.write("CODEX_HOME_CX=%s  # cx@example.com\nexport CODEX_HOME=\"$CODEX_HOME_CX\"\n" % (root / "cx"))
        mon = start_monitor(env)
        try:
            wait_until(lambda: (mon.get_json("/api/accounts?provider=codex")[1].get("active") or {}).get("label"),
                       30, message="the Codex posture")
            wait_until(lambda: len(mon.get_json("/api/accounts")[1].get("accounts") or []) == 3, 30,
                       message="the Claude posture")
            yield {"home": home, "env": dict(env, SVC_MONITOR_PORT=str(mon.port)), "mon": mon, "env_file": env_file,
                   "provider": provider}
        finally:
            mon.stop()


def run_client(env: Dict[str, str], args: List[str], body: Callable[[Client], Any], mode: str = "auto") -> Any:
    """`body(client)` on a session with `svc-monitor mcp ARGS` started by the SDK's stdio client.

    `mode="auto"`, the SDK's default, first probes `server/discover` (the 2026-07-28 era), which this
    handshake-era server answers "method not found", then falls back to `initialize`; `"legacy"`
    goes straight to `initialize`."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "svcposture", "monitor", "mcp", *args],
                                   env=env, cwd=str(REPO))
    out: List[Any] = []

    async def main() -> None:
        async with Client(params, read_timeout_seconds=60, mode=mode) as client:
            out.append(await body(client))
    anyio.run(main)
    return out[0]


@pytest.fixture()
def sdk_asks_2025_06_18(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's client offering 2025-06-18 in `initialize`, as a client of that version does."""
    import mcp.client.session as sdk_session
    monkeypatch.setattr(sdk_session, "LATEST_HANDSHAKE_VERSION", "2025-06-18")


def payload(result: Any) -> Any:
    """A tool result's body: its structured content, which the JSON text says too."""
    assert result.structured_content == json.loads(result.content[-1].text)
    return result.structured_content


def switched_events(home: Path) -> List[Dict[str, Any]]:
    out = []
    for path in sorted((home / "svc" / "events").glob("*.jsonl")):
        for raw in path.read_bytes().splitlines():
            event = json.loads(raw)
            if event["attributes"]["event.name"] == "account.switched":
                out.append(event)
    return out


def no_token(*texts: str) -> None:
    for text in texts:
        for tok in (TOK1, TOK2, TOK3, CXTOK):
            assert tok not in text, "a token leaked"


# ---------------------------------------------------------------- listing

def test_initialize_lists_the_read_tools_with_closed_schemas(node: Dict[str, Any]) -> None:
    async def body(client: Client) -> Any:
        return client.protocol_version, client.server_info, await client.list_tools()
    version, info, listed = run_client(node["env"], [], body)
    # The SDK offers 2025-11-25 in initialize (after its server/discover probe finds no 2026-era server).
    assert version == "2025-11-25" and info.name == "svcposture" and info.description
    tools = {tool.name: tool for tool in listed.tools}
    # No fleet on this node (no anchor) and no --allow-switch: three tools.
    assert set(tools) == READ_TOOLS
    for tool in tools.values():
        assert tool.input_schema["type"] == "object" and tool.input_schema["additionalProperties"] is False
        assert tool.description and tool.annotations.read_only_hint is True
    assert tools["guard"].input_schema["properties"]["reserve"] == {
        "type": "integer", "minimum": 0, "maximum": 50, "description": tools["guard"].input_schema[
            "properties"]["reserve"]["description"]}
    assert tools["posture"].input_schema["properties"]["provider"]["enum"] == ["claude", "codex", "copilot", "zai",
                                                                          "kimi"]


# ---------------------------------------------------------------- posture and the resources

def test_posture_is_the_monitors_body_without_error_internals(node: Dict[str, Any]) -> None:
    async def body(client: Client) -> Any:
        return await client.call_tool("posture", {}), await client.call_tool("posture", {"provider": "codex"})
    claude, codex = run_client(node["env"], [], body)
    assert claude.is_error is False and codex.is_error is False
    got = payload(claude)
    direct = node["mon"].get_json("/api/accounts")[1]
    assert got["active"]["label"] == direct["active"]["label"] == "acct1"
    assert [a["label"] for a in got["accounts"]] == [a["label"] for a in direct["accounts"]]
    assert got["active"]["fiveHour"]["pct"] == 10.0 and got["active"]["sevenDay"]["pct"] == 20.0
    # acct3's refused token: the monitor says httpStatus 401; the tool keeps the kind and the sentence only.
    raw = [a for a in direct["accounts"] if a["label"] == "acct3"][0]["error"]
    assert raw["kind"] == "auth" and raw["httpStatus"] == 401
    shown = [a for a in got["accounts"] if a["label"] == "acct3"][0]["error"]
    assert shown == {"kind": "auth", "message": raw["message"]}
    cx = payload(codex)
    assert cx["active"]["label"].startswith("codex-") and cx["active"]["fiveHour"]["pct"] == 55.0
    no_token(claude.content[0].text, codex.content[0].text)


def test_both_resources_list_and_read_as_json(node: Dict[str, Any]) -> None:
    async def body(client: Client) -> Any:
        listed = await client.list_resources()
        reads = [await client.read_resource(r.uri) for r in listed.resources]
        try:
            await client.read_resource("svcposture://posture/gemini")
            missing = None
        except MCPError as exc:
            missing = exc
        return listed, reads, missing
    listed, reads, missing = run_client(node["env"], [], body)
    assert [str(r.uri) for r in listed.resources] == ["svcposture://posture/" + name for name in (
        "claude", "codex", "copilot", "zai", "kimi")]
    assert {r.mime_type for r in listed.resources} == {"application/json"}
    claude, codex, *others = (json.loads(r.contents[0].text) for r in reads)
    assert [body["available"] for body in others] == [False, False, False]  # no line of theirs on this node
    assert reads[0].contents[0].mime_type == "application/json"
    assert claude["active"]["label"] == "acct1" and codex["active"]["label"].startswith("codex-")
    assert "httpStatus" not in json.dumps(claude)
    assert missing is not None and missing.error.code == -32002 and "gemini" in missing.error.message


# ---------------------------------------------------------------- guard

def guard_cli(env: Dict[str, str], *args: str) -> Dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "guard", "--json", *args], env=env,
                          capture_output=True, timeout=60, cwd=str(REPO))
    return json.loads(done.stdout)


def test_guard_gives_the_commands_decision(node: Dict[str, Any]) -> None:
    async def body(client: Client) -> Any:
        return [await client.call_tool("guard", args) for args in
                ({}, {"account": "acct2", "reserve": 50}, {"account": "acct2", "reserve": 30},
                 {"provider": "codex", "reserve": 40}, {"provider": "codex", "reserve": 50})]
    results = run_client(node["env"], [], body)
    go, hold, go2, cx_go, cx_hold = (payload(r) for r in results)
    assert all(r.is_error is False for r in results)
    assert set(go) == GUARD_FIELDS and go["decision"] == "go" and go["account"] == "acct1"
    # acct2's 5-hour window at 60 % holds under a 50 % reserve (limit 50 %), not under 30 % (limit 70 %).
    assert hold["decision"] == "hold" and hold["window"] == "five_hour" and hold["pct"] == 60.0
    assert hold["reservePct"] == 50 and hold["retryAfterS"] > 0
    assert go2["decision"] == "go" and go2["reservePct"] == 30
    assert (cx_go["decision"], cx_hold["decision"]) == ("go", "hold") and cx_hold["provider"] == "codex"
    # The same answer as the command's, field for field (the wait until the reset aside).
    cli = guard_cli(node["env"], "--account", "acct2", "--reserve", "50")
    assert {k: v for k, v in cli.items() if k != "retryAfterS"} == {k: v for k, v in hold.items()
                                                                    if k != "retryAfterS"}
    assert guard_cli(node["env"]) == go


BAD_ARGUMENTS = [("guard", {"reserve": 51}, "reserve must be an integer from 0 to 50"),
                 ("guard", {"reserve": "10"}, "reserve must be an integer"),
                 ("guard", {"reserve": True}, "reserve must be an integer"),
                 ("guard", {"account": ""}, "account must not be empty"),
                 ("guard", {"account": "a" * 81}, "at most 80 characters"),
                 ("guard", {"wait": 5}, "unknown argument 'wait'"),
                 ("guard", {"account": "acct9"}, "acct9"),
                 ("posture", {"provider": "gemini"}, "provider must be one of claude, codex"),
                 ("advice", {"provider": None}, "provider must be a string"),
                 ("fleet_accounts", {"x": 1}, "unknown argument 'x'"),
                 ("fleet_owner", {}, "ticket is required"),
                 ("fleet_owner", {"ticket": "ENG 1"}, "'ENG 1' is not a tracker ticket identifier"),
                 ("fleet_owner", {"ticket": "ENG-1", "provider": "gemini"}, "provider must be one of claude, codex")]


def _call_all(node: Dict[str, Any], mode: str = "auto") -> Any:
    async def body(client: Client) -> Any:
        answers: List[Any] = []
        for name, args, _ in BAD_ARGUMENTS + [("nope", {}, "")]:
            try:
                answers.append(await client.call_tool(name, args))
            except MCPError as exc:
                answers.append(exc.error)
        # Still serving after all of them.
        return client.protocol_version, answers, await client.call_tool("posture", {})
    return run_client(node["env"], [], body, mode=mode)


def test_bad_arguments_are_tool_results_the_model_can_read_in_2025_11_25(node: Dict[str, Any]) -> None:
    version, answers, after = _call_all(node, mode="legacy")
    assert version == "2025-11-25"
    for (name, args, words), result in zip(BAD_ARGUMENTS, answers):
        assert not isinstance(result, ErrorData), (name, args, result)
        assert result.is_error is True and words in result.content[0].text, (name, args, result)
        assert "Traceback" not in result.content[0].text and result.structured_content is None
    # An unknown tool stays a protocol error (server/tools "Error Handling").
    unknown = answers[-1]
    assert isinstance(unknown, ErrorData) and unknown.code == -32602 and "unknown tool 'nope'" in unknown.message
    assert after.is_error is False


def test_bad_arguments_are_json_rpc_errors_before_2025_11_25(node: Dict[str, Any], sdk_asks_2025_06_18: None) -> None:
    version, answers, after = _call_all(node)
    assert version == "2025-06-18"
    for (name, args, words), error in zip(BAD_ARGUMENTS + [("nope", {}, "unknown tool 'nope'")], answers):
        assert isinstance(error, ErrorData), (name, args, error)
        assert error.code == -32602 and words in error.message, (name, args, error.message)
        assert "Traceback" not in error.message
    assert after.is_error is False


def test_advice_is_the_real_monitors_and_an_unknown_account_is_an_error(node: Dict[str, Any]) -> None:
    async def body(client: Client) -> Any:
        return await client.call_tool("advice", {}), await client.call_tool("guard", {"account": "acct9"})
    advice, unknown = run_client(node["env"], [], body)
    got = payload(advice)
    direct = node["mon"].get_json("/api/advice")[1]
    assert got["advice"] == direct["advice"] and got["active"] == direct["active"] == {
        "label": "acct1", "email": direct["active"]["email"], "health": "ok", "note": None, "fix": None}
    # A probe may land between the two reads (every 5 s here): the tool's is the same one or older.
    assert got["to"] == direct["to"] and got["probedAt"] <= direct["probedAt"]
    # A typo is no busy account: the guard's exit 2 becomes a bad argument listing the labels, which
    # the model reads (2025-11-25); before that version it is error -32602 (the test above).
    text = unknown.content[0].text
    assert unknown.is_error is True and "acct9" in text and "acct1" in text and "Traceback" not in text


# ---------------------------------------------------------------- switch

def test_switch_only_with_allow_switch(node: Dict[str, Any]) -> None:
    before = node["env_file"].read_bytes()

    async def body(client: Client) -> Any:
        listed = await client.list_tools()
        try:
            await client.call_tool("switch", {"to": "acct2"})
        except MCPError as exc:
            return listed, exc.error
        return listed, None
    listed, error = run_client(node["env"], [], body)
    assert "switch" not in {tool.name for tool in listed.tools}
    assert error is not None and error.code == -32602 and "--allow-switch" in error.message
    assert node["env_file"].read_bytes() == before


def test_switch_runs_the_switch_command(node: Dict[str, Any]) -> None:
    home, mon = node["home"], node["mon"]
    events_before = len(switched_events(home))

    async def body(client: Client) -> Any:
        listed = await client.list_tools()
        unknown = await client.call_tool("switch", {"to": "acct9"})
        moved = await client.call_tool("switch", {"to": "acct2"})
        return listed, unknown, moved
    listed, unknown, moved = run_client(node["env"], ["--allow-switch"], body)
    try:
        tools = {tool.name: tool for tool in listed.tools}
        assert set(tools) == READ_TOOLS | {"switch"}
        assert tools["switch"].input_schema["required"] == ["to"] and tools["switch"].annotations.read_only_hint is False
        # An unknown account: refused with the command's sentence, the file untouched.
        assert unknown.is_error is True and "acct9" in payload(unknown)["error"]
        result = payload(moved)
        assert moved.is_error is False and result["switched"] is True
        assert (result["from"], result["to"], result["provider"]) == ("acct1", "acct2", "claude")
        assert active_label(node["env_file"].read_bytes(), "claude") == "acct2"
        switched = switched_events(home)
        assert len(switched) == events_before + 1
        assert switched[-1]["attributes"]["switch.reason"] == "manual"
        wait_until(lambda: mon.get_json("/api/accounts")[1]["active"]["label"] == "acct2", 20,
                   message="the monitor to show acct2")
    finally:
        async def back(client: Client) -> Any:
            return await client.call_tool("switch", {"to": "acct1"})
        assert payload(run_client(node["env"], ["--allow-switch"], back))["to"] == "acct1"
        wait_until(lambda: mon.get_json("/api/accounts")[1]["active"]["label"] == "acct1", 20,
                   message="the monitor to show acct1 again")


# ---------------------------------------------------------------- the monitor down

def test_the_monitor_down_is_a_tool_error_naming_the_url(node: Dict[str, Any]) -> None:
    async def body(client: Client) -> Any:
        listed = await client.list_tools()
        results = {name: await client.call_tool(name, {}) for name in ("posture", "advice", "guard",
                                                                        "fleet_accounts")}
        try:
            await client.read_resource("svcposture://posture/claude")
            resource_error = None
        except MCPError as exc:
            resource_error = exc.error
        # ping belongs to the handshake era (the SDK deprecates Client.send_ping for 2026-07-28 on):
        # asked through the session of a `legacy` connection.
        await client.session.send_ping()
        return listed, results, resource_error, await client.call_tool("posture", {"provider": "codex"})
    listed, results, resource_error, again = run_client(node["env"], ["--url", CLOSED_URL], body, mode="legacy")
    assert {tool.name for tool in listed.tools} == READ_TOOLS
    for name, result in results.items():
        assert result.is_error is True, name
        text = result.content[0].text
        assert "the monitor at %s did not answer" % CLOSED_URL in text, (name, text)
        # And how to start one.
        assert "start one with `svc-monitor`" in text, (name, text)
    # The guard's own answer comes with it: unavailable.
    assert payload(results["guard"])["decision"] == "unavailable"
    assert resource_error is not None and CLOSED_URL in resource_error.message
    assert again.is_error is True and CLOSED_URL in again.content[0].text


def test_the_port_setting_finds_the_monitor(node: Dict[str, Any]) -> None:
    # Without --url: $SVC_MONITOR_PORT, as for the guard and the status line.
    async def body(client: Client) -> Any:
        return await client.call_tool("posture", {})
    assert payload(run_client(node["env"], [], body))["node"] == "mcp-node"


# ---------------------------------------------------------------- advice and the fleet, from a scripted monitor

ADVICE = {"available": True, "node": "mcp-node", "generatedAt": "2026-01-01T00:00:00.000Z", "probedAt": 1,
          "reservePct": 0, "provider": "claude", "active": {"label": "acct1", "email": "one@example.com"},
          "advice": "switch", "to": {"label": "acct2",
          "email": "two@example.com"}, "waitS": None, "reason": "acct1 5-hour window reaches 100% before its reset",
          "ranked": [{"label": "acct2", "email": "two@example.com", "headroomPct": 40.0,
                      "wallAt": None, "reachesReset": True}]}
CODEX_ADVICE = dict(ADVICE, provider="codex", active={"label": "codex-cx", "email": "cx@example.com"},
                    advice="stay", to=None, ranked=[])
FLEET_ACCOUNTS = {"accounts": [{"key": "0123456789abcdef", "provider": "claude", "labels": ["acct1"],
                                "hosts": [{"host": "h1", "active": True}], "status": "ok",
                                "fiveHour": {"pct": 12.0, "resetsAt": "2026-01-01T00:00:00.000Z",
                                             "probedAt": 1, "host": "h1"},
                                "sevenDay": {"pct": 30.0, "resetsAt": "2026-01-05T00:00:00.000Z",
                                             "probedAt": 1, "host": "h1"}, "wallAt": None}],
                  "source": "prometheus", "readAt": "2026-01-01T00:00:00.000Z"}
OWNER = {"ticket": "ENG-1", "owner": "h2", "candidates": ["h1", "h2"], "livenessKnown": True, "headroom": True,
         "provider": "claude", "skipped": [{"host": "h1", "reason": "acct1 (active): 5h at 100%"}], "waitUntil": None}
NO_FLEET = {"source": "tracker", "anchor": None, "publishIntervalMs": 60000, "hosts": [],
            "error": "no liveness anchor configured (svc-cluster set-anchor <TICKET>)"}


class _Scripted(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        owner = self.server.owner  # type: ignore[attr-defined]
        owner.paths.append(self.path)
        body = owner.routes.get(self.path)
        if body is None:
            send_raw(self, 404, b'{"error": "not found"}')
        else:
            send_raw(self, 200, json.dumps(body).encode())


class ScriptedMonitor:
    """Serves fixed JSON bodies by path, and remembers the paths asked."""

    def __init__(self, routes: Dict[str, Any]) -> None:
        self.routes = routes
        self.paths: List[str] = []
        self._server = StandInServer(("127.0.0.1", 0), self, _Scripted)
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]

    def __enter__(self) -> "ScriptedMonitor":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.parametrize("fleet", [
    {"source": "prometheus", "anchor": None, "publishIntervalMs": 60000, "hosts": []},
    {"source": "tracker", "anchor": "OPS-1", "publishIntervalMs": 60000, "hosts": []},
    # The monitor's placeholder while its first fleet read is slow: it may read one, so the tool is listed.
    {"source": "tracker", "anchor": None, "hosts": [], "error": "the fleet is still being read"}],
    ids=["prometheus", "anchor", "first-read"])
def test_advice_and_fleet_accounts_where_the_node_reads_a_fleet(env: Dict[str, str], fleet: Dict[str, Any]) -> None:
    routes = {"/api/advice": ADVICE, "/api/advice?provider=codex": CODEX_ADVICE,
              "/api/fleet": fleet, "/api/fleet/accounts": FLEET_ACCOUNTS,
              "/api/fleet/owner?ticket=ENG-1&provider=claude": OWNER}
    with ScriptedMonitor(routes) as scripted:
        async def body(client: Client) -> Any:
            return (await client.list_tools(), await client.call_tool("advice", {}),
                    await client.call_tool("advice", {"provider": "codex"}), await client.call_tool("fleet_accounts"),
                    await client.call_tool("fleet_owner", {"ticket": "ENG-1"}))
        listed, advice, codex_advice, fleet, owner = run_client(env, ["--url", scripted.url], body)
    assert {tool.name for tool in listed.tools} == READ_TOOLS | {"fleet_accounts", "fleet_owner"}
    assert payload(advice) == ADVICE and payload(codex_advice) == CODEX_ADVICE
    assert payload(fleet) == FLEET_ACCOUNTS and fleet.is_error is False
    assert payload(owner) == OWNER and owner.is_error is False
    assert "/api/advice?provider=codex" in scripted.paths and "/api/fleet/accounts" in scripted.paths


def test_fleet_accounts_is_not_listed_where_the_node_reads_no_fleet(env: Dict[str, str]) -> None:
    with ScriptedMonitor({"/api/fleet": NO_FLEET, "/api/fleet/accounts": FLEET_ACCOUNTS}) as scripted:
        async def body(client: Client) -> Any:
            return (await client.list_tools(), await client.call_tool("fleet_accounts", {}),
                    await client.call_tool("fleet_owner", {"ticket": "ENG-1"}))
        listed, result, owner = run_client(env, ["--url", scripted.url], body)
    assert {tool.name for tool in listed.tools} == READ_TOOLS
    for answer in (result, owner):
        assert answer.is_error is True and "reads no fleet" in answer.content[0].text
        assert "no liveness anchor" in answer.content[0].text
    assert not any(path.startswith("/api/fleet/") for path in scripted.paths)


def test_a_monitor_without_the_advice_says_so(env: Dict[str, str]) -> None:
    with ScriptedMonitor({}) as scripted:
        async def body(client: Client) -> Any:
            return await client.call_tool("advice", {})
        result = run_client(env, ["--url", scripted.url], body)
    assert result.is_error is True and scripted.url in result.content[0].text
    assert "/api/advice" in result.content[0].text


def test_help_explains_itself(env: Dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "mcp", "--help"], env=env,
                          capture_output=True, timeout=60, cwd=str(REPO))
    text = done.stdout.decode()
    assert done.returncode == 0 and text.startswith("usage: svc-monitor mcp")
    for words in ("claude mcp add svcposture -- svc-monitor mcp", "[mcp_servers.svcposture]", "--allow-switch",
                  "posture", "advice", "guard", "fleet_accounts", "fleet_owner", "svcposture://posture/codex"):
        assert words in text, words
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "mcp", "--bogus"], env=env,
                          capture_output=True, timeout=60, cwd=str(REPO))
    assert done.returncode == 2 and done.stdout == b"" and b"unknown argument" in done.stderr
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "mcp", "--url", "ftp://x"], env=env,
                          capture_output=True, timeout=60, cwd=str(REPO))
    assert done.returncode == 2 and b"--url" in done.stderr


# ---------------------------------------------------------------- the real demo: a node that reads a fleet

def test_the_demo_reads_a_fleet_and_the_tool_gives_its_accounts(tmp_path: Path, env: Dict[str, str]) -> None:
    from tests.support.firstlook import Demo, get_json

    demo = Demo(tmp_path / "demo-home", ["--port", "0"]).wait_ready()
    try:
        # The ticket the demo routes around its rejected host (it prints which).
        ticket = re.search(r"ticket (\S+) skips ", demo.text()).group(1)

        async def body(client: Client) -> Any:
            return (await client.list_tools(), await client.call_tool("fleet_accounts", {}),
                    await client.call_tool("fleet_owner", {"ticket": ticket}))
        listed, result, owner = run_client(env, ["--url", demo.url], body)
        direct = get_json(demo.url + "/api/fleet/accounts")
        routed = get_json(demo.url + "/api/fleet/owner?ticket=" + ticket)
    finally:
        assert demo.stop() == 0
    assert {tool.name for tool in listed.tools} == READ_TOOLS | {"fleet_accounts", "fleet_owner"}
    assert owner.is_error is False and payload(owner) == routed
    assert routed["skipped"] and routed["owner"] not in [s["host"] for s in routed["skipped"]]
    got = payload(result)
    assert result.is_error is False and got["source"] == direct["source"] == "demo"
    assert sorted(str(a["key"]) for a in got["accounts"]) == sorted(str(a["key"]) for a in direct["accounts"])
    assert got["accounts"] and all(a["hosts"] for a in got["accounts"])
