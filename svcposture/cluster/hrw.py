"""Which host owns a ticket: highest random weight (HRW) over the roster, and `svc-cluster owner`.

The scoring is pure and imports only hashlib: `svcposture.owner` is this
module's `owner`. The command's imports (argparse, the roster, liveness and
its tracker client) are deferred to the command itself.
"""
from __future__ import annotations

import hashlib
import sys
from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Sequence

if TYPE_CHECKING:
    import argparse


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


# ---------------------------------------------------------------- command

def cmd_owner(ns: argparse.Namespace) -> int:
    import os
    from .. import config
    from .._text import printable
    from ..paths import Paths
    from ._common import print_json, valid_ticket
    from .liveness import collect_status

    ticket = ns.ticket
    if not valid_ticket(ticket):
        print("svc-cluster owner: %r is not a ticket identifier like ENG-123" % ns.ticket[:80], file=sys.stderr)
        return 2
    paths = Paths(environ=os.environ)
    hosts = config.roster(paths)
    live: Optional[List[str]] = None
    note = None
    if not ns.no_liveness:
        report = collect_status(paths, os.environ)
        if report.get("error"):
            note = "liveness unknown (%s); using the full roster" % report["error"]
        else:
            live = [h["host"] for h in report["hosts"] if h["state"] == "live"]
    chosen = owner(ticket, hosts, live)
    result = {"ticket": ticket, "owner": chosen, "candidates": candidates(hosts, live),
              "livenessKnown": live is not None}
    if ns.json:
        print_json(result, ensure_ascii=False)
    else:
        print(printable(chosen) if chosen is not None else "(nobody: the roster is empty)")
    if note:
        print("svc-cluster owner: %s" % note, file=sys.stderr)
    return 0


def add_commands(sub: Any) -> None:
    import argparse
    p = sub.add_parser(
        "owner", help="which host owns a ticket (highest random weight over the roster)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Highest-random-weight ownership. Score = first 8 bytes (big-endian) of\n"
                    "sha256(ticket NUL host); the highest wins, ties go to the smaller name.\n"
                    "Candidates are the roster hosts that are live when liveness is known, else\n"
                    "the whole roster. A host absent from the roster owns nothing.")
    p.add_argument("ticket", metavar="TICKET", help="tracker ticket identifier, e.g. ENG-123")
    p.add_argument("--json", action="store_true", help="print {ticket, owner, candidates, livenessKnown}")
    p.add_argument("--no-liveness", action="store_true", help="do not read liveness; use the full roster")
    p.set_defaults(func=cmd_owner)
