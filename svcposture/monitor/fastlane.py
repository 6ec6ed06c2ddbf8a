"""The fast lane: cached plain reads answered from one selector thread.

Every accepted connection starts here. The lane parses request heads itself
and asks the application for the bytes of a plain `GET <target> HTTP/1.1` of
one of its FAST_TARGETS (/api/accounts, /api/trajectory). Whatever the lane
does not answer itself is handed, with the bytes already read and the answers
not yet sent, to a handler thread of its own (MonitorServer.hand_off);
_ReplayRaw puts those bytes back in front of the socket for the handler.
"""
from __future__ import annotations

import io
import selectors
import socket
import threading
import time
from typing import Any, List, Optional, Tuple

from .wire import CLOSE, MAX_HEADER_LINE, MAX_HEADERS, MAX_REQUEST_HEAD, TOKEN_BYTES_RE


class _ReplayRaw(io.RawIOBase):
    """A socket's byte stream with bytes already read off it put back in front.

    While `deadline` (a time.monotonic() instant) is set, no read waits past
    it: a per-recv timeout restarts on every byte, so a client sending one
    byte a second would otherwise never time out.
    """

    def __init__(self, prefix: bytes, sock: Any) -> None:
        self._prefix = prefix
        self._sock = sock
        self.deadline: Optional[float] = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("the request did not arrive in time")
            self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class _ClosedSocket:
    def recv_into(self, buffer: Any) -> int:
        return 0


def replay_reader(prefix: bytes, sock: Any, buffer_size: int) -> Tuple[io.BufferedReader, _ReplayRaw]:
    """A reader of `sock` that first yields `prefix`, the bytes the lane already
    read off it, and its raw stream (whose `deadline` bounds every read)."""
    raw = _ReplayRaw(prefix, sock)
    return io.BufferedReader(raw, buffer_size), raw


def closed_reader() -> io.BufferedReader:
    """A reader at end of stream: the lane answered a `Connection: close` request."""
    return io.BufferedReader(_ReplayRaw(b"", _ClosedSocket()))


class _Conn:
    """One connection waiting in the lane. `since` is when its current wait
    began: when it went idle, or the first byte of the request now arriving."""

    __slots__ = ("sock", "address", "inbox", "since")

    def __init__(self, sock: socket.socket, address: Any) -> None:
        self.sock = sock
        self.address = address
        self.inbox = b""
        self.since = time.monotonic()

    def shed_order(self) -> Tuple[bool, float]:
        # Idle keep-alive connections go first, then requests still arriving; oldest first.
        return (bool(self.inbox), self.since)


_LINE_START = b"GET "
_LINE_END = b" HTTP/1.1"


