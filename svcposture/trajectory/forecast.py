"""When a window hits its wall: the burn-rate forecast of docs/trajectory.md, a pure function.

It runs once per window and account after every probe and on every library
call, so it stays a few passes of plain arithmetic in C-level builtins (no
statistics module, no Decimal, no sort): 120 points take well under 50 µs.
"""
from __future__ import annotations

import math
import operator

from .._names import FIVE_HOUR, SEVEN_DAY

# `import svcposture` loads this module, and typing alone would cost more
# than the rest of the package's import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

__all__ = ["forecast", "LOOKBACK_MS", "MIN_SPAN_MS", "MIN_POINTS"]

_HOUR_MS = 3_600_000.0
# Per window: how far back the rate looks, and the least span that makes a rate.
LOOKBACK_MS = {FIVE_HOUR: 60 * 60_000, SEVEN_DAY: 24 * 3_600_000}
MIN_SPAN_MS = {FIVE_HOUR: 10 * 60_000, SEVEN_DAY: 2 * 3_600_000}
MIN_POINTS = 3
# Either spelling of a window is accepted: the claim name or the body field.
_WINDOW = {FIVE_HOUR: FIVE_HOUR, "fiveHour": FIVE_HOUR, SEVEN_DAY: SEVEN_DAY, "sevenDay": SEVEN_DAY}


def _one_decimal(value: float) -> float:
    # Half-up, like every pct the package reports. The slope is float
    # arithmetic, so an exact 0.25 may arrive as 0.24999999999999997: a
    # nudge far below any real difference lets it round as the 0.25 it is.
    return math.floor(value * 10.0 + 0.5 + 1e-9) / 10.0


def _iso(ms: float) -> Optional[str]:
    from .._time import iso_from_ms

    try:
        return iso_from_ms(int(round(ms)))
    except (ValueError, OverflowError):
        return None  # beyond year 9999: no wall worth naming


def forecast(points: Iterable[Sequence[float]], *, now_ms: int, resets_at_ms: Optional[int],
             window: str) -> Optional[Dict[str, Any]]:
    """The burn-rate forecast of one window from its recent (t_ms, pct) points, or None.

    `points` are the current cycle's samples of one window (epoch ms, percent),
    in any order; the ones inside the lookback (`five_hour`/`fiveHour`: the
    last 60 min up to `now_ms`; `seven_day`/`sevenDay`: 24 h) are used, the
    probe at `now_ms` included. Fewer than 3 of them, or a span shorter than
    10 min (5 h window) or 2 h (7 d window), gives None. Points with a pct
    that is negative or not finite are ignored.

    Returns `{"ratePctPerHour", "wallAt", "beforeReset", "pctAtReset", "samples"}`:
    the least-squares slope in pct per hour, floored at 0 and rounded half-up
    to 1 decimal; `wallAt`, the ISO-8601 UTC instant (`...Z`, ms) when the
    newest point's pct reaches 100 at that rate (the newest point's time when
    it is already >= 100, null when the rate is 0); `beforeReset`, whether
    that wall comes before `resets_at_ms`; `pctAtReset`, the newest pct plus
    rate x hours until the reset (1 decimal, may exceed 100; null without
    `resets_at_ms`); `samples`, the number of points used. The newest point is
    normally the probe at `now_ms`. The result does not depend on the order of
    `points`. A window name outside the four spellings raises InvalidSetting.
    """
    claim = _WINDOW.get(window)  # type: ignore[arg-type]
    if claim is None:
        from ..settings import InvalidSetting
        raise InvalidSetting("window must be five_hour, seven_day, fiveHour or sevenDay, not %r" % (window,))
    used, times, pcts, mean_t = _in_lookback(points, now_ms - LOOKBACK_MS[claim], now_ms)
    n = len(used)
    if n < MIN_POINTS:
        return None
    t0 = max(times)
    if t0 - min(times) < MIN_SPAN_MS[claim]:
        return None
    rate = _one_decimal(max(0.0, _slope_per_hour(times, pcts, mean_t)))
    # The newest point (the higher pct on a tie, whatever the order given).
    at = times.index(t0)
    pct0 = pcts[at] if times.count(t0) == 1 else max(p for t, p in used if t == t0)
    if pct0 >= 100.0:
        wall_ms: "Optional[float]" = t0
    elif rate > 0.0:
        wall_ms = t0 + (100.0 - pct0) / rate * _HOUR_MS
    else:
        wall_ms = None
    wall_at = _iso(wall_ms) if wall_ms is not None else None
    if resets_at_ms is None:
        before_reset, at_reset = False, None
    else:
        before_reset = wall_at is not None and wall_ms < resets_at_ms  # type: ignore[operator]
        at_reset = _one_decimal(pct0 + rate * max(0.0, resets_at_ms - t0) / _HOUR_MS)
    return {"ratePctPerHour": rate, "wallAt": wall_at, "beforeReset": before_reset,
            "pctAtReset": at_reset, "samples": n}


def _in_lookback(points: Iterable[Sequence[float]], low: float,
                 high: float) -> Tuple[Sequence[Sequence[float]], Sequence[float], Sequence[float], float]:
    """(points, their times, their pcts, mean time) of the points with
    low <= t <= high and a finite pct >= 0."""
    used = points if isinstance(points, (list, tuple)) else list(points)
    if len(used) >= MIN_POINTS:
        # Callers mostly pass the lookback's points only, so look (in C) before
        # filtering (in Python). A NaN can hide from min() and max(), not from fsum().
        times, pcts = zip(*used)
        if low <= min(times) and max(times) <= high and 0.0 <= min(pcts):
            try:
                sum_t, sum_p = math.fsum(times), math.fsum(pcts)
            except (OverflowError, ValueError):
                sum_t = sum_p = math.nan
            if math.isfinite(sum_t) and math.isfinite(sum_p):
                return used, times, pcts, sum_t / len(times)
    used = [tp for tp in used if low <= tp[0] <= high and 0.0 <= tp[1] < math.inf]
    if not used:
        return used, (), (), 0.0
    times, pcts = zip(*used)
    return used, times, pcts, math.fsum(times) / len(times)


def _slope_per_hour(times: Sequence[float], pcts: Sequence[float], mean_t: float) -> float:
    """Least-squares slope, pct per hour.

    fsum is exactly rounded, so the sums do not depend on the order of the
    points and the result is the same for every permutation; centring the
    times on their mean keeps epoch-sized numbers out of the products.
    """
    xs = list(map(mean_t.__rsub__, times))  # t - mean_t, without a Python-level loop
    # The span check guarantees two distinct times, so the divisor is positive.
    return math.fsum(map(operator.mul, xs, pcts)) * _HOUR_MS / math.fsum(map(operator.mul, xs, xs))
