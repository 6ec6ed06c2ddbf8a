"""The request handler: parsing requests and writing replies, nothing else.

It reads one request (its line and header fields, under the request
deadline), asks the application (app.py) for the reply and writes it in one
write; a stream reply is written by sse.pump under one of the server's stream
slots while the server's HangupWatch watches its socket. Every route, the
guard and the caches are the application's.
"""
from __future__ import annotations

import io
import logging
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, Dict, List, Optional

from .._version import __version__
from . import sse, wire
from .fastlane import closed_reader, replay_reader
from .framing import framing_error
from .wire import (MAX_HEADER_LINE, MAX_HEADERS, MAX_REQUEST_HEAD, REASONS, REQUEST_READ_TIMEOUT_S,
                   TOKEN_BYTES_RE, TOKEN_RE, Request, RequestHeaders)

log = logging.getLogger("svcposture.monitor")


class MonitorHandler(BaseHTTPRequestHandler):
    """Serves one connection of a MonitorServer.

    The server it is given provides `app` (the MonitorApp), `streams` (its
    StreamSlots), `hangups` (its HangupWatch), `stopping` (an Event),
    `request_timeout_s` and `take_handoff(sock)` (what the fast lane already
    read and answered on this connection).
    """

    server: Any
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
        untrusted = framing_error(fields.get("content-length", ()), "transfer-encoding" in fields)
        if untrusted:
            self.send_error(400, untrusted)  # closes: where this request ends is unknown
            return False
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

    # -- replies: always one write --

    def _connection_header(self) -> bytes:
        if self.close_connection:
            return wire.CLOSE
        if self.request_version == "HTTP/1.0":
            return b"Connection: keep-alive\r\n"
        return b""

    def send_error(self, code: int, message: Optional[str] = None, explain: Optional[str] = None) -> None:
        # The stdlib's parse errors (400/414/431/505/501) as JSON, closing the
        # connection since the request's framing can no longer be trusted.
        self.close_connection = True
        try:
            text = message or REASONS.get(code, "error")
            self.wfile.write(wire.error_response(code, text, self._connection_header(),
                                                 head_only=self.command == "HEAD"))
        except OSError:
            pass

    def _method_not_allowed(self) -> None:
        self.close_connection = True  # any request body is left unread
        self.wfile.write(wire.error_response(405, "Only GET and HEAD are supported.", self._connection_header(),
                                             b"Allow: GET, HEAD\r\n", head_only=self.command == "HEAD"))

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        if self.headers.get("Content-Length") not in (None, "0") or "Transfer-Encoding" in self.headers:
            self.close_connection = True  # a GET with a body: don't parse it as the next request
        path, _, query = self.path.partition("?")
        reply = self.server.app.handle(Request(self.command, path, query, self.headers, self._connection_header()))
        if isinstance(reply, sse.Stream):
            self._stream(reply)
        else:
            self.wfile.write(reply)

    def _stream(self, stream: sse.Stream) -> None:
        server = self.server
        if not server.streams.acquire():
            self.wfile.write(wire.error_response(503, "Too many stream subscribers; retry later.",
                                                 self._connection_header(), b"Retry-After: 5\r\n"))
            return
        gone = server.hangups.watch(self.connection)
        try:
            self.close_connection = True
            sse.pump(self.wfile.write, stream, server.stopping, gone)
        finally:
            server.hangups.unwatch(self.connection)
            server.streams.release()
