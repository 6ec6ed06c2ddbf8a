#!/usr/bin/env python3
"""What `svc-monitor mcp` costs an agent (docs/mcp.md).

Against a real monitor subprocess (its cache warm) and the provider test server:
- a `tools/call guard` round trip over stdio on one session (write the request,
  read the reply line), median of 200, beside a direct `GET /api/accounts` to
  the monitor on a fresh connection (what the guard itself does), the two
  alternating one for one so both see the same load (target <= 3x);
- the server's start-up to its `initialize` reply (spawn, imports, handshake),
  beside `python -c pass` on the same interpreter, alternating, median of 30
  (target <= 3x).

The server is driven through its pipes by this script, not by an SDK, so the
figures are the server's own. Children get a private bytecode cache, warmed
first, as an installed package has. The last stdout line is the bench_all JSON
{"figures": [...]}; `python3 -m scripts.bench_all` runs this with the others.
"""
from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from tests.support.home import REPO, accounts_path, monitor_env, set_host_name, write_accounts
from tests.support.monitor import Monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

ACCOUNTS = [("ACCT1", "tok-mcp-1", "one@example.com"), ("ACCT2", "tok-mcp-2", "two@example.com")]
ROUND_TRIP_TARGET = 3.0
START_TARGET = 3.0
INITIALIZE = (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
              b'"capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}\n')


def server_command(url: str) -> List[str]:
    return [sys.executable, "-m", "svcposture", "monitor", "mcp", "--url", url]


def start_server(url: str, env: Dict[str, str]) -> Tuple["subprocess.Popen[bytes]", float]:
    """A server with its initialize answered; (process, ms from spawn to that reply)."""
    started = time.perf_counter()
    proc = subprocess.Popen(server_command(url), env=env, cwd=str(REPO), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    reply = json.loads(proc.stdout.readline())
    ms = (time.perf_counter() - started) * 1000
    if reply.get("result", {}).get("protocolVersion") != "2025-06-18":
        raise RuntimeError("initialize failed: %r" % reply)
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.flush()
    return proc, ms


def stop_server(proc: "subprocess.Popen[bytes]") -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    if proc.wait(30) != 0:
        raise RuntimeError("the server exited %s" % proc.returncode)


def guard_call(proc: "subprocess.Popen[bytes]", msg_id: int) -> Tuple[float, str]:
    assert proc.stdin is not None and proc.stdout is not None
    request = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                          "params": {"name": "guard", "arguments": {}}}).encode() + b"\n"
    started = time.perf_counter()
    proc.stdin.write(request)
    proc.stdin.flush()
    line = proc.stdout.readline()
    ms = (time.perf_counter() - started) * 1000
    reply = json.loads(line)
    return ms, reply["result"]["structuredContent"]["decision"]


def direct_get(host: str, port: int) -> float:
    started = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", "/api/accounts", headers={"Connection": "close"})
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    ms = (time.perf_counter() - started) * 1000
    if response.status != 200 or not json.loads(body).get("available"):
        raise RuntimeError("GET /api/accounts: %s" % response.status)
    return ms


def figure(name: str, ours: List[float], base: List[float], label: str, target: float) -> Dict[str, Any]:
    med, bmed = statistics.median(ours), statistics.median(base)
    ratio = round(med / bmed, 2)
    return {"figure": "%s, median of %d" % (name, len(ours)), "value": round(med, 2), "unit": "ms",
            "baseline": round(bmed, 2), "baseline_label": label, "ratio": ratio, "target": "<= %gx" % target,
            "ok": ratio <= target}


def round_trips(monitor: Monitor, env: Dict[str, str], rounds: int) -> Dict[str, Any]:
    proc, _ = start_server(monitor.url, env)
    ours: List[float] = []
    base: List[float] = []
    not_go = 0
    try:
        guard_call(proc, 1)  # the first call imports the guard
        for i in range(rounds):
            ms, decision = guard_call(proc, 2 + i)
            not_go += decision != "go"
            ours.append(ms)
            base.append(direct_get(monitor.host, monitor.port))
    finally:
        stop_server(proc)
    fig = figure("tools/call guard round trip over stdio (one session)", ours, base,
                 "GET /api/accounts direct", ROUND_TRIP_TARGET)
    if not_go:
        print("%d of %d guard decisions were not go" % (not_go, rounds))
        fig["ok"] = False
    return fig


def start_ups(monitor: Monitor, env: Dict[str, str], rounds: int) -> Dict[str, Any]:
    ours: List[float] = []
    base: List[float] = []
    stop_server(start_server(monitor.url, env)[0])  # warms the bytecode cache
    for _ in range(rounds):
        proc, ms = start_server(monitor.url, env)
        stop_server(proc)
        ours.append(ms)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        base.append((time.perf_counter() - started) * 1000)
    return figure("server start-up to its initialize reply", ours, base, "python -c pass", START_TARGET)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="50 round trips and 10 start-ups")
    parser.add_argument("--rounds", type=int, default=None, help="timed guard round trips (default 200)")
    parser.add_argument("--starts", type=int, default=None, help="timed start-ups (default 30)")
    args = parser.parse_args()
    rounds = args.rounds or (50 if args.quick else 200)
    starts = args.starts or (10 if args.quick else 30)

    work = Path(tempfile.mkdtemp(prefix="svc-mcp-"))
    home = work / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "mcp-node")
    figures: List[Dict[str, Any]] = []
    with ProviderServer() as provider:
        for _, token, _ in ACCOUNTS:
            provider.set_account(token)
        write_accounts(accounts_path(home), ACCOUNTS, active="ACCT1")
        env = monitor_env(home, provider.url, SVC_POSTURE_TTL_S="300", SVC_PROBE_INTERVAL_S="300",
                          SVC_REFRESH_FLOOR_S="30")
        monitor = Monitor(env).start(work / "monitor.log")
        try:
            wait_until(lambda: monitor.get_json("/api/accounts")[1].get("status") == "ok", 30, message="posture")
            child = dict(env, PYTHONPYCACHEPREFIX=str(work / "pycache"), SVC_GUARD_BUDGET_MS="5000")
            child.pop("PYTHONDONTWRITEBYTECODE", None)
            figures.append(round_trips(monitor, child, rounds))
            figures.append(start_ups(monitor, child, starts))
        finally:
            code = monitor.stop()
    for fig in figures:
        print("%-70s %8s %-3s baseline %8s (%s)  ratio %sx" % (
            fig["figure"], fig["value"], fig["unit"], fig["baseline"], fig["baseline_label"], fig["ratio"]))
    print(json.dumps({"figures": figures}))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
