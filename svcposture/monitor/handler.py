"""The request handler: parsing a request and writing its reply, nothing else.

It reads one request (its line and header fields, under the request
deadline), asks the application for the reply (app.MonitorApp.respond), and
writes it: a Response encoded with the Connection line this handler decided
and without its body for HEAD, in one write; a stream by sse.pump under one
of the server's stream slots while the server watches its socket for a
hang-up. Every route, the guard and the caches are the application's.
"""
from __future__ import annotations

import io
import logging
import socket
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, Dict, List, Optional

from .._version import __version__
from . import sse
from .connection import Connection
from .framing import framing_error
from .protocols import HandlerServer
from .request import (MAX_HEADER_LINE, MAX_HEADERS, MAX_REQUEST_HEAD, REQUEST_READ_TIMEOUT_S, TOKEN_BYTES_RE,
                      TOKEN_RE, Request, RequestHeaders)
from .response import REASONS, Response, connection_line, error_response

log = logging.getLogger("svcposture.monitor")

# What a stream answers to HEAD: no slot is taken and no frame is sent.
_STREAM_HEAD = Response(200, "text/event-stream", b"", b"Cache-Control: no-cache\r\n")
_TOO_MANY_STREAMS = error_response(503, "Too many stream subscribers; retry later.", b"Retry-After: 5\r\n")


class _Writer(io.BufferedIOBase):
    """Writes go whole to the socket (sendall): every reply is one write."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return len(data)


class MonitorHandler(BaseHTTPRequestHandler):
    """Serves one Connection handed off by a MonitorServer (a HandlerServer)."""

    server: HandlerServer  # type: ignore[assignment]
    request: Connection  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"
    server_version = "svc-monitor/" + __version__
    sys_version = ""
    timeout = REQUEST_READ_TIMEOUT_S

    def setup(self) -> None:
        # Slowloris: a request (or the next one on a kept-alive connection)
        # must arrive in full within the read timeout, 10 s unless configured,
        # however its bytes trickle in (the reader's deadline, set per request).
        self.timeout = self.server.request_timeout_s
        conn = self.request
        self.connection = conn.sock
        self.connection.settimeout(self.timeout)
        # Every response is one write, so Nagle has nothing to merge; left on, it
        # holds back the answers to pipelined requests until the client's delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        self.rfile, self._raw = conn.reader(self.rbufsize if self.rbufsize > 0 else io.DEFAULT_BUFFER_SIZE)
        self.wfile = _Writer(self.connection)
        if conn.unsent:
            self.wfile.write(conn.unsent)
            conn.unsent = b""

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
        # Every method is the application's to answer (a 405 for all but GET and HEAD).
        if name.startswith("do_"):
            return self._respond
        raise AttributeError(name)

    # -- replies: the one place a Response gets its Connection line and loses its body for HEAD --

    def _send(self, response: Response) -> None:
        if response.ends_connection:
            self.close_connection = True
        self.wfile.write(response.encode(connection_line(self.close_connection, self.request_version),
                                         head_only=self.command == "HEAD"))

    def send_error(self, code: int, message: Optional[str] = None, explain: Optional[str] = None) -> None:
        # The stdlib's parse errors (400/414/431/505/501) as JSON, closing the
        # connection since the request's framing can no longer be trusted.
        try:
            self._send(error_response(code, message or REASONS.get(code, "error"), ends_connection=True))
        except OSError:
            pass

    def _respond(self) -> None:
        if self.headers.get("Content-Length") not in (None, "0") or "Transfer-Encoding" in self.headers:
            self.close_connection = True  # a request with a body: don't parse it as the next request
        path, _, query = self.path.partition("?")
        reply = self.server.app.respond(Request(self.command, path, query, self.headers))  # type: ignore[arg-type]
        if not isinstance(reply, sse.Stream):
            self._send(reply)
        elif self.command == "HEAD":
            self._send(_STREAM_HEAD)
        else:
            self._stream(reply)

    def _stream(self, stream: sse.Stream) -> None:
        server = self.server
        if not server.streams.acquire():
            self._send(_TOO_MANY_STREAMS)
            return
        gone = server.watch_hangup(self.request)
        try:
            self.close_connection = True
            sse.pump(self.wfile.write, stream, server.stopping, gone)
        finally:
            server.unwatch_hangup(self.request)
            server.streams.release()
