"""A tracker and Loki stand-in that answers well, or trickles: one byte every few seconds.

    with SlowUpstream(host="n1") as up:
        env["SVC_TRACKER_URL"] = up.url + "/graphql"   # or SVC_LOKI_URL = up.url
        up.trickle = True       # from now on: the head and body one byte at a time
        up.trickle = False      # good answers again

Good answers: the anchor issue query gets an issue with no heartbeat (Linear's
shape), a Loki instant query gets one live host; a mutation (the heartbeat
publisher) gets HTTP 500 at once, so that only the reads under test trickle.
A trickled reply never ends: it stops when the client goes away or the
stand-in stops.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any, List

from .rawserver import http_reply


class SlowUpstream:
    def __init__(self, host: str = "n1", byte_every_s: float = 2.0) -> None:
        self.host = host
        self.byte_every_s = byte_every_s
        self.trickle = False
        self.trickled = 0  # connections that were trickled
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conns: List[socket.socket] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.url = "http://127.0.0.1:%d" % self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> "SlowUpstream":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._sock.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except OSError:
                pass
        self._thread.join(5)

    def _serve(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _request(self, conn: socket.socket) -> bytes:
        conn.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip() or b"0")
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body

    def _answer(self, conn: socket.socket) -> None:
        try:
            request = self._request(conn)
            if b"mutation" in request:
                conn.sendall(http_reply(500, {"errors": [{"message": "stand-in: no heartbeats here"}]}))
            elif self.trickle:
                self._trickle(conn)
            else:
                conn.sendall(http_reply(200, self._good(request)))
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def _good(self, request: bytes) -> Any:
        if b"/loki/" in request.split(b"\r\n", 1)[0]:
            return {"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {"host": self.host}, "value": [time.time(), "3"]}]}}
        return {"data": {"issue": {"id": "issue-1", "identifier": "OPS-1", "archivedAt": None, "trashed": False,
                                   "state": {"type": "started"},
                                   "attachments": {"nodes": [], "pageInfo": {"hasNextPage": False,
                                                                             "endCursor": None}}}}}

    def _trickle(self, conn: socket.socket) -> None:
        with self._lock:
            self.trickled += 1
        reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n" + \
            json.dumps({"data": {"pad": "x" * 999_900}}).encode()
        for i in range(len(reply)):
            if self._stop.wait(self.byte_every_s if i else 0):
                return
            conn.sendall(reply[i:i + 1])
