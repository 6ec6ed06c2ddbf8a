"""/api/accounts/stream off raw sockets, parsed per the WHATWG EventSource rules."""
from __future__ import annotations

import json
import socket
import time

import pytest

from tests.support.home import canary, node_env, write_accounts
from tests.support.monitor import SSEClient, get_request, raw_http
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

TOK1 = canary("sse1")
TOK2 = canary("sse2")
STALL_S = 120.0


@pytest.fixture(scope="module")
def provider():
    with ProviderServer() as p:
        p.set_account(TOK1, five_hour=(0.30, "allowed"))
        p.set_account(TOK2, five_hour=(0.10, "allowed"))
        yield p


@pytest.fixture(scope="module")
def mon(tmp_path_factory, provider, module_monitors):
    home = tmp_path_factory.mktemp("sse") / "home"
    home.mkdir()
    env = node_env(home, provider.url, [("ACCT1", TOK1, "one@example.com"), ("ACCT2", TOK2, "two@example.com")],
                   active="ACCT1", extra={"SVC_REFRESH_FLOOR_S": "0", "SVC_SSE_KEEPALIVE_S": "0.3",
                                          # A write to a client that never reads blocks this long:
                                          # far beyond any frame's delivery to the others.
                                          "SVC_MONITOR_REQUEST_TIMEOUT_S": str(STALL_S)})
    m = module_monitors.start(env)
    yield m


def _force(mon):
    status, _, body = raw_http(mon.port, get_request("/api/accounts?refresh=true", "127.0.0.1:%d" % mon.port,
                                                     ["X-Svc-Refresh: 1"]))
    assert status == 200
    return json.loads(body)


def test_wire_format_is_exact(mon):
    with socket.create_connection(("127.0.0.1", mon.port), timeout=10) as sock:
        sock.sendall(get_request("/api/accounts/stream", "127.0.0.1:%d" % mon.port))
        buf = b""
        while buf.count(b"\n\n") < 3:  # head, retry, first frame
            chunk = sock.recv(65536)
            assert chunk
            buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK"
    headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
    assert headers["content-type"] == "text/event-stream"
    assert headers["cache-control"] == "no-cache"
    assert headers["x-accel-buffering"] == "no"
    assert "access-control-allow-origin" not in headers
    assert rest.startswith(b"retry: 5000\n\nevent: account\nid: ")
    frame = rest[len(b"retry: 5000\n\n"):].split(b"\n\n")[0].split(b"\n")
    assert frame[0] == b"event: account" and frame[1][4:].isdigit() and frame[2].startswith(b"data: {")
    assert len(frame) == 3  # the body is one JSON line
    json.loads(frame[2][6:])


def test_on_connect_frame_is_what_a_plain_read_returns(mon):
    with SSEClient(mon.port) as client:
        first = client.next_account()
        assert client.retry == 5000
        plain = mon.get_json("/api/accounts")[1]
    assert first["available"] is True
    assert first["probedAt"] == plain["probedAt"]
    drop = ("generatedAt", "cached")
    assert {k: v for k, v in first.items() if k not in drop} == {k: v for k, v in plain.items() if k not in drop}
    assert list(first) == list(plain)


def test_forced_refresh_reaches_every_subscriber(mon, provider):
    clients = [SSEClient(mon.port) for _ in range(6)]
    try:
        firsts = [c.next_account() for c in clients]
        first_ids = [int(c.last_id) for c in clients]
        provider.set_account(TOK1, status="rejected", five_hour=(1.0, "rejected"))
        forced = _force(mon)
        assert forced["status"] == "rejected" and forced["cached"] is False
        pushed = [c.next_account() for c in clients]
        ids = {int(c.last_id) for c in clients}
        for before, after in zip(firsts, pushed):
            assert after["cached"] is False
            assert after["status"] == "rejected"
            assert after["probedAt"] == forced["probedAt"] > before["probedAt"]
            assert after["siblingWithHeadroom"]["label"] == "acct2"
        assert len(ids) == 1 and ids.pop() > max(first_ids)
    finally:
        provider.set_account(TOK1, five_hour=(0.30, "allowed"))
        for c in clients:
            c.close()


def test_ids_increase_and_keepalives_flow(mon):
    with SSEClient(mon.port, timeout=5) as client:
        client.next_account()
        seen = [int(client.last_id)]
        for _ in range(3):
            _force(mon)
            client.next_account()
            seen.append(int(client.last_id))
        assert seen == sorted(seen) and len(set(seen)) == len(seen)
        assert client.read_for(1.0) == []  # nothing new: only comments arrive
        assert client.comments.count("keepalive") >= 2


