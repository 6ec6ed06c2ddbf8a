"""Which reset cycle a window's value belongs to, one rule for the package.

A window's cycle is named by its `resetsAt`. The provider's reset instant
wobbles by a few seconds from one reply to the next, so two instants within
CYCLE_TOLERANCE_MS are the same cycle: history, forecasts and alerts all
split series at the same place.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

CYCLE_TOLERANCE_MS = 120_000


def same_cycle(a: Optional[int], b: Optional[int]) -> bool:
    """Both reset instants known and within the tolerance, or both unknown."""
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= CYCLE_TOLERANCE_MS
