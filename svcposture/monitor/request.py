"""A parsed HTTP request and the limits every request is read under.

The limits and the grammar here are read by one parser of request heads
(requesthead.py), which both request paths (the fast lane and the threaded
handler) use: the fast lane may only answer what the handler would, byte for
byte, so the two must agree on what a request is.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ..settings import DEFAULT_REQUEST_TIMEOUT_S

# Slowloris: a request (or the next one on a kept-alive connection) must
# arrive within this many seconds unless SVC_MONITOR_REQUEST_TIMEOUT_S says otherwise.
REQUEST_READ_TIMEOUT_S = DEFAULT_REQUEST_TIMEOUT_S
MAX_HEADERS = 100
# The request line, as the stdlib's http.server bounds it: past this, 414.
MAX_REQUEST_LINE = 65536
# The header field lines of one request together (the empty line after them
# not counted); one line is bounded by what is left of it. Bounds what a
# connection can make the monitor hold; browsers send a few KB, and a bigger
# block gets 431.
MAX_REQUEST_HEAD = 32 * 1024

TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
TOKEN_BYTES_RE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")


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
    """One parsed request: what an endpoint may know of it. The connection it
    came on, and the Connection line its reply carries, are the server side's."""

    __slots__ = ("method", "path", "query", "headers")

    def __init__(self, method: str, path: str, query: str = "", headers: Optional[RequestHeaders] = None) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers if headers is not None else RequestHeaders({})

    @classmethod
    def of(cls, method: str, target: str, headers: Any = ()) -> "Request":
        """A request for `target` (path and query), headers as RequestHeaders.of takes them."""
        path, _, query = target.partition("?")
        return cls(method, path, query, RequestHeaders.of(headers))