def test_stalled_subscriber_does_not_delay_others(mon):
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    stalled.connect(("127.0.0.1", mon.port))
    stalled.sendall(get_request("/api/accounts/stream", "127.0.0.1:%d" % mon.port))
    # never reads again
    try:
        # If the stalled client held up the fan-out, every frame after its send
        # buffer filled would wait STALL_S for its write to time out; the good
        # client's read timeout is a third of that, so such a wait fails the test.
        with SSEClient(mon.port, timeout=STALL_S / 3) as good:
            good.next_account()
            for _ in range(15):
                forced = _force(mon)
                body = good.next_account()
                assert body["probedAt"] == forced["probedAt"]
    finally:
        stalled.close()


def test_subscriber_cap_answers_503(tmp_path, provider, monitors):
    # A hung-up subscriber frees its slot at the next write (a keepalive at the latest).
    env = node_env(tmp_path, provider.url, extra={"SVC_MONITOR_MAX_STREAMS": "2", "SVC_SSE_KEEPALIVE_S": "0.2"})
    m = monitors.start(env, ["--no-probe"])
    a, b = SSEClient(m.port), SSEClient(m.port)
    a.next_account(), b.next_account()
    c = SSEClient(m.port)
    assert c.status == 503 and c.headers["retry-after"] == "5"
    assert json.loads(c.body)["error"] == "unavailable"
    c.close()
    a.close()

    def reopened():
        d = SSEClient(m.port)
        try:
            return d.status == 200
        finally:
            d.close()
    assert wait_until(reopened, 10, 0.1)
    b.close()
    assert m.get("/healthz")[0] == 200


def test_disabled_body_exact_on_json_and_sse_then_enable_is_pushed(tmp_path, provider, monitors):
    env = node_env(tmp_path, provider.url, extra={"SVC_PROBE_INTERVAL_S": "0.3", "SVC_REFRESH_FLOOR_S": "0",
                                                        "SVC_SSE_KEEPALIVE_S": "0.2"})
    (tmp_path / ".config" / "svc").mkdir(parents=True)
    (tmp_path / ".config" / "svc" / "node.json").write_text('{"svc": {"host": {"name": "dis-node"}}}')
    m = monitors.start(env)
    exact = b'{"available":false,"node":"dis-node"}'
    status, headers, body = m.get("/api/accounts")
    assert status == 200 and body == exact and headers["cache-control"] == "no-store"
    with socket.create_connection(("127.0.0.1", m.port), timeout=10) as sock:
        sock.sendall(get_request("/api/accounts/stream", "127.0.0.1:%d" % m.port))
        buf = b""
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # several periodic probes and keepalives pass
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            assert chunk, "the stream closed"
            buf += chunk
        body_part = buf.partition(b"\r\n\r\n")[2]
        assert body_part.count(b"event: account") == 1  # one disabled frame, not one per probe
        assert b"data: " + exact + b"\n\n" in body_part
        assert b": keepalive\n\n" in body_part
    # A later enable is pushed to an open stream.
    with SSEClient(m.port, timeout=15) as client:
        assert client.next_account() == {"available": False, "node": "dis-node"}
        write_accounts(tmp_path / ".config" / "svc" / "model-accounts.env", [("ACCT1", TOK1, "one@example.com")],
                       active="ACCT1")
        pushed = client.next_account()
        assert pushed["available"] is True and pushed["cached"] is False
        assert pushed["active"]["label"] == "acct1"


def test_no_probe_sse_is_the_disabled_frame(tmp_path, monitors):
    from tests.support.home import clean_env
    m = monitors.start(clean_env(tmp_path), ["--no-probe"])
    with SSEClient(m.port) as client:
        body = client.next_account()
    assert set(body) == {"available", "node"} and body["available"] is False
    assert m.get("/api/accounts")[2] == json.dumps(body, separators=(",", ":")).encode()


def test_on_connect_waits_for_the_first_probe(tmp_path, monitors):
    tok = canary("slow")
    with ProviderServer() as slow:
        slow.set_account(tok, mode="slow", delay=1.5)
        env = node_env(tmp_path, slow.url, [("ACCT1", tok, "s@example.com")], active="ACCT1")
        m = monitors.start(env)
        try:
            with SSEClient(m.port, timeout=20) as client:
                body = client.next_account()
            assert body["available"] is True and body["active"]["label"] == "acct1"
            assert slow.message_calls() == 1
        finally:
            m.stop()
