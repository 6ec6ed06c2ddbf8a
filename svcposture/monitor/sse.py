"""Server-sent events of /api/accounts/stream (DESIGN §5).

A stream is `retry: 5000`, the body a plain read would return now, then one
`event: account` frame per refresh the posture service publishes, with a
`: keepalive` comment whenever nothing happened for SVC_SSE_KEEPALIVE_S.
Fan-out is the service's Broadcast (one Condition and a sequence number); a
pushed frame is serialised once and the same bytes go to every subscriber.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Tuple

from .wire import dumps

if TYPE_CHECKING:
    from .server import MonitorServer

log = logging.getLogger("svcposture.monitor")

SSE_RETRY_MS = 5000
DEFAULT_KEEPALIVE_S = 15.0
KEEPALIVE = b": keepalive\n\n"


def stream_head(date_header: bytes) -> bytes:
    """The response head and the `retry:` line; a stream always ends its connection."""
    return (b"HTTP/1.1 200 OK\r\nServer: svc-monitor\r\n%sContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\nX-Content-Type-Options: nosniff\r\n"
            b"Connection: close\r\n\r\nretry: %d\n\n" % (date_header, SSE_RETRY_MS))


def account_frame(seq: int, data: bytes) -> bytes:
    return b"event: account\nid: %d\ndata: %s\n\n" % (seq, data)


def frame_identity(body: Mapping[str, Any]) -> Tuple[Any, Any]:
    # A disabled body has no probedAt, so repeats of it collapse to one frame.
    return body.get("available"), body.get("probedAt")


class FrameCache:
    """The newest pushed frame, serialised once for all subscribers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frame: Tuple[int, bytes] = (-1, b"")

    def frame(self, seq: int, body: Mapping[str, Any]) -> bytes:
        with self._lock:
            if self._frame[0] == seq:
                return self._frame[1]
        frame = account_frame(seq, dumps(body))
        with self._lock:
            if seq > self._frame[0]:
                self._frame = (seq, frame)
        return frame


def pump(write: Callable[[bytes], Any], server: MonitorServer,
         gone: Optional[threading.Event] = None, service: Any = None) -> None:
    """Write one whole stream: head, on-connect frame, then pushed frames until
    the server stops or the client goes (`gone` is set, or a write raises).

    `service` is another vendor's posture (`?provider=codex`); None is the
    server's own, whose frames are serialised once for every subscriber."""
    own = service is None
    service = server.service if own else service
    broadcast = service.broadcast
    write(stream_head(server.date_header()))
    after, _ = broadcast.latest()
    try:
        body = service.read()
    except Exception as exc:
        log.warning("posture read failed: %s: %s", type(exc).__name__, exc)
        return
    if server.stopping.is_set():
        return
    write(account_frame(after, server.posture_bytes(body) if own else dumps(body)))
    sent = frame_identity(body)
    keepalive = server.keepalive_s
    while True:
        item = broadcast.wait(after, keepalive, gone)
        if server.stopping.is_set() or broadcast.closed or (gone is not None and gone.is_set()):
            return
        if item is None:
            write(KEEPALIVE)
            continue
        after, body = item
        identity = frame_identity(body)
        if identity == sent:
            continue  # the on-connect frame already carried this result
        sent = identity
        write(server.frames.frame(after, body) if own else account_frame(after, dumps(body)))
