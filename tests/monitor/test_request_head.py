"""The one parser of request heads (monitor/requesthead.py), without sockets.

The fast lane parses a head it holds whole (parse_head), a handler thread reads
one line by line (read_head): the two must give the same verdict on any bytes,
or the lane would answer what the handler refuses. The rules themselves (the
limits of request.py, the refusals, the Connection decision) are pinned here
once, for both.
"""
from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcposture.monitor.request import MAX_HEADERS, MAX_REQUEST_HEAD, MAX_REQUEST_LINE
from svcposture.monitor.requesthead import Refusal, RequestHead, head_end, parse_head, read_head


def verdict(parsed: Any) -> Any:
    if isinstance(parsed, RequestHead):
        return ("head", parsed.method, parsed.target, parsed.version, parsed.fields, parsed.body, parsed.close)
    return parsed  # a Refusal (a tuple) or None


def both(data: bytes) -> Any:
    """The verdict of both entry points, which must agree."""
    whole = verdict(parse_head(data))
    lines = verdict(read_head(io.BufferedReader(io.BytesIO(data), 8192).readline))
    assert whole == lines, data[:300]
    return whole


LINES = st.sampled_from([b"GET / HTTP/1.1", b"GET /api/accounts HTTP/1.0", b"HEAD //x HTTP/1.1", b"GET /",
                         b"POST / HTTP/2.0", b"G\xc3\xa9T / HTTP/1.1", b"GET / HTTP/1.x", b"", b"  ",
                         b"GET  /  HTTP/1.1"])
FIELDS = st.sampled_from([b"Host: x", b"Connection: close", b"connection: Keep-Alive", b"Content-Length: 0",
                          b"Content-Length: 5", b"Content-Length: 5, 0", b"Transfer-Encoding: chunked", b"Host : x",
                          b" folded", b"X:", b"X: a\rb", b"\xff: y", b"Content-Length: +1", b"Connection: upgrade"])
EOLS = st.sampled_from([b"\r\n", b"\n", b"\r"])


@st.composite
def heads(draw: st.DrawFn) -> bytes:
    eol = draw(EOLS)
    fields = draw(st.lists(FIELDS, max_size=6))
    data = draw(LINES) + eol + b"".join(field + draw(EOLS) for field in fields)
    return data + (eol if draw(st.booleans()) else b"") + draw(st.sampled_from([b"", b"GET / HTTP/1.1\r\n\r\n"]))


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(heads(), st.binary(max_size=200)))
def test_the_lane_and_the_handler_read_any_bytes_alike(data: bytes) -> None:
    both(data)


def test_a_plain_get_is_parsed_whole() -> None:
    head = both(b"GET /api/accounts?provider=codex HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nx-a:  2 \r\n\r\n")
    assert head == ("head", "GET", "/api/accounts?provider=codex", "HTTP/1.1",
                    {"host": ["a"], "x-a": ["1", "2"]}, False, False)


