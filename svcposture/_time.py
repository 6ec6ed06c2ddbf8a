"""Timestamps: every timestamp the package writes is UTC ISO-8601 with milliseconds and `Z`."""
from __future__ import annotations

import datetime as _dt
import re
import time

# Annotations only: typing costs a status line render more than this module does.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_UTC = _dt.timezone.utc
_ISO_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?$",
    re.ASCII,  # \d must not accept other scripts' digits
)


# Epoch milliseconds beyond this (year 5138) are not an instant.
MAX_MS = 10 ** 14


def read_ms(value: object) -> Optional[int]:
    """Epoch milliseconds as a JSON integer (or an integral float) in range, else None: how a
    monitor reads an instant its child printed."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    try:
        ms = int(value)
    except (OverflowError, ValueError):
        return None
    return ms if 0 <= ms <= MAX_MS else None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_UTC)


def _format(stamp: _dt.datetime) -> str:
    # strftime("%Y") drops leading zeros of years before 1000 on glibc.
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (
        stamp.year, stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second,
        stamp.microsecond // 1000)


def iso_from_ms(ms: int) -> str:
    """Raises ValueError outside years 1..9999."""
    try:
        stamp = _EPOCH + _dt.timedelta(milliseconds=int(ms))
    except OverflowError:
        raise ValueError("timestamp out of range") from None
    return _format(stamp)


def iso_now() -> str:
    return iso_from_ms(now_ms())


def iso_from_epoch(seconds: float) -> str:
    """Epoch seconds (int or float) to `...sss Z`; raises ValueError on junk."""
    value = float(seconds)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("not a finite epoch")
    # Floor to whole milliseconds: a reset instant is never reported early.
    return iso_from_ms(int(value * 1000) if value >= 0 else -int(-value * 1000))


def _instant(text: str) -> _dt.datetime:
    """The UTC instant an ISO-8601 text names, truncated to the millisecond (never rounded)."""
    if not isinstance(text, str):
        raise ValueError("timestamp is not a string")
    m = _ISO_RE.match(text.strip())
    if not m:
        raise ValueError("not an ISO-8601 timestamp")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    micro = int((frac or "0")[:3].ljust(3, "0")) * 1000
    tz = _UTC
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        tz = _dt.timezone(sign * _dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    try:
        stamp = _dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tz)
        return stamp.astimezone(_UTC)
    except OverflowError:
        # An offset that pushes year 1 or 9999 out of range.
        raise ValueError("timestamp out of range") from None


def normalize_iso(text: str) -> str:
    """Any ISO-8601 instant to UTC `Z` with milliseconds, truncated (never rounded)."""
    return _format(_instant(text))


def parse_iso_ms(text: str) -> int:
    """Epoch milliseconds of an ISO-8601 instant (naive means UTC). Computed from the instant,
    not by formatting and parsing it again: a fleet view parses one per account."""
    return (_instant(text) - _EPOCH) // _ONE_MS


_ONE_MS = _dt.timedelta(milliseconds=1)


def month_key(ms: int) -> str:
    return iso_from_ms(ms)[:7]
