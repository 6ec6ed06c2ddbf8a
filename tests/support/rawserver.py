"""A loopback TCP server that answers every connection with bytes a test chose.

For clients that must survive a broken or hostile peer (the statusline's
monitor client): replies that are not HTTP, not JSON, huge, cut short,
trickled, or never sent at all.

    with RawServer({"/api/accounts": http_reply(200, body)}) as server:
        ... server.url ...

`routes` maps a request path to what is sent back:
- bytes: written whole, then the connection is closed;
- HANG: nothing is sent and the connection is held open until the server stops;
- a callable(sock): does whatever it likes with the socket, e.g. a `Trickle`
  (the head at once, then the body a byte at a time, telling whether the client
  has gone).
A path not in `routes` gets `default` (404 unless set). `requests` lists the
paths asked for, in order.
"""
from __future__ import annotations

import json
import select
import socket
import threading
from typing import Any, Callable, Dict, List, Optional, Union

HANG = object()
Reply = Union[bytes, object, Callable[[socket.socket], None]]


def http_reply(status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> bytes:
    """A complete HTTP/1.1 reply; `body` that is not bytes is sent as JSON."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    head = ["HTTP/1.1 %d X" % status, "Content-Type: application/json", "Content-Length: %d" % len(raw),
            "Connection: close"]
    head += ["%s: %s" % item for item in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + raw


class RawServer:
    def __init__(self, routes: Optional[Dict[str, Reply]] = None, default: Optional[Reply] = None) -> None:
        self.routes = dict(routes or {})
        self.default = default if default is not None else http_reply(404, {"error": "not_found"})
        self.requests: List[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._held: List[socket.socket] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> "RawServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        try:
            self._sock.close()
        except OSError:
            pass
        with self._lock:
            held, self._held = self._held, []
        for conn in held:
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
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                head += chunk
        except OSError:
            pass
        parts = head.split(b" ", 2)
        path = parts[1].decode("latin-1") if len(parts) > 1 else ""
        with self._lock:
            self.requests.append(path)
        reply = self.routes.get(path, self.default)
        if reply is HANG:
            with self._lock:
                self._held.append(conn)
            return
        try:
            if callable(reply):
                reply(conn)
            else:
                conn.sendall(reply)  # type: ignore[arg-type]
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass


class Trickle:
    """A RawServer answer: the head at once, then the body one byte every `every_s` seconds."""

    def __init__(self, body: bytes, every_s: float = 0.5) -> None:
        self.body = body
        self.every_s = every_s
        self.started = threading.Event()
        self.stop = threading.Event()
        self.conn: "socket.socket | None" = None

    def __call__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.started.set()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n" % len(self.body))
        for i in range(len(self.body)):
            if self.stop.wait(self.every_s):
                return
            conn.sendall(self.body[i:i + 1])

    def client_gone(self) -> bool:
        """Whether the client has closed its end (its process exited, or it gave up)."""
        conn = self.conn
        if conn is None:
            return False
        try:
            # A socket with a timeout would wait that long in recv: ask select first, without waiting.
            readable, _, _ = select.select([conn], [], [], 0)
            return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):  # ValueError: the stand-in closed it after a failed send
            return True
