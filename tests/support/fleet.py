"""A fleet on the test tracker: heartbeats of many hosts with account blocks, in every state.

    names = populate(srv, "OPS-1", 500)
    home = make_node(tmp_path, names[0], names, anchor="OPS-1")

Hosts are `host-000`, `host-001`, ...; by default every tenth is stale, every
twenty-fifth missing (no attachment), and the accounts cover ok, degraded and
rejected, a stale probe, a wall forecast before the reset and a null quota.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from svcposture._time import iso_from_ms
from svcposture.cluster.liveness import heartbeat_url

INTERVAL_MS = 120000


def host_names(count: int) -> List[str]:
    return ["host-%03d" % i for i in range(count)]


def account(i: int, now_ms: int) -> Optional[Dict[str, Any]]:
    """The account block host `i` publishes (None for every seventh: no active account)."""
    if i % 7 == 6:
        return None
    five = (i * 37) % 115
    seven = (i * 13) % 100
    status = "rejected" if five >= 100 else "degraded" if five >= 80 else "ok"
    probed = now_ms - (3_600_000 if i % 11 == 5 else 60_000)
    wall = iso_from_ms(now_ms + 40 * 60_000) if 80 <= five < 100 else None
    return {"label": "acct%d" % (i % 3 + 1), "status": status,
            "five_hour_pct": float(five), "five_hour_resets_at": iso_from_ms(now_ms + 2 * 3_600_000),
            "seven_day_pct": float(seven), "seven_day_resets_at": iso_from_ms(now_ms + 3 * 86_400_000),
            "wall_at": wall, "probed_at": iso_from_ms(probed), "probe_interval_ms": 300000}


def metadata(host: str, i: int, published_ms: int, now_ms: int) -> Dict[str, Any]:
    quota = None if i % 2 else {"five_hour_pct": float((i * 37) % 115), "seven_day_pct": float((i * 13) % 100)}
    return {"host": host, "publishedAt": iso_from_ms(published_ms), "publishIntervalMs": INTERVAL_MS,
            "version": "0.1.0", "accountStatus": (account(i, now_ms) or {}).get("status", "unknown"),
            "quota": quota, "account": account(i, now_ms)}


def populate(srv: Any, issue: str, count: int, *, stale_every: int = 10, missing_every: int = 25) -> List[str]:
    """Put `count` hosts' heartbeats on `issue`; returns the host names (the roster)."""
    now = int(time.time() * 1000)
    names = host_names(count)
    for i, host in enumerate(names):
        if missing_every and i % missing_every == missing_every - 1:
            continue
        age = 10 * 60_000 if stale_every and i % stale_every == stale_every - 1 else 5_000
        published = now - age
        srv.put_attachment(issue, heartbeat_url(host), subtitle=iso_from_ms(published),
                           metadata=metadata(host, i, published, now))
    return names
