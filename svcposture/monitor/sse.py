"""Server-sent events: the one pump that writes every stream (docs/http-api.md).

A stream is the response head and `retry: 5000`, the frames its source opens
with, then the frames of each body its Broadcast publishes, with a
`: keepalive` comment whenever nothing happened for SVC_SSE_KEEPALIVE_S.
Fan-out is a Broadcast (one Condition and a sequence number), so a slow
subscriber skips bodies instead of queueing them; a frame pushed to every
subscriber is serialised once (FrameCache) and the same bytes go to all.

A source is any object with

    broadcast           the Broadcast its bodies come from
    opening(seq)        the frames sent on connect (bytes), or None to end at once
    update(seq, body)   the frames for one published body (b"" sends nothing)

one per subscriber, so that it may remember what it already sent.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Optional, Protocol

from ..broadcast import Broadcast

from .memo import Memo
from .response import CLOSE, dumps, head

SSE_RETRY_MS = 5000
KEEPALIVE = b": keepalive\n\n"
STREAM_HEADERS = (b"Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\nX-Content-Type-Options: nosniff\r\n"
                  + CLOSE)


def stream_head() -> bytes:
    """The response head and the `retry:` line; a stream always ends its connection."""
    return head(200, "text/event-stream", None, b"", STREAM_HEADERS) + b"retry: %d\n\n" % SSE_RETRY_MS


def frame(event: bytes, seq: int, data: bytes) -> bytes:
    """One `event:` frame; `data` is one line of JSON."""
    return b"event: %s\nid: %d\ndata: %s\n\n" % (event, seq, data)


class FrameSource(Protocol):
    """One subscriber's frames (see above)."""

    broadcast: Broadcast

    def opening(self, seq: int) -> Optional[bytes]:
        """The frames sent on connect, or None to end at once."""

    def update(self, seq: int, body: Mapping[str, Any]) -> bytes:
        """The frames for one published body (b"" sends nothing)."""


class Stream:
    """The app's answer to a stream route: the subscriber's source and the keepalive interval."""

    __slots__ = ("source", "keepalive_s")

    def __init__(self, source: FrameSource, keepalive_s: float) -> None:
        self.source = source
        self.keepalive_s = keepalive_s


class FrameCache:
    """The newest pushed frame of one event, serialised once for all subscribers."""

    def __init__(self, event: bytes, serialise: Callable[[Any], bytes] = dumps) -> None:
        self._event = event
        self._serialise = serialise
        self._frames: Memo[bytes] = Memo()

    def frame(self, seq: int, body: Mapping[str, Any]) -> bytes:
        return self._frames.get(seq, self._frame, seq, body)

    def _frame(self, seq: int, body: Mapping[str, Any]) -> bytes:
        return frame(self._event, seq, self._serialise(body))


def pump(write: Callable[[bytes], Any], stream: Stream, stopping: threading.Event,
         gone: Optional[threading.Event] = None) -> None:
    """Write one whole stream: head, opening frames, then pushed frames until
    `stopping` is set, the broadcast closes, or the client goes (`gone` is
    set, or a write raises)."""
    source = stream.source
    broadcast = source.broadcast
    write(stream_head())
    after, _ = broadcast.latest()
    opening = source.opening(after)
    if opening is None or stopping.is_set():
        return
    write(opening)
    while True:
        item = broadcast.wait(after, stream.keepalive_s, gone)
        if stopping.is_set() or broadcast.closed or (gone is not None and gone.is_set()):
            return
        if item is None:
            write(KEEPALIVE)
            continue
        after, body = item
        frames = source.update(after, body)
        if frames:
            write(frames)


class StreamSlots:
    """At most `limit` streams at once (SVC_MONITOR_MAX_STREAMS): each holds a
    thread and a socket for as long as its client stays."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._count = 0
        self._lock = threading.Lock()

    def acquire(self) -> bool:
        with self._lock:
            if self._count >= self.limit:
                return False
            self._count += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._count -= 1

    @property
    def count(self) -> int:
        return self._count
