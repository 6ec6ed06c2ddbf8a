#!/usr/bin/env python3
"""Provider calls spent by the monitor under read load.

Against a real monitor subprocess and the provider test server (3 accounts):
- 10,000 plain GET /api/accounts over 32 keep-alive connections inside the TTL:
  how many header probes (sweeps) did they cost? A monitor without a cache
  would spend one per read (the baseline).
- 100 concurrent guarded forced refreshes (`?refresh=true` + X-Svc-Refresh),
  fired after the refresh floor has passed: how many sweeps? Without
  single-flight each would spend one.

The last stdout line is the bench_all JSON {"figures": [...]}.
"""
from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import List

from tests.support.home import accounts_path, monitor_env, set_host_name, write_accounts
from tests.support.monitor import Monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

ACCOUNTS = [("ACCT1", "tok-calls-1", "one@example.com"), ("ACCT2", "tok-calls-2", "two@example.com"),
            ("ACCT3", "tok-calls-3", "three@example.com")]


def plain_reads(host: str, port: int, total: int, connections: int) -> List[int]:
    statuses: List[int] = []
    lock = threading.Lock()
    per = [total // connections + (1 if i < total % connections else 0) for i in range(connections)]

    def worker(count: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        got = []
        for _ in range(count):
            conn.request("GET", "/api/accounts")
            resp = conn.getresponse()
            resp.read()
            got.append(resp.status)
        conn.close()
        with lock:
            statuses.extend(got)

    threads = [threading.Thread(target=worker, args=(n,)) for n in per]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def forced_refreshes(host: str, port: int, count: int) -> List[int]:
    statuses: List[int] = []
    lock = threading.Lock()
    gate = threading.Barrier(count)

    def worker() -> None:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        conn.connect()
        gate.wait()
        conn.request("GET", "/api/accounts?refresh=true",
                     headers={"X-Svc-Refresh": "1", "Host": "127.0.0.1:%d" % port})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        with lock:
            statuses.append(resp.status)

    threads = [threading.Thread(target=worker) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 reads and 50 refreshes")
    parser.add_argument("--reads", type=int, default=None)
    parser.add_argument("--refreshes", type=int, default=None)
    args = parser.parse_args()
    reads = args.reads or (2000 if args.quick else 10000)
    refreshes = args.refreshes or (50 if args.quick else 100)
    floor_s = 1.0

    work = Path(tempfile.mkdtemp(prefix="svc-calls-"))
    home = work / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "calls-node")
    with ProviderServer() as provider:
        for _, token, _ in ACCOUNTS:
            provider.set_account(token)
        write_accounts(accounts_path(home), ACCOUNTS, active="ACCT1")
        env = monitor_env(home, provider.url, SVC_POSTURE_TTL_S="300", SVC_PROBE_INTERVAL_S="300",
                          SVC_REFRESH_FLOOR_S=str(floor_s))
        monitor = Monitor(env).start(work / "monitor.log")
        assert monitor.url
        host, port = monitor.url.split("//", 1)[1].rsplit(":", 1)
        try:
            wait_until(lambda: provider.message_calls() >= len(ACCOUNTS), 30, message="first sweep")
            time.sleep(0.3)
            provider.reset_counts()
            started = time.monotonic()
            statuses = plain_reads(host, int(port), reads, 32)
            read_s = time.monotonic() - started
            read_sweeps = provider.message_calls() / len(ACCOUNTS)
            bad_reads = sum(1 for s in statuses if s != 200)

            time.sleep(floor_s + 0.2)  # past the floor, so a refresh may start a probe
            provider.reset_counts()
            ref = forced_refreshes(host, int(port), refreshes)
            refresh_sweeps = provider.message_calls() / len(ACCOUNTS)
            bad_refreshes = sum(1 for s in ref if s != 200)
        finally:
            code = monitor.stop()
    print("plain reads: %d in %.2f s (%.0f/s), %d non-200, provider sweeps spent: %g (baseline without cache: %d)"
          % (reads, read_s, reads / read_s, bad_reads, read_sweeps, reads))
    print("forced refreshes: %d concurrent, %d non-200, provider sweeps spent: %g (baseline without single-flight: %d)"
          % (refreshes, bad_refreshes, refresh_sweeps, refreshes))
    print("monitor exit: %d" % code)
    figures = [
        {"figure": "provider sweeps for %d plain reads" % reads, "value": read_sweeps, "unit": "",
         "baseline": reads, "baseline_label": "one per read", "ratio": round(read_sweeps / reads, 5),
         "target": "0 (cached)", "ok": read_sweeps == 0 and bad_reads == 0},
        {"figure": "provider sweeps for %d concurrent forced refreshes" % refreshes, "value": refresh_sweeps,
         "unit": "", "baseline": refreshes, "baseline_label": "one per refresh",
         "ratio": round(refresh_sweeps / refreshes, 3), "target": "1 (single flight)",
         "ok": refresh_sweeps == 1 and bad_refreshes == 0},
    ]
    print(json.dumps({"figures": figures}))
    return 0 if code == 0 and not bad_reads and not bad_refreshes else 1


if __name__ == "__main__":
    sys.exit(main())
