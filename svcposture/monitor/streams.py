"""The sources of the monitor's event streams, one object per subscriber (see sse.py).

PostureFrames feeds /api/accounts/stream: the body a plain read would return
now, then one `event: account` frame per refresh the posture service
publishes. TrajectoryFrames feeds /api/trajectory/stream: `event: trajectory`
frames (on connect and after every probe) and one `event: alert` frame per
alert emitted while it is open.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Optional, Set, Tuple

from .sse import FrameCache, frame
from .response import dumps

log = logging.getLogger("svcposture.monitor")

ACCOUNT = b"account"
TRAJECTORY = b"trajectory"
ALERT = b"alert"


def frame_identity(body: Mapping[str, Any]) -> Tuple[Any, Any]:
    # A disabled body has no probedAt, so repeats of it collapse to one frame.
    return body.get("available"), body.get("probedAt")


class PostureFrames:
    """One subscriber of the posture stream."""

    def __init__(self, service: Any, posture_bytes: Callable[[Mapping[str, Any]], bytes],
                 frames: FrameCache) -> None:
        self.broadcast = service.broadcast
        self._service = service
        self._posture_bytes = posture_bytes
        self._frames = frames
        self._sent: Any = None

    def opening(self, seq: int) -> Optional[bytes]:
        try:
            body = self._service.read()
        except Exception as exc:
            log.warning("posture read failed: %s: %s", type(exc).__name__, exc)
            return None
        self._sent = frame_identity(body)
        return frame(ACCOUNT, seq, self._posture_bytes(body))

    def update(self, seq: int, body: Mapping[str, Any]) -> bytes:
        identity = frame_identity(body)
        if identity == self._sent:
            return b""  # the on-connect frame already carried this result
        self._sent = identity
        return self._frames.frame(seq, body)


def _alert_ids(body: Any) -> Set[str]:
    alerts = body.get("alerts") if isinstance(body, dict) else None
    return {a.get("id") for a in alerts or [] if isinstance(a, dict) and isinstance(a.get("id"), str)}


class TrajectoryFrames:
    """One subscriber of the trajectory stream.

    Every published body carries the newest alerts, so a subscriber that was
    slow and skipped a body still gets each alert once: what it has not sent
    yet goes out, oldest first, before the body itself.
    """

    def __init__(self, trajectory: Any) -> None:
        self.broadcast = trajectory.broadcast
        self._trajectory = trajectory
        self._sent: Set[str] = set()

    def opening(self, seq: int) -> Optional[bytes]:
        body = self._trajectory.body()
        self._sent = _alert_ids(body)
        return frame(TRAJECTORY, seq, dumps(body))

    def update(self, seq: int, body: Mapping[str, Any]) -> bytes:
        frames = [frame(ALERT, seq, dumps(event)) for event in reversed(body.get("alerts") or [])
                  if isinstance(event, dict) and event.get("id") not in self._sent]
        self._sent = _alert_ids(body)  # an alert that left the newest 20 never comes back
        frames.append(frame(TRAJECTORY, seq, dumps(body)))
        return b"".join(frames)
