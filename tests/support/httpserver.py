"""The HTTP server under every test stand-in (provider, tracker, Loki): threaded,
quiet about clients that hang up, and pointing back at the object that scripts it."""
from __future__ import annotations

import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Optional, Tuple, Type


class StandInServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: Tuple[str, int], owner: Any, handler: Type[BaseHTTPRequestHandler]) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-reply is what several tests do on purpose.
        if isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError, socket.timeout)):
            return
        super().handle_error(request, client_address)


def send_raw(handler: BaseHTTPRequestHandler, status: int, raw: bytes, content_type: str = "application/json",
             headers: Optional[Dict[str, str]] = None) -> None:
    """One whole reply, then close: what the stand-ins send, exact bytes included."""
    handler.send_response(status)
    handler.send_header("content-type", content_type)
    handler.send_header("content-length", str(len(raw)))
    handler.send_header("connection", "close")
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(raw)
    handler.close_connection = True


class QuietHandler(BaseHTTPRequestHandler):
    """A stand-in's request handler: HTTP/1.1, and no log line per request."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass


class Served:
    """A stand-in served on a thread of its own at `url` while in a `with` block: a subclass names
    its request `handler`, which finds the stand-in as `self.server.owner`; `lock` guards its state."""

    handler: Type[BaseHTTPRequestHandler]

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._server = StandInServer(("127.0.0.1", 0), self, self.handler)
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
