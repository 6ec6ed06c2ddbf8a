"""How long to wait after a provider said 429, for every poller of a usage endpoint (docs/posture.md)."""
from __future__ import annotations

from typing import Optional

# Backoff on 429: retry-after plus this share, never shorter than MIN_BACKOFF_S nor longer than MAX_BACKOFF_S.
RETRY_AFTER_MARGIN = 0.10
MIN_BACKOFF_S = 60.0
MAX_BACKOFF_S = 15 * 60


def backoff_delay(interval_s: float, retry_after_s: Optional[float], failures: int,
                  cap_s: float = MAX_BACKOFF_S) -> float:
    """Delay after a 429: retry-after + 10 % (at least 60 s) when given, else doubling;
    capped, and never below the interval."""
    if retry_after_s is not None and retry_after_s >= 0:
        wanted = max(MIN_BACKOFF_S, retry_after_s * (1 + RETRY_AFTER_MARGIN))
    else:
        wanted = max(MIN_BACKOFF_S, interval_s * (2 ** max(1, min(failures, 10))))
    return max(interval_s, min(cap_s, wanted))
