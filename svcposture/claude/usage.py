"""The usage reply, read the way the provider really sends it (docs/posture.md).

Pure functions, no I/O. The reply of `GET /api/oauth/usage` has carried its
windows in two shapes: named buckets (`five_hour`, `seven_day`,
`seven_day_opus`, `seven_day_sonnet`), each an object `{utilization,
resets_at}`, a bare number (the utilization) or null; and, in newer replies,
`limits: [{kind, percent, resets_at, scope: {model: {display_name}}}]`.

Every window is judged on its own: one that cannot be read is left out, and
never spoils the others. A window is read when its percent is a finite number
from 0 up to MAX_PCT; its reset is kept when it is an ISO-8601 instant or epoch
seconds, and left out (unknown) otherwise. Where a named bucket and a `limits[]`
entry both give a window, the named bucket wins, whole.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional, Tuple

from .. import _time
from .._text import is_number

# A percent beyond this is not a utilization (the header probe draws the same line).
MAX_PCT = 1e8
# Epoch seconds beyond this (year 5138) are not a reset instant.
MAX_EPOCH_S = 1e11
# A limits[] longer than this is not read past it: real replies carry a handful.
MAX_LIMITS = 64

# (window, contract pct key, contract resets_at key or None), in contract order.
WINDOWS: Tuple[Tuple[str, str, Optional[str]], ...] = (
    ("five_hour", "ratelimit.five_hour_pct", "ratelimit.five_hour_resets_at"),
    ("seven_day", "ratelimit.seven_day_pct", "ratelimit.seven_day_resets_at"),
    ("seven_day_large", "ratelimit.seven_day_large_pct", None),
    ("seven_day_medium", "ratelimit.seven_day_medium_pct", None),
)
WINDOW_PCT_KEYS = tuple(pct for _, pct, _ in WINDOWS)
# The named bucket of each window.
_NAMED = {"five_hour": "five_hour", "seven_day": "seven_day", "seven_day_large": "seven_day_opus",
          "seven_day_medium": "seven_day_sonnet"}
# limits[] kinds that name a window by themselves; weekly_scoped goes by its model name.
_KIND_WINDOW = {"session": "five_hour", "weekly_all": "seven_day"}
_SCOPED_MODELS = (("opus", "seven_day_large"), ("sonnet", "seven_day_medium"))

Window = Tuple[float, Optional[str]]


def read_pct(value: Any) -> Optional[float]:
    """A JSON number that is a percent (finite, 0..MAX_PCT), else None. Booleans are not numbers."""
    if not is_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer with hundreds of digits
        return None
    if not math.isfinite(number) or number < 0 or number > MAX_PCT:
        return None
    return value if isinstance(value, int) else number


def read_reset(value: Any) -> Optional[str]:
    """An ISO-8601 instant (any offset, any fraction) or epoch seconds as UTC `...sssZ`,
    truncated to the millisecond; None when it is neither."""
    if isinstance(value, str):
        try:
            return _time.normalize_iso(value)
        except ValueError:
            return None
    if not is_number(value):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_EPOCH_S:
        return None
    try:
        return _time.iso_from_epoch(seconds)
    except ValueError:
        return None


def _bucket(value: Any) -> Optional[Window]:
    """A named bucket: an object, a bare number, or anything else (unreadable)."""
    if isinstance(value, Mapping):
        pct = read_pct(value.get("utilization"))
        return (pct, read_reset(value.get("resets_at"))) if pct is not None else None
    pct = read_pct(value)
    return (pct, None) if pct is not None else None


def _scoped_window(entry: Mapping[str, Any]) -> Optional[str]:
    scope = entry.get("scope")
    model = scope.get("model") if isinstance(scope, Mapping) else None
    name = model.get("display_name") if isinstance(model, Mapping) else None
    if not isinstance(name, str):
        return None
    lowered = name.lower()
    for word, window in _SCOPED_MODELS:
        if word in lowered:
            return window
    return None


def _limits(value: Any) -> Dict[str, Window]:
    """The windows of a `limits[]` array; the first readable entry of a window wins."""
    found: Dict[str, Window] = {}
    if not isinstance(value, list):
        return found
    for entry in value[:MAX_LIMITS]:
        if not isinstance(entry, Mapping):
            continue
        kind = entry.get("kind")
        window = _KIND_WINDOW.get(kind) if isinstance(kind, str) else None
        if window is None and kind == "weekly_scoped":
            window = _scoped_window(entry)
        if window is None or window in found:
            continue
        pct = read_pct(entry.get("percent"))
        if pct is not None:
            found[window] = (pct, read_reset(entry.get("resets_at")))
    return found


def usage_windows(body: Any) -> Dict[str, Window]:
    """{window: (pct, resets_at or None)} of every window the reply lets us read."""
    if not isinstance(body, Mapping):
        return {}
    windows = _limits(body.get("limits"))
    for window, bucket in _NAMED.items():
        named = _bucket(body.get(bucket))
        if named is not None:
            windows[window] = named
    return windows


def usage_values(body: Any, subscription: Optional[str], tier: Optional[str]) -> Dict[str, Any]:
    """The reply as {contract key: value}; unreadable or missing windows are left out.

    Raises ValueError only when the reply is not a JSON object at all.
    """
    if not isinstance(body, Mapping):
        raise ValueError("usage reply is not an object")
    windows = usage_windows(body)
    values: Dict[str, Any] = {}
    for window, pct_key, reset_key in WINDOWS:
        if window not in windows:
            continue
        pct, reset = windows[window]
        values[pct_key] = pct
        if reset_key is not None and reset is not None:
            values[reset_key] = reset
    if subscription is not None:
        values["subscription.type"] = subscription
    if tier is not None:
        values["rate_limit.tier"] = tier
    return values


def has_window(values: Mapping[str, Any]) -> bool:
    """Whether a sample read at least one window (an empty one is not appended)."""
    return any(key in values for key in WINDOW_PCT_KEYS)
