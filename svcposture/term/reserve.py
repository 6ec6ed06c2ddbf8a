"""svc-monitor reserve: show or set the human reserve, `svc.posture.reservePct` (docs/steering.md).

    svc-monitor reserve        # what it is, where it comes from, what automation does with it
    svc-monitor reserve 20     # automation leaves 20 % of every account for people

The reserve is a SHARED Layer-2 setting read from cluster-secrets.json, then config.json
(_reserve.py); a value set here goes into cluster-secrets.json, the file read first, through
the config module's locked atomic write. guard and switch read it on every call, the monitor's
advice at its next probe; `svc-cluster bundle export` carries it to the other nodes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, Optional, Sequence

from .._reserve import MAX_RESERVE, RESERVE_KEY, ReserveError, parse_reserve_text, reserve_source
from .._text import pct_text, printable


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="svc-monitor reserve",
        description=("Show or set the human reserve (%s): the share of every account that automation "
                     "leaves for people. guard holds once any window reaches 100 - PCT %%, and switch --best "
                     "and the automatic switch pick only accounts below it. An integer from 0 to %d; 0, "
                     "no reserve, when unset. It is a SHARED setting: it goes into "
                     "~/.config/svc/cluster-secrets.json, which svc-cluster bundle export carries to the "
                     "other nodes." % (RESERVE_KEY, MAX_RESERVE)))
    parser.add_argument("pct", nargs="?", metavar="PCT", help="the reserve to set, 0-%d" % MAX_RESERVE)
    parser.add_argument("--json", action="store_true",
                        help="print {key, value, previous, file, changed} (without PCT: {key, value, file})")
    return parser


def _effect(pct: int) -> str:
    if pct == 0:
        return "automation may use every account up to 100%"
    return "automation holds once a window reaches %s, leaving %s for people" % (pct_text(100 - pct),
                                                                                  pct_text(pct))


def show(home: str) -> Dict[str, Any]:
    pct, source = reserve_source(home)
    return {"key": RESERVE_KEY, "value": pct, "file": source}


def set_reserve(home: str, pct: int) -> Dict[str, Any]:
    """Write `pct` into cluster-secrets.json; {key, value, previous, file, changed}."""
    from ..config import write_layer
    from ..paths import Paths
    try:
        previous = reserve_source(home)[0]
    except ReserveError:
        previous = None  # a bad value is what this command replaces
    path = Paths(environ=os.environ).cluster_secrets
    changed = write_layer(path, {RESERVE_KEY: pct})
    return {"key": RESERVE_KEY, "value": pct, "previous": previous, "file": str(path), "changed": bool(changed)}


def _said(result: Dict[str, Any]) -> str:
    pct = result["value"]
    if "changed" not in result:
        where = ("%s in %s" % (RESERVE_KEY, result["file"]) if result["file"]
                 else "%s is not set" % RESERVE_KEY)
        return "the human reserve is %s (%s): %s" % (pct_text(pct), where, _effect(pct))
    if not result["changed"] and result["previous"] == pct:
        return "the human reserve is already %s; nothing changed" % pct_text(pct)
    was = " (was %s)" % pct_text(result["previous"]) if result["previous"] is not None else ""
    return ("the human reserve is now %s%s, in %s: %s; guard and switch use it from their next call, the "
            "monitor's advice from its next probe" % (pct_text(pct), was, result["file"], _effect(pct)))


def main(argv: Optional[Sequence[str]] = None) -> int:
    ns = build_parser().parse_args(argv)
    from ..paths import home_of
    home = str(home_of(os.environ))
    try:
        if ns.pct is None:
            result = show(home)
        else:
            pct = parse_reserve_text(ns.pct.strip())
            if pct is None:
                print("svc-monitor reserve: PCT must be an integer from 0 to %d, not %s"
                      % (MAX_RESERVE, printable(ns.pct)[:40]), file=sys.stderr)
                return 2
            result = set_reserve(home, pct)
    except ReserveError as exc:
        print("svc-monitor reserve: %s" % printable(exc), file=sys.stderr)
        return 2
    print(json.dumps(result) if ns.json else "svc-monitor reserve: %s" % printable(_said(result)))
    return 0
