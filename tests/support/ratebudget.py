"""The tracker's hourly request budget, as Linear enforces it, for the stand-in tracker.

Linear allows each user a number of requests (and complexity points) per hour,
shared by all of that user's keys, states the figures on every reply
(`X-RateLimit-Requests-{Limit,Remaining,Reset}`, `X-RateLimit-Complexity-*`,
`X-Complexity`), and refuses a request over the limit with RATELIMITED.
Here the hour is a fixed window of `window_s` seconds, scaled down so that a
test sees several of them, and every reply carries the headers.

    srv.enforce_budget(limit=1500, window_s=9.0)
"""
from __future__ import annotations

import threading
import time
from typing import Dict, List, Tuple


class RateBudgetGate:
    def __init__(self, limit: int = 1500, window_s: float = 3600.0, complexity_limit: int = 250000,
                 cost: int = 1, refusal_status: int = 400) -> None:
        self.limit = limit
        self.window_s = window_s
        self.complexity_limit = complexity_limit
        self.cost = cost
        # 400 with extensions.code RATELIMITED, as Linear answers; 429 as a proxy might.
        self.refusal_status = refusal_status
        self._lock = threading.Lock()
        self._start = time.time()
        self._window = 0
        self._used = 0
        self._points = 0
        # Requests answered per window, and requests refused, over the gate's life.
        self.per_window: List[int] = [0]
        self.refused = 0

    def _roll(self, now: float) -> float:
        """The current window's end (epoch s), starting a new window when this one is over."""
        window = int((now - self._start) // self.window_s)
        if window != self._window:
            self._window = window
            self._used = 0
            self._points = 0
            self.per_window.extend([0] * (window + 1 - len(self.per_window)))
        return self._start + (window + 1) * self.window_s

    def take(self) -> Tuple[bool, Dict[str, str]]:
        """(allowed, the headers of this reply): one request counted, or refused when over the limit."""
        with self._lock:
            now = time.time()
            end = self._roll(now)
            allowed = self._used < self.limit and self._points + self.cost <= self.complexity_limit
            if allowed:
                self._used += 1
                self._points += self.cost
                self.per_window[self._window] += 1
            else:
                self.refused += 1
            reset_ms = str(int(end * 1000))
            headers = {
                "X-RateLimit-Requests-Limit": str(self.limit),
                "X-RateLimit-Requests-Remaining": str(max(0, self.limit - self._used)),
                "X-RateLimit-Requests-Reset": reset_ms,
                "X-RateLimit-Complexity-Limit": str(self.complexity_limit),
                "X-RateLimit-Complexity-Remaining": str(max(0, self.complexity_limit - self._points)),
                "X-RateLimit-Complexity-Reset": reset_ms,
                "X-Complexity": str(self.cost),
            }
            return allowed, headers

    def busiest_share(self, complete_only: bool = True) -> float:
        """The largest share of the limit used in one window (the current window left out when
        `complete_only`: it has not had its whole length yet)."""
        with self._lock:
            counts = self.per_window[:-1] if complete_only and len(self.per_window) > 1 else self.per_window
            return max(counts or [0]) / float(self.limit)
