"""A vendor's limit as a window (docs/posture.md): its place by its length, its derived status.

One rule for every vendor.

The vendors do not always send the exact length: real Codex logs carry
`window_minutes: 299` and `10079` for the 5-hour and the weekly windows. A
length within 2 % of 5 hours (17,640 to 18,360 s) is the 5-hour window,
within 2 % of 7 days (592,704 to 616,896 s) the weekly one; any other
length is kept apart, as an extra window with its own length.

A window travels from the probe child to the monitor as
`{pct, resetsAt, status, derived: true}`; an extra window adds its length
(`seconds`, null when it has none: a credit limit) and `name`, and, where the
vendor gives one, `windowMinutes`. The monitor whitelists each one here.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional

from ._names import ALLOWED, ALLOWED_WARNING, REJECTED, WINDOW_FIELDS, WINDOW_STATUSES
from ._text import is_int, read_pct

FIVE_HOUR_S = 18000
SEVEN_DAY_S = 604800
# Within 2 % of the length: 49/50 to 51/50 of it, in exact integer steps.
TOLERANCE_PARTS = 50

WARNING_PCT = 90.0
REJECTED_PCT = 100.0

FIVE_HOUR_FIELD, SEVEN_DAY_FIELD = WINDOW_FIELDS


def _near(seconds: float, length: int) -> bool:
    scaled = seconds * TOLERANCE_PARTS
    return length * (TOLERANCE_PARTS - 1) <= scaled <= length * (TOLERANCE_PARTS + 1)


def field_of_length(seconds: Optional[float]) -> Optional[str]:
    """`fiveHour`, `sevenDay`, or None for any other length (or none at all)."""
    if seconds is None or isinstance(seconds, bool):
        return None
    if _near(seconds, FIVE_HOUR_S):
        return FIVE_HOUR_FIELD
    if _near(seconds, SEVEN_DAY_S):
        return SEVEN_DAY_FIELD
    return None


def derived_status(pct: float) -> str:
    """The status word a vendor does not send: rejected from 100 %, allowed_warning from 90 %."""
    if pct >= REJECTED_PCT:
        return REJECTED
    if pct >= WARNING_PCT:
        return ALLOWED_WARNING
    return ALLOWED


# ---------------------------------------------------------------- a window as the monitor takes it

# Beyond this a length is not a window's (ten years).
MAX_WINDOW_S = 10 * 366 * 86400
MAX_NAME = 64
_ISO_MS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:()+/-]*$")


def window_name(value: Any) -> Optional[str]:
    """A window's name as a vendor gives it (a model, a quota): printable words, at most MAX_NAME."""
    if isinstance(value, str) and len(value) <= MAX_NAME and _NAME_RE.match(value):
        return value
    return None


def clean_window(value: Any) -> Optional[Dict[str, Any]]:
    """A window from a child's block, whitelisted; None unless its pct and status are readable."""
    if not isinstance(value, dict):
        return None
    pct = read_pct(value.get("pct"))
    status = value.get("status")
    if pct is None or status not in WINDOW_STATUSES:
        return None
    resets = value.get("resetsAt")
    return {"pct": pct, "resetsAt": resets if isinstance(resets, str) and _ISO_MS_RE.match(resets) else None,
            "status": status, "derived": True}


def _length(value: Any, high: int) -> Any:
    """A length in whole units from 1 to `high`, None for none; False when it is something else."""
    if value is None:
        return None
    return value if is_int(value) and 0 < value <= high else False


def clean_extra(value: Any) -> Optional[Dict[str, Any]]:
    """An extra window from a child's block, whitelisted: a window with its `seconds` (a length, or
    null for a limit without one) and `name`, and `windowMinutes` when the child gave that key."""
    window = clean_window(value)
    seconds = _length(value.get("seconds"), MAX_WINDOW_S) if window is not None else False
    if window is None or seconds is False:
        return None
    window["seconds"] = seconds
    window["name"] = window_name(value.get("name"))
    if "windowMinutes" in value:
        minutes = _length(value["windowMinutes"], MAX_WINDOW_S // 60)
        window["windowMinutes"] = minutes if minutes is not False else None
    return window
