"""Which host owns a ticket: highest random weight (HRW) over the roster (docs/liveness.md).

Pure and importing only hashlib: `svcposture.owner` is this module's `owner`,
and the Codex child, the headroom ranking and the cluster all score with it.
`svc-cluster owner` is cluster/owner.py.
"""
from __future__ import annotations

import hashlib
from typing import Iterable, List, Optional, Sequence


def hrw_score(ticket: str, host: str) -> int:
    """Highest-random-weight score: first 8 bytes, big-endian, of sha256(ticket NUL host)."""
    digest = hashlib.sha256(ticket.encode("utf-8") + b"\0" + host.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def candidates(roster: Sequence[str], live: Optional[Iterable[str]] = None) -> List[str]:
    """roster ∩ live when liveness is known; the full roster when unknown or empty."""
    unique = list(dict.fromkeys(roster))
    if live is None:
        return unique
    live_set = set(live)
    alive = [h for h in unique if h in live_set]
    return alive or unique


def owner(ticket: str, roster: Sequence[str], live: Optional[Iterable[str]] = None) -> Optional[str]:
    """The roster host that owns `ticket` (docs/liveness.md), or None for an empty roster.

    Each candidate scores the first 8 bytes, big-endian, of
    sha256(ticket + NUL + host); the highest score wins and a tie goes to the
    smaller host name. The candidates are the roster hosts that are in `live`
    when liveness is known (`live` not None), else, or when none of them is
    live, the whole roster. Duplicate roster names count once, and the order
    of `roster` and `live` does not matter. Adding or removing one host moves
    only the tickets that host wins or held. A pure function: no I/O.
    """
    hosts = candidates(roster, live)
    if not hosts:
        return None
    return min(hosts, key=lambda h: (-hrw_score(ticket, h), h))


def owns(ticket: str, host: str, roster: Sequence[str], live: Optional[Iterable[str]] = None) -> bool:
    """A host absent from the roster owns nothing, whatever the scores say."""
    return host in roster and owner(ticket, roster, live) == host
