"""`svc-cluster owner`: which host owns a ticket, by the roster and (when known) liveness (docs/liveness.md).

The command's imports (the roster, liveness and its tracker client) are
deferred to the command itself.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, List, Optional

from ..hrw import candidates, owner

if TYPE_CHECKING:
    import argparse


def cmd_owner(ns: argparse.Namespace) -> int:
    import os
    from .. import config
    from .._text import printable
    from ..paths import Paths
    from ._common import print_json, valid_ticket
    from ..settings import Settings
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
        report = collect_status(paths, Settings.from_environ(os.environ, strict=False))
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
