"""A client that hangs up a stream frees its subscriber slot without waiting for
the stream's next write: keepalives are an hour apart here, so only noticing
the hang-up itself can free the slot."""
from __future__ import annotations

import re
import socket
import struct

import pytest

from tests.support.home import node_env
from tests.support.monitor import SSEClient, get_request
from tests.support.waiting import wait_until

CAP = 4


@pytest.fixture
def mon(tmp_path, monitors):
    env = node_env(tmp_path, None, extra={"SVC_MONITOR_MAX_STREAMS": str(CAP), "SVC_SSE_KEEPALIVE_S": "3600",
                                          "SVC_ACCOUNTS_PROBE": "0", "SVC_QUOTA_SAMPLER": "0"})
    m = monitors.start(env, ["--no-probe"])
    yield m
    m.stop()


def subscribers(mon) -> int:
    status, _, body = mon.get("/metrics")
    assert status == 200
    return int(re.search(r"^svc_sse_subscribers (\d+)", body.decode(), re.M).group(1))


def fill(mon, count: int):
    clients = [SSEClient(mon.port) for _ in range(count)]
    for c in clients:
        assert c.status == 200
        c.next_account()
    return clients


def accepted(mon) -> bool:
    c = SSEClient(mon.port)
    try:
        return c.status == 200
    finally:
        c.close()


@pytest.mark.parametrize("how", ["close", "reset", "half-close"])
def test_hung_up_streams_free_their_slots(mon, how):
    clients = fill(mon, CAP)
    assert SSEClient(mon.port).status == 503
    for c in clients:
        if how == "reset":  # RST instead of FIN
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if how == "half-close":
            c.sock.shutdown(socket.SHUT_WR)
        else:
            c.close()
    wait_until(lambda: subscribers(mon) == 0, 30, 0.05, "every hung-up stream to free its slot")
    assert accepted(mon)
    for c in clients:
        c.sock.close()


def test_a_burst_of_connect_and_drop_clients_cannot_hold_the_cap(mon):
    keep = fill(mon, 1)
    for _ in range(5 * CAP):
        wait_until(lambda: subscribers(mon) < CAP, 30, 0.02, "a free slot")
        sock = socket.create_connection(("127.0.0.1", mon.port), timeout=20)
        sock.sendall(get_request("/api/accounts/stream", "127.0.0.1:%d" % mon.port))
        assert sock.recv(12) == b"HTTP/1.1 200"
        sock.close()
    wait_until(lambda: subscribers(mon) == 1, 30, 0.05, "only the kept stream to hold a slot")
    # The stream that stayed is served as before.
    assert keep[0].status == 200 and accepted(mon)
    keep[0].close()


def test_bytes_sent_after_the_request_do_not_end_or_stall_a_stream(mon):
    c = fill(mon, 1)[0]
    c.sock.sendall(b"junk after the request\r\n" * 1000)
    other = fill(mon, 1)[0]
    # Still counted as subscribers, and both still open (no EOF on either).
    assert subscribers(mon) == 2
    c.sock.settimeout(0.2)
    with pytest.raises(socket.timeout):
        c.sock.recv(1)
    c.close()
    wait_until(lambda: subscribers(mon) == 1, 30, 0.05, "the closed stream's slot")
    other.close()
