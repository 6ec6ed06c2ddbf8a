"""Raw HTTP request bytes against the real monitor subprocess.

Every answer must be a well-formed HTTP/1.1 response that is not a 5xx (505
for a non-1.x version excepted), every 4xx must carry a JSON `error` and
`message`, the monitor must stay up, and its stderr must never show a traceback.
"""
from __future__ import annotations

import json
import re
import socket
import time
from typing import Iterator, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.home import accounts_path, monitor_env, set_host_name, write_accounts
from tests.support.monitor import Monitor, http_get
from tests.support.provider import ProviderServer

FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
STATUS_RE = re.compile(rb"HTTP/1\.[01] (\d{3}) [A-Za-z]")


@pytest.fixture(scope="module", params=["plain", "read-guard", "no-probe"])
def monitor(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitor]:
    root = tmp_path_factory.mktemp("fuzzhttp")
    home = root / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "fuzz-node")
    with ProviderServer() as provider:
        provider.set_account("tok-fuzz-http", status="allowed")
        write_accounts(accounts_path(home), [("ACCT1", "tok-fuzz-http", "fuzz@example.com")], active="ACCT1")
        env = monitor_env(home, provider.url, SVC_POSTURE_TTL_S="600", SVC_REFRESH_FLOOR_S="30",
                          SVC_PROBE_INTERVAL_S="600", SVC_SSE_KEEPALIVE_S="0.5")
        if request.param == "read-guard":
            env["SVC_MONITOR_READ_GUARD"] = "1"
        mon = Monitor(env, args=["--no-probe"] if request.param == "no-probe" else [])
        mon.start(root / "monitor.log")
        mon.mode = request.param  # type: ignore[attr-defined]
        try:
            yield mon
        finally:
            alive = mon.proc is not None and mon.proc.poll() is None
            code = mon.stop()
            text = mon.stderr_text()
            assert alive, "the monitor died during the fuzz run:\n" + text
            assert code == 0, text
            assert "Traceback" not in text, text


def exchange(url: str, data: bytes, timeout: float = 5.0) -> bytes:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    chunks: List[bytes] = []
    try:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may close early on garbage; read what it said
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                block = sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not block:
                break
            chunks.append(block)
            so_far = b"".join(chunks)
            # A stream never ends by itself: one frame (or keepalive) is enough.
            if b"text/event-stream" in so_far and (b"\n\n" in so_far.split(b"\r\n\r\n", 1)[-1]):
                break
    finally:
        sock.close()
    return b"".join(chunks)


def check_reply(request: bytes, reply: bytes) -> None:
    if not reply:
        return  # closing without an answer is allowed (empty or torn request)
    assert reply.startswith(b"HTTP/1.1 "), (request[:200], reply[:200])
    statuses = [int(m.group(1)) for m in STATUS_RE.finditer(reply)]
    assert statuses, reply[:200]
    for status in statuses:
        assert status < 500 or status == 505, (request[:300], reply[:300])
    first = statuses[0]
    head, _, body = reply.partition(b"\r\n\r\n")
    assert b"traceback" not in reply.lower()
    if 400 <= first < 500 or first == 505:
        headers = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
        headers = {k.strip().lower(): v.strip() for k, v in headers.items()}
        assert headers.get(b"content-type", b"").startswith(b"application/json"), reply[:300]
        length = int(headers[b"content-length"])
        if request.split(b" ", 1)[0] == b"HEAD":
            return
        doc = json.loads(body[:length])
        assert isinstance(doc.get("error"), str) and isinstance(doc.get("message"), str), doc


# ---------------------------------------------------------------- request grammar

METHODS = st.sampled_from([b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"TRACE", b"CONNECT",
                           b"get", b"G\xc3\xa9T", b"", b"GET GET", b"PATCH", b"PRI"])
PATHS = st.sampled_from([b"/", b"/api/accounts", b"/api/accounts?refresh=true", b"/api/accounts?refresh=TRUE",
                         b"/api/accounts?refresh=true&refresh=false", b"/api/accounts/stream", b"/metrics",
                         b"/healthz", b"/api/openapi.json", b"//evil.com/x", b"*", b"http://127.0.0.1/",
                         b"/api/../etc/passwd", b"/%00", b"/%ff%fe", b"/api/accounts#x", b"/static/../../x",
                         b"/\xff\xfe", b"/" + b"a" * 3000, b"/api/accounts?" + b"x=1&" * 400, b""])
