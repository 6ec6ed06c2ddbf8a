"""The request handler: parsing, the routes, the guard, and one-write responses.

Every route of DESIGN §5 is answered here (the fast lane only short-cuts the
cached plain read of /api/accounts and hands everything else over). The
guard's policy lives in trust.py, the stream in sse.py, the /metrics text and
the OpenAPI document in exposition.py, the dashboard files in assets.py.
"""
from __future__ import annotations

import functools
import io
import logging
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .._version import __version__
from . import sse, trajectory_routes
from .assets import PAGE_HEADERS
from .exposition import METRICS_TYPE, render_metrics, render_trajectory_metrics
from .fastlane import closed_reader, replay_reader
from .fleet import fleet_cache
from .trust import GUARD_MESSAGES
from .vendor_routes import vendor_accounts_reply, vendor_service
from .wire import (ERROR_CODES, JSON_HEADERS, JSON_TYPE, MAX_HEADER_LINE, MAX_HEADERS, MAX_REQUEST_HEAD, REASONS,
                   REQUEST_READ_TIMEOUT_S, TOKEN_BYTES_RE, TOKEN_RE, dumps)

if TYPE_CHECKING:
    from .server import MonitorServer

log = logging.getLogger("svcposture.monitor")


class RequestHeaders:
    """Request header fields, looked up case-insensitively.

    The stdlib hands header blocks to the email parser, which costs more than
    the rest of a cached read put together; HTTP/1.1 fields need far less."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Dict[str, List[str]]) -> None:
        self._fields = fields

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


class MonitorHandler(BaseHTTPRequestHandler):
    server: MonitorServer
    protocol_version = "HTTP/1.1"
    server_version = "svc-monitor/" + __version__
    sys_version = ""
    timeout = REQUEST_READ_TIMEOUT_S
    # Every response is one write, so Nagle has nothing to merge; left on, it
    # holds back the answers to pipelined requests until the client's delayed ACK.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        # Slowloris: a request (or the next one on a kept-alive connection)
        # must arrive in full within the read timeout, 10 s unless configured,
        # however its bytes trickle in (the reader's deadline, set per request).
        self.timeout = self.server.request_timeout_s
        super().setup()
        handoff = self.server.take_handoff(self.request)
        unsent, unread, close = handoff if handoff is not None else (b"", b"", False)
        self.rfile.close()  # the stdlib's reader; the socket stays open
        self.rfile, self._raw = replay_reader(unread, self.connection, self.rbufsize
                                              if self.rbufsize > 0 else io.DEFAULT_BUFFER_SIZE)
        if unsent:
            self.wfile.write(unsent)
        if close:
            # The fast lane answered a `Connection: close` request: nothing follows.
            self.rfile = closed_reader()

    def handle_one_request(self) -> None:
        self._raw.deadline = time.monotonic() + self.server.request_timeout_s
        super().handle_one_request()

    def _request_read(self) -> None:
        """The request head is in: responses (a stream included) are not bound by its deadline."""
        self._raw.deadline = None
        try:
            self.connection.settimeout(self.timeout)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # per-request logging would dominate the hot path

    def parse_request(self) -> bool:
        self.command = None  # type: ignore[assignment]
        self.request_version = self.default_request_version
        self.close_connection = True
        if not self._parse_request_line():
            return False
        fields = self._read_fields()
        if fields is None:
            return False
        self._request_read()
        self.headers = RequestHeaders(fields)  # type: ignore[assignment]
        conntype = (self.headers.get("Connection") or "").lower()
        if conntype == "close":
            self.close_connection = True
        elif conntype == "keep-alive":
            self.close_connection = False
        return True

    def _parse_request_line(self) -> bool:
        requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        self.requestline = requestline
        words = requestline.split()
        if not words:
            return False
        if len(words) != 3:
            self.send_error(400, "Bad request line.")
            return False
        command, path, version = words
        if not version.startswith("HTTP/") or not TOKEN_RE.match(command):
            self.send_error(400, "Bad request line.")
            return False
        major, dot, minor = version[5:].partition(".")
        if not (major.isdigit() and minor.isdigit() and dot and len(major) < 4 and len(minor) < 4):
            self.send_error(400, "Bad request version.")
            return False
        if major != "1":
            self.send_error(505, "Only HTTP/1.x is supported.")
            return False
        self.request_version = version
        if minor != "0":
            self.close_connection = False
        if path.startswith("//"):
            path = "/" + path.lstrip("/")  # never let it read as a network-path reference
        self.command, self.path = command, path
        return True

    def _read_fields(self) -> Optional[Dict[str, List[str]]]:
        """The header fields by lower-cased name; None once an error reply is sent."""
        fields: Dict[str, List[str]] = {}
        count = 0
        total = 0
        readline = self.rfile.readline
        token = TOKEN_BYTES_RE.match
        while True:
            line = readline(min(MAX_HEADER_LINE, MAX_REQUEST_HEAD - total) + 1)
            if line == b"\r\n" or line == b"\n" or not line:
                break
            total += len(line)
            if len(line) > MAX_HEADER_LINE:
                self.send_error(431, "Header line too long.")
                return None
            if total > MAX_REQUEST_HEAD:
                self.send_error(431, "Header fields too large.")
                return None
            count += 1
            if count > MAX_HEADERS:
                self.send_error(431, "Too many header fields.")
                return None
            name, colon, value = line.partition(b":")
            # No folded lines, no space before the colon: both are smuggling tools.
            if not colon or not token(name):
                self.send_error(400, "Malformed header field.")
                return None
            key = name.decode("ascii").lower()
            text = value.strip(b" \t\r\n").decode("iso-8859-1")
            values = fields.get(key)
            if values is None:
                fields[key] = [text]
            else:
                values.append(text)
        return fields

    def __getattr__(self, name: str) -> Any:
        # Every method other than GET/HEAD, however spelled, is a 405.
        if name.startswith("do_"):
            return self._method_not_allowed
        raise AttributeError(name)

    # -- response writing: always one write --

    def _send(self, status: int, ctype: str, body: bytes, extra: bytes = b"",
              head_only: Optional[bool] = None) -> None:
        if head_only is None:
            head_only = self.command == "HEAD"
        conn = self._connection_header()
        head = b"HTTP/1.1 %d %s\r\nServer: svc-monitor\r\n%sContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n" % (
            status, REASONS.get(status, "Unknown").encode("ascii"), self.server.date_header(),
            ctype.encode("ascii"), len(body), conn, extra)
        self.wfile.write(head if head_only else head + body)

    def _connection_header(self) -> bytes:
        if self.close_connection:
            return b"Connection: close\r\n"
        if self.request_version == "HTTP/1.0":
            return b"Connection: keep-alive\r\n"
        return b""

    def _send_json(self, status: int, obj: Any, extra: bytes = b"") -> None:
        self._send(status, JSON_TYPE, dumps(obj), JSON_HEADERS + extra)

    def _error(self, status: int, message: str, extra: bytes = b"") -> None:
        self._send_json(status, {"error": ERROR_CODES.get(status, "error"), "message": message}, extra)

    def send_error(self, code: int, message: Optional[str] = None, explain: Optional[str] = None) -> None:
        # The stdlib's parse errors (400/414/431/505/501) as JSON, closing the
        # connection since the request's framing can no longer be trusted.
        self.close_connection = True
        try:
            text = message or REASONS.get(code, "error")
            self._send_json(code, {"error": ERROR_CODES.get(code, "error"), "message": text})
        except OSError:
            pass

    def _method_not_allowed(self) -> None:
        self.close_connection = True  # any request body is left unread
        self._error(405, "Only GET and HEAD are supported.", b"Allow: GET, HEAD\r\n")

    # -- routing --

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        server = self.server
        path, _, query = self.path.partition("?")
        if self.headers.get("Content-Length") not in (None, "0") or "Transfer-Encoding" in self.headers:
            self.close_connection = True  # a GET with a body: don't parse it as the next request
        if server.read_guard:
            reason = self._host_origin_reason()
            if reason:
                return self._forbidden(reason)
        if path == "/api/accounts":
            return self._accounts(query)
        if path == "/api/accounts/stream":
            return self._stream(query=query)
        if path in trajectory_routes.ROUTES:
            return trajectory_routes.answer(self, path, query)
        if path == "/healthz":
            # probeIntervalS: a posture older than twice it is stale (DESIGN §14).
            return self._send_json(200, {"ok": True, "node": server.node, "version": __version__,
                                         "startedAt": server.started_at,
                                         "probeIntervalS": server.service.interval_s})
        if path == "/metrics":
            return self._metrics()
        if path == "/api/fleet":
            return self._send(200, JSON_TYPE, fleet_cache(server).body(), JSON_HEADERS)
        if path == "/api/openapi.json":
            return self._send(200, JSON_TYPE, server.openapi_body, JSON_HEADERS)
        asset = server.static.get(path)
        if asset is not None:
            return self._send(200, asset[1], asset[0], PAGE_HEADERS)
        self._error(404, "No such route. See /api/openapi.json.")

    def _host_origin_reason(self) -> Optional[str]:
        trust = self.server.trust
        if not trust.host_trusted(self.headers.get_all("Host") or []):
            return "untrusted_host"
        origins = self.headers.get_all("Origin")
        if origins is not None and not trust.origin_trusted(origins):
            return "untrusted_origin"
        return None

    def _forbidden(self, reason: str) -> None:
        self._send_json(403, {"error": "forbidden", "reason": reason, "message": GUARD_MESSAGES[reason]})

    def _accounts(self, query: str) -> None:
        service, bad = vendor_service(self.server.service, query)
        if bad is not None:
            return self._send_json(400, bad)
        if service is not self.server.service:
            return self._vendor_accounts(service, _refresh_requested(query))
        refresh = _refresh_requested(query)
        if refresh:
            if self.headers.get("X-Svc-Refresh") is None:
                return self._forbidden("refresh_header_missing")
            reason = self._host_origin_reason()
            if reason:
                return self._forbidden(reason)
        if not refresh and self.command == "GET":
            fresh = getattr(self.server.service, "fresh_summary", None)
            summary = fresh() if fresh is not None else None
            if summary is not None:
                self.wfile.write(self.server.cached_read_response(summary, self._connection_header()))
                return
        try:
            body = self.server.service.read(refresh=refresh)
        except Exception as exc:  # the posture layer failed: say so, keep serving
            log.warning("posture read failed: %s: %s", type(exc).__name__, exc)
            return self._error(500, "The posture could not be read.")
        self._send(200, JSON_TYPE, self.server.posture_bytes(body), JSON_HEADERS)

    def _vendor_accounts(self, service: Any, refresh: bool) -> None:
        if refresh:
            reason = self._host_origin_reason() if self.headers.get("X-Svc-Refresh") is not None \
                else "refresh_header_missing"
            if reason:
                return self._forbidden(reason)
        status, body = vendor_accounts_reply(service, refresh)
        self._send(status, JSON_TYPE, body, JSON_HEADERS)

    def _stream(self, pump: Any = sse.pump, query: str = "") -> None:
        server = self.server
        service, bad = vendor_service(server.service, query)
        if bad is not None:
            return self._send_json(400, bad)
        if service is not server.service:
            pump = functools.partial(sse.pump, service=service)
        if self.command == "HEAD":
            return self._send(200, "text/event-stream", b"", b"Cache-Control: no-cache\r\n")
        if not server.acquire_stream():
            return self._error(503, "Too many stream subscribers; retry later.", b"Retry-After: 5\r\n")
        gone = server.hangups.watch(self.connection)
        try:
            self.close_connection = True
            pump(self.wfile.write, server, gone)
        finally:
            server.hangups.unwatch(self.connection)
            server.release_stream()

    def _metrics(self) -> None:
        server = self.server
        try:
            figures = server.service.metrics()
        except Exception as exc:
            log.warning("posture metrics failed: %s: %s", type(exc).__name__, exc)
            figures = {}
        codex = getattr(server.service, "codex", None)
        text = render_metrics(figures, subscribers=server.stream_count, subscribers_max=server.max_streams,
                              codex=codex.metrics() if codex is not None else None)
        if server.trajectory is not None:
            text += render_trajectory_metrics(server.trajectory.metrics())
        self._send(200, METRICS_TYPE, text.encode("utf-8"), b"Cache-Control: no-store\r\n")


def _refresh_requested(query: str) -> bool:
    if not query:
        return False
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name == "refresh" and value == "true":
            return True
    return False
