"""A vendor's limit as a window (docs/posture.md): its place by its length, its derived status.

One rule for every vendor.

The vendors do not always send the exact length: real Codex logs carry
`window_minutes: 299` and `10079` for the 5-hour and the weekly windows. A
length within 2 % of 5 hours (17,640 to 18,360 s) is the 5-hour window,
within 2 % of 7 days (592,704 to 616,896 s) the weekly one; any other
length is kept apart, as an extra window with its own length.
"""
from __future__ import annotations

from typing import Optional

from ._names import ALLOWED, ALLOWED_WARNING, REJECTED, WINDOW_FIELDS

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
