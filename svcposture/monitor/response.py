"""A response as a value, and the one place it becomes bytes.

An endpoint returns a Response (status, content type, extra head lines, body)
and never sees the connection. Response.encode is the only place that adds
the `Connection:` line and drops the body of an answer to HEAD; the server
side (the handler, the fast lane) decides both and calls it. Status reasons,
error codes, the headers every JSON reply carries and the one JSON
serialisation live here too, so both request paths write identical bytes.

Every response is one bytes object written with one send: a status line
written apart from its body stalls keep-alive clients on delayed ACKs, and the
cached posture read is the hot path. A Response remembers its last encoding
(per Date second, Connection line and HEAD), so a cached Response costs one
comparison per request.
"""
from __future__ import annotations

import json
import time
from email.utils import formatdate
from typing import Any, Tuple

JSON_TYPE = "application/json"
JSON_HEADERS = b"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
CLOSE = b"Connection: close\r\n"
KEEP_ALIVE = b"Connection: keep-alive\r\n"
ALLOW = b"Allow: GET, HEAD\r\n"

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 414: "URI Too Long",
           431: "Request Header Fields Too Large", 500: "Internal Server Error",
           501: "Not Implemented", 503: "Service Unavailable", 505: "HTTP Version Not Supported"}
ERROR_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
               408: "request_timeout", 414: "uri_too_long", 431: "header_fields_too_large",
               500: "internal", 501: "not_implemented", 503: "unavailable",
               505: "http_version_not_supported"}
_REASON_BYTES = {status: reason.encode("ascii") for status, reason in REASONS.items()}


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# (second, "Date: ...\r\n"): one tuple, so that replacing it is atomic.
_date: Tuple[int, bytes] = (-1, b"")


def date_header() -> bytes:
    """The Date header line of this second, formatted once per second (the same object all second)."""
    global _date
    second = int(time.time())
    cached = _date
    if cached[0] != second:
        cached = (second, ("Date: %s\r\n" % formatdate(second, usegmt=True)).encode("ascii"))
        _date = cached
    return cached[1]


def head(status: int, ctype: str, length: Any, conn: bytes = b"", extra: bytes = b"") -> bytes:
    """A response head: status line, Server, Date, Content-Type, Content-Length
    (left out when `length` is None: a stream), the `conn` line, then `extra`."""
    return b"HTTP/1.1 %d %s\r\nServer: svc-monitor\r\n%sContent-Type: %s\r\n%s%s%s\r\n" % (
        status, _REASON_BYTES.get(status, b"Unknown"), date_header(), ctype.encode("ascii"),
        b"" if length is None else b"Content-Length: %d\r\n" % length, conn, extra)


def connection_line(close: bool, version: str) -> bytes:
    """The Connection line a reply carries: `close` when the connection ends
    after it, `keep-alive` for an HTTP/1.0 client that keeps it, else none."""
    if close:
        return CLOSE
    return KEEP_ALIVE if version == "HTTP/1.0" else b""


class Response:
    """One whole response but its Connection line. `ends_connection` says the
    connection cannot go on after it (the request left bytes unread)."""

    __slots__ = ("status", "ctype", "body", "headers", "ends_connection", "_encoded")

    def __init__(self, status: int, ctype: str, body: bytes, headers: bytes = b"",
                 ends_connection: bool = False) -> None:
        self.status = status
        self.ctype = ctype
        self.body = body
        self.headers = headers
        self.ends_connection = ends_connection
        self._encoded: Tuple[bytes, bytes, bool, bytes] = (b"", b"", False, b"")

    def encode(self, conn: bytes = b"", head_only: bool = False) -> bytes:
        """The bytes on the wire: the head with the `conn` line, then the body
        unless `head_only` (an answer to HEAD carries the GET's Content-Length)."""
        date = date_header()
        last = self._encoded
        if last[0] is date and last[1] == conn and last[2] == head_only:
            return last[3]
        top = head(self.status, self.ctype, len(self.body), conn, self.headers)
        data = top if head_only else top + self.body
        self._encoded = (date, conn, head_only, data)
        return data


def json_response(status: int, obj: Any, extra: bytes = b"") -> Response:
    return Response(status, JSON_TYPE, dumps(obj), JSON_HEADERS + extra)


def error_response(status: int, message: str, extra: bytes = b"", ends_connection: bool = False) -> Response:
    """`{"error": code, "message": ...}` with the status's error code."""
    return Response(status, JSON_TYPE, dumps({"error": ERROR_CODES.get(status, "error"), "message": message}),
                    JSON_HEADERS + extra, ends_connection)
