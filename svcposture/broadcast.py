"""Latest-value fan-out, for the event streams.

A stream wants the newest body, not every body: a subscriber that falls
behind skips frames instead of holding anybody up, and memory does not grow
with the number of slow readers. So there is no queue per subscriber, only
one value, one Condition and a sequence number.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Tuple


class Broadcast:
    """Latest-value fan-out: one Condition, a monotonic sequence number.

    A waiter gets the newest body with a higher sequence; a slow reader skips
    frames instead of holding anybody up.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._seq = 0
        self._body: Optional[Dict[str, Any]] = None
        self.closed = False

    def publish(self, body: Dict[str, Any]) -> int:
        with self._cond:
            self._seq += 1
            self._body = body
            self._cond.notify_all()
            return self._seq

    def latest(self) -> Tuple[int, Optional[Dict[str, Any]]]:
        with self._cond:
            return self._seq, self._body

    def wait(self, after_seq: int, timeout: float,
             cancel: Optional[threading.Event] = None) -> Optional[Tuple[int, Dict[str, Any]]]:
        """(seq, body) newer than `after_seq`, or None on timeout, on close, or once
        `cancel` is set and wake() has been called."""
        with self._cond:
            self._cond.wait_for(lambda: self.closed or (cancel is not None and cancel.is_set())
                                or (self._seq > after_seq and self._body is not None), timeout=timeout)
            if self.closed or self._seq <= after_seq or self._body is None:
                return None
            return self._seq, self._body

    def wake(self) -> None:
        """Let every waiter re-check its `cancel` event."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()
