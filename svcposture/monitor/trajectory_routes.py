"""The trajectory routes (DESIGN §10): /api/trajectory, /api/history, /api/trajectory/stream.

The contract's posture routes and their stream are untouched; these sit
beside them. /api/trajectory is the body the trajectory service built after
the last probe, written as prebuilt bytes (the fast lane answers it too).
/api/history reads the history index. The stream sends `event: trajectory`
frames (on connect and after every probe) and one `event: alert` frame per
alert emitted while it is open.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, Set

from urllib.parse import unquote

from ..history import DEFAULT_HOURS, MAX_HOURS
from .sse import KEEPALIVE, stream_head
from .wire import JSON_HEADERS, JSON_TYPE, dumps

if TYPE_CHECKING:
    from .handler import MonitorHandler
    from .server import MonitorServer

log = logging.getLogger("svcposture.monitor")

TRAJECTORY = "/api/trajectory"
HISTORY = "/api/history"
STREAM = "/api/trajectory/stream"
ROUTES = (TRAJECTORY, HISTORY, STREAM)


def answer(handler: "MonitorHandler", path: str, query: str) -> None:
    server = handler.server
    if server.trajectory is None:
        return handler._error(404, "No trajectory on this server.")
    if path == TRAJECTORY:
        response = server.trajectory_response(handler._connection_header())
        if response is not None:
            handler.wfile.write(response if handler.command == "GET" else response.partition(b"\r\n\r\n")[0] + b"\r\n\r\n")
        return None
    if path == HISTORY:
        return _history(handler, query)
    return handler._stream(pump)


def parse_hours(query: str) -> Optional[int]:
    """`hours` of a /api/history query: default 24, else exactly one integer 1..192; None when bad."""
    values = [part.partition("=")[2] for part in query.split("&") if part.partition("=")[0] == "hours"] if query else []
    if not values:
        return DEFAULT_HOURS
    if len(values) != 1:
        return None
    try:
        text = unquote(values[0], errors="strict") if "%" in values[0] else values[0]
    except UnicodeDecodeError:
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 3:
        return None
    hours = int(text)
    return hours if 1 <= hours <= MAX_HOURS else None


def _history(handler: "MonitorHandler", query: str) -> None:
    hours = parse_hours(query)
    if hours is None:
        return handler._send_json(400, {"error": "bad_request",
                                        "message": "hours must be one integer from 1 to %d" % MAX_HOURS})
    try:
        body = handler.server.history_body(hours)
    except Exception as exc:  # the history could not be read: say so, keep serving
        log.warning("history read failed: %s: %s", type(exc).__name__, exc)
        return handler._error(500, "The history could not be read.")
    handler._send(200, JSON_TYPE, dumps(body), JSON_HEADERS)


def trajectory_frame(seq: int, data: bytes) -> bytes:
    return b"event: trajectory\nid: %d\ndata: %s\n\n" % (seq, data)


def alert_frame(seq: int, event: Any) -> bytes:
    return b"event: alert\nid: %d\ndata: %s\n\n" % (seq, dumps(event))


def _alert_ids(body: Any) -> Set[str]:
    alerts = body.get("alerts") if isinstance(body, dict) else None
    return {a.get("id") for a in alerts or [] if isinstance(a, dict) and isinstance(a.get("id"), str)}


def pump(write: Callable[[bytes], Any], server: "MonitorServer",
         gone: Optional[threading.Event] = None) -> None:
    """One whole trajectory stream: head, the current body, then alerts and bodies as they come.

    Every published body carries the newest alerts, so a subscriber that was
    slow and skipped a body still gets each alert once: what it has not sent
    yet goes out, oldest first, before the body itself.
    """
    trajectory = server.trajectory
    broadcast = trajectory.broadcast
    write(stream_head(server.date_header()))
    after, _ = broadcast.latest()
    body = trajectory.body()
    if server.stopping.is_set():
        return
    write(trajectory_frame(after, dumps(body)))
    sent = _alert_ids(body)
    while True:
        item = broadcast.wait(after, server.keepalive_s, gone)
        if server.stopping.is_set() or broadcast.closed or (gone is not None and gone.is_set()):
            return
        if item is None:
            write(KEEPALIVE)
            continue
        after, body = item
        for event in reversed(body.get("alerts") or []):
            if isinstance(event, dict) and event.get("id") not in sent:
                write(alert_frame(after, event))
        sent = _alert_ids(body)  # an alert that left the newest 20 never comes back
        write(trajectory_frame(after, dumps(body)))
