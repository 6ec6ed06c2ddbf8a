"""Cached plain reads on kept-alive connections are answered by one selector
thread; everything else is handed, bytes and all, to the threaded handler.
These tests pin that the hand-off loses nothing and reorders nothing."""
import json
import socket
import time

import pytest

from tests.support.home import canary, node_env
from tests.support.monitor import read_response
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

TOK = canary("fast")
READ = b"GET /api/accounts HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.fixture(scope="module")
def provider():
    with ProviderServer() as p:
        p.set_account(TOK, five_hour=(0.42, "allowed"))
        yield p


@pytest.fixture(scope="module")
def node(tmp_path_factory, provider, module_monitors):
    home = tmp_path_factory.mktemp("fast") / "home"
    home.mkdir()
    env = node_env(home, provider.url, [("ACCT1", TOK, "one@example.com")], active="ACCT1",
                   extra={"SVC_MONITOR_REQUEST_TIMEOUT_S": "1.5"})
    mon = module_monitors.start(env)
    # Warm the cache so the fast lane has a fresh posture to answer from.
    with socket.create_connection(("127.0.0.1", mon.port), timeout=10) as s:
        s.sendall(READ)
        assert read_response(s)[0] == 200
    yield mon


def connect(node):
    return socket.create_connection(("127.0.0.1", node.port), timeout=10)


