"""One way to wait in a test: poll a predicate until it holds or a deadline passes."""
from __future__ import annotations

import time
from typing import Any, Callable


def wait_until(predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.02,
               message: str = "condition") -> Any:
    """Call `predicate` every `interval` s until it returns something truthy and
    return that value; raise AssertionError once `timeout` s have passed.

    The predicate always gets one last call at the deadline, so a slow machine
    costs time, never a false failure."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, message))
        time.sleep(min(interval, left))
