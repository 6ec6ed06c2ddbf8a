"""The fast lane: cached plain reads of /api/accounts (and /api/trajectory) answered from one selector thread.

Every accepted connection starts here. Whatever the lane does not answer
itself is handed, with the bytes already read and the answers not yet sent, to
a handler thread of its own (MonitorServer.hand_off); _ReplayRaw puts those
bytes back in front of the socket for the handler.
"""
from __future__ import annotations

import io
import selectors
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from .wire import MAX_HEADER_LINE, MAX_HEADERS, TOKEN_BYTES_RE

if TYPE_CHECKING:
    from .server import MonitorServer


class _ReplayRaw(io.RawIOBase):
    """A socket's byte stream with bytes already read off it put back in front."""

    def __init__(self, prefix: bytes, sock: socket.socket) -> None:
        self._prefix = prefix
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return self._sock.recv_into(buffer)


class _ClosedSocket:
    def recv_into(self, buffer: Any) -> int:
        return 0


def replay_reader(prefix: bytes, sock: Any, buffer_size: int) -> io.BufferedReader:
    """A reader of `sock` that first yields `prefix`, the bytes the lane already read off it."""
    return io.BufferedReader(_ReplayRaw(prefix, sock), buffer_size)


def closed_reader() -> io.BufferedReader:
    """A reader at end of stream: the lane answered a `Connection: close` request."""
    return io.BufferedReader(_ReplayRaw(b"", _ClosedSocket()))


class _Conn:
    __slots__ = ("sock", "address", "inbox", "last")

    def __init__(self, sock: socket.socket, address: Any) -> None:
        self.sock = sock
        self.address = address
        self.inbox = b""
        self.last = time.monotonic()


_FAST_TARGET = b"/api/accounts"
_FAST_LINE = b"GET " + _FAST_TARGET + b" HTTP/1.1"
# The trajectory body is built once per probe, so its reads are as cheap.
_TRAJECTORY_LINE = b"GET /api/trajectory HTTP/1.1"


class FastLane:
    """Cached plain reads of /api/accounts on kept-alive connections, in one thread.

    A thread per connection makes 32 busy connections fight over the GIL after
    every recv and send; one selector loop answering from prebuilt bytes does
    not. Anything that is not a well-formed `GET /api/accounts HTTP/1.1` with a
    fresh cached posture (or `GET /api/trajectory HTTP/1.1`, built once per probe) (streams, forced refreshes, other routes, odd or
    oversized requests, a slow reader) is handed, with the bytes already read
    and any answers not yet sent, to the ordinary threaded handler, which
    applies every rule of the surface. The fast lane therefore only ever
    answers what that handler would have answered byte for byte.
    """

    def __init__(self, server: MonitorServer) -> None:
        self.server = server
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._incoming: List[_Conn] = []
        self._lock = threading.Lock()
        self._closed = False
        self.thread = threading.Thread(target=self._loop, name="svc-monitor-fast-lane", daemon=True)
        self.thread.start()

    def adopt(self, sock: socket.socket, address: Any) -> None:
        with self._lock:
            if self._closed:
                sock.close()
                return
            self._incoming.append(_Conn(sock, address))
        self._wake()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._wake()
        self.thread.join(5.0)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass

    def _loop(self) -> None:
        server = self.server
        try:
            while True:
                with self._lock:
                    closed = self._closed
                    incoming, self._incoming = self._incoming, []
                if closed:
                    for conn in incoming:
                        conn.sock.close()
                    break
                for conn in incoming:
                    try:
                        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    except OSError:
                        pass
                    conn.sock.setblocking(False)
                    self.selector.register(conn.sock, selectors.EVENT_READ, conn)
                for key, _ in self.selector.select(timeout=1.0):
                    if key.data is None:
                        try:
                            self._wake_r.recv(4096)
                        except OSError:
                            pass
                        continue
                    self._readable(key.data)
                self._expire(time.monotonic() - server.request_timeout_s)
        finally:
            for key in list(self.selector.get_map().values()):
                if key.data is not None:
                    self._drop(key.data)
            self.selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _expire(self, cutoff: float) -> None:
        # An idle keep-alive connection, or a request trickling in (slowloris),
        # is closed after the read timeout, as the threaded handler would.
        for key in list(self.selector.get_map().values()):
            conn = key.data
            if conn is not None and conn.last < cutoff:
                self._drop(conn)

    def _drop(self, conn: _Conn) -> None:
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.close()
        except OSError:
            pass

    def _readable(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self._drop(conn)
        if not data:
            return self._drop(conn)
        conn.last = time.monotonic()
        inbox = conn.inbox + data
        answers: List[bytes] = []
        close_after = False
        while inbox:
            end = inbox.find(b"\r\n\r\n")
            if end < 0:
                if len(inbox) > MAX_HEADER_LINE or b"\n\n" in inbox:
                    return self._hand_off(conn, inbox, answers)  # oversized or bare-LF framing
                break
            answer, close_after = self._answer(inbox[:end])
            if answer is None:
                return self._hand_off(conn, inbox, answers)
            answers.append(answer)
            inbox = inbox[end + 4:]
            if close_after:
                break
        conn.inbox = inbox
        if answers:
            payload = b"".join(answers)
            try:
                sent = conn.sock.send(payload)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                return self._drop(conn)
            if sent < len(payload):
                # A slow reader: let a thread block on it, never this loop.
                return self._hand_off(conn, inbox, [payload[sent:]], close_after)
        if close_after:
            self._drop(conn)

    def _answer(self, head: bytes) -> Tuple[Optional[bytes], bool]:
        """The response to one request head, or (None, _) to hand it off."""
        server = self.server
        line, _, fields = head.partition(b"\r\n")
        trajectory = line == _TRAJECTORY_LINE
        if (line != _FAST_LINE and not trajectory) or server.read_guard or server.stopping.is_set():
            return None, False
        close = False
        count = 0
        token = TOKEN_BYTES_RE.match
        for field in fields.split(b"\r\n") if fields else ():
            count += 1
            name, colon, value = field.partition(b":")
            if count > MAX_HEADERS or not colon or not token(name) or len(field) > MAX_HEADER_LINE:
                return None, False
            lower = name.lower()
            if lower == b"connection":
                option = value.strip(b" \t").lower()
                if option == b"close":
                    close = True
                elif option != b"keep-alive":
                    return None, False
            elif lower == b"transfer-encoding" or (lower == b"content-length" and value.strip(b" \t") != b"0"):
                return None, False
        if trajectory:
            response = server.trajectory_response(b"Connection: close\r\n" if close else b"")
            return response, close
        fresh = getattr(server.service, "fresh_summary", None)
        summary = fresh() if fresh is not None else None
        if summary is None:
            return None, False
        return server.cached_read_response(summary, b"Connection: close\r\n" if close else b""), close

    def _hand_off(self, conn: _Conn, inbox: bytes, answers: List[bytes], close_after: bool = False) -> None:
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.setblocking(True)
        except OSError:
            return self._drop(conn)
        self.server.hand_off(conn.sock, conn.address, b"".join(answers), b"" if close_after else inbox,
                             close_after)
