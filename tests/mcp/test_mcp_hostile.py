"""svc-monitor mcp (docs/mcp.md) under a raw, hostile client: the real server as a subprocess with pipes.

Garbage lines, a 10 MB line, unknown methods, calls before `initialize`, wrong types and batches:
each gets the JSON-RPC error the protocol calls for, the server keeps serving, and nothing but
JSON-RPC ever reaches its stdout. No monitor is needed: every case is answered before one is asked
(tools that would ask it point at a closed port).
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, Optional

import pytest

from tests.support.home import REPO
from tests.support.rawserver import RawServer, http_reply

CLOSED_URL = "http://127.0.0.1:9"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
NOT_INITIALIZED, RESOURCE_NOT_FOUND = -32003, -32002
TEN_MB = 10 * 1024 * 1024


class RawClient:
    """The server over its pipes; every stdout line is checked to be one JSON-RPC message."""

    def __init__(self, env: Dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "mcp", "--url", CLOSED_URL,
                                      *args], env=env, cwd=str(REPO), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: "queue.Queue[Optional[bytes]]" = queue.Queue()
        self.stderr: List[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()
        self.next_id = 1000

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(None)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in iter(self.proc.stderr.readline, b""):
            self.stderr.append(line)

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw if raw.endswith(b"\n") else raw + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        if msg_id is None:
            self.next_id += 1
            msg_id = self.next_id
        message: Dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message).encode())
        return self.recv()

    def recv(self, timeout: float = 30.0) -> Any:
        line = self.lines.get(timeout=timeout)
        assert line is not None, "the server closed its stdout"
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        message = json.loads(line)
        for one in message if isinstance(message, list) else [message]:
            assert one["jsonrpc"] == "2.0" and "id" in one and ("result" in one) != ("error" in one), one
        return message

    def initialize(self, version: str = "2025-06-18") -> Dict[str, Any]:
        reply = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                            "clientInfo": {"name": "hostile", "version": "0"}})
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        return reply

    def alive(self) -> None:
        """The server still answers: a ping gets its empty result."""
        self.next_id += 1
        assert self.request("ping", msg_id=self.next_id) == {"jsonrpc": "2.0", "id": self.next_id, "result": {}}

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(30)
        assert self.lines.get(timeout=10) is None  # nothing more on stdout
        text = b"".join(self.stderr).decode("utf-8", "replace")
        assert "Traceback" not in text, text
        return code


@pytest.fixture()
def client(env: Dict[str, str]) -> Iterator[RawClient]:
    raw = RawClient(env)
    try:
        yield raw
    finally:
        if raw.proc.poll() is None:
            raw.proc.kill()
            raw.proc.wait(10)


def error_of(reply: Dict[str, Any], code: int, msg_id: Any = None) -> str:
    assert reply["id"] == msg_id and reply["error"]["code"] == code, reply
    return reply["error"]["message"]


# ---------------------------------------------------------------- the lifecycle

def test_calls_before_initialize_are_refused_but_ping_and_unknown_methods_answer(client: RawClient) -> None:
    for method in ("tools/list", "tools/call", "resources/list", "resources/read"):
        message = error_of(client.request(method, {}, msg_id="early"), NOT_INITIALIZED, "early")
        assert "initialize" in message
    client.alive()
    assert "server/discover" in error_of(client.request("server/discover", {}, msg_id=7), METHOD_NOT_FOUND, 7)
    # A notification before initialize gets no answer at all: the next line is the ping's.
    client.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    client.alive()
    reply = client.initialize()
    assert reply["result"]["protocolVersion"] == "2025-06-18"
    assert reply["result"]["serverInfo"]["name"] == "svcposture"
    assert set(reply["result"]["capabilities"]) == {"tools", "resources"}
    assert {t["name"] for t in client.request("tools/list")["result"]["tools"]} == {"posture", "advice", "guard"}
    # A second initialize is refused; the session keeps its version.
    error_of(client.request("initialize", {"protocolVersion": "2024-11-05"}, msg_id=8), INVALID_REQUEST, 8)
    assert client.close() == 0


@pytest.mark.parametrize("asked, answered", [("2024-11-05", "2024-11-05"), ("2025-03-26", "2025-03-26"),
                                             ("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"),
                                             ("2099-01-01", "2025-11-25"), ("", "2025-11-25")])
def test_version_negotiation(client: RawClient, asked: str, answered: str) -> None:
    result = client.initialize(asked)["result"]
    assert result["protocolVersion"] == answered
    # Implementation.description came with 2025-11-25.
    assert ("description" in result["serverInfo"]) == (answered == "2025-11-25")
    tools = client.request("tools/list")["result"]["tools"]
    # Tool annotations came with 2025-03-26; the structured result with 2025-06-18.
    assert all(("annotations" in t) == (answered != "2024-11-05") for t in tools)
    result = client.request("tools/call", {"name": "guard", "arguments": {}})["result"]
    assert result["isError"] is True and ("structuredContent" in result) == (answered >= "2025-06-18")
    # A bad argument: a protocol error before 2025-11-25, a tool result the model can read from then on.
    reply = client.request("tools/call", {"name": "guard", "arguments": {"reserve": 75}}, msg_id="bad")
    if answered == "2025-11-25":
        result = reply["result"]
        assert result["isError"] is True and "reserve must be an integer from 0 to 50" in result["content"][0]["text"]
    else:
        assert "reserve must be an integer from 0 to 50" in error_of(reply, INVALID_PARAMS, "bad")
    # An unknown tool and a malformed call stay protocol errors in every version.
    error_of(client.request("tools/call", {"name": "nope", "arguments": {}}, msg_id="u"), INVALID_PARAMS, "u")
    error_of(client.request("tools/call", {"name": "guard", "arguments": []}, msg_id="m"), INVALID_PARAMS, "m")
    assert client.close() == 0


def test_initialize_with_bad_params(client: RawClient) -> None:
    for params in ({}, {"protocolVersion": 20250618}, {"protocolVersion": "2025-06-18", "capabilities": []}):
        message = error_of(client.request("initialize", params, msg_id=1), INVALID_PARAMS, 1)
        assert "protocolVersion" in message or "capabilities" in message
    # Still not initialized, and still serving.
    error_of(client.request("tools/list", msg_id=2), NOT_INITIALIZED, 2)
    assert client.initialize()["result"]["protocolVersion"] == "2025-06-18"


# ---------------------------------------------------------------- garbage

def test_garbage_lines_get_parse_errors_and_the_server_goes_on(client: RawClient) -> None:
    client.initialize()
    for garbage in (b"garbage", b"{", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', b"\xff\xfe\x00{}",
                    b"[" * 200000 + b"]" * 200000, b'{"a": 1} {"b": 2}', b"\x1b[31m", b"nul\x00l"):
        client.send(garbage)
        assert "Parse error" in error_of(client.recv(), PARSE_ERROR)
        client.alive()
    # Blank lines carry no message and get no answer.
    client.send(b"   \r\n")
    client.alive()
    assert client.close() == 0


def test_messages_that_are_no_requests(client: RawClient) -> None:
    client.initialize()
    cases = [(b"42", None), (b'"ping"', None), (b"null", None), (b"true", None),
             (b'{"jsonrpc": "1.0", "id": 5, "method": "ping"}', 5),
             (b'{"id": 6, "method": "ping"}', 6),
             (b'{"jsonrpc": "2.0", "id": 7}', 7),
             (b'{"jsonrpc": "2.0", "id": 8, "method": 5}', 8),
             (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', None),
             (b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}', None),
             (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', None),
             (b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": "x"}', 9)]
    for raw, msg_id in cases:
        client.send(raw)
        error_of(client.recv(), INVALID_REQUEST, msg_id)
    client.alive()
    # A client's reply to a request this server never sent is ignored.
    client.send(b'{"jsonrpc": "2.0", "id": 99, "result": {}}')
    client.alive()


def test_unknown_methods(client: RawClient) -> None:
    client.initialize()
    for method in ("tools/delete", "prompts/list", "logging/setLevel", "x" * 5000, "rpc.discover"):
        message = error_of(client.request(method, {}, msg_id="u"), METHOD_NOT_FOUND, "u")
        assert message.startswith("Method not found") and len(message) < 200
    # Unknown notifications are dropped without an answer.
    client.send(b'{"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}}')
    client.alive()


def test_wrong_types_are_invalid_params_with_a_sentence(client: RawClient) -> None:
    client.initialize()
    cases = [("tools/call", [], "params must be an object"),
             ("tools/call", {}, "needs name"),
             ("tools/call", {"name": 5}, "needs name"),
             ("tools/call", {"name": "guard", "arguments": []}, "arguments must be an object"),
             ("tools/call", {"name": "guard", "arguments": "reserve=5"}, "arguments must be an object"),
             ("tools/call", {"name": "guard", "arguments": {"reserve": 1e400}}, "reserve must be an integer"),
             ("tools/call", {"name": "guard", "arguments": {"reserve": 10.5}}, "reserve must be an integer"),
             ("tools/call", {"name": "guard", "arguments": {"account": ["acct1"]}}, "account must be a string"),
             ("tools/call", {"name": "posture", "arguments": {"provider": {"x": 1}}}, "provider must be a string"),
             ("tools/call", {"name": "switch", "arguments": {"to": "acct2"}}, "--allow-switch"),
             ("tools/call", {"name": "\u202e\x1b[2J", "arguments": {}}, "unknown tool"),
             ("resources/read", {}, "needs uri"),
             ("resources/read", {"uri": 5}, "needs uri")]
    for method, params, words in cases:
        message = error_of(client.request(method, params, msg_id="w"), INVALID_PARAMS, "w")
        assert words in message and "Traceback" not in message, (params, message)
        assert "\x1b" not in message and "\u202e" not in message
    message = error_of(client.request("resources/read", {"uri": "file:///etc/passwd"}, msg_id="r"),
                       RESOURCE_NOT_FOUND, "r")
    assert "file:///etc/passwd" in message
    # A reserve of 5.0 is the integer 5 (JSON has one number type): no error, the monitor is simply down.
    result = client.request("tools/call", {"name": "guard", "arguments": {"reserve": 5.0}})["result"]
    assert result["isError"] is True and result["structuredContent"]["reservePct"] == 5
    assert client.close() == 0


# ---------------------------------------------------------------- a 10 MB line

def peak_rss_kb(pid: int) -> int:
    with open("/proc/%d/status" % pid) as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize("shape", ["letters", "json"])
def test_a_10_mb_line_is_answered_and_never_held(client: RawClient, shape: str) -> None:
    client.initialize()
    client.alive()
    before = peak_rss_kb(client.proc.pid)
    if shape == "letters":
        line = b"a" * TEN_MB
    else:
        line = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "guard", "x": "' \
            + b"x" * TEN_MB + b'"}}'
    # Written from a thread: the server answers (and its stdout is read) while the line is still arriving.
    writer = threading.Thread(target=client.send, args=(line,), daemon=True)
    writer.start()
    message = error_of(client.recv(60), INVALID_REQUEST)
    assert "at most 1048576 bytes" in message
    writer.join(60)
    assert not writer.is_alive()
    client.alive()
    # Never the whole line in memory, let alone twice: the peak grew by well under 10 MB.
    grown_kb = peak_rss_kb(client.proc.pid) - before
    assert grown_kb < 5 * 1024, grown_kb
    # A line just under the bound is still read whole (and is no JSON-RPC message).
    client.send(b'"' + b"y" * (1024 * 1024 - 3) + b'"')
    error_of(client.recv(), INVALID_REQUEST)
    client.alive()
    assert client.close() == 0


# ---------------------------------------------------------------- batches

def test_batches_as_each_version_has_them(env: Dict[str, str]) -> None:
    old = RawClient(env)
    try:
        # Before initialize there is no version to batch under.
        old.send(b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]')
        assert "before initialize" in error_of(old.recv(), INVALID_REQUEST)
        old.initialize("2025-03-26")
        old.send(json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
                             {"jsonrpc": "2.0", "method": "notifications/initialized"},
                             {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                             {"jsonrpc": "2.0", "id": 3, "method": "no/such"},
                             {"jsonrpc": "2.0", "id": 4, "method": "initialize",
                              "params": {"protocolVersion": "2025-03-26"}},
                             [1], 7]).encode())
        replies = old.recv()
        assert isinstance(replies, list) and len(replies) == 6
        by_id = {r["id"]: r for r in replies if r["id"] is not None}
        assert by_id[1]["result"] == {} and {t["name"] for t in by_id[2]["result"]["tools"]} >= {"guard"}
        assert by_id[3]["error"]["code"] == METHOD_NOT_FOUND and by_id[4]["error"]["code"] == INVALID_REQUEST
        assert [r["error"]["code"] for r in replies if r["id"] is None] == [INVALID_REQUEST, INVALID_REQUEST]
        # Only notifications: nothing comes back.
        old.send(b'[{"jsonrpc": "2.0", "method": "notifications/initialized"}]')
        old.alive()
        old.send(b"[]")
        assert "1 to" in error_of(old.recv(), INVALID_REQUEST)
        old.send(json.dumps([{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(65)]).encode())
        error_of(old.recv(), INVALID_REQUEST)
        assert old.close() == 0
    finally:
        if old.proc.poll() is None:
            old.proc.kill()
    new = RawClient(env)
    try:
        new.initialize("2025-06-18")
        new.send(b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]')
        assert "2025-06-18" in error_of(new.recv(), INVALID_REQUEST)
        new.alive()
        assert new.close() == 0
    finally:
        if new.proc.poll() is None:
            new.proc.kill()


# ---------------------------------------------------------------- the streams

def test_stdout_is_json_rpc_alone_and_the_end_of_input_ends_the_server(env: Dict[str, str]) -> None:
    # Everything at once, stdin closed at the end: every line out is a reply (RawClient.recv checks).
    raw = RawClient(env)
    raw.send(b"\n".join([b"garbage", b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":'
                                     b'{"protocolVersion":"2025-06-18"}}',
                         b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"posture"}}',
                         b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"guard"}}',
                         b'{"jsonrpc":"2.0","id":4,"method":"ping"}']))
    assert raw.proc.stdin is not None
    raw.proc.stdin.close()
    replies = [raw.recv() for _ in range(5)]
    assert [r["id"] for r in replies] == [None, 1, 2, 3, 4]
    assert raw.proc.wait(30) == 0 and raw.lines.get(timeout=10) is None
    assert b"serving on stdio" in b"".join(raw.stderr)


def test_a_token_in_the_agents_environment_is_not_kept(env: Dict[str, str]) -> None:
    token = "sk-ant-oat01-CANARYMCP" + os.urandom(6).hex()
    raw = RawClient(dict(env, MODEL_CODE_OAUTH_TOKEN=token, MODEL_TOKEN_ACCT1=token))
    try:
        raw.initialize()
        raw.alive()
        with open("/proc/%d/environ" % raw.proc.pid, "rb") as fh:
            assert token.encode() not in fh.read()
        assert raw.close() == 0
    finally:
        if raw.proc.poll() is None:
            raw.proc.kill()


def test_the_server_keeps_serving_a_slow_client(client: RawClient) -> None:
    # A message in pieces, with pauses: one reply, when the newline comes.
    client.initialize()
    for piece in (b'{"jsonrpc": "2.0", ', b'"id": "slow", ', b'"method": "ping"}'):
        assert client.proc.stdin is not None
        client.proc.stdin.write(piece)
        client.proc.stdin.flush()
        time.sleep(0.05)
        assert client.lines.empty()
    client.send(b"")
    assert client.recv() == {"jsonrpc": "2.0", "id": "slow", "result": {}}


# ---------------------------------------------------------------- what the monitor answers

# JSON has no NaN and no infinity; Python's reader takes both (1e999 overflows to one), the encoder refuses.
NON_FINITE = (b'{"available": true, "node": "n", "status": "ok", "probedAt": 1, "active": null, '
              b'"accounts": [{"label": "acct1", "fiveHour": {"pct": NaN}, "sevenDay": {"pct": 1e999}}]}')


def test_a_monitor_answering_nan_or_infinity_costs_one_answer_never_the_session(env: Dict[str, str]) -> None:
    routes = {path: http_reply(200, NON_FINITE) for path in
              ("/api/accounts", "/api/accounts?provider=codex", "/api/advice")}
    with RawServer(routes) as monitor:
        raw = RawClient(env, "--url", monitor.url)
        try:
            raw.initialize()
            for name, args in (("posture", {}), ("posture", {"provider": "codex"}), ("advice", {})):
                result = raw.request("tools/call", {"name": name, "arguments": args})["result"]
                assert result["isError"] is True and "NaN or infinity" in result["content"][0]["text"], result
            # The guard's own reading of such a posture: unavailable (docs/steering.md), its answer carried.
            result = raw.request("tools/call", {"name": "guard", "arguments": {}})["result"]
            assert result["structuredContent"]["decision"] == "unavailable", result
            reply = raw.request("resources/read", {"uri": "svcposture://posture/claude"}, msg_id="r")
            assert "NaN or infinity" in error_of(reply, -32603, "r")
            raw.alive()
            assert raw.close() == 0
        finally:
            if raw.proc.poll() is None:
                raw.proc.kill()


def test_a_reply_that_cannot_be_encoded_costs_one_internal_error() -> None:
    # Behind the check above, whatever a tool returns still goes through the encoder's guard: in-process,
    # since no real monitor's answer reaches it any more.
    from svcposture.mcp.session import Session

    class Toolbox:
        def tools(self, version: Any) -> List[Any]:
            return []

        def call(self, name: str, arguments: Any, version: Any) -> Any:
            return {"content": [], "structuredContent": {"pct": float("nan")}}

    logged: List[str] = []
    session = Session(Toolbox(), logged.append)
    session.handle(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}')
    reply = json.loads(session.handle(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}'))
    assert reply["id"] == 2 and reply["error"]["code"] == -32603 and "encoded" in reply["error"]["message"]
    batch = json.loads(session.handle(b'[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}},'
                                      b'{"jsonrpc":"2.0","id":4,"method":"ping"}]'))
    assert [r.get("error", {}).get("code") for r in batch] == [-32603, None] and batch[1]["result"] == {}
    assert json.loads(session.handle(b'{"jsonrpc":"2.0","id":5,"method":"ping"}'))["result"] == {}
    assert logged and "could not be encoded" in logged[0]
