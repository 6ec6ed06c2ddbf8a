"""The fast lane: cached plain reads answered from one selector thread.

Every accepted connection starts here. The lane parses request heads itself
and answers a plain `GET <target> HTTP/1.1` whose target the application
lists in fast_reads() with that read's Response. Whatever it does not answer
itself goes on, as the Connection carrying the bytes already read and the
answers not yet sent, to a handler thread of its own (the server's
hand_off): the request moves one way, and the lane never sees it again.
"""
from __future__ import annotations

import re
import selectors
import socket
import threading
import time
from typing import List, Optional, Tuple

from .connection import Connection
from .protocols import LaneServer
from .request import MAX_HEADER_LINE, MAX_HEADERS, MAX_REQUEST_HEAD
from .response import CLOSE

_LINE_START = b"GET "
_LINE_END = b" HTTP/1.1"
_TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
# Header fields the lane answers without looking at each one: token names,
# no folding, no bare CR or LF, and none of the three fields that change the
# framing (those are looked at one by one: _framing_fields).
_PLAIN_FIELDS = re.compile(rb"(?:\r\n(?!connection:|transfer-encoding:|content-length:)" + _TOKEN + rb":[^\r\n]*)*\Z",
                           re.IGNORECASE)
_FIELDS = re.compile(rb"(?:\r\n" + _TOKEN + rb":[^\r\n]*)*\Z")


class FastLane:
    """Cached plain reads on kept-alive connections, in one thread.

    A thread per connection makes 32 busy connections fight over the GIL after
    every recv and send; one selector loop answering from prebuilt bytes does
    not. Anything that is not a well-formed `GET <target> HTTP/1.1` the app
    has a fresh cached read for (streams, forced refreshes, other routes, odd
    or oversized requests, a slow reader) is handed, with the bytes already
    read and any answers not yet sent, to the ordinary threaded handler, which
    applies every rule of the surface. The fast lane therefore only ever
    answers what that handler would have answered byte for byte.
    """

    def __init__(self, server: LaneServer) -> None:
        self.server = server
        self.reads = server.app.fast_reads()
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._incoming: List[Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._shed_requested = 0
        self._next_expiry = 0.0
        self.thread = threading.Thread(target=self._loop, name="svc-monitor-fast-lane", daemon=True)
        self.thread.start()

    def adopt(self, conn: Connection) -> None:
        with self._lock:
            if self._closed:
                _close(conn)
                return
            self._incoming.append(conn)
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
        select = self.selector.select
        try:
            while True:
                # Unlocked peek: adopt() and request_shed() wake the selector after
                # changing these, so a change missed here is seen on the next turn.
                if self._incoming or self._shed_requested or self._closed:
                    if self._take_incoming():
                        break
                for key, _ in select(timeout=min(1.0, server.request_timeout_s / 4)):
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

    def _take_incoming(self) -> bool:
        """Register the connections adopted since the last turn; True once the lane is closed."""
        with self._lock:
            closed = self._closed
            incoming, self._incoming = self._incoming, []
            shed, self._shed_requested = self._shed_requested, 0
        if closed:
            for conn in incoming:
                _close(conn)
            return True
        self._make_room(len(incoming), shed)
        for conn in incoming:
            try:
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.sock.setblocking(False)
                self.selector.register(conn.sock, selectors.EVENT_READ, conn)
            except (OSError, ValueError):
                _close(conn)
        return False

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
                       key=Connection.shed_order)
        for conn in conns[:count]:
            self._drop(conn)

    def _drop(self, conn: Connection) -> None:
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        _close(conn)

    def _readable(self, conn: Connection) -> None:
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
        now = time.monotonic()
        if not conn.inbox:
            conn.since = now  # the first byte of a request starts its clock
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
            conn.since = now  # idle from now, or the next pipelined request's clock
            if close_after:
                break
        conn.inbox = inbox
        if answers:
            payload = answers[0] if len(answers) == 1 else b"".join(answers)
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
        line_end = head.find(b"\r\n")
        if line_end < 0:
            line_end = len(head)
        if not head.startswith(_LINE_START) or not head.endswith(_LINE_END, 0, line_end):
            return None, False
        read = self.reads.get(head[len(_LINE_START):line_end - len(_LINE_END)])
        if read is None or self.server.stopping.is_set() or head.count(b"\r\n") > MAX_HEADERS:
            return None, False
        close = False
        if not _PLAIN_FIELDS.match(head, line_end):
            fields = head[line_end:].lower()
            if not _FIELDS.match(fields):
                return None, False
            close, plain = _framing_fields(fields)
            if not plain:
                return None, False
        response = read()
        if response is None:
            return None, False
        return response.encode(CLOSE if close else b""), close

    def _hand_off(self, conn: Connection, inbox: bytes, answers: List[bytes], close_after: bool = False) -> None:
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.setblocking(True)
        except OSError:
            return self._drop(conn)
        conn.unsent = b"".join(answers)
        conn.inbox = b"" if close_after else inbox
        conn.closing = close_after
        self.server.hand_off(conn)


def _framing_fields(fields: bytes) -> Tuple[bool, bool]:
    """(close after the answer, the fields leave the framing plain) for lower-cased
    header fields that name Connection, Transfer-Encoding or Content-Length."""
    close = False
    for field in fields.split(b"\r\n")[1:]:
        if len(field) > MAX_HEADER_LINE:
            return close, False
        name, _, value = field.partition(b":")
        if name == b"connection":
            option = value.strip(b" \t")
            if option == b"close":
                close = True
            elif option != b"keep-alive":
                return close, False
        elif name == b"transfer-encoding" or (name == b"content-length" and value.strip(b" \t") != b"0"):
            return close, False
    return close, True


def _close(conn: Connection) -> None:
    try:
        conn.close()
    except OSError:
        pass
