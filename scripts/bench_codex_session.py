#!/usr/bin/env python3
"""The zero-call path's cost does not grow with the session log: newest sample from 100 MB vs 1 MB.

Two real rollout logs in a temporary CODEX_HOME, each ending with the CLI's
`token_count` line after ordinary lines: one of 1 MB (the baseline) and one of
100 MB, written densely (not sparse: every byte is on disk, so a reader that
scanned the file would pay for it). `newest_session_sample` is timed on each,
best of N runs after a warm-up. Target: the 100 MB read within 2x the 1 MB one.

The last stdout line is the bench_all JSON {"figures": [...]}.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from svcposture.codex.session import newest_session_sample
from tests.support.codex import other_line, session_path, token_count_line


def write_log(home: Path, size: int, at: float) -> Path:
    path = session_path(home, at)
    path.parent.mkdir(parents=True, exist_ok=True)
    filler = (other_line(at - 1) + "\n").encode()
    last = (token_count_line(at, (37.0, 300, 900), (61.0, 10080, 9000), spelling="resets_in_seconds") + "\n").encode()
    block = filler * (1024 * 1024 // len(filler))
    with open(str(path), "wb") as fh:
        written = 0
        while written + len(block) + len(last) <= size:
            fh.write(block)
            written += len(block)
        while written + len(filler) + len(last) <= size:
            fh.write(filler)
            written += len(filler)
        fh.write(last)
    return path


def best_of(runs: int, fn: Callable[[], object]) -> float:
    fn()
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args()
    runs = 5 if args.quick else 20
    work = Path(tempfile.mkdtemp(prefix="bench-codex-"))
    try:
        at = time.time() - 60
        small, big = work / "small", work / "big"
        write_log(small, 1024 * 1024, at)
        write_log(big, 100 * 1024 * 1024, at)
        now_ms = int(time.time() * 1000)
        for home in (small, big):
            sample = newest_session_sample(str(home), None, now_ms)
            assert sample is not None and sample["fiveHour"]["pct"] == 37.0, "no sample read from %s" % home
        small_s = best_of(runs, lambda: newest_session_sample(str(small), None, now_ms))
        big_s = best_of(runs, lambda: newest_session_sample(str(big), None, now_ms))
    finally:
        shutil.rmtree(str(work), ignore_errors=True)
    ratio = big_s / small_s
    print("newest session sample: 1 MB log %.2f ms, 100 MB log %.2f ms, ratio %.2fx (target <= 2x), best of %d"
          % (small_s * 1000, big_s * 1000, ratio, runs))
    figures = [{"figure": "newest session sample from a 100 MB log", "value": round(big_s * 1000, 3), "unit": "ms",
                "baseline": round(small_s * 1000, 3), "baseline_label": "1 MB log", "baseline_unit": "ms",
                "ratio": round(ratio, 2), "target": "<= 2x", "ok": ratio <= 2.0}]
    print(json.dumps({"figures": figures}))
    return 0 if ratio <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
