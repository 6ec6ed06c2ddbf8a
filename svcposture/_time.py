"""Timestamps: every timestamp the package writes is UTC ISO-8601 with milliseconds and `Z`."""
from __future__ import annotations

import datetime as _dt
import re
import time

_UTC = _dt.timezone.utc
_ISO_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?$"
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def iso_from_ms(ms: int) -> str:
    seconds, millis = divmod(int(ms), 1000)
    stamp = _dt.datetime.fromtimestamp(seconds, _UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % millis


def iso_now() -> str:
    return iso_from_ms(now_ms())


def iso_from_epoch(seconds: float) -> str:
    """Epoch seconds (int or float) to `...sss Z`; raises ValueError on junk."""
    value = float(seconds)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("not a finite epoch")
    # Floor to whole milliseconds: a reset instant is never reported early.
    return iso_from_ms(int(value * 1000) if value >= 0 else -int(-value * 1000))


def normalize_iso(text: str) -> str:
    """Any ISO-8601 instant to UTC `Z` with milliseconds, truncated (never rounded)."""
    if not isinstance(text, str):
        raise ValueError("timestamp is not a string")
    m = _ISO_RE.match(text.strip())
    if not m:
        raise ValueError("not an ISO-8601 timestamp")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    tz = _UTC
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        tz = _dt.timezone(sign * _dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    stamp = _dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tz)
    stamp = stamp.astimezone(_UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % (stamp.microsecond // 1000)


def parse_iso_ms(text: str) -> int:
    """Epoch milliseconds of an ISO-8601 instant (naive means UTC)."""
    norm = normalize_iso(text)
    stamp = _dt.datetime.strptime(norm[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=_UTC)
    return int(stamp.timestamp()) * 1000 + int(norm[20:23])


def month_key(ms: int) -> str:
    return _dt.datetime.fromtimestamp(int(ms) // 1000, _UTC).strftime("%Y-%m")
