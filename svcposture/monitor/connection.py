"""One client connection, and what the fast lane leaves on it for the handler.

Every accepted socket becomes a Connection in the fast lane. When the lane
hands it to a handler thread, the bytes it read but did not answer (`inbox`),
the answers it could not send yet (`unsent`) and whether it answered a
`Connection: close` request (`closing`) travel on the same object, which the
handler reads from through reader(): the leftover bytes first, then the socket.
"""
from __future__ import annotations

import io
import socket
import time
from typing import Any, Optional, Tuple


class Connection:
    """A client socket and its address, with the lane's leftovers.

    `since` is when its current wait began: when it went idle, or the first
    byte of the request now arriving. The server's socketserver machinery
    shuts it down and closes it as it would the socket itself.
    """

    __slots__ = ("sock", "address", "inbox", "unsent", "closing", "since")

    def __init__(self, sock: socket.socket, address: Any) -> None:
        self.sock = sock
        self.address = address
        self.inbox = b""
        self.unsent = b""
        self.closing = False
        self.since = time.monotonic()

    def shed_order(self) -> Tuple[bool, float]:
        # Idle keep-alive connections go first, then requests still arriving; oldest first.
        return (bool(self.inbox), self.since)

    def reader(self, buffer_size: int) -> Tuple[io.BufferedReader, "ReplayRaw"]:
        """A reader of the socket that first yields the bytes already read off
        it, and its raw stream (whose `deadline` bounds every read). At end of
        stream at once when the lane answered a `Connection: close` request."""
        raw = ReplayRaw(b"", None) if self.closing else ReplayRaw(self.inbox, self.sock)
        self.inbox = b""
        return io.BufferedReader(raw, buffer_size), raw

    def fileno(self) -> int:
        return self.sock.fileno()

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()


class ReplayRaw(io.RawIOBase):
    """A socket's byte stream with bytes already read off it put back in front
    (no socket: end of stream after them).

    While `deadline` (a time.monotonic() instant) is set, no read waits past
    it: a per-recv timeout restarts on every byte, so a client sending one
    byte a second would otherwise never time out.
    """

    def __init__(self, prefix: bytes, sock: Optional[socket.socket]) -> None:
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
        if self._sock is None:
            return 0
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("the request did not arrive in time")
            self._sock.settimeout(left)
        return self._sock.recv_into(buffer)
