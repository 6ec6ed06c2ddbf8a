"""kill -9 the monitor at random points while its active account flips between ok
and rejected: the event log holds exactly one account.status.changed per real
edge (no duplicate, none lost), and a sibling flipping out of phase moves nothing;
and one account.quota.threshold per window cycle that reached 90 % (none twice, none lost), one
account.quota.wall per cycle at the wall, and account.quota.usable never twice without a wall between.
CI runs $SVC_CRASH_KILLS (default 15) kill points; scripts/crash_test.py runs 100.
"""
from __future__ import annotations

import os
import random
from pathlib import Path

from tests.support.crash import run_crash


def test_random_kill9_points_keep_exactly_one_event_per_edge(tmp_path: Path) -> None:
    kills = int(os.environ.get("SVC_CRASH_KILLS", "15"))
    seed = int(os.environ.get("SVC_CRASH_SEED", str(random.randrange(1 << 30))))
    result = run_crash(tmp_path, kills, seed)
    summary = "seed %d: %r" % (seed, {k: v for k, v in result.items() if k != "statuses"})
    assert result["duplicates"] == 0, summary
    assert result["lost"] == 0 and result["unexplained"] == 0, summary
    assert result["consistent"], summary
    assert result["tracebacks"] == 0, summary
    assert result["final_exit"] == 0, summary
    assert result["sibling_events"] == 0, summary
    # Threshold alerts across the same kills: one per window cycle, none lost.
    assert result["alert_duplicates"] == 0 and result["alerts_lost"] == 0, summary
    assert result["alerts_wrong_threshold"] == 0, summary
    # The final phase proves at least one rejected cycle, so its alert must be there.
    assert result["alert_cycles_proven"] >= 1 and result["alerts"] >= result["alert_cycles_proven"], summary
    # Wall alerts: one per cycle at the wall, none lost; usable alerts: never twice without a wall
    # between (the final phase is rejected, then ok: at least one).
    assert result["wall_duplicates"] == 0 and result["walls_lost"] == 0, summary
    assert result["usable_faults"] == 0 and result["usables"] >= 1, summary
    # The run exercised edges at all, and the final clean phase saw both kinds.
    assert result["real_edges_proven"] >= 2 and result["events"] >= 2, summary
    assert result["statuses"][-1] == "ok", summary
    # Every third kill fires the moment an event is appended: some of those must
    # have landed between the append and the latch write, the window that matters.
    assert result["kills_between_emit_and_advance"] >= 1, summary