class Responses:
    """Reads pipelined responses off one socket, keeping what follows each."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        self.buf += chunk

    def next(self, head_only=False):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head_only else int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            self._fill()
        body, self.buf = self.buf[:length], self.buf[length:]
        return int(lines[0].split()[1]), headers, body


def test_pipelined_fast_and_slow_requests_answer_in_order(node, provider):
    calls = provider.message_calls()
    with connect(node) as s:
        s.sendall(READ + READ + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + READ)
        reader = Responses(s)
        answers = [reader.next() for _ in range(4)]
    assert [a[0] for a in answers] == [200, 200, 200, 200]
    bodies = [json.loads(a[2]) for a in answers]
    assert bodies[0]["available"] is True and bodies[0]["cached"] is True
    assert bodies[2] == {"ok": True, "node": bodies[0]["node"], "version": bodies[2]["version"],
                         "startedAt": bodies[2]["startedAt"], "probeIntervalS": bodies[2]["probeIntervalS"],
                         "accountsFile": bodies[2]["accountsFile"]}
    assert bodies[3]["probedAt"] == bodies[0]["probedAt"]
    assert provider.message_calls() == calls  # cached reads spend no probe


def test_fast_answer_has_the_same_head_as_the_threaded_one(node):
    with connect(node) as s:
        s.sendall(READ)
        fast = read_response(s)
        s.sendall(b"GET /api/accounts?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # a query: threaded path
        slow = read_response(s)
    assert fast[0] == slow[0] == 200
    assert {k: v for k, v in fast[1].items() if k not in ("date", "content-length")} == \
           {k: v for k, v in slow[1].items() if k not in ("date", "content-length")}
    a, b = json.loads(fast[2]), json.loads(slow[2])
    a.pop("generatedAt"), b.pop("generatedAt")
    assert a == b


def test_request_split_across_packets(node):
    with connect(node) as s:
        for piece in (READ[:5], READ[5:20], READ[20:]):
            s.sendall(piece)
            time.sleep(0.05)
        status, _, body = read_response(s)
    assert status == 200 and json.loads(body)["available"] is True


def test_connection_close_is_honoured(node):
    with connect(node) as s:
        s.sendall(b"GET /api/accounts HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" + READ)
        status, headers, _ = read_response(s)
        assert status == 200 and headers.get("connection") == "close"
        s.settimeout(5)
        assert s.recv(65536) == b""  # the pipelined second request is not answered


def test_a_get_with_a_body_goes_to_the_threaded_handler_and_closes(node):
    with connect(node) as s:
        s.sendall(b"GET /api/accounts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nGET /")
        status, headers, _ = read_response(s)
        assert status == 200 and headers.get("connection") == "close"
        s.settimeout(5)
        assert s.recv(65536) == b""


def test_bad_header_in_the_fast_path_still_gets_400(node):
    with connect(node) as s:
        s.sendall(b"GET /api/accounts HTTP/1.1\r\nHost : 127.0.0.1\r\n\r\n")
        status, _, body = read_response(s)
    assert status == 400 and json.loads(body)["error"]


def test_idle_kept_alive_connection_is_closed_after_the_read_timeout(node):
    with connect(node) as s:
        s.sendall(READ)
        assert read_response(s)[0] == 200
        s.settimeout(10)
        started = time.monotonic()
        assert s.recv(65536) == b""
        assert time.monotonic() - started >= 1.0  # closed by the 1.5 s timeout, not at once


def test_a_client_that_does_not_read_never_blocks_others(node):
    hog = connect(node)
    try:
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        hog.sendall(READ * 1500)  # ~2.5 MB of answers it will not read for now
        with connect(node) as s:
            s.sendall(READ)
            assert read_response(s)[0] == 200
        got = 0
        hog.settimeout(10)
        reader = Responses(hog)
        for _ in range(1500):
            status, _, body = reader.next()
            assert status == 200
            got += 1
        assert got == 1500
    finally:
        hog.close()


def test_two_hundred_idle_connections_do_not_block_a_read(node):
    idle = [connect(node) for _ in range(200)]
    try:
        with connect(node) as s:
            s.sendall(READ)
            assert read_response(s)[0] == 200
    finally:
        for sock in idle:
            sock.close()
    assert wait_until(lambda: node.proc.poll() is None, 1.0)


# ---------------------------------------------------------------- one parser, one way

# Heads for a cached read, well-formed but unusual or refused: the lane may answer only what
# the handler answers, and refuses (through the handler) what the handler refuses, alike.
SAME_HEADS = [
    b"GET /api/accounts HTTP/1.1\nHost: 127.0.0.1\n\n",
    b"GET /api/accounts HTTP/1.1\r\nHost: 127.0.0.1\n\r\n",
    b"GET  /api/accounts  HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET //api/accounts HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET /api/accounts HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"GET /api/accounts HTTP/1.1\r\nConnection: upgrade\r\nConnection: close\r\n\r\n",
    b"GET /api/accounts HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
    b"GET /api/accounts HTTP/1.1\r\nHost : 127.0.0.1\r\n\r\n",
    b"GET /api/accounts HTTP/1.1\r\nHost: 127.0.0.1\r\n folded\r\n\r\n",
    b"GET /api/accounts HTTP/1.x\r\n\r\n",
    b"GET /api/accounts HTTP/2.0\r\n\r\n",
    b"GET /api/accounts HTTP/1.1 x\r\n\r\n",
    b"GET /api/accounts HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    b"GET /api/accounts HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n",
    b"HEAD /api/accounts HTTP/1.1\r\nHost : 127.0.0.1\r\n\r\n",
]


def _comparable(answer):
    status, headers, body = answer
    if status == 200:
        body = json.loads(body)
        body.pop("generatedAt")
    return status, {k: v for k, v in headers.items() if k not in ("date", "content-length")}, body


@pytest.mark.parametrize("head", SAME_HEADS, ids=lambda head: repr(head)[2:40])
def test_the_lane_and_the_handler_answer_the_same_heads_alike(node, head):
    with connect(node) as s:  # a fresh connection: the lane reads the head first
        s.sendall(head)
        first = Responses(s).next(head.startswith(b"HEAD"))
    with connect(node) as s:  # handed to a handler thread by /healthz, which then reads the head itself
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + head)
        reader = Responses(s)
        assert reader.next()[0] == 200
        handled = reader.next(head.startswith(b"HEAD"))
    assert _comparable(first) == _comparable(handled)


def test_the_lane_imports_nothing_above_it():
    import ast
    import svcposture.monitor.fastlane as fastlane

    tree = ast.parse(open(fastlane.__file__).read())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level}
    assert imported == {"connection", "protocols", "request", "requesthead", "response"}


def test_the_lane_needs_no_server():
    import threading

    from svcposture.monitor.connection import Connection
    from svcposture.monitor.fastlane import FastLane
    from svcposture.monitor.response import Response

    handed = []
    fast = Response(200, "text/plain", b"fast\n")
    lane = FastLane({b"/fast": lambda: fast}, handed.append, lambda: 0, max_connections=16,
                    request_timeout_s=5.0, stopping=threading.Event())
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname(), timeout=10)
    try:
        lane.adopt(Connection(*listener.accept()))
        client.sendall(b"GET /fast HTTP/1.1\r\n\r\n")
        status, _, body = read_response(client)
        assert (status, body) == (200, b"fast\n")
        client.sendall(b"GET /fast HTTP/1.1\r\n\r\nGET /slow HTTP/1.1\r\n\r\n")
        wait_until(lambda: handed, 10, message="the hand-off")
        assert handed[0].unsent.endswith(b"fast\n") and handed[0].inbox == b"GET /slow HTTP/1.1\r\n\r\n"
    finally:
        lane.close()
        client.close()
        listener.close()
        for conn in handed:
            conn.close()
