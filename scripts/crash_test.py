#!/usr/bin/env python3
"""The full crash test: 100 random kill -9 points in a monitor whose active account
flips between ok and rejected every second (short probe interval, TTL and floor
via SVC_* env vars). Prints the figures: answered probes, real edges, events,
duplicates, lost, and how many kills landed between an edge's emit and advance; and the
threshold alerts of the same run (one per 5-hour window cycle that reached 90 %: duplicates, lost),
and its wall and usable alerts (one wall per cycle at the wall; a usable never twice without a wall).

The last stdout line is the bench_all JSON {"figures": [...]}. --quick runs 15.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

from tests.support.crash import run_crash


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=None, help="kill points (default 100, 15 with --quick)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the temp HOME and monitor logs")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    kills = args.kills or (15 if args.quick else 100)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    workdir = Path(tempfile.mkdtemp(prefix="svc-crash-"))
    try:
        result = run_crash(workdir, kills, seed, log=print if args.verbose else (lambda s: None))
    finally:
        if not args.keep:
            shutil.rmtree(str(workdir), ignore_errors=True)
    for key, value in result.items():
        if key != "statuses":
            print("%-32s %s" % (key, value))
    print("seed %d%s" % (seed, "; kept %s" % workdir if args.keep else ""))
    alerts_ok = all(result[key] == 0 for key in ("alert_duplicates", "alerts_lost", "alerts_wrong_threshold",
                                                 "wall_duplicates", "walls_lost", "usable_faults"))
    ok = (result["consistent"] and result["duplicates"] == 0 and result["lost"] == 0 and result["tracebacks"] == 0
          and alerts_ok)
    figures = [
        {"figure": "crash: kill -9 points", "value": kills, "unit": "", "baseline": None, "ratio": None,
         "target": None, "ok": None},
        {"figure": "crash: real edges / account.status.changed logged", "value": "%d / %d" % (result["real_edges_proven"], result["events"]),
         "unit": "", "baseline": None, "ratio": None,
         "target": "events within possible %s" % result["possible_edges"], "ok": result["consistent"]},
        {"figure": "crash: duplicate events", "value": result["duplicates"], "unit": "", "baseline": None,
         "ratio": None, "target": "0", "ok": result["duplicates"] == 0},
        {"figure": "crash: lost edges", "value": result["lost"], "unit": "", "baseline": None, "ratio": None,
         "target": "0", "ok": result["lost"] == 0},
        {"figure": "crash: events for the non-active sibling", "value": result["sibling_events"], "unit": "",
         "baseline": None, "ratio": None, "target": "0", "ok": result["sibling_events"] == 0},
        {"figure": "crash: window cycles proven >= 90% / threshold alerts logged",
         "value": "%d / %d" % (result["alert_cycles_proven"], result["alerts"]), "unit": "", "baseline": None,
         "ratio": None, "target": None, "ok": None},
        {"figure": "crash: duplicate threshold alerts", "value": result["alert_duplicates"], "unit": "",
         "baseline": None, "ratio": None, "target": "0", "ok": result["alert_duplicates"] == 0},
        {"figure": "crash: lost threshold alerts", "value": result["alerts_lost"], "unit": "", "baseline": None,
         "ratio": None, "target": "0", "ok": result["alerts_lost"] == 0},
        {"figure": "crash: duplicate or lost wall alerts / usable alerts without a wall before",
         "value": "%d / %d" % (result["wall_duplicates"] + result["walls_lost"], result["usable_faults"]), "unit": "",
         "baseline": None, "ratio": None, "target": "0 / 0",
         "ok": result["wall_duplicates"] + result["walls_lost"] + result["usable_faults"] == 0},
        {"figure": "crash: kills between emit and advance", "value": result["kills_between_emit_and_advance"],
         "unit": "", "baseline": None, "ratio": None, "target": None, "ok": None},
    ]
    print(json.dumps({"figures": figures}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
