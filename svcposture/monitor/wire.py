"""The bytes both request paths agree on: the threaded handler and the fast lane.

Request limits, the header-name grammar, status reasons and error codes, the
headers every JSON reply carries, the one JSON serialisation, and the one
builder of response heads. The fast lane may only answer what the handler
would answer byte for byte, so the two take all of these from here.

Every response is built as one bytes object and written with one send: a
status line written apart from its body stalls keep-alive clients on delayed
ACKs, and the cached posture read is the hot path.
"""
from __future__ import annotations

import json
import re
import time
from email.utils import formatdate
from typing import Any, Dict, List, Optional, Tuple

from ..settings import DEFAULT_REQUEST_TIMEOUT_S

JSON_TYPE = "application/json"
JSON_HEADERS = b"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
CLOSE = b"Connection: close\r\n"

# Slowloris: a request (or the next one on a kept-alive connection) must
# arrive within this many seconds unless SVC_MONITOR_REQUEST_TIMEOUT_S says otherwise.
REQUEST_READ_TIMEOUT_S = DEFAULT_REQUEST_TIMEOUT_S
MAX_HEADERS = 100
MAX_HEADER_LINE = 65536
# All header fields of one request together. Bounds what a connection can
# make the monitor hold (a hundred 64 KB lines would be 6.4 MB each); browsers
# send a few KB, and a bigger block gets 431.
MAX_REQUEST_HEAD = 32 * 1024

TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
TOKEN_BYTES_RE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")

REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 414: "URI Too Long",
           431: "Request Header Fields Too Large", 500: "Internal Server Error",
           501: "Not Implemented", 503: "Service Unavailable", 505: "HTTP Version Not Supported"}
ERROR_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed",
               408: "request_timeout", 414: "uri_too_long", 431: "header_fields_too_large",
               500: "internal", 501: "not_implemented", 503: "unavailable",
               505: "http_version_not_supported"}
_REASON_BYTES = {status: reason.encode("ascii") for status, reason in REASONS.items()}


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# (second, "Date: ...\r\n"): one tuple, so that replacing it is atomic.
_date: Tuple[int, bytes] = (-1, b"")


def date_header() -> bytes:
    """The Date header line of this second, formatted once per second."""
    global _date
    second = int(time.time())
    cached = _date
    if cached[0] != second:
        cached = (second, ("Date: %s\r\n" % formatdate(second, usegmt=True)).encode("ascii"))
        _date = cached
    return cached[1]


def head(status: int, ctype: str, length: Optional[int], conn: bytes = b"", extra: bytes = b"") -> bytes:
    """A response head: status line, Server, Date, Content-Type, Content-Length
    (left out when `length` is None: a stream), the `conn` line, then `extra`."""
    return b"HTTP/1.1 %d %s\r\nServer: svc-monitor\r\n%sContent-Type: %s\r\n%s%s%s\r\n" % (
        status, _REASON_BYTES.get(status, b"Unknown"), date_header(), ctype.encode("ascii"),
        b"" if length is None else b"Content-Length: %d\r\n" % length, conn, extra)


def response(status: int, ctype: str, body: bytes, conn: bytes = b"", extra: bytes = b"",
             head_only: bool = False) -> bytes:
    """A whole response (head and body, or the head alone for HEAD) as one bytes object."""
    top = head(status, ctype, len(body), conn, extra)
    return top if head_only else top + body


def json_response(status: int, obj: Any, conn: bytes = b"", extra: bytes = b"", head_only: bool = False) -> bytes:
    return response(status, JSON_TYPE, dumps(obj), conn, JSON_HEADERS + extra, head_only)


def error_response(status: int, message: str, conn: bytes = b"", extra: bytes = b"",
                   head_only: bool = False) -> bytes:
    """`{"error": code, "message": ...}` with the status's error code."""
    return json_response(status, {"error": ERROR_CODES.get(status, "error"), "message": message},
                         conn, extra, head_only)


class RequestHeaders:
    """Request header fields, looked up case-insensitively.

    The stdlib hands header blocks to the email parser, which costs more than
    the rest of a cached read put together; HTTP/1.1 fields need far less."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Dict[str, List[str]]) -> None:
        self._fields = fields

    @classmethod
    def of(cls, pairs: Any) -> "RequestHeaders":
        """Headers from (name, value) pairs or a mapping."""
        fields: Dict[str, List[str]] = {}
        for name, value in (pairs.items() if hasattr(pairs, "items") else pairs):
            fields.setdefault(name.lower(), []).append(value)
        return cls(fields)

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        values = self._fields.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str, failobj: Any = None) -> Any:
        values = self._fields.get(name.lower())
        return list(values) if values else failobj

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def items(self) -> List[Tuple[str, str]]:
        return [(k, v) for k, values in self._fields.items() for v in values]


class Request:
    """One parsed request. `conn` is the Connection line its reply carries
    (b"", `Connection: close` or `Connection: keep-alive`): the handler
    decides it from the request's framing, the app only writes it."""

    __slots__ = ("method", "path", "query", "headers", "conn")

    def __init__(self, method: str, path: str, query: str = "", headers: Any = None, conn: bytes = b"") -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers if headers is not None else RequestHeaders({})
        self.conn = conn

    @property
    def head_only(self) -> bool:
        return self.method == "HEAD"
