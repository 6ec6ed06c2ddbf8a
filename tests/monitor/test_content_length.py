"""Request body framing the monitor cannot trust (RFC 9112 §6.3): Content-Length fields
that differ, Content-Length with Transfer-Encoding, a length that is not a plain
decimal number. Each gets exactly one 400 and the connection closed, so what
follows can never be read as a second request: raw sockets against the real
monitor, on the fast lane's request line and on the slow path's."""
from __future__ import annotations

import json
import socket

import pytest

from tests.support.home import clean_env
from tests.support.monitor import start_monitor

SMUGGLED = b"GET /api/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

BAD = {
    "zero-then-length": [b"Content-Length: 0", b"Content-Length: %d" % len(SMUGGLED)],
    "length-then-zero": [b"Content-Length: %d" % len(SMUGGLED), b"Content-Length: 0"],
    "differing-list": [b"Content-Length: %d, 0" % len(SMUGGLED)],
    "with-chunked": [b"Content-Length: %d" % len(SMUGGLED), b"Transfer-Encoding: chunked"],
    "chunked-first": [b"Transfer-Encoding: chunked", b"Content-Length: 0"],
    "signed-plus": [b"Content-Length: +%d" % len(SMUGGLED)],
    "negative": [b"Content-Length: -1"],
    "hex": [b"Content-Length: 0x10"],
    "exponent": [b"Content-Length: 1e3"],
    "empty": [b"Content-Length: "],
    "inner-space": [b"Content-Length: 1 0"],
    "non-ascii-digit": [b"Content-Length: \xb2"],
}
PATHS = {"fast-lane": b"/api/accounts", "slow-path": b"/healthz"}


@pytest.fixture(scope="module")
def mon(tmp_path_factory):
    home = tmp_path_factory.mktemp("framing") / "home"
    home.mkdir()
    m = start_monitor(clean_env(home), args=("--no-probe",))
    yield m
    m.stop()


def _exchange(port: int, raw: bytes) -> bytes:
    """Everything the monitor sends back until it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                raise AssertionError("the connection was left open after %r" % data[:200])
            if not chunk:
                return data
            data += chunk


def _request(path: bytes, port: int, fields) -> bytes:
    head = [b"GET %s HTTP/1.1" % path, b"Host: 127.0.0.1:%d" % port] + list(fields)
    return b"\r\n".join(head) + b"\r\n\r\n" + SMUGGLED


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("case", sorted(BAD))
def test_untrustworthy_framing_is_one_400_and_close(mon, path, case):
    data = _exchange(mon.port, _request(PATHS[path], mon.port, BAD[case]))
    assert data.startswith(b"HTTP/1.1 400 "), data[:300]
    assert data.count(b"HTTP/1.1 ") == 1, data  # the smuggled request was never answered
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"\r\nConnection: close\r\n" in head + b"\r\n"
    assert json.loads(body)["error"] == "bad_request"
    assert mon.proc.poll() is None


@pytest.mark.parametrize("path", sorted(PATHS))
def test_framing_that_can_be_trusted_is_still_served(mon, path):
    # Identical duplicates are one length (RFC 9112 §6.3 allows accepting them).
    same = _exchange(mon.port, _request(PATHS[path], mon.port, [b"Content-Length: 0", b"Content-Length: 0",
                                                                b"Connection: close"])[:-len(SMUGGLED)])
    assert same.startswith(b"HTTP/1.1 200 ") and same.count(b"HTTP/1.1 ") == 1
    # A GET with a body: answered, and the connection closed rather than the body read as a request.
    body = _exchange(mon.port, _request(PATHS[path], mon.port, [b"Content-Length: %d" % len(SMUGGLED)]))
    assert body.startswith(b"HTTP/1.1 200 ") and body.count(b"HTTP/1.1 ") == 1, body[:300]
