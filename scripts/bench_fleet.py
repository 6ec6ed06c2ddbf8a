#!/usr/bin/env python3
"""Benchmark of the fleet view, every figure against a baseline measured in the same run.

1. `svc-cluster status --json` (the real command, a subprocess) for 500 hosts
   against the test tracker answering every request 50 ms late: the number of
   tracker requests (target <= 6: 100 attachments a page) and the wall time
   (target < 1.5 s), and the ratio of that time to the same command for 50 hosts.
2. Cached GET /api/fleet of 500 hosts, req/s with wrk (32 keep-alive connections),
   against the one-write stdlib ThreadingHTTPServer serving a body of the same
   size, alternating rounds (target >= 0.5x).

3. The fleet past the tracker's budget (docs/fleet-prometheus.md): `svc-cluster status --json` for
   1,000 hosts read from a real Prometheus scraping 1,000 stand-in monitors (10 s),
   and from a real VictoriaMetrics fed by its remote_write: wall time (target < 1 s)
   and queries per status (target <= 4), against the tracker path for the same
   1,000 hosts (50 ms a request) measured in the same run.
4. The tracker path's hosts per bot user at the default interval, before and after
   budgeting: N real publishers at the default 120 s (on an hour scaled down to
   24 s, as the stand-in tracker enforces it: 1,500 requests, RATELIMITED past
   them) and a reader every scaled minute; after one window of start-up, the
   figure is the largest N with no request refused and no host ever seen not
   live by the reader for a whole window.

5. 10,000 hosts of three accounts each beside 1,000, from a real VictoriaMetrics fed through
   its import API: `svc-cluster status --json`, GET /api/fleet/accounts on a real monitor
   (target < 1 s each) and the queries of one read (target <= 4), the 1,000-host figures
   measured in the same run as the baseline.

Loopback only. Installs wrk (apt-get) when missing (parts 1-2).
Usage: python3 -m scripts.bench_fleet [--quick] [--duration S] [--rounds N] [--parts 1,2,3,4,5]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from scripts.bench_server import BASELINE_A, start_baseline, wrk
from tests.support.fleet import populate
from tests.support.home import BEARER, make_node, node_env
from tests.support.monitor import start_monitor
from tests.support.tracker import TrackerServer

LATENCY_S = 0.05


def ensure_wrk() -> None:
    if not shutil.which("wrk"):
        print("bench: installing wrk with apt-get", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=False)
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True)


def status_run(root: Path, hosts: int, runs: int) -> Tuple[float, int]:
    """(median wall seconds, tracker requests of one run) of `svc-cluster status --json` for `hosts` hosts."""
    with TrackerServer(tokens=[BEARER]) as srv:
        srv.add_issue("OPS-1")
        names = populate(srv, "OPS-1", hosts, stale_every=0, missing_every=0)
        home = make_node(root / ("n%d" % hosts), names[0], names, anchor="OPS-1")
        env = node_env(home, tracker_url=srv.url, interval_ms=120000)
        srv.latency_s = LATENCY_S
        times: List[float] = []
        requests = 0
        for _ in range(runs):
            before = srv.count("issue")
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "svcposture", "cluster", "status", "--json"], env=env,
                                  capture_output=True, text=True, timeout=120)
            times.append(time.perf_counter() - start)
            report = json.loads(done.stdout)
            live = sum(1 for h in report["hosts"] if h["state"] == "live")
            if live != hosts:
                raise RuntimeError("status saw %d of %d hosts live: %s" % (live, hosts, report.get("error")))
            requests = srv.count("issue") - before
    return statistics.median(times), requests


def fleet_rates(root: Path, duration: float, rounds: int) -> Tuple[Dict[str, List[float]], int]:
    with TrackerServer(tokens=[BEARER]) as srv:
        srv.add_issue("OPS-1")
        names = populate(srv, "OPS-1", 500)
        home = make_node(root / "mon", names[0], names, anchor="OPS-1")
        env = node_env(home, tracker_url=srv.url, interval_ms=120000, SVC_FLEET_TTL_S="3600")
        mon = start_monitor(env, ["--no-probe"], timeout=30)
        base = None
        try:
            size = len(mon.get("/api/fleet", timeout=60)[2])
            base, port, _ = start_baseline(BASELINE_A, size)
            targets = {"monitor": mon.url + "/api/fleet", "baseline": "http://127.0.0.1:%d/" % port}
            for url in targets.values():  # warm-up
                wrk(url, 1)
            rates: Dict[str, List[float]] = {k: [] for k in targets}
            for _ in range(rounds):
                for name, url in targets.items():
                    rates[name].append(wrk(url, duration))
            if srv.count("issue") != 5:
                raise RuntimeError("the benchmarked reads were not cached: %d tracker reads" % srv.count("issue"))
        finally:
            mon.stop(timeout=20, check=False)
            if base is not None:
                base.terminate()
    return rates, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs (2 s, 1 round) for a smoke check")
    parser.add_argument("--duration", type=float, default=None, help="seconds per wrk run (default 5; quick 2)")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 3; quick 1)")
    parser.add_argument("--parts", default="1,2,3,4,5", help="which parts to run (default all: 1,2,3,4,5)")
    args = parser.parse_args()
    parts = {p.strip() for p in args.parts.split(",")}
    if parts & {"3", "4", "5"}:
        from scripts.bench_fleet_scale import run_scale
        run_scale(parts, quick=args.quick)
    if not parts & {"1", "2"}:
        return 0
    duration = args.duration or (2.0 if args.quick else 5.0)
    rounds = args.rounds or (1 if args.quick else 3)
    runs = 1 if args.quick else 3
    ensure_wrk()
    root = Path(tempfile.mkdtemp(prefix="svc-bench-fleet-"))
    try:
        t500, req500 = status_run(root, 500, runs)
        t50, req50 = status_run(root, 50, runs)
        rates, size = fleet_rates(root, duration, rounds)
    finally:
        shutil.rmtree(str(root), ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    ratio = statistics.median(m / b for m, b in zip(rates["monitor"], rates["baseline"]))
    print("tracker latency %d ms per request; status: median of %d runs; wrk -t2 -c32, %d x %.0f s rounds, "
          "alternating; /api/fleet body %d bytes; all runs (req/s): %s"
          % (LATENCY_S * 1000, runs, rounds, duration, size, {k: [round(x) for x in v] for k, v in rates.items()}))
    rows = [("status --json, 500 hosts (tracker requests)", req500, "50 hosts: %d" % req50, "-", "<= 6"),
            ("status --json, 500 hosts (s)", "%.3f" % t500, "50 hosts: %.3f s" % t50, "%.2fx" % (t500 / t50), "< 1.5 s"),
            ("cached GET /api/fleet, 500 hosts (req/s)", "%.0f" % med["monitor"],
             "one-write stdlib %.0f" % med["baseline"], "%.2fx" % ratio, ">= 0.5x")]
    header = ("figure", "value", "baseline", "ratio", "target")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(5)]
    for row in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    figures = [
        {"figure": "svc-cluster status --json, 500 hosts, 50 ms tracker: requests", "value": req500,
         "unit": "requests", "baseline": req50, "baseline_label": "50 hosts", "ratio": round(req500 / req50, 3),
         "target": "<= 6", "ok": req500 <= 6},
        {"figure": "svc-cluster status --json, 500 hosts, 50 ms tracker: wall time", "value": round(t500, 3),
         "unit": "s", "baseline": round(t50, 3), "baseline_label": "50 hosts", "ratio": round(t500 / t50, 3),
         "target": "< 1.5 s", "ok": t500 < 1.5},
        {"figure": "cached GET /api/fleet, 500 hosts, vs one-write stdlib", "value": round(med["monitor"]),
         "unit": "req/s", "baseline": round(med["baseline"]), "baseline_label": "one-write stdlib ThreadingHTTPServer",
         "ratio": round(ratio, 3), "target": ">= 0.5x", "ok": ratio >= 0.5},
    ]
    print(json.dumps({"figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
