"""A short soak of the real monitor (python3 -m scripts.soak --quick, shortened further):
32 readers, 50 SSE clients joining and leaving, a 1 s probe interval. Memory
stays flat after warm-up, and threads and fds return to their pre-load level."""
from __future__ import annotations

import os

from scripts.soak import run_soak, verdict


def test_short_soak_leaks_nothing() -> None:
    duration = float(os.environ.get("SVC_SOAK_S", "12"))
    result = run_soak(duration, warmup=min(4.0, duration / 3))
    summary = {k: v for k, v in result.items() if k != "samples"}
    assert verdict(result) == [], summary
    # The load really ran: readers, stream churn and periodic probes.
    assert result["reads"] > 100 and result["sse_sessions"] > 50 and result["probes"] >= 4, summary
    assert result["threads_peak"] > result["threads_before"] + 40, summary
