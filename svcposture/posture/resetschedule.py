"""The probe at the reset (docs/posture.md): when a window resets, look again soon after.

Without it a `rejected` account stays rejected on every screen, and in the
latch, until the next periodic probe, up to a probe interval after the
provider has let it go. The posture service asks one extra probe at each reset
instant plus a margin (60 s: the provider's own clock and roll-over need a
moment) for the active account's binding window and for the binding window of
every rejected account. The refresh floor still gates when a probe may start.

`reset_instants_ms` is pure; `ResetSchedule` holds the instants still ahead,
replaced whole by each new result, so an instant already probed for is never
asked again and an account that recovered drops out by itself.
"""
from __future__ import annotations

import threading
from typing import Any, Iterable, List, Mapping, Optional

from .._names import FIELD_OF_CLAIM, REJECTED
from .._time import parse_iso_ms
from ..settings import DEFAULT_RESET_MARGIN_S as DEFAULT_MARGIN_S

# How many probes already run are remembered.
MAX_FIRED = 64


def reset_instants_ms(summary: Optional[Mapping[str, Any]]) -> List[int]:
    """Epoch ms of the resets worth a probe: the active account's binding window and
    the binding window of every account whose binding status is rejected."""
    if not isinstance(summary, Mapping) or summary.get("available") is not True or "error" in summary:
        return []
    instants = set()
    for account in summary.get("accounts") or []:
        if not isinstance(account, Mapping):
            continue
        if account.get("active") is not True and account.get("bindingStatus") != REJECTED:
            continue
        field = FIELD_OF_CLAIM.get(account.get("bindingWindow") or "")
        window = account.get(field) if field else None
        resets = window.get("resetsAt") if isinstance(window, Mapping) else None
        if isinstance(resets, str):
            try:
                instants.add(parse_iso_ms(resets))
            except ValueError:
                continue
    return sorted(instants)


class ResetSchedule:
    """The reset probes still ahead, as epoch ms (reset + margin); thread-safe."""

    def __init__(self, margin_s: float = DEFAULT_MARGIN_S) -> None:
        self.margin_ms = int(round(margin_s * 1000))
        self._lock = threading.Lock()
        self._due: List[int] = []
        # Probes already run: a result that still names their reset (the two
        # clocks a few ms apart) never asks for them again.
        self._fired: List[int] = []

    def replace(self, instants_ms: Iterable[int], now_ms: int) -> None:
        """The newest result decides: only its resets whose probe is still ahead stay."""
        with self._lock:
            self._due = sorted({t + self.margin_ms for t in instants_ms
                                if t + self.margin_ms > now_ms and t + self.margin_ms not in self._fired})

    def next_ms(self) -> Optional[int]:
        with self._lock:
            return self._due[0] if self._due else None

    def pop_due(self, now_ms: int) -> bool:
        """Take the next probe and every other whose time has come; True when there was one."""
        with self._lock:
            if not self._due:
                return False
            taken = [t for t in self._due if t <= now_ms] or self._due[:1]
            self._due = [t for t in self._due if t not in taken]
            self._fired = (self._fired + taken)[-MAX_FIRED:]
        return True

    def snapshot(self) -> List[int]:
        with self._lock:
            return list(self._due)
