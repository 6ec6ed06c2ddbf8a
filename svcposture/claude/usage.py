"""The usage reply, read the way the provider really sends it (docs/posture.md).

Pure functions, no I/O. The reply of `GET /api/oauth/usage` has carried its
windows in two shapes: named buckets (`five_hour`, `seven_day`,
`seven_day_opus`, `seven_day_sonnet`), each an object `{utilization,
resets_at}`, a bare number (the utilization) or null; and, in newer replies,
`limits: [{kind, percent, resets_at, scope: {model: {display_name}}}]`.

Every window is judged on its own: one that cannot be read is left out, and
never spoils the others. A window is read when its percent is a finite number
from 0 up to _text.MAX_PCT (read_pct); its reset is kept when it is an ISO-8601 instant or epoch
seconds, and left out (unknown) otherwise. Where a named bucket and a `limits[]`
entry both give a window, the named bucket wins, whole.

Beyond the contract's windows (usage_extras): every other `seven_day_*`
bucket (`seven_day_cowork`, `seven_day_omelette`, ...), every other bucket in
the `{utilization, resets_at}` shape whatever its name (the provider ships
codenames such as `iguana_necktie` and `nimbus_quill` beside the documented
windows, and a codename that starts carrying a figure is a limit the operator
has to see), and every `limits[]` entry scoped to a model
(`scope.model.display_name`: "Fable", "Opus") is an extra window named by its
bucket or its model, in the shape of Codex's extra windows. A codename's length
is not known (null), unless its name says `five_hour_` or `seven_day_`.
`extra_usage` (the plan's overage credits) is kept as it is sent. They never
reach the contract's keys or events.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .. import _time
from .._text import is_number, read_pct
from ..windows import FIVE_HOUR_S, SEVEN_DAY_S, derived_status

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

# Extra windows kept at most (real replies carry a handful), and what a name of one may be.
MAX_EXTRAS = 32
MAX_NAME = 64
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:()+/-]*$")
_CURRENCY_RE = re.compile(r"^[A-Z]{3}$")
_ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_EXTRA_BUCKET_PREFIX = "seven_day_"
# Top-level members that are no window bucket, whatever their shape.
_NOT_BUCKETS = frozenset(["extra_usage", "limits", "spend"])
# The members of a window bucket: a bucket of another name is an extra window only in this shape.
_BUCKET_SHAPE = ("utilization", "resets_at")
# Credits beyond this are not money.
MAX_AMOUNT = 1e15


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


# ---------------------------------------------------------------- beyond the contract

def _name(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and len(value) <= MAX_NAME and _NAME_RE.match(value) else None


def _extra(pct: Any, resets_at: Optional[str], seconds: Optional[int], name: str) -> Dict[str, Any]:
    shown = round(float(pct), 1)
    return {"pct": shown, "resetsAt": resets_at, "status": derived_status(shown), "derived": True,
            "seconds": seconds, "name": name}


def _scoped_model(entry: Mapping[str, Any]) -> Optional[str]:
    scope = entry.get("scope")
    model = scope.get("model") if isinstance(scope, Mapping) else None
    return _name(model.get("display_name")) if isinstance(model, Mapping) else None


def _entry_seconds(entry: Mapping[str, Any]) -> Optional[int]:
    kind, group = entry.get("kind"), entry.get("group")
    if kind == "session" or group == "session":
        return FIVE_HOUR_S
    if (isinstance(kind, str) and kind.startswith("weekly")) or group == "weekly":
        return SEVEN_DAY_S
    return None


def _scoped_extras(value: Any) -> List[Dict[str, Any]]:
    extras: List[Dict[str, Any]] = []
    for entry in (value[:MAX_LIMITS] if isinstance(value, list) else []):
        name = _scoped_model(entry) if isinstance(entry, Mapping) else None
        pct = read_pct(entry.get("percent")) if name is not None else None
        if pct is not None:
            extras.append(_extra(pct, read_reset(entry.get("resets_at")), _entry_seconds(entry), name))
    return extras


def _bucket_seconds(key: str, value: Any) -> Tuple[bool, Optional[int]]:
    """(whether the member is an extra window's bucket, its length): any `seven_day_*` bucket, and a
    bucket of any other name in the `{utilization, resets_at}` shape."""
    if key.startswith(_EXTRA_BUCKET_PREFIX):
        return True, SEVEN_DAY_S
    if key in _NOT_BUCKETS or not isinstance(value, Mapping) or not all(k in value for k in _BUCKET_SHAPE):
        return False, None
    return True, (FIVE_HOUR_S if key.startswith("five_hour_") else None)


def _bucket_extras(body: Mapping[str, Any]) -> List[Dict[str, Any]]:
    named = set(_NAMED.values())
    extras: List[Dict[str, Any]] = []
    for key, value in body.items():
        if not isinstance(key, str) or key in named or _name(key) is None:
            continue
        is_bucket, seconds = _bucket_seconds(key, value)
        bucket = _bucket(value) if is_bucket else None
        if bucket is not None:
            extras.append(_extra(bucket[0], bucket[1], seconds, key))
    return extras


def _amount(value: Any) -> Optional[Any]:
    if not is_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(number) and 0 <= number <= MAX_AMOUNT else None


def extra_usage(value: Any) -> Optional[Dict[str, Any]]:
    """`extra_usage` (overage credits) as {enabled, monthlyLimit, usedCredits, utilization, currency}."""
    if not isinstance(value, Mapping):
        return None
    enabled = value.get("is_enabled")
    currency = value.get("currency")
    return {"enabled": enabled if isinstance(enabled, bool) else None,
            "monthlyLimit": _amount(value.get("monthly_limit")), "usedCredits": _amount(value.get("used_credits")),
            "utilization": read_pct(value.get("utilization")),
            "currency": currency if isinstance(currency, str) and _CURRENCY_RE.match(currency) else None}


def usage_extras(body: Any) -> Dict[str, Any]:
    """What the reply says beyond the contract: {"extraWindows": [...], "extraUsage": {...} | None}.

    Scoped `limits[]` entries first, in the reply's order, then the other
    buckets (`seven_day_*` and codenames), in the reply's order; the first window of a name wins.
    """
    if not isinstance(body, Mapping):
        return {"extraWindows": [], "extraUsage": None}
    extras: List[Dict[str, Any]] = []
    seen = set()
    for window in _scoped_extras(body.get("limits")) + _bucket_extras(body):
        if window["name"] not in seen and len(extras) < MAX_EXTRAS:
            seen.add(window["name"])
            extras.append(window)
    return {"extraWindows": extras, "extraUsage": extra_usage(body.get("extra_usage"))}


def _clean_extra(value: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(value, Mapping):
        return None
    pct, name, seconds, resets = (value.get("pct"), _name(value.get("name")), value.get("seconds"),
                                  value.get("resetsAt"))
    if read_pct(pct) is None or name is None or seconds not in (FIVE_HOUR_S, SEVEN_DAY_S, None):
        return None
    return _extra(pct, resets if isinstance(resets, str) and _ISO_RE.match(resets) else None, seconds, name)


def clean_usage_extras(value: Any) -> Dict[str, Any]:
    """usage_extras' output as read back from the child: whitelisted again, field by field."""
    value = value if isinstance(value, Mapping) else {}
    windows = value.get("extraWindows")
    extras = [w for w in (_clean_extra(v) for v in (windows[:MAX_EXTRAS] if isinstance(windows, list) else []))
              if w is not None]
    usage = value.get("extraUsage")
    cleaned = None
    if isinstance(usage, Mapping):
        cleaned = extra_usage({"is_enabled": usage.get("enabled"), "monthly_limit": usage.get("monthlyLimit"),
                               "used_credits": usage.get("usedCredits"), "utilization": usage.get("utilization"),
                               "currency": usage.get("currency")})
    return {"extraWindows": extras, "extraUsage": cleaned}
