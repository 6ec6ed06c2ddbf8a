"""The fast lane: cached plain reads answered from one selector thread.

Every accepted connection starts here. The lane reads request heads with the
one parser of request heads (requesthead.py) and answers a GET whose target
is one of its cached reads with that read's Response. Whatever it does not
answer itself goes on, as the Connection carrying the bytes already read and
the answers not yet sent, to the hand-off it was given (a handler thread):
the request moves one way, and the lane never sees it again.

The lane knows no server: it is built with its cached reads, how many
connections are held on threads, the connection cap, the request timeout, the
stopping Event and where to hand off, and it imports only what lies below it.
"""
from __future__ import annotations

import selectors
import socket
import threading
import time
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from .connection import Connection
from .protocols import FastRead, HandOff
from .request import MAX_REQUEST_HEAD
from .requesthead import RequestHead, head_end, parse_head
from .response import connection_line

# What the lane does with one head: answer it with (a cached read, close after, the
# request's version), or None: hand it off.
_Decision = Optional[Tuple[FastRead, bool, str]]
# Decisions kept by the head's bytes: a client sends the same head again and again
# on a kept-alive connection, and parsing it anew would cost more than the answer.
# Bounded (emptied when full, heads past _DECIDED_HEAD bytes never kept) so that
# varied heads cost a parse each and no memory.
_DECIDED_MAX = 256
_DECIDED_HEAD = 2048


class FastLane:
    """Cached plain reads on kept-alive connections, in one thread.

    A thread per connection makes 32 busy connections fight over the GIL after
    every recv and send; one selector loop answering from prebuilt bytes does
    not. Anything that is not a well-formed body-less GET the lane has a fresh
    cached read for (streams, forced refreshes, other routes, refused heads,
    oversized requests, a slow reader) is handed, with the bytes already read
    and any answers not yet sent, to a handler thread, which applies every rule
    of the surface. Both parse heads with the same parser and encode replies
    with the same Connection line, so the lane only ever answers what the
    handler would have answered, byte for byte.
    """

    def __init__(self, reads: Mapping[bytes, FastRead], hand_off: HandOff, threads_held: Callable[[], int], *,
                 max_connections: int, request_timeout_s: float, stopping: threading.Event) -> None:
        """`reads`: request target -> its cached read; `hand_off(conn)`: serve `conn` on a
        thread; `threads_held()`: connections served on threads now, which count against
        `max_connections` with the lane's own; `stopping`: once set, nothing more is answered here."""
        self.reads: Dict[str, FastRead] = {target.decode("iso-8859-1"): read for target, read in reads.items()}
        self._hand_off_to = hand_off
        self._threads_held = threads_held
        self.max_connections = max_connections
        self.request_timeout_s = request_timeout_s
        self._stopping = stopping
        self._decided: Dict[bytes, _Decision] = {}
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
        timeout_s = self.request_timeout_s
        select = self.selector.select
        try:
            while True:
                # Unlocked peek: adopt() and request_shed() wake the selector after
                # changing these, so a change missed here is seen on the next turn.
                if self._incoming or self._shed_requested or self._closed:
                    if self._take_incoming():
                        break
                for key, _ in select(timeout=min(1.0, timeout_s / 4)):
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
                    self._next_expiry = now + min(0.25, timeout_s / 8)
                    self._expire(now - timeout_s)
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
        within the cap once `arriving` more join (and `shed` at least)."""
        over = self.held + arriving + self._threads_held() - self.max_connections
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
            end = head_end(inbox)
            if end < 0:
                if len(inbox) > MAX_REQUEST_HEAD:
                    return self._hand_off(conn, inbox, answers)  # the handler refuses it from what is here
                break
            answer, close_after = self._answer(inbox[:end])
            if answer is None:
                return self._hand_off(conn, inbox, answers)
            answers.append(answer)
            inbox = inbox[end:]
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
        """The response to one request head and whether the connection closes after
        it, or (None, _) to hand it off."""
        try:
            decision = self._decided[head]
        except KeyError:
            decision = self._decide(head)
            if len(head) <= _DECIDED_HEAD:
                if len(self._decided) >= _DECIDED_MAX:
                    self._decided.clear()
                self._decided[head] = decision
        if decision is None or self._stopping.is_set():
            return None, False
        read, close, version = decision
        response = read()
        if response is None:
            return None, False
        close = close or response.ends_connection
        return response.encode(connection_line(close, version)), close

    def _decide(self, head: bytes) -> _Decision:
        """Answer a head with a cached read only as the handler would: a GET of that
        target, parsed and framed by the same rules, announcing no body."""
        parsed = parse_head(head)
        if not isinstance(parsed, RequestHead) or parsed.method != "GET" or parsed.body:
            return None
        read = self.reads.get(parsed.target)
        if read is None:
            return None
        return read, parsed.close, parsed.version

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
        self._hand_off_to(conn)


def _close(conn: Connection) -> None:
    try:
        conn.close()
    except OSError:
        pass
