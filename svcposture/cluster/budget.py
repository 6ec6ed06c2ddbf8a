"""The tracker's request budget: what its rate-limit headers say, and the heartbeat interval it allows.

Linear allows a number of requests (and of complexity points) an hour per user,
shared by every key of that user, and states the figures on every reply:

    X-RateLimit-Requests-Limit / -Remaining / -Reset      (reset: epoch ms)
    X-RateLimit-Complexity-Limit / -Remaining / -Reset
    X-Complexity                                          (the cost of this request)

Heartbeats are the only steady load on that budget, one request per host per
interval, so the publisher stretches its interval until the whole roster's
heartbeats need at most HEARTBEAT_SHARE of the limit; the rest is left for
reads (status, the fleet page, the doctor). Every figure here is a pure
function of the headers and the roster size, so the publisher, the doctor and
`svc-cluster status` compute the same interval.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional


# Heartbeats may use this share of the hourly limit; the rest is for reads.
HEARTBEAT_SHARE = 0.6
# Linear's documented limit for API keys and OAuth apps, used only to explain
# a figure when the tracker has not stated its own.
DOCUMENTED_LIMIT = 1500
# A tracker stating an absurd limit or cost is ignored rather than obeyed.
MAX_STATED = 10 ** 9
# The longest interval a stretch may reach, and so the longest a heartbeat may claim: readers
# call a host live for twice its claim, so one reply stating a tiny limit (a glitch, a proxy, a
# hostile tracker) must not let a dead host pass as live for hours. A roster that needs more
# than this is past what the tracker carries; the doctor says so and names Prometheus.
MAX_STRETCH_MS = 15 * 60 * 1000


class RateBudget(NamedTuple):
    """One reply's rate-limit figures; each None when the reply did not state it (or stated junk)."""
    requests_limit: Optional[int]
    requests_remaining: Optional[int]
    requests_reset_ms: Optional[int]
    complexity_limit: Optional[int]
    complexity_remaining: Optional[int]
    complexity_reset_ms: Optional[int]
    complexity_cost: Optional[int]

    @property
    def stated(self) -> bool:
        return self.requests_limit is not None or self.complexity_limit is not None


NO_BUDGET = RateBudget(None, None, None, None, None, None, None)


def _header_int(headers: Any, name: str) -> Optional[int]:
    try:
        raw = headers.get(name)
    except AttributeError:
        return None
    if not isinstance(raw, str) or not raw.strip() or len(raw) > 32:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0 or value > MAX_STATED * 1e6:
        return None
    return int(value)


def _reset_ms(headers: Any, name: str) -> Optional[int]:
    value = _header_int(headers, name)
    if value is None:
        return None
    # Linear sends epoch milliseconds; accept epoch seconds too.
    return value * 1000 if value < 10 ** 11 else value


def _bounded(value: Optional[int], low: int) -> Optional[int]:
    return value if value is not None and low <= value <= MAX_STATED else None


def budget_from_headers(headers: Any) -> RateBudget:
    """The figures of one reply's headers; a missing or malformed header is None, never an error."""
    if headers is None:
        return NO_BUDGET
    return RateBudget(
        requests_limit=_bounded(_header_int(headers, "X-RateLimit-Requests-Limit"), 1),
        requests_remaining=_bounded(_header_int(headers, "X-RateLimit-Requests-Remaining"), 0),
        requests_reset_ms=_reset_ms(headers, "X-RateLimit-Requests-Reset"),
        complexity_limit=_bounded(_header_int(headers, "X-RateLimit-Complexity-Limit"), 1),
        complexity_remaining=_bounded(_header_int(headers, "X-RateLimit-Complexity-Remaining"), 0),
        complexity_reset_ms=_reset_ms(headers, "X-RateLimit-Complexity-Reset"),
        complexity_cost=_bounded(_header_int(headers, "X-Complexity"), 1),
    )


def merge(previous: RateBudget, newer: RateBudget) -> RateBudget:
    """`newer`'s figures, each falling back to `previous`'s where the newer reply said nothing."""
    return RateBudget(*(n if n is not None else p for p, n in zip(previous, newer)))


def budget_interval_ms(hosts: int, budget: RateBudget, window: int, now: int) -> int:
    """The shortest heartbeat interval at which `hosts` heartbeats stay within HEARTBEAT_SHARE
    of every stated limit; 0 when the tracker stated none.

    The request limit over the window and the complexity limit at this
    request's cost each give a bound, and the larger wins. Then, when what is
    left until the stated reset would not carry the heartbeats at that rate
    (the user's other keys spent most of the window), they share what is left
    instead of running dry into RATELIMITED.
    """
    hosts = max(1, hosts)
    bounds = [0.0]
    if budget.requests_limit:
        bounds.append(hosts * window / (HEARTBEAT_SHARE * budget.requests_limit))
    if budget.complexity_limit and budget.complexity_cost:
        bounds.append(hosts * window * budget.complexity_cost / (HEARTBEAT_SHARE * budget.complexity_limit))
    interval = max(bounds)
    reset = budget.requests_reset_ms
    if interval and budget.requests_remaining is not None and reset is not None and 0 < reset - now <= window:
        until_reset = reset - now
        if hosts * until_reset / interval > budget.requests_remaining:
            interval = hosts * until_reset / max(1, budget.requests_remaining)
    return int(math.ceil(min(interval, window)))


def interval_in_force_ms(configured_ms: int, hosts: int, budget: RateBudget, window: int, now: int) -> int:
    """The configured interval, stretched to the budget's when the roster needs more room,
    but never past MAX_STRETCH_MS (a configured interval longer than that is kept as it is)."""
    return max(configured_ms, min(budget_interval_ms(hosts, budget, window, now), MAX_STRETCH_MS))


def claimed_interval_ms(claimed: float, local_ms: float) -> float:
    """How much of a peer's stated interval a reader honours: at most MAX_STRETCH_MS, or the
    reader's own configured interval when that is longer (the fleet shares its settings)."""
    return min(claimed, max(float(local_ms), float(MAX_STRETCH_MS)))


def heartbeat_need(hosts: int, interval_ms: int, limit: int, window: int) -> float:
    """The fraction of `limit` that `hosts` heartbeats every `interval_ms` need per window."""
    return hosts * (window / float(max(1, interval_ms))) / max(1, limit)
