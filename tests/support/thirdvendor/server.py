"""The acme quota endpoint, standing in on loopback: `GET /v1/quota` with a bearer key."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any, Dict, List

from tests.support.httpserver import StandInServer, send_raw

from .demo import quota_reply

__all__ = ["AcmeServer", "quota_reply"]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        server: "AcmeServer" = self.server.owner  # type: ignore[attr-defined]
        auth = self.headers.get("Authorization") or ""
        key = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        with server.lock:
            server.calls.append(key)
            reply = server.replies.get(key)
        if self.path != "/v1/quota":
            send_raw(self, 404, b'{"error":"not found"}')
        elif reply is None:
            send_raw(self, 401, b'{"error":"bad key"}')
        else:
            send_raw(self, 200, json.dumps(reply).encode("utf-8"))


class AcmeServer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.replies: Dict[str, Any] = {}
        self.calls: List[str] = []
        self._server = StandInServer(("127.0.0.1", 0), self, _Handler)
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "AcmeServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def set_reply(self, key: str, body: Any) -> None:
        with self.lock:
            self.replies[key] = body
