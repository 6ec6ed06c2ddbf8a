#!/usr/bin/env python3
"""Benchmark of the trajectory side (docs/trajectory.md), each figure against a baseline of the same run.

1. A probe's history append (4 rows, one locked write, as the monitor does it), median
   over many probes, against one bare os.write of the same bytes      (target < 1 ms).
2. /api/history server time (the monitor's history index, then the JSON) over 8 days of
   4 accounts at a 30 s probe interval (~92k rows):
   - hours=192 with the index warm                                      (target < 50 ms);
   - hours=192 cold against hours=24 cold plus the parse of the 7 extra day files
                                                                        (target <= 1.5x).
3. Cached GET /api/trajectory req/s with wrk against a real monitor, alternating with the
   one-write stdlib baseline of bench_server                            (target >= 0.8x),
   and cached GET /api/accounts in the same rounds for comparison.
4. The forecast of one window over 120 points                           (target < 50 µs).

Usage: python3 -m scripts.bench_trajectory [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

from scripts.bench_server import BASELINE_A, ensure_tools, start_baseline, wrk
from svcposture.trajectory.forecast import forecast
from svcposture.trajectory.history import append_rows, rows_from_summary
from svcposture.trajectory.historyindex import HistoryIndex
from svcposture.demo import main as demo
from svcposture.monitor.response import dumps
from svcposture.paths import Paths
from tests.support.history import fleet_rows
from tests.support.home import REPO
from tests.support.monitor import start_monitor


def bench_append(root: Path, probes: int) -> Dict[str, float]:
    paths = Paths(root, environ={"HOME": str(root)})
    now = int(time.time() * 1000)
    summary = {"available": True, "probedAt": now, "accounts": [
        {"label": "acct%d" % i, "fiveHour": {"pct": 41.5, "resetsAt": "2026-01-01T00:00:00.000Z"},
         "sevenDay": {"pct": 12.0, "resetsAt": "2026-01-05T00:00:00.000Z"}} for i in range(4)]}
    ours: List[float] = []
    bare: List[float] = []
    line = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows_from_summary(summary))
    fd = os.open(str(root / "bare.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for i in range(probes):
            summary["probedAt"] = now + i * 30_000
            start = time.perf_counter()
            append_rows(paths, rows_from_summary(summary), fsync=False)
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            os.write(fd, line)
            bare.append(time.perf_counter() - start)
    finally:
        os.close(fd)
    return {"ours_us": statistics.median(ours) * 1e6, "bare_us": statistics.median(bare) * 1e6}


def bench_history(root: Path, repeats: int) -> Dict[str, float]:
    paths = Paths(root, environ={"HOME": str(root)})
    now = int(time.time() * 1000)
    rows: List[Dict[str, Any]] = []
    for probe in fleet_rows(now, days=8):
        rows.extend(probe)
    append_rows(paths, rows, fsync=False)

    def timed(index: HistoryIndex, hours: int) -> float:
        start = time.perf_counter()
        dumps(index.body(node="bench", hours=hours, now_ms=now))
        return time.perf_counter() - start

    cold192 = statistics.median(timed(HistoryIndex(paths), 192) for _ in range(repeats))
    cold24 = statistics.median(timed(HistoryIndex(paths), 24) for _ in range(repeats))
    # The parse of the day files hours=192 reads and hours=24 does not.
    files = sorted(paths.history_dir.glob("*.jsonl"))
    extra = files[:-2]
    parse_extra: List[float] = []
    for _ in range(repeats):
        index = HistoryIndex(paths)
        start = time.perf_counter()
        for path in extra:
            index._refresh(path.name[:10], path)
        parse_extra.append(time.perf_counter() - start)
    warm_index = HistoryIndex(paths)
    timed(warm_index, 192)
    warm192 = statistics.median(timed(warm_index, 192) for _ in range(repeats * 3))
    warm24 = statistics.median(timed(warm_index, 24) for _ in range(repeats * 3))
    return {"rows": len(rows), "files": len(files), "cold192_ms": cold192 * 1e3, "cold24_ms": cold24 * 1e3,
            "parse_extra_ms": statistics.median(parse_extra) * 1e3, "warm192_ms": warm192 * 1e3,
            "warm24_ms": warm24 * 1e3}


def bench_forecast(repeats: int) -> Dict[str, float]:
    now = 1_800_000_000_000
    points = [(now - (119 - i) * 30_000, 40.0 + i * 0.1) for i in range(120)]
    loops = 2000
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            forecast(points, now_ms=now, resets_at_ms=now + 3_600_000, window="five_hour")
        samples.append((time.perf_counter() - start) / loops)
    # Baseline: one pass of sum() over the same points (the least any fit must do).
    base = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            sum(p for _, p in points)
        base.append((time.perf_counter() - start) / loops)
    return {"us": statistics.median(samples) * 1e6, "sum_us": statistics.median(base) * 1e6}


def bench_http(duration: float, rounds: int) -> Dict[str, Any]:
    provider = demo.SimulatedProvider().start()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("SVC_", "MODEL_"))}
    base_env["PYTHONPATH"] = str(REPO)
    node = demo.DemoNode(provider.url, base_environ=base_env, started=provider.started)
    environ = dict(node.environ, SVC_POSTURE_TTL_S="3600", SVC_PROBE_INTERVAL_S="3600", SVC_QUOTA_SAMPLER="0")
    mon = start_monitor(environ, timeout=30)
    proc = None
    try:
        deadline = time.monotonic() + 60
        body = b""
        while time.monotonic() < deadline:
            body = mon.get("/api/trajectory", timeout=60)[2]
            if json.loads(body).get("probedAt"):
                break
            time.sleep(0.2)
        proc, port, _ = start_baseline(BASELINE_A, len(body))
        targets = {"monitor": mon.url + "/api/trajectory", "a": "http://127.0.0.1:%d/" % port,
                   "accounts": mon.url + "/api/accounts"}
        for url in targets.values():
            wrk(url, 1)
        rates: Dict[str, List[float]] = {k: [] for k in targets}
        for _ in range(rounds):
            for name, url in targets.items():
                rates[name].append(wrk(url, duration))
        start = time.perf_counter()
        status = mon.get("/api/history?hours=192", timeout=60)[0]
        history_ms = (time.perf_counter() - start) * 1e3
        if status != 200:
            raise RuntimeError("/api/history answered %d" % status)
    finally:
        mon.stop(timeout=20, check=False)
        if proc is not None:
            proc.terminate()
        provider.stop()
        node.remove()
    ratio = statistics.median(m / a for m, a in zip(rates["monitor"], rates["a"]))
    accounts_ratio = statistics.median(m / a for m, a in zip(rates["accounts"], rates["a"]))
    return {"rates": rates, "ratio": ratio, "accounts_ratio": accounts_ratio, "size": len(body),
            "history_http_ms": history_ms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs for a smoke check")
    args = parser.parse_args()
    ensure_tools()
    with tempfile.TemporaryDirectory(prefix="svc-bench-traj-") as tmp:
        root = Path(tmp)
        (root / "a").mkdir()
        (root / "h").mkdir()
        append = bench_append(root / "a", 300 if args.quick else 2000)
        hist = bench_history(root / "h", 2 if args.quick else 5)
    fc = bench_forecast(3 if args.quick else 7)
    http = bench_http(2.0 if args.quick else 5.0, 1 if args.quick else 3)
    budget = hist["cold24_ms"] + hist["parse_extra_ms"]
    cold_ratio = hist["cold192_ms"] / budget
    med = {k: statistics.median(v) for k, v in http["rates"].items()}
    print("history: %d rows in %d day files; all times are server-side (index + JSON), medians" % (hist["rows"], hist["files"]))
    for key, value in sorted(hist.items()):
        print("  %-16s %s" % (key, round(value, 2)))
    print("append: ours %.1f µs, bare os.write %.1f µs (medians)" % (append["ours_us"], append["bare_us"]))
    print("forecast of 120 points: %.1f µs (a sum() over them: %.2f µs)" % (fc["us"], fc["sum_us"]))
    print("GET /api/trajectory (body %d bytes) req/s per round: %s; /api/history?hours=192 over HTTP %.1f ms"
          % (http["size"], {k: [round(x) for x in v] for k, v in http["rates"].items()}, http["history_http_ms"]))
    figures = [
        {"figure": "history append of one probe (4 rows), median", "value": round(append["ours_us"], 1), "unit": "µs",
         "baseline": round(append["bare_us"], 1), "baseline_label": "one bare os.write of the same bytes",
         "ratio": round(append["ours_us"] / append["bare_us"], 2), "target": "< 1000 µs",
         "ok": append["ours_us"] < 1000},
        {"figure": "/api/history?hours=192 over ~92k rows, index warm", "value": round(hist["warm192_ms"], 2),
         "unit": "ms", "baseline": round(hist["warm24_ms"], 2), "baseline_label": "hours=24, index warm",
         "ratio": round(hist["warm192_ms"] / hist["warm24_ms"], 2), "target": "< 50 ms",
         "ok": hist["warm192_ms"] < 50},
        {"figure": "/api/history?hours=192 cold (parses 9 day files)", "value": round(hist["cold192_ms"], 1),
         "unit": "ms", "baseline": round(budget, 1),
         "baseline_label": "hours=24 cold %.1f ms + parse of the 7 extra files %.1f ms" % (hist["cold24_ms"], hist["parse_extra_ms"]),
         "ratio": round(cold_ratio, 2), "target": "<= 1.5x", "ok": cold_ratio <= 1.5},
        {"figure": "cached GET /api/trajectory vs one-write stdlib", "value": round(med["monitor"]), "unit": "req/s",
         "baseline": round(med["a"]), "baseline_label": "one-write stdlib ThreadingHTTPServer",
         "ratio": round(http["ratio"], 3), "target": ">= 0.8x", "ok": http["ratio"] >= 0.8},
        {"figure": "cached GET /api/accounts vs one-write stdlib (same rounds)", "value": round(med["accounts"]),
         "unit": "req/s", "baseline": round(med["a"]), "baseline_label": "one-write stdlib ThreadingHTTPServer",
         "ratio": round(http["accounts_ratio"], 3), "target": None, "ok": None},
        {"figure": "forecast of one window over 120 points", "value": round(fc["us"], 1), "unit": "µs",
         "baseline": round(fc["sum_us"], 2), "baseline_label": "sum() over the 120 pcts",
         "ratio": round(fc["us"] / fc["sum_us"], 1), "target": "< 50 µs", "ok": fc["us"] < 50},
    ]
    print(json.dumps({"figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
