#!/usr/bin/env python3
"""The monitor under 1,100 trickling clients, started under `ulimit -n 1024`.

Measured in the same run, on the same monitor:
- baseline: the monitor with no client but the /healthz poller;
- loaded: 1,100 clients each sending one byte a second (60 of them 16 KB
  header chunks), reconnecting whenever the monitor closes them.

Figures: /healthz p99 latency (loaded / baseline), the monitor's CPU share of
one core, its RSS and its open descriptors (against the 1,024 limit). The
last stdout line is the bench_all JSON {"figures": [...]}.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from tests.support.home import clean_env
from tests.support.monitor import http_get
from tests.support.tricklers import Tricklers, proc_figures, raise_own_limit, start_under_limit

NOFILE = 1024
TRICKLERS = 1100
REQUEST_TIMEOUT_S = 3.0


def phase(mon, seconds: float, clients=None) -> Tuple[List[float], List[Dict[str, float]], float]:
    """(healthz latencies, /proc samples, CPU share of one core) over `seconds`."""
    latencies: List[float] = []
    samples: List[Dict[str, float]] = []
    start = proc_figures(mon.pid)
    began = next_tick = time.monotonic()
    while time.monotonic() - began < seconds:
        if clients is not None and time.monotonic() >= next_tick:
            clients.tick()
            next_tick += 1.0
        t0 = time.monotonic()
        status, _, _ = http_get(mon.url, "/healthz", timeout=10)
        latencies.append(time.monotonic() - t0 if status == 200 else float("inf"))
        samples.append(proc_figures(mon.pid))
        time.sleep(0.2)
    cpu = (samples[-1]["cpu_s"] - start["cpu_s"]) / (time.monotonic() - began)
    return latencies, samples, cpu


def p99(values: List[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 s per phase instead of 20 s")
    args = parser.parse_args()
    seconds = 8.0 if args.quick else 20.0
    raise_own_limit(TRICKLERS + 512)
    work = Path(tempfile.mkdtemp(prefix="svc-tricklers-"))
    home = work / "home"
    home.mkdir(mode=0o700)
    env = dict(clean_env(home), SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0",
               SVC_MONITOR_REQUEST_TIMEOUT_S=str(REQUEST_TIMEOUT_S))
    mon = start_under_limit(env, ["--no-probe"], NOFILE)
    clients = Tricklers(mon.port, TRICKLERS, 60)
    try:
        base_lat, base_samples, base_cpu = phase(mon, seconds)
        clients.fill()
        lat, samples, cpu = phase(mon, seconds, clients)
    finally:
        clients.close()
        code = mon.stop()
        shutil.rmtree(str(work), ignore_errors=True)
    rss, base_rss = max(s["rss_mb"] for s in samples), max(s["rss_mb"] for s in base_samples)
    fds, base_fds = max(s["fds"] for s in samples), max(s["fds"] for s in base_samples)
    print("baseline: /healthz p99 %.3f s, CPU %.1f%%, RSS %.1f MB, %d descriptors"
          % (p99(base_lat), 100 * base_cpu, base_rss, base_fds))
    print("1,100 tricklers: /healthz p99 %.3f s (max %.3f), CPU %.1f%%, RSS %.1f MB, %d descriptors of %d; "
          "%d connects, %d closed by the monitor, longest life %.1f s at a %.1f s request timeout"
          % (p99(lat), max(lat), 100 * cpu, rss, fds, NOFILE, clients.connects, clients.closed_by_monitor,
             clients.longest_life, REQUEST_TIMEOUT_S))
    figures = [
        {"figure": "/healthz p99 under 1,100 tricklers", "value": round(p99(lat), 3), "unit": "s",
         "baseline": round(p99(base_lat), 3), "baseline_label": "no tricklers",
         "ratio": round(p99(lat) / p99(base_lat), 2) if p99(base_lat) else None, "target": "< 1 s",
         "ok": p99(lat) < 1.0},
        {"figure": "monitor CPU under 1,100 tricklers", "value": round(100 * cpu, 1), "unit": "% of a core",
         "baseline": round(100 * base_cpu, 1), "baseline_label": "no tricklers", "ratio": None,
         "target": "< 50 %", "ok": cpu < 0.5},
        {"figure": "monitor RSS under 1,100 tricklers", "value": round(rss, 1), "unit": "MB",
         "baseline": round(base_rss, 1), "baseline_label": "no tricklers",
         "ratio": round(rss / base_rss, 2) if base_rss else None, "target": "< 100 MB", "ok": rss < 100.0},
        {"figure": "monitor descriptors under 1,100 tricklers", "value": int(fds), "unit": "fds",
         "baseline": NOFILE, "baseline_label": "ulimit -n", "ratio": round(fds / NOFILE, 2),
         "target": "< 1024", "ok": fds < NOFILE},
    ]
    print(json.dumps({"figures": figures}))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
