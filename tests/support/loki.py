"""A Loki test server on 127.0.0.1 answering GET /loki/api/v1/query with the real shape:

    {"status": "success", "data": {"resultType": "vector",
     "result": [{"metric": {"host": "a"}, "value": [1700000000.123, "5"]}]}}

    with LokiServer() as loki:
        loki.set_counts({"a": 5, "b": 0})
        env["SVC_LOKI_URL"] = loki.url
"""
from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any, Dict, List, Optional

from tests.support.httpserver import StandInServer

MODES = ("normal", "error", "garbage", "http500", "wrong_shape", "bad_value", "matrix")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _send(self, status: int, raw: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(raw)
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        owner = self.server.owner
        parts = urllib.parse.urlsplit(self.path)
        if parts.path != "/loki/api/v1/query":
            self._send(404, b"404 page not found\n")
            return
        query = urllib.parse.parse_qs(parts.query).get("query", [""])[0]
        with owner._lock:
            owner.queries.append(query)
            mode, counts = owner.mode, dict(owner.counts)
        now = round(time.time(), 3)
        if mode == "error":
            self._send(400, json.dumps({"status": "error", "errorType": "bad_data",
                                        "error": "parse error at line 1, col 5: syntax error"}).encode())
        elif mode == "garbage":
            self._send(200, b"<<not json>>")
        elif mode == "http500":
            self._send(500, b"too many outstanding requests\n")
        elif mode == "wrong_shape":
            self._send(200, json.dumps({"status": "success", "data": {"resultType": "vector",
                                                                       "result": [{"metric": "a"}]}}).encode())
        elif mode == "bad_value":
            self._send(200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {"host": "a"}, "value": [now, "many"]}]}}).encode())
        elif mode == "matrix":
            self._send(200, json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                                       "result": []}}).encode())
        else:
            result = [{"metric": {"host": host}, "value": [now, str(n)]} for host, n in counts.items()]
            self._send(200, json.dumps({"status": "success", "data": {
                "resultType": "vector", "result": result,
                "stats": {"summary": {"bytesProcessedPerSecond": 0, "execTime": 0.001}}}}).encode())


class LokiServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self.counts: Dict[str, int] = {}
        self.mode = "normal"
        self.queries: List[str] = []
        self._httpd = StandInServer((host, port), self, _Handler)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return "http://%s:%d" % (host, port)

    def set_counts(self, counts: Dict[str, int]) -> None:
        with self._lock:
            self.counts = dict(counts)

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        with self._lock:
            self.mode = mode

    def start(self) -> "LokiServer":
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         name="loki-server", daemon=True).start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "LokiServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def first_query(server: LokiServer) -> Optional[str]:
    with server._lock:
        return server.queries[0] if server.queries else None
