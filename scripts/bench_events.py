#!/usr/bin/env python3
"""Event-log benchmark: newest-first lookup cost vs log size, and locked append rate.

1. Time to find the newest `account.ratelimit.sampled` in a 1 MB and in a 100 MB
   month file (same tail in both: the newest sample sits behind 50 status events).
   The lookup seeks from the end, so the ratio 100MB/1MB must stay under 2x.
2. Appends per second through EventLog.append (flock, O_APPEND, torn-line check,
   one write, fsync), against a baseline measured in the same run: plain unlocked
   O_APPEND write + fsync of the same lines. Also the no-fsync pair, which isolates
   the cost of the lock and the seal check.

Logs are generated in a temporary directory that is removed afterwards.
`--quick` uses 1 MB vs 10 MB and fewer appends. The last stdout line is the JSON
figures object that scripts/bench_all.py reads.
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
from typing import Callable, Dict, List

from svcposture._files import append_line
from svcposture._time import parse_iso_ms
from svcposture.events import RATELIMIT_SAMPLED, EventLog, ratelimit_sampled, status_changed

MONTH_MS = parse_iso_ms("2026-03-01T00:00:00Z")
TAIL_STATUS_EVENTS = 50


def sample_line(i: int) -> bytes:
    ev = ratelimit_sampled("bench-node", "acct%d@example.com" % (i % 3), {
        "ratelimit.five_hour_pct": (i * 7) % 100, "ratelimit.seven_day_pct": (i * 3) % 100,
        "ratelimit.five_hour_resets_at": "2026-03-01T15:00:00.000Z",
        "ratelimit.seven_day_resets_at": "2026-03-05T00:00:00.000Z",
        "ratelimit.seven_day_large_pct": 12.5, "ratelimit.seven_day_medium_pct": 3.0,
        "subscription.type": "max", "rate_limit.tier": "default_large_max_20x",
    }, ts_ms=MONTH_MS + i * 1000)
    return json.dumps(ev, separators=(",", ":")).encode() + b"\n"


def build_log(directory: Path, size_bytes: int) -> Path:
    """A month file of ~size_bytes of samples, ending with the newest sample
    followed by TAIL_STATUS_EVENTS status events."""
    log = EventLog(directory)
    path = log.path_for(MONTH_MS)
    directory.mkdir(parents=True, exist_ok=True)
    # A block of distinct lines, repeated: generating 150k envelopes one by one
    # would dominate the run without changing what is measured.
    block = b"".join(sample_line(i) for i in range(2000))
    with open(str(path), "wb") as fh:
        written = 0
        while written + len(block) <= size_bytes:
            fh.write(block)
            written += len(block)
        rest = size_bytes - written
        if rest > 0:
            cut = block.rfind(b"\n", 0, rest) + 1
            fh.write(block[:cut])
        fh.write(sample_line(999999))
        for i in range(TAIL_STATUS_EVENTS):
            ev = status_changed("bench-node", "acct%d" % (i % 3), None, "rejected" if i % 2 == 0 else "ok",
                                "five_hour", ts_ms=MONTH_MS + 10 ** 9 + i)
            fh.write(json.dumps(ev, separators=(",", ":")).encode() + b"\n")
    return path


def time_newest(directory: Path, repeats: int) -> float:
    log = EventLog(directory)
    found = log.newest(RATELIMIT_SAMPLED)
    assert found is not None and found["ts"] == sample_ts(999999), "wrong event found"
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        log.newest(RATELIMIT_SAMPLED)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def sample_ts(i: int) -> str:
    return json.loads(sample_line(i))["ts"]


def rate(count: int, fn: Callable[[int], None]) -> float:
    start = time.perf_counter()
    for i in range(count):
        fn(i)
    return count / (time.perf_counter() - start)


def plain_append(path: Path, line: bytes, fsync: bool) -> None:
    fd = os.open(str(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 MB vs 10 MB and fewer appends (for CI)")
    parser.add_argument("--big-mb", type=int, default=None, help="size of the big log in MB (default 100, quick 10)")
    args = parser.parse_args(argv)
    big_mb = args.big_mb or (10 if args.quick else 100)
    repeats = 100 if args.quick else 300
    appends = 300 if args.quick else 2000

    figures: List[Dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp:
        root = Path(tmp)
        small_dir, big_dir = root / "small", root / "big"
        t0 = time.perf_counter()
        build_log(small_dir, 1 * 1024 * 1024)
        big_path = build_log(big_dir, big_mb * 1024 * 1024)
        print("generated logs: 1 MB and %.1f MB in %.1f s" % (big_path.stat().st_size / 2 ** 20,
                                                            time.perf_counter() - t0))
        small_s = time_newest(small_dir, repeats)
        big_s = time_newest(big_dir, repeats)
        ratio = big_s / small_s
        print("newest %s, 1 MB log:   %8.1f us (median of %d)" % (RATELIMIT_SAMPLED, small_s * 1e6, repeats))
        print("newest %s, %d MB log: %8.1f us (median of %d)" % (RATELIMIT_SAMPLED, big_mb, big_s * 1e6, repeats))
        print("ratio %d MB / 1 MB: %.2fx (target < 2x)" % (big_mb, ratio))
        figures.append({"figure": "newest sample in %d MB log" % big_mb, "value": round(big_s * 1e6, 1),
                        "unit": "us", "baseline": round(small_s * 1e6, 1), "baseline_label": "1 MB log",
                        "ratio": round(ratio, 3), "target": "< 2x", "ok": ratio < 2.0})

        # Interleaved rounds, median per variant: fsync latency on a shared disk
        # drifts, and alternating keeps both sides of each ratio under the same drift.
        lines = [sample_line(i) for i in range(appends)]
        events = [json.loads(x) for x in lines]
        log = EventLog(root / "append-eventlog")
        variants = {
            "eventlog": lambda i: log.append(events[i]),
            "locked": lambda i: append_line(root / "append-locked" / "x.jsonl", lines[i]),
            "plain": lambda i: plain_append(root / "append-plain" / "x.jsonl", lines[i], True),
            "locked_nf": lambda i: append_line(root / "append-locked-nf" / "x.jsonl", lines[i], fsync=False),
            "plain_nf": lambda i: plain_append(root / "append-plain-nf" / "x.jsonl", lines[i], False),
        }
        for name in ("append-plain", "append-plain-nf"):
            (root / name).mkdir()
        rounds = 3 if args.quick else 5
        per_round = max(1, appends // rounds)
        results: Dict[str, List[float]] = {k: [] for k in variants}
        for r in range(rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(list(variants)))
            for name in order:
                n = per_round * (5 if name.endswith("_nf") else 1)
                fn = variants[name]
                results[name].append(rate(n, lambda i, fn=fn: fn(i % per_round + r * per_round)))
        med = {k: statistics.median(v) for k, v in results.items()}
        print("appends/s, EventLog.append (serialize + flock + seal check + fsync): %8.0f" % med["eventlog"])
        print("appends/s, append_line (flock + seal check + fsync):                 %8.0f" % med["locked"])
        print("appends/s, plain O_APPEND write + fsync (baseline):                  %8.0f" % med["plain"])
        print("ratio append_line / plain: %.2fx; EventLog.append / plain: %.2fx"
              % (med["locked"] / med["plain"], med["eventlog"] / med["plain"]))
        print("appends/s, append_line without fsync (lock + seal only):             %8.0f" % med["locked_nf"])
        print("appends/s, plain O_APPEND write without fsync:                       %8.0f" % med["plain_nf"])
        print("ratio locked / plain (no fsync): %.2fx" % (med["locked_nf"] / med["plain_nf"]))
        figures.append({"figure": "EventLog.append (lock + fsync)", "value": round(med["eventlog"]),
                        "unit": "appends/s", "baseline": round(med["plain"]),
                        "baseline_label": "plain O_APPEND + fsync",
                        "ratio": round(med["eventlog"] / med["plain"], 3), "target": None, "ok": None})
        figures.append({"figure": "append_line (lock + fsync)", "value": round(med["locked"]),
                        "unit": "appends/s", "baseline": round(med["plain"]),
                        "baseline_label": "plain O_APPEND + fsync",
                        "ratio": round(med["locked"] / med["plain"], 3), "target": None, "ok": None})
        figures.append({"figure": "append_line (lock, no fsync)", "value": round(med["locked_nf"]),
                        "unit": "appends/s", "baseline": round(med["plain_nf"]),
                        "baseline_label": "plain O_APPEND, no fsync",
                        "ratio": round(med["locked_nf"] / med["plain_nf"], 3), "target": None, "ok": None})

    print(json.dumps({"figures": figures}))
    return 0 if figures[0]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
