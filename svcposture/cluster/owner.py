"""`svc-cluster owner`: which host owns a ticket, by the roster and (when known) liveness (docs/liveness.md).

Without `--headroom` the owner is the contract's: highest random weight over
the live roster. With it, the first host in that order that has headroom for
the vendor (cluster/dispatch.py decides, from the fleet read status makes).
`--url` reads a running monitor's fleet view instead of this node's roster and
liveness, as `svc-cluster status --url` does.

The command's imports (the roster, liveness and its tracker client) are
deferred to the command itself.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..hrw import candidates, owner

if TYPE_CHECKING:
    import argparse

# Exit codes: 1 when no candidate has headroom (the contract's owner is named all the same) or
# the fleet view cannot be read; 2 for bad usage.
NO_HEADROOM = 1
USAGE = 2


def _usage_error(ns: argparse.Namespace) -> Optional[str]:
    """Why the arguments cannot be acted on (exit 2), or None."""
    from ..vendors import names_text, provider_names
    from ._common import valid_ticket

    if not valid_ticket(ns.ticket):
        return "%r is not a ticket identifier like ENG-123" % ns.ticket[:80]
    if ns.headroom and ns.no_liveness:
        return "--headroom judges the hosts by the fleet view, which --no-liveness leaves unread; drop one of them"
    if ns.provider is not None and not ns.headroom:
        return "--provider names whose headroom --headroom judges; add --headroom"
    if ns.provider is not None and ns.provider not in provider_names():
        return "unknown provider %r; the vendors are %s" % (ns.provider[:40], names_text())
    return None


def _fleet(ns: argparse.Namespace) -> Tuple[List[str], Optional[Dict[str, Any]]]:
    """(the roster, the fleet report; None when liveness is not read). With --url the roster is
    the hosts of the monitor's fleet view, which lists every roster host."""
    import os
    from .. import config
    from ..paths import Paths
    from ..settings import Settings
    from .hostaccounts import peer_accounts
    from .liveness import collect_status
    from .status import monitor_report

    if ns.url:
        report = monitor_report(ns.url)
        for row in report["hosts"]:
            # Another monitor's rows are read as a peer's heartbeat is: field by field.
            row["accounts"] = peer_accounts(row.get("accounts"))
        return [row["host"] for row in report["hosts"]], report
    paths = Paths(environ=os.environ)
    hosts = config.roster(paths)
    if ns.no_liveness:
        return hosts, None
    return hosts, collect_status(paths, Settings.from_environ(os.environ, strict=False))


def _live(report: Optional[Dict[str, Any]]) -> Optional[List[str]]:
    if report is None or report.get("error"):
        return None
    return [h["host"] for h in report["hosts"] if h["state"] == "live"]


def cmd_owner(ns: argparse.Namespace) -> int:
    from .._text import printable
    from ._common import print_json

    problem = _usage_error(ns)
    if problem is not None:
        print("svc-cluster owner: %s" % problem, file=sys.stderr)
        return USAGE
    hosts, report = _fleet(ns)
    if ns.url and report is not None and not report["hosts"] and report.get("error"):
        # No fleet view at all (the monitor did not answer with one): nothing to name an owner from.
        print("svc-cluster owner: %s" % printable(report["error"])[:300], file=sys.stderr)
        return NO_HEADROOM
    if report is not None and report.get("error") and not ns.no_liveness:
        print("svc-cluster owner: liveness unknown (%s); using the full roster" % printable(report["error"])[:300],
              file=sys.stderr)
    if ns.headroom:
        return _with_headroom(ns, report or {"hosts": []})
    live = None if ns.no_liveness else _live(report)
    chosen = owner(ns.ticket, hosts, live)
    result = {"ticket": ns.ticket, "owner": chosen, "candidates": candidates(hosts, live),
              "livenessKnown": live is not None}
    if ns.json:
        print_json(result, ensure_ascii=False)
    else:
        print(printable(chosen) if chosen is not None else "(nobody: the roster is empty)")
    return 0


def _with_headroom(ns: argparse.Namespace, report: Dict[str, Any]) -> int:
    import os
    from .._reserve import ReserveError, reserve_pct
    from .._text import printable
    from ..paths import Paths
    from ..vendors import DEFAULT_PROVIDER
    from ._common import print_json
    from .dispatch import headroom_found, owner_with_headroom
    from .fleetaccounts import accounts_view

    try:
        reserve = reserve_pct(str(Paths(environ=os.environ).home))
    except ReserveError as exc:
        print("svc-cluster owner: %s" % exc, file=sys.stderr)
        return USAGE
    provider = ns.provider or DEFAULT_PROVIDER
    body = owner_with_headroom(ns.ticket, report, accounts_view(report), provider, reserve)
    found = headroom_found(body)
    if ns.json:
        print_json(body, ensure_ascii=False)
    else:
        print(printable(body["owner"]) if body["owner"] is not None else "(nobody: the roster is empty)")
        for skipped in body["skipped"]:
            print("  skipped %s: %s" % (printable(skipped["host"]), printable(skipped["reason"])))
    if not found:
        when = "; the first holding window resets at %s" % body["waitUntil"] if body["waitUntil"] else ""
        print("svc-cluster owner: no candidate has headroom for %s%s; the contract's owner is named"
              % (provider, when), file=sys.stderr)
        return NO_HEADROOM
    return 0


def add_commands(sub: Any) -> None:
    import argparse
    p = sub.add_parser(
        "owner", help="which host owns a ticket (highest random weight over the roster)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Highest-random-weight ownership. Score = first 8 bytes (big-endian) of\n"
                    "sha256(ticket NUL host); the highest wins, ties go to the smaller name.\n"
                    "Candidates are the roster hosts that are live when liveness is known, else\n"
                    "the whole roster. A host absent from the roster owns nothing.\n\n"
                    "--headroom: the first candidate in that order whose active account of the\n"
                    "vendor is healthy and below 100 - reserve on every window, or that has such\n"
                    "another account to switch to; exit 1 (naming the contract's owner and when\n"
                    "the first holding window resets) when none has. Leave it off where the\n"
                    "contract's ownership must hold.")
    p.add_argument("ticket", metavar="TICKET", help="tracker ticket identifier, e.g. ENG-123")
    p.add_argument("--json", action="store_true",
                   help="print {ticket, owner, candidates, livenessKnown} (with --headroom also "
                        "headroom, provider, skipped, waitUntil)")
    p.add_argument("--no-liveness", action="store_true", help="do not read liveness; use the full roster")
    p.add_argument("--headroom", action="store_true",
                   help="skip hosts without headroom for the vendor (their accounts at the wall, refused or unread)")
    p.add_argument("--provider", metavar="NAME", default=None,
                   help="with --headroom: whose accounts (default: the default vendor)")
    p.add_argument("--url", metavar="URL", default=None,
                   help="read a running monitor's fleet view (its /api/fleet; the demo's too) instead of "
                        "this node's roster and liveness")
    p.set_defaults(func=cmd_owner)
