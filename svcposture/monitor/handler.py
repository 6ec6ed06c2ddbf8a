"""The request handler: reading a request and writing its reply, nothing else.

It reads one request head (the one parser of request heads, requesthead.py,
under the request deadline), asks the application for the reply
(app.MonitorApp.respond), and writes it: a Response encoded with the
Connection line the head decided and without its body for HEAD, in one write;
a stream by sse.pump under one of the stream slots while the hang-up watch
watches its socket. Every route, the guard and the caches are the application's.
It is given what it needs (protocols.Serving) and holds no server.
"""
from __future__ import annotations

import io
import logging
import socket
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, Optional

from .._version import __version__
from . import sse
from .connection import Connection
from .protocols import Serving
from .request import REQUEST_READ_TIMEOUT_S, Request, RequestHeaders
from .requesthead import Refusal, read_head
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
    """Serves one Connection handed off by the fast lane, with what the server gave it (a Serving)."""

    request: Connection  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"
    server_version = "svc-monitor/" + __version__
    sys_version = ""
    timeout = REQUEST_READ_TIMEOUT_S

    def __init__(self, conn: Connection, address: Any, serving: Serving) -> None:
        self.serving = serving
        # socketserver's handler serves the whole connection inside __init__.
        super().__init__(conn, address, serving)  # type: ignore[arg-type]

    def setup(self) -> None:
        # Slowloris: a request (or the next one on a kept-alive connection)
        # must arrive in full within the read timeout, 10 s unless configured,
        # however its bytes trickle in (the reader's deadline, set per request).
        self.timeout = self.serving.request_timeout_s
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
        """Read one head and answer it; close_connection says whether another may follow."""
        self.command = None  # type: ignore[assignment]
        self.request_version = self.default_request_version
        self.close_connection = True
        self._raw.deadline = time.monotonic() + self.serving.request_timeout_s
        try:
            head = read_head(self.rfile.readline)
            if head is None:
                return
            if isinstance(head, Refusal):
                self.command = head.method  # type: ignore[assignment]
                self.send_error(head.status, head.message)  # closes: where this request ends is unknown
                return
            self._request_read()
            self.command, self.path, self.request_version = head.method, head.target, head.version
            self.close_connection = head.close
            self.headers = RequestHeaders(head.fields)  # type: ignore[assignment]
            self._respond()
        except socket.timeout:
            # The request did not arrive in time, or its reply could not be written: close unanswered.
            self.close_connection = True

    def _request_read(self) -> None:
        """The request head is in: responses (a stream included) are not bound by its deadline."""
        self._raw.deadline = None
        try:
            self.connection.settimeout(self.timeout)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # per-request logging would dominate the hot path

    # -- replies: the one place a Response gets its Connection line and loses its body for HEAD --

    def _send(self, response: Response) -> None:
        if response.ends_connection:
            self.close_connection = True
        self.wfile.write(response.encode(connection_line(self.close_connection, self.request_version),
                                         head_only=self.command == "HEAD"))

    def send_error(self, code: int, message: Optional[str] = None, explain: Optional[str] = None) -> None:
        # Refused heads as JSON, closing the connection since the request's
        # framing can no longer be trusted.
        try:
            self._send(error_response(code, message or REASONS.get(code, "error"), ends_connection=True))
        except OSError:
            pass

    def _respond(self) -> None:
        path, _, query = self.path.partition("?")
        reply = self.serving.app.respond(Request(self.command, path, query, self.headers))  # type: ignore[arg-type]
        if not isinstance(reply, sse.Stream):
            self._send(reply)
        elif self.command == "HEAD":
            self._send(_STREAM_HEAD)
        else:
            self._stream(reply)

    def _stream(self, stream: sse.Stream) -> None:
        serving = self.serving
        if not serving.streams.acquire():
            self._send(_TOO_MANY_STREAMS)
            return
        gone = serving.hangups.watch(self.request.sock)
        try:
            self.close_connection = True
            sse.pump(self.wfile.write, stream, serving.stopping, gone)
        finally:
            serving.hangups.unwatch(self.request.sock)
            serving.streams.release()
