"""A key vendor's limits as windows (pure, docs/vendors.md): one quota read from its counts or its
percent, its reset instant, and its place by length.

- A quota is no window when it is unlimited or its entitlement is 0 or below (a free plan's
  premium bucket, a Business seat's unlimited chat, a `-1` sentinel): it has no wall.
- Its pct is used / entitlement from the counts when the entitlement is above 0 and `used`
  (else entitlement - remaining) is known; else the vendor's own percent; else no window.
  Numbers may come as strings; NaN, infinities and absurd figures are not numbers.
- Its status is derived (the vendors send none): rejected from 100 %, allowed_warning from 90 %,
  and rejected too whenever it has 0 (or less) remaining of an entitlement above 0.
- A reset is epoch milliseconds, an ISO-8601 instant (nine fractional digits included) or a
  date (midnight UTC); anything else is null, never guessed.
- A window is placed by its length (svcposture.windows): within 2 % of 5 h or 7 d it is
  `fiveHour`/`sevenDay`, the first of a length winning its slot; any other is an extra window
  with `seconds`, `windowMinutes` (null without a length) and `name`.
- A month is MONTH_S long (30 days): a calendar month's true length changes from one to the
  next, and an extra window's length keys its history, so the nominal one is kept.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from .. import _time
from .._names import REJECTED
from .._text import read_number, read_pct
from ..windows import MAX_WINDOW_S, derived_status, field_of_length, window_name

# Beyond this a count is not a quota's (a quadrillion).
MAX_COUNT = 1e15
MONTH_S = 30 * 86400
# Replies list a handful of limits; past this they are not a plan's.
MAX_QUOTAS = 32
# An instant's text past this length is not one.
MAX_TEXT = 64
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII)
_PLAN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$")

# (length in seconds or None, name or None, window) of one quota, in the reply's order.
Found = Tuple[Optional[int], Optional[str], Dict[str, Any]]


def count(value: Any) -> Optional[float]:
    """A count as a vendor sends it (a number or a string holding one), at most MAX_COUNT either way."""
    number = read_number(value)
    return number if number is not None and abs(number) <= MAX_COUNT else None


def _spent(total: Optional[float], used: Optional[float], remaining: Optional[float]) -> Optional[float]:
    if total is None:
        return None
    if used is not None and used >= 0:
        return used
    return total - remaining if remaining is not None else None


def quota_window(*, entitlement: Any = None, used: Any = None, remaining: Any = None, pct: Any = None,
                 unlimited: Any = False, resets_at: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """One quota as a window, or None when it is not one (the rules above)."""
    total = count(entitlement)
    if unlimited is True or (total is not None and total <= 0):
        return None
    left = count(remaining)
    spent = _spent(total, count(used), left)
    value = read_pct(spent / total * 100.0 if spent is not None and total else read_number(pct))
    if value is None:
        return None
    value = round(value, 1)
    exhausted = total is not None and left is not None and left <= 0
    return {"pct": value, "resetsAt": resets_at, "status": REJECTED if exhausted else derived_status(value),
            "derived": True}


def iso_of_ms(value: Any) -> Optional[str]:
    """An epoch-milliseconds reset (a number or a numeric string) as ISO, else None (0 is none)."""
    ms = read_number(value)
    if ms is None or not 0 < ms <= _time.MAX_MS:
        return None
    return _time.iso_from_ms(int(ms))


def iso_of_text(value: Any) -> Optional[str]:
    """An ISO-8601 instant or a date (midnight UTC) as ISO with milliseconds, else None."""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        return None
    text = value.strip()
    if _DATE_RE.match(text):
        text += "T00:00:00Z"
    try:
        return _time.normalize_iso(text)
    except ValueError:
        return None


def first_iso(holder: Any, keys: Iterable[str]) -> Optional[str]:
    """The first of `keys` in `holder` that reads as an instant (iso_of_text), else None."""
    if not isinstance(holder, Mapping):
        return None
    return next((found for found in (iso_of_text(holder.get(key)) for key in keys) if found is not None), None)


def length_s(number: Any, unit_s: int) -> Optional[int]:
    """A length of `number` units of `unit_s` seconds, when it is one (up to ten years)."""
    value = read_number(number)
    if value is None:
        return None
    seconds = value * unit_s
    return int(round(seconds)) if 0 < seconds <= MAX_WINDOW_S else None


def plan_word(value: Any) -> Optional[str]:
    """A plan or seat word as a vendor sends it (`pro`, `copilot_for_business_seat`), else None."""
    return value if isinstance(value, str) and _PLAN_RE.match(value) else None


def place(found: Iterable[Found]) -> Dict[str, Any]:
    """fiveHour, sevenDay and extraWindows from quotas in any order (the rules above)."""
    placed: Dict[str, Any] = {"fiveHour": None, "sevenDay": None, "extraWindows": []}
    extras: List[Dict[str, Any]] = placed["extraWindows"]
    for seconds, name, window in found:
        slot = field_of_length(seconds)
        if slot is not None and placed[slot] is None:
            placed[slot] = window
        elif len(extras) < MAX_QUOTAS:
            minutes = seconds // 60 if seconds is not None else None
            extras.append(dict(window, seconds=seconds, windowMinutes=minutes or None, name=window_name(name)))
    return placed


def slots_of(found: Iterable[Found]) -> "frozenset[str]":
    """The slots (`fiveHour`, `sevenDay`) these quotas' lengths would take."""
    return frozenset(slot for slot in (field_of_length(seconds) for seconds, _n, _w in found) if slot)