class FastLane:
    """Cached plain reads of /api/accounts on kept-alive connections, in one thread.

    A thread per connection makes 32 busy connections fight over the GIL after
    every recv and send; one selector loop answering from prebuilt bytes does
    not. Anything that is not a well-formed `GET <target> HTTP/1.1` the app
    has bytes for (a fresh cached posture, the trajectory built once per
    probe) (streams, forced refreshes, other routes, odd or oversized
    requests, a slow reader) is handed, with the bytes already read
    and any answers not yet sent, to the ordinary threaded handler, which
    applies every rule of the surface. The fast lane therefore only ever
    answers what that handler would have answered byte for byte.
    """

    def __init__(self, server: Any) -> None:
        # `server` provides app (fast_response, FAST_TARGETS), stopping,
        # request_timeout_s, max_connections, connections_held(in_lane) and
        # hand_off(sock, address, unsent, unread, close).
        self.server = server
        self.app = server.app
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._incoming: List[_Conn] = []
        self._lock = threading.Lock()
        self._closed = False
        self._shed_requested = 0
        self._next_expiry = 0.0
        self.thread = threading.Thread(target=self._loop, name="svc-monitor-fast-lane", daemon=True)
        self.thread.start()

    def adopt(self, sock: socket.socket, address: Any) -> None:
        with self._lock:
            if self._closed:
                sock.close()
                return
            self._incoming.append(_Conn(sock, address))
        self._wake()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the lane: its thread closes every connection still waiting and
        ends; this returns once it has (or after `timeout_s`)."""
        with self._lock:
            self._closed = True
        self._wake()
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout_s)

    def request_shed(self, count: int) -> None:
        """Ask the lane to close `count` of its oldest idle connections (the accept
        loop ran out of descriptors); the lane thread does it on its next turn."""
        with self._lock:
            self._shed_requested = max(self._shed_requested, count)
        self._wake()

    @property
    def held(self) -> int:
        mapping = self.selector.get_map()
        if mapping is None:
            return 0  # the selector is closed: the lane has stopped
        return max(0, len(mapping) - 1)  # less the wake-up socket

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
                    shed, self._shed_requested = self._shed_requested, 0
                if closed:
                    for conn in incoming:
                        self._close_socket(conn.sock)
                    break
                self._make_room(len(incoming), shed)
                for conn in incoming:
                    try:
                        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        conn.sock.setblocking(False)
                        self.selector.register(conn.sock, selectors.EVENT_READ, conn)
                    except (OSError, ValueError):
                        self._close_socket(conn.sock)
                for key, _ in self.selector.select(timeout=min(1.0, server.request_timeout_s / 4)):
                    if key.data is None:
                        try:
                            self._wake_r.recv(4096)
                        except OSError:
                            pass
                        continue
                    self._readable(key.data)
                now = time.monotonic()
                if now >= self._next_expiry:
                    # A sweep of every connection, a few times per timeout, not per wake-up.
                    self._next_expiry = now + min(0.25, server.request_timeout_s / 8)
                    self._expire(now - server.request_timeout_s)
        finally:
            for key in list(self.selector.get_map().values()):
                if key.data is not None:
                    self._drop(key.data)
            self.selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _expire(self, cutoff: float) -> None:
        # An idle keep-alive connection, or a request whose first byte came
        # longer ago than the read timeout, is closed: the clock starts at the
        # first byte and never restarts, so trickling bytes (slowloris) buy nothing.
        for key in list(self.selector.get_map().values()):
            conn = key.data
            if conn is not None and conn.since < cutoff:
                self._drop(conn)

    def _make_room(self, arriving: int, shed: int) -> None:
        """Close the oldest idle connections so that the connections held stay
        within the server's cap once `arriving` more join (and `shed` at least)."""
        over = self.server.connections_held(self.held + arriving) - self.server.max_connections
        count = max(over, shed)
        if count <= 0:
            return
        conns = sorted((key.data for key in self.selector.get_map().values() if key.data is not None),
                       key=_Conn.shed_order)
        for conn in conns[:count]:
            self._drop(conn)

    def _drop(self, conn: _Conn) -> None:
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        self._close_socket(conn.sock)

    @staticmethod
    def _close_socket(sock: socket.socket) -> None:
        try:
            sock.close()
        except OSError:
            pass

    def _readable(self, conn: _Conn) -> None:
        try:
            # Never more than one byte past the cap on a request head: what a
            # connection can make the lane hold is bounded.
            data = conn.sock.recv(MAX_REQUEST_HEAD + 1 - len(conn.inbox))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self._drop(conn)
        if not data:
            return self._drop(conn)
        if not conn.inbox:
            conn.since = time.monotonic()  # the first byte of a request starts its clock
        inbox = conn.inbox + data
        answers: List[bytes] = []
        close_after = False
        while inbox:
            end = inbox.find(b"\r\n\r\n")
            if end < 0:
                if len(inbox) > MAX_REQUEST_HEAD or b"\n\n" in inbox:
                    # Oversized (the handler answers 431 from what is here) or bare-LF framing.
                    return self._hand_off(conn, inbox, answers)
                break
            answer, close_after = self._answer(inbox[:end])
            if answer is None:
                return self._hand_off(conn, inbox, answers)
            answers.append(answer)
            inbox = inbox[end + 4:]
            conn.since = time.monotonic()  # idle from now, or the next pipelined request's clock
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
        line, _, fields = head.partition(b"\r\n")
        target = line[len(_LINE_START):-len(_LINE_END)]
        if (not line.startswith(_LINE_START) or not line.endswith(_LINE_END) or target not in self.app.FAST_TARGETS
                or self.server.stopping.is_set()):
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
        response = self.app.fast_response(target, CLOSE if close else b"")
        return response, close and response is not None

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
