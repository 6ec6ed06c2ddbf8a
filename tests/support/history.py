"""History rows for a test node: a climbing account, or days of a whole fleet.

    rows = climb_rows("acct1", start_ms, end_ms, step_ms=60_000, pct0=40.0, rate=60.0, resets_ms=reset)
    write_rows(home, rows)

The rows go in through the package's own writer, so the files are exactly
what a monitor writes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from svcposture.trajectory.history import append_rows
from svcposture.paths import Paths

HOUR_MS = 3_600_000


def climb_rows(label: str, start_ms: int, end_ms: int, *, step_ms: int, pct0: float, rate: float,
               resets_ms: Optional[int], field: str = "fiveHour", other_pct: float = 10.0) -> List[Dict[str, Any]]:
    """Rows of `label` from start_ms (pct0) climbing `rate` pct per hour, one every step_ms."""
    rows = []
    other = "sevenDay" if field == "fiveHour" else "fiveHour"
    t = start_ms
    while t <= end_ms:
        pct = round(pct0 + rate * (t - start_ms) / HOUR_MS, 1)
        rows.append({"t": t, "label": label, field: {"pct": pct, "resetsAt": resets_ms},
                     other: {"pct": other_pct, "resetsAt": None}})
        t += step_ms
    return rows


def fleet_rows(end_ms: int, *, days: float, accounts: int = 4, step_ms: int = 30_000) -> Iterable[List[Dict[str, Any]]]:
    """One probe's rows at a time (all accounts share `t`), for `days` days up to end_ms."""
    t = end_ms - int(days * 86_400_000)
    while t <= end_ms:
        yield [{"t": t, "label": "acct%d" % (i + 1),
                "fiveHour": {"pct": float((t // 60_000 + i * 7) % 100), "resetsAt": (t // 18_000_000 + 1) * 18_000_000},
                "sevenDay": {"pct": float((t // 3_600_000 + i) % 100), "resetsAt": None}}
               for i in range(accounts)]
        t += step_ms


def write_rows(home: Path, rows: Iterable[Dict[str, Any]]) -> None:
    """Append rows to the node's history, as a monitor would (no fsync: test speed)."""
    append_rows(Paths(home, environ={"HOME": str(home)}), list(rows), fsync=False)