@pytest.mark.parametrize("data, status, message", [
    (b"GET /" + b"a" * MAX_REQUEST_LINE + b" HTTP/1.1\r\n\r\n", 414, "URI Too Long"),
    (b"GET /\r\n\r\n", 400, "Bad request line."),
    (b"GET / HTTP/1.1 extra\r\n\r\n", 400, "Bad request line."),
    (b"G(T / HTTP/1.1\r\n\r\n", 400, "Bad request line."),
    (b"GET / HTTP/1.x\r\n\r\n", 400, "Bad request version."),
    (b"GET / HTTP/2.0\r\n\r\n", 505, "Only HTTP/1.x is supported."),
    (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400, "Malformed header field."),
    (b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, "Malformed header field."),
    (b"GET / HTTP/1.1\r\nX: " + b"y" * 70000 + b"\r\n\r\n", 431, "Header fields too large."),
    (b"GET / HTTP/1.1\r\n" + b"X: " + b"y" * 20000 + b"\r\nY: " + b"y" * 20000 + b"\r\n\r\n", 431,
     "Header fields too large."),
    (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * (MAX_HEADERS + 1) + b"\r\n", 431, "Too many header fields."),
    (b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "Content-Length fields differ."),
    (b"GET / HTTP/1.1\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
     "Content-Length and Transfer-Encoding together."),
    (b"GET / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400, "Content-Length must be a decimal number."),
], ids=lambda value: repr(value)[:40] if isinstance(value, bytes) else None)
def test_a_refused_head_says_why(data: bytes, status: int, message: str) -> None:
    refusal = both(data)
    assert isinstance(refusal, Refusal) and (refusal.status, refusal.message) == (status, message)


def test_a_refusal_after_the_request_line_knows_its_method() -> None:
    # So that a refused HEAD gets no body: the method is known once its line was read.
    assert both(b"HEAD / HTTP/1.1\r\nHost : x\r\n\r\n") == Refusal(400, "Malformed header field.", "HEAD")
    assert both(b"HEAD / HTTP/2.0\r\n\r\n") == Refusal(505, "Only HTTP/1.x is supported.", "")


def test_the_limits_are_inclusive() -> None:
    assert both(b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * MAX_HEADERS + b"\r\n")[0] == "head"
    line = b"GET /" + b"a" * (MAX_REQUEST_LINE - 16) + b" HTTP/1.1\r\n"
    assert len(line) == MAX_REQUEST_LINE and both(line + b"\r\n")[0] == "head"
    # The field lines fill MAX_REQUEST_HEAD exactly (the empty line after them not counted); one byte more is too many.
    fields = b"X: y\r\n" + b"X: " + b"y" * (MAX_REQUEST_HEAD - 11) + b"\r\n"
    assert len(fields) == MAX_REQUEST_HEAD
    for end in (b"\r\n", b"\n"):
        assert both(b"GET / HTTP/1.1\r\n" + fields + end)[0] == "head"
        assert both(b"GET / HTTP/1.1\r\nX" + fields + end) == Refusal(431, "Header fields too large.", "GET")


def test_no_request_line_is_no_answer() -> None:
    assert both(b"") is None
    assert both(b"\r\nGET / HTTP/1.1\r\n\r\n") is None
    assert both(b"   \r\n") is None


@pytest.mark.parametrize("fields, version, body, close", [
    (b"", "HTTP/1.1", False, False),
    (b"", "HTTP/1.0", False, True),
    (b"Connection: keep-alive\r\n", "HTTP/1.0", False, False),
    (b"Connection: Close\r\n", "HTTP/1.1", False, True),
    (b"Connection: keep-alive, close\r\n", "HTTP/1.1", False, False),  # only the first value is read, whole
    (b"Connection: upgrade\r\nConnection: close\r\n", "HTTP/1.1", False, False),
    (b"Content-Length: 0\r\nContent-Length: 0\r\n", "HTTP/1.1", False, False),
    (b"Content-Length: 3\r\nConnection: keep-alive\r\n", "HTTP/1.1", True, True),
    (b"Transfer-Encoding: chunked\r\n", "HTTP/1.1", True, True),
])
def test_the_connection_closes_as_the_head_says(fields: bytes, version: str, body: bool, close: bool) -> None:
    head = both(b"GET / " + version.encode() + b"\r\n" + fields + b"\r\n")
    assert head[0] == "head" and (head[5], head[6]) == (body, close)


def test_a_network_path_reads_as_a_path() -> None:
    assert both(b"GET ///evil.com/x HTTP/1.1\r\n\r\n")[2] == "/evil.com/x"


@pytest.mark.parametrize("data, end", [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET", 27),
    (b"GET / HTTP/1.1\nHost: x\n\nGET", 24),
    (b"GET / HTTP/1.1\r\nHost: x\n\r\n", 26),  # a bare LF, then CR LF: where the handler's readline ends it too
    (b"GET / HTTP/1.1\r\nHost: x\r\n", -1),
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r", -1),
])
def test_the_end_of_a_head_is_its_first_empty_line(data: bytes, end: int) -> None:
    assert head_end(data) == end
    if end > 0:
        assert verdict(parse_head(data[:end])) == verdict(parse_head(data))  # nothing past it is read