VERSIONS = st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/0.9", b"HTTP/1.1x", b"HTTP/",
                            b"HTTP/1", b"HTTP/11.1", b"http/1.1", b"HTTP/1.1 extra", b"", b"HTTP/9999.9999"])
HEADER_NAMES = st.sampled_from([b"Host", b"X-Svc-Refresh", b"Origin", b"Content-Length", b"Transfer-Encoding",
                                b"Connection", b"Accept", b"Cookie", b"Authorization", b"host", b" Host",
                                b"Host ", b"X\x00Y", b"", b"Bad Name", b"\xff"])
HEADER_VALUES = st.one_of(
    st.sampled_from([b"localhost", b"127.0.0.1", b"[::1]", b"localhost.evil.com", b"127.0.0.1.nip.io",
                     b"user@localhost", b"null", b"file://", b"http://localhost", b"chunked", b"-1", b"0",
                     b"99999999999999999999", b"close", b"keep-alive", b"", b" ", b"\xff\xfe", b"a\x00b"]),
    st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
)
header_line = st.tuples(HEADER_NAMES, st.sampled_from([b": ", b":", b" : ", b""]), HEADER_VALUES).map(b"".join)
EOL = st.sampled_from([b"\r\n", b"\n", b"\r\n", b"\r"])


GOOD_NAMES = st.sampled_from([b"Host", b"X-Svc-Refresh", b"Origin", b"Accept", b"Connection", b"host",
                              b"ORIGIN", b"Content-Length", b"Referer", b"Sec-Fetch-Site"])
good_header = st.tuples(GOOD_NAMES, HEADER_VALUES).map(lambda t: t[0] + b": " + t[1])


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 9)) < 7:
        # Well framed, hostile inside: these reach the routes and the guard.
        eol = b"\r\n"
        line = b" ".join((draw(st.sampled_from([b"GET", b"GET", b"HEAD", b"POST"])), draw(PATHS) or b"/",
                          draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0"]))))
        headers = draw(st.lists(good_header, max_size=6))
    else:
        eol = draw(EOL)
        line = b" ".join(x for x in (draw(METHODS), draw(PATHS), draw(VERSIONS)) if x or draw(st.booleans()))
        headers = draw(st.lists(header_line, max_size=8))
        if draw(st.booleans()):
            headers.append(b" folded continuation")
    body = draw(st.sampled_from([b"", b"", b"x=1", b"0\r\n\r\n", b"{}" * 10]))
    raw = line + eol + eol.join(headers) + (eol if headers else b"") + eol + body
    if draw(st.booleans()):
        # Pipelined: a second, valid request right behind the first.
        raw += b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    return raw


@FUZZ
@given(data=st.one_of(requests(), st.binary(max_size=300)))
def test_raw_requests_get_a_clear_answer(monitor: Monitor, data: bytes) -> None:
    assert monitor.url is not None
    check_reply(data, exchange(monitor.url, data))


def test_hostile_sizes_and_shapes(monitor: Monitor) -> None:
    assert monitor.url is not None
    cases: List[Tuple[bytes, int]] = [
        (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(150)) + b"\r\n", 431),
        (b"GET / HTTP/1.1\r\nX: " + b"y" * 70000 + b"\r\n\r\n", 431),
        (b"GET / HTTP/1.1\r\nHost: localhost\r\n folded: yes\r\n\r\n", 400),
        (b"GET /nowhere HTTP/1.1\r\nHost: localhost\r\n\r\n", 404),
        (b"POST /api/accounts HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello", 405),
        (b"GET /api/accounts?refresh=true HTTP/1.1\r\nHost: localhost\r\n\r\n", 403),
        (b"GET /api/accounts?refresh=true HTTP/1.1\r\nHost: evil.com\r\nX-Svc-Refresh: 1\r\n\r\n", 403),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"GET /\r\n\r\n", 400),
    ]
    for request, expected in cases:
        reply = exchange(monitor.url, request)
        check_reply(request, reply)
        got = int(STATUS_RE.match(reply).group(1)) if STATUS_RE.match(reply) else None
        assert got == expected, (request[:80], reply[:200])
    # Still serving normally after all of it.
    status, _, body = http_get(monitor.url, "/api/accounts", {"Host": "localhost"})
    assert status == 200, body
    assert json.loads(body)["available"] is (monitor.mode != "no-probe")  # type: ignore[attr-defined]
