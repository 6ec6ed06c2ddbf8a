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
import time
from typing import Any

from .rawserver import RawServer, http_reply


class SlowUpstream(RawServer):
    """RawServer's accept loop and stop, with its own answer to every connection."""

    def __init__(self, host: str = "n1", byte_every_s: float = 2.0) -> None:
        super().__init__()
        self.host = host
        self.byte_every_s = byte_every_s
        self.trickle = False
        self.trickled = 0  # connections that were trickled

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
