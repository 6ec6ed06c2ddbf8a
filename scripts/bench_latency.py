#!/usr/bin/env python3
"""Latency of cached GET /api/accounts at 32 keep-alive connections (wrk --latency).

Measured side by side, alternating, in the same run:
- the real monitor subprocess, its posture cached (TTL 300 s);
- the fastest plain stdlib server: a ThreadingHTTPServer speaking HTTP/1.1 whose
  do_GET writes status line, headers and a constant body of the same size in
  ONE write (the baseline of the monitor issue).

Reports p50 and p99 (target: monitor p99 < 20 ms) and the ratio to the baseline.
`wrk` comes from Debian; the script installs it with apt-get when missing and
root. The last stdout line is the bench_all JSON {"figures": [...]}.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

from tests.support.home import accounts_path, monitor_env, set_host_name, write_accounts
from tests.support.monitor import Monitor, http_get
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

BASELINE_SERVER = r'''
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
body = b"x" * int(sys.argv[1])
head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body))
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.wfile.write(head + body)
    def log_message(self, *a):
        pass
class S(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    def handle_error(self, request, client_address):
        pass  # wrk resets its connections at the end of a run
s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
'''


def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        if not shutil.which("wrk"):
            subprocess.run(["apt-get", "update", "-qq"], check=False, stdout=subprocess.DEVNULL)
            subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=False, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    found = shutil.which("wrk")
    if not found:
        raise SystemExit("bench_latency: wrk is not installed (apt-get install wrk)")
    return found


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    m = re.match(r"^([\d.]+)(us|ms|s)$", text.strip())
    if not m:
        raise ValueError(text)
    return float(m.group(1)) * _UNITS[m.group(2)]


def run_wrk(wrk: str, url: str, seconds: float, connections: int = 32, threads: int = 1) -> Dict[str, float]:
    proc = subprocess.run([wrk, "-t%d" % threads, "-c%d" % connections, "-d%ds" % max(1, int(seconds)),
                           "--latency", url], capture_output=True, text=True, timeout=seconds + 60)
    out = proc.stdout
    result: Dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("50%", "75%", "90%", "99%"):
            result["p" + parts[0][:-1]] = _ms(parts[1])
        elif line.startswith("Requests/sec:"):
            result["rps"] = float(line.split(":", 1)[1])
        elif "Non-2xx" in line:
            result["non2xx"] = float(line.split(":", 1)[1])
        elif line.strip().startswith("Socket errors"):
            result["socket_errors"] = float(sum(int(x) for x in re.findall(r"\d+", line)))
    if "p99" not in result or "rps" not in result:
        raise RuntimeError("wrk output not understood:\n" + out + proc.stderr)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds of 3 s instead of 3 rounds of 10 s")
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    rounds, seconds = (2, 3.0) if args.quick else (3, 10.0)
    wrk = ensure_wrk()

    work = Path(tempfile.mkdtemp(prefix="svc-latency-"))
    home = work / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "bench-node")
    baseline: Optional[subprocess.Popen] = None
    with ProviderServer() as provider:
        accounts = [("ACCT1", "tok-lat-1", "one@example.com"), ("ACCT2", "tok-lat-2", "two@example.com"),
                    ("ACCT3", "tok-lat-3", "three@example.com")]
        for _, token, _ in accounts:
            provider.set_account(token)
        write_accounts(accounts_path(home), accounts, active="ACCT1")
        env = monitor_env(home, provider.url, SVC_POSTURE_TTL_S="300", SVC_PROBE_INTERVAL_S="300",
                          SVC_REFRESH_FLOOR_S="30")
        monitor = Monitor(env).start(work / "monitor.log")
        try:
            assert monitor.url
            wait_until(lambda: json.loads(http_get(monitor.url or "", "/api/accounts")[2]).get("status") == "ok",
                       30, message="a probed posture")
            size = len(http_get(monitor.url, "/api/accounts")[2])
            baseline = subprocess.Popen([sys.executable, "-c", BASELINE_SERVER, str(size)], stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)
            assert baseline.stdout is not None
            base_url = "http://127.0.0.1:%s/api/accounts" % baseline.stdout.readline().strip()
            ours: List[Dict[str, float]] = []
            theirs: List[Dict[str, float]] = []
            run_wrk(wrk, monitor.url + "/api/accounts", 1, args.connections)  # warm up both
            run_wrk(wrk, base_url, 1, args.connections)
            for _ in range(rounds):
                ours.append(run_wrk(wrk, monitor.url + "/api/accounts", seconds, args.connections))
                theirs.append(run_wrk(wrk, base_url, seconds, args.connections))
            calls = provider.message_calls()
        finally:
            if baseline is not None:
                baseline.kill()
                baseline.wait()
            code = monitor.stop()

    def med(rows: List[Dict[str, float]], key: str) -> float:
        return statistics.median(r.get(key, 0.0) for r in rows)

    p99, p50, rps = med(ours, "p99"), med(ours, "p50"), med(ours, "rps")
    b99, b50, brps = med(theirs, "p99"), med(theirs, "p50"), med(theirs, "rps")
    non2xx = sum(r.get("non2xx", 0) for r in ours)
    print("body %d bytes, %d connections, %d rounds x %.0f s, alternating" % (size, args.connections, rounds, seconds))
    print("monitor : p50 %.2f ms  p99 %.2f ms  %.0f req/s  (non-2xx %d)" % (p50, p99, rps, non2xx))
    print("baseline: p50 %.2f ms  p99 %.2f ms  %.0f req/s" % (b50, b99, brps))
    print("provider calls during the run: %d; monitor exit %d" % (calls, code))
    figures = [
        {"figure": "cached read p99 latency, %d connections" % args.connections, "value": round(p99, 2),
         "unit": "ms", "baseline": round(b99, 2), "baseline_label": "stdlib one-write server",
         "ratio": round(p99 / b99, 2) if b99 else None, "target": "< 20 ms", "ok": p99 < 20.0 and non2xx == 0},
        {"figure": "cached read p50 latency, %d connections" % args.connections, "value": round(p50, 2),
         "unit": "ms", "baseline": round(b50, 2), "baseline_label": "stdlib one-write server",
         "ratio": round(p50 / b50, 2) if b50 else None, "target": None, "ok": None},
    ]
    print(json.dumps({"figures": figures}))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
