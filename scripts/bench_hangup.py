#!/usr/bin/env python3
"""How soon a hung-up stream frees its subscriber slot.

A monitor subprocess with a cap of one stream and keepalives SVC_SSE_KEEPALIVE_S
apart (15 s, the default: before the hang-up watch, the slot stayed taken until
the next keepalive write). Each round opens the one stream, reads its first
frame, closes it, and then opens new streams, each answered 503 at once, until
one is accepted: the time from the close to that 200 is the release latency.

Baseline, measured side by side in the same run: a new connection's
GET /healthz round trip (the cost of asking the monitor anything, which each
attempt above pays too). Target: the slowest release under 1 s.

    python3 -m scripts.bench_hangup [--quick]

The last stdout line is the bench_all JSON {"figures": [...]}.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import List

from tests.support.home import node_env
from tests.support.monitor import SSEClient, raw_http, get_request, start_monitor

KEEPALIVE_S = 15.0
TARGET_S = 1.0


def first_accepted(port: int, since: float) -> SSEClient:
    """Open streams until one is accepted (the others get 503 at once)."""
    while True:
        attempt = SSEClient(port)
        if attempt.status == 200:
            return attempt
        attempt.close()
        if time.perf_counter() - since > 2 * KEEPALIVE_S:
            raise RuntimeError("the slot was not freed within two keepalive intervals")


def release_latency(port: int) -> float:
    """Hang up the one stream; the time until the next is accepted."""
    stream = first_accepted(port, time.perf_counter())  # the previous round's stream may still be leaving
    stream.next_account()
    t0 = time.perf_counter()
    stream.close()
    first_accepted(port, t0).close()
    return time.perf_counter() - t0


def healthz_round_trip(port: int) -> float:
    t0 = time.perf_counter()
    status, _, _ = raw_http(port, get_request("/healthz", "127.0.0.1:%d" % port))
    assert status == 200
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (CI)")
    args = parser.parse_args()
    rounds = 8 if args.quick else 30
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = node_env(home, None, extra={"SVC_MONITOR_MAX_STREAMS": "1", "SVC_SSE_KEEPALIVE_S": str(KEEPALIVE_S),
                                          "SVC_ACCOUNTS_PROBE": "0", "SVC_QUOTA_SAMPLER": "0"})
        monitor = start_monitor(env, ["--no-probe"])
        try:
            released: List[float] = []
            base: List[float] = []
            for _ in range(rounds):
                released.append(release_latency(monitor.port))
                base.append(healthz_round_trip(monitor.port))
        finally:
            monitor.stop()
    p50 = statistics.median(released) * 1000
    worst = max(released) * 1000
    base_ms = statistics.median(base) * 1000
    ok = worst < TARGET_S * 1000
    print("stream slot release after a hang-up, keepalive %g s, %d rounds" % (KEEPALIVE_S, rounds))
    print("  median %.1f ms, slowest %.1f ms (target < %g ms): %s" % (p50, worst, TARGET_S * 1000,
                                                                     "PASS" if ok else "MISS"))
    print("  new-connection /healthz round trip (baseline): %.1f ms" % base_ms)
    figures = [
        {"figure": "stream slot freed after hang-up (median)", "value": round(p50, 1), "unit": "ms",
         "baseline": round(base_ms, 1), "baseline_label": "new-connection /healthz round trip",
         "ratio": round(p50 / base_ms, 2) if base_ms else None, "target": None, "ok": None},
        {"figure": "stream slot freed after hang-up (slowest)", "value": round(worst, 1), "unit": "ms",
         "baseline": KEEPALIVE_S * 1000, "baseline_label": "keepalive interval (the old bound)",
         "ratio": round(worst / (KEEPALIVE_S * 1000), 4), "target": "< %g ms" % (TARGET_S * 1000), "ok": ok},
    ]
    print(json.dumps({"figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
