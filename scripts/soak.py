#!/usr/bin/env python3
"""Soak the real monitor: a 1 s probe interval, 32 keep-alive readers of
/api/accounts, and 50 SSE clients that keep joining and leaving, for 5 minutes
(--quick: 20 s). Samples the monitor's RSS, open fds and threads from /proc.

Pass criteria: RSS growth after warm-up < 10%; once the load stops, open fds
and threads return to what they were before it (no leak); no read error, no
traceback in the monitor's stderr; the work asked for (a few probes; the CI
test also asks for reads, sessions and concurrent streams) done, the load
kept on past the duration until it is (probes per interval is a figure, not a
criterion: each probe is a Python child, slow on a loaded machine); every SSE
session planning to stay over
2.5 s gets its first frame (it waits up to 20 s for it, past its planned stay
or the end of the load if need be). How soon that frame comes is a figure
(first-frame latency p50 / max), not a criterion: on a loaded machine it
depends on scheduling.

The last stdout line is the bench_all JSON {"figures": [...]}.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from tests.support.home import accounts_path, monitor_env, set_host_name, write_accounts
from tests.support.monitor import Monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until


def proc_sample(pid: int) -> Dict[str, int]:
    fields: Dict[str, int] = {}
    with open("/proc/%d/status" % pid) as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                fields[key] = int(value.split()[0])
    fields["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    return {"rss_kb": fields["VmRSS"], "threads": fields["Threads"], "fds": fields["fds"]}


# SSE sessions that plan to stay longer than this must see their first frame.
CHECKED_STAY_S = 2.5
# How long such a session waits for it, whatever the load, its planned stay or
# the end of the run: a deadline on a condition, far above any latency seen.
FIRST_FRAME_DEADLINE_S = 20.0


class Load:
    def __init__(self, host: str, port: int, readers: int, sse_clients: int, seed: int) -> None:
        self.host, self.port = host, port
        self.readers, self.sse_clients = readers, sse_clients
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.reads = 0
        self.read_errors: List[str] = []
        self.sse_sessions = 0
        self.sse_frames = 0
        self.sse_empty_sessions = 0
        self.sse_held_for_first_frame = 0
        self.first_frame_s: List[float] = []
        self.rng = random.Random(seed)
        self.threads: List[threading.Thread] = []

    def start(self) -> None:
        for i in range(self.readers):
            self.threads.append(threading.Thread(target=self._reader, name="reader-%d" % i, daemon=True))
        for i in range(self.sse_clients):
            self.threads.append(threading.Thread(target=self._subscriber, args=(i,), name="sse-%d" % i,
                                                 daemon=True))
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        # A checked SSE session may still be waiting for its first frame.
        deadline = time.monotonic() + FIRST_FRAME_DEADLINE_S + 10.0
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))

    def _reader(self) -> None:
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                conn.request("GET", "/api/accounts")
                resp = conn.getresponse()
                body = resp.read()
                if resp.status != 200 or not body.startswith(b"{"):
                    with self.lock:
                        self.read_errors.append("status %d" % resp.status)
                with self.lock:
                    self.reads += 1
                # A little think time keeps 32 readers from starving the probe of CPU on 2 cores.
                self.stop.wait(0.002)
            except (OSError, http.client.HTTPException) as exc:
                with self.lock:
                    self.read_errors.append(type(exc).__name__)
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def _subscriber(self, index: int) -> None:
        rng = random.Random(self.rng.random())
        while not self.stop.is_set():
            stay = rng.uniform(0.5, 6.0)
            # A session planning to stay longer than CHECKED_STAY_S must get its
            # first frame, and waits for it (up to FIRST_FRAME_DEADLINE_S) even
            # past its planned stay or the end of the load: whether the frame
            # comes is the check, how soon is the first-frame latency figure.
            # Shorter sessions may leave before the monitor answers (churn).
            checked = stay > CHECKED_STAY_S
            frames = 0
            got_bytes = False
            first_frame = None
            held = False
            ended = ""
            joined = time.monotonic()
            try:
                sock = socket.create_connection((self.host, self.port), timeout=0.5)
            except OSError:
                with self.lock:
                    self.read_errors.append("sse connect")
                self.stop.wait(0.2)
                continue
            with sock:
                try:
                    sock.sendall(b"GET /api/accounts/stream HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    leave = time.monotonic() + stay
                    deadline = joined + FIRST_FRAME_DEADLINE_S
                    while True:
                        now = time.monotonic()
                        if checked and not frames:
                            if now >= deadline:
                                ended = "no first frame within %.0f s" % FIRST_FRAME_DEADLINE_S
                                break
                        elif now >= leave or self.stop.is_set():
                            break
                        try:
                            block = sock.recv(65536)
                        except socket.timeout:
                            continue
                        if not block:
                            ended = "closed before the first frame"
                            break
                        got_bytes = True
                        frames += block.count(b"event: account")
                        if frames and first_frame is None:
                            first_frame = time.monotonic() - joined
                            held = now >= leave or self.stop.is_set()
                except OSError as exc:
                    ended = "%s before the first frame" % type(exc).__name__
            with self.lock:
                self.sse_sessions += 1
                self.sse_frames += frames
                if checked and frames == 0:
                    self.sse_empty_sessions += 1
                    self.read_errors.append("sse %s (bytes: %s)" % (ended, got_bytes))
                if first_frame is not None:
                    self.first_frame_s.append(first_frame)
                    self.sse_held_for_first_frame += held
            # Leave abruptly half the time, rejoin after a short pause.
            self.stop.wait(rng.uniform(0.0, 0.5))


# How far past its planned duration a run keeps the load on while waiting for
# the minimum amounts of work it was asked for (min_probes, ...): a monitor that
# has not done them by then has stalled, whatever the machine's load.
MAX_OVERRUN_S = 120.0


def run_soak(duration: float, warmup: float, interval: float = 1.0, readers: int = 32, sse_clients: int = 50,
             seed: int = 1, log: Callable[[str], None] = lambda s: None, *, min_probes: int = 0,
             min_reads: int = 0, min_sessions: int = 0, min_thread_rise: int = 0) -> Dict[str, Any]:
    """Run the load for `duration` s and then, if need be, until it has seen at
    least `min_probes` probes, `min_reads` reads, `min_sessions` SSE sessions and
    a thread peak `min_thread_rise` above the pre-load count (conditions, not
    rates: how many fit in the duration is the probe-rate figure), or until
    MAX_OVERRUN_S more have passed; `verdict` then reports what was missing."""
    work = Path(tempfile.mkdtemp(prefix="svc-soak-"))
    home = work / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "soak-node")
    samples: List[Dict[str, Any]] = []
    with ProviderServer() as provider:
        accounts = [("ACCT1", "tok-soak-1", "one@example.com"), ("ACCT2", "tok-soak-2", "two@example.com"),
                    ("ACCT3", "tok-soak-3", "three@example.com")]
        for suffix, token, _ in accounts:
            provider.set_account(token, five_hour=(0.3, "allowed"), seven_day=(0.5, "allowed_warning"))
        write_accounts(accounts_path(home), accounts, active="ACCT1")
        env = monitor_env(home, provider.url, SVC_PROBE_INTERVAL_S=str(interval),
                          # Plain reads stay cached between periodic probes, as with the defaults.
                          SVC_POSTURE_TTL_S=str(max(5.0, 3 * interval)),
                          SVC_REFRESH_FLOOR_S=str(min(0.5, interval / 2)),
                          SVC_SSE_KEEPALIVE_S="2")
        monitor = Monitor(env).start(work / "monitor.log")
        assert monitor.url
        host, port = monitor.url.split("//", 1)[1].rsplit(":", 1)
        pid = monitor.pid
        try:
            wait_until(lambda: provider.message_calls() >= 3, 30, message="first probe")
            time.sleep(1.0)
            before = proc_sample(pid)
            calls_before = provider.message_calls()
            log("before load: %r" % before)
            load = Load(host, int(port), readers, sse_clients, seed)
            started = time.monotonic()
            load.start()
            next_sample = started

            def enough() -> bool:
                return ((provider.message_calls() - calls_before) // len(accounts) >= min_probes
                        and load.reads >= min_reads and load.sse_sessions >= min_sessions
                        and any(s["threads"] >= before["threads"] + min_thread_rise for s in samples))
            while True:
                now = time.monotonic()
                if now >= next_sample:
                    sample = dict(proc_sample(pid), t=round(now - started, 1), reads=load.reads)
                    samples.append(sample)
                    log("t=%5.1fs rss=%d kB threads=%d fds=%d reads=%d" % (
                        sample["t"], sample["rss_kb"], sample["threads"], sample["fds"], sample["reads"]))
                    next_sample += 1.0
                elapsed = now - started
                if elapsed >= duration and (enough() or elapsed >= duration + MAX_OVERRUN_S):
                    break
                time.sleep(0.05)
            load_s = time.monotonic() - started
            load.finish()
            probes = (provider.message_calls() - calls_before) // len(accounts)
            peak = {k: max(s[k] for s in samples) for k in ("rss_kb", "threads", "fds")}

            def settled() -> Any:
                now = proc_sample(pid)
                return now if (now["threads"] <= before["threads"] + 1 and now["fds"] <= before["fds"] + 1) \
                    else None
            try:
                after = wait_until(settled, 20, 0.1, "threads and fds back to their pre-load level")
            except AssertionError:
                after = proc_sample(pid)
            alive = monitor.proc is not None and monitor.proc.poll() is None
        finally:
            code = monitor.stop()
        stderr = monitor.stderr_text()
    warm = [s["rss_kb"] for s in samples if s["t"] >= warmup][:3] or [samples[-1]["rss_kb"]]
    tail = [s["rss_kb"] for s in samples[-3:]]
    rss_warm = statistics.median(warm)
    rss_end = statistics.median(tail)
    growth = 100.0 * (rss_end - rss_warm) / rss_warm
    return {
        "duration_s": duration, "load_s": round(load_s, 1), "warmup_s": warmup, "probe_interval_s": interval,
        "readers": readers, "sse_clients": sse_clients, "reads": load.reads,
        "reads_per_s": round(load.reads / load_s, 1),
        "minimums": {"probes": min_probes, "reads": min_reads, "sse_sessions": min_sessions,
                     "thread_rise": min_thread_rise},
        "read_errors": len(load.read_errors), "read_error_kinds": sorted(set(load.read_errors))[:5],
        "sse_sessions": load.sse_sessions, "sse_frames": load.sse_frames,
        "sse_sessions_without_frame": load.sse_empty_sessions,
        "sse_sessions_held_for_first_frame": load.sse_held_for_first_frame, "probes": probes,
        "sse_first_frame_p50_ms": round(1000 * statistics.median(load.first_frame_s), 1) if load.first_frame_s else None,
        "sse_first_frame_max_ms": round(1000 * max(load.first_frame_s), 1) if load.first_frame_s else None,
        "rss_before_kb": before["rss_kb"], "rss_after_warmup_kb": rss_warm, "rss_end_kb": rss_end,
        "rss_peak_kb": peak["rss_kb"], "rss_growth_pct": round(growth, 2),
        "threads_before": before["threads"], "threads_peak": peak["threads"], "threads_after": after["threads"],
        "fds_before": before["fds"], "fds_peak": peak["fds"], "fds_after": after["fds"],
        "monitor_alive": alive, "exit_code": code, "tracebacks": stderr.count("Traceback"),
        "samples": samples,
    }


def verdict(result: Dict[str, Any]) -> List[str]:
    problems = []
    if result["rss_growth_pct"] >= 10.0:
        problems.append("RSS grew %.1f%% after warm-up" % result["rss_growth_pct"])
    if result["threads_after"] > result["threads_before"] + 1:
        problems.append("threads %d -> %d" % (result["threads_before"], result["threads_after"]))
    if result["fds_after"] > result["fds_before"] + 1:
        problems.append("fds %d -> %d" % (result["fds_before"], result["fds_after"]))
    if result["read_errors"]:
        problems.append("%d read errors %s" % (result["read_errors"], result["read_error_kinds"]))
    if result["sse_sessions_without_frame"]:
        problems.append("%d SSE sessions got no frame" % result["sse_sessions_without_frame"])
    if not result["monitor_alive"] or result["exit_code"] != 0 or result["tracebacks"]:
        problems.append("monitor alive=%s exit=%s tracebacks=%d" % (
            result["monitor_alive"], result["exit_code"], result["tracebacks"]))
    # Amounts of work the run waited for; missing one means the monitor stalled
    # for MAX_OVERRUN_S past the planned duration. How many fit into the duration
    # (the probe rate) is a figure, not a criterion.
    minimums = result.get("minimums", {})
    done = {"probes": result["probes"], "reads": result["reads"], "sse_sessions": result["sse_sessions"],
            "thread_rise": result["threads_peak"] - result["threads_before"]}
    for key, wanted in sorted(minimums.items()):
        if done[key] < wanted:
            problems.append("only %d %s (waited for %d) in %.0f s" % (done[key], key, wanted, result["load_s"]))
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 s with a 5 s warm-up instead of 5 min / 60 s")
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--warmup", type=float, default=None)
    parser.add_argument("--readers", type=int, default=32)
    parser.add_argument("--sse", type=int, default=50, help="SSE clients joining and leaving")
    parser.add_argument("--verbose", action="store_true", help="print a sample every second")
    args = parser.parse_args()
    duration = args.duration or (20.0 if args.quick else 300.0)
    warmup = args.warmup if args.warmup is not None else (5.0 if args.quick else 60.0)
    result = run_soak(duration, warmup, readers=args.readers, sse_clients=args.sse,
                      log=print if args.verbose else (lambda s: None), min_probes=2)
    for key, value in result.items():
        if key != "samples":
            print("%-28s %s" % (key, value))
    problems = verdict(result)
    print("verdict: %s" % ("PASS" if not problems else "FAIL: " + "; ".join(problems)))
    figures = [
        {"figure": "soak %.0f s: RSS growth after warm-up" % duration, "value": result["rss_growth_pct"],
         "unit": "%", "baseline": round(result["rss_after_warmup_kb"] / 1024.0, 1), "baseline_unit": "MB",
         "baseline_label": "RSS after warm-up",
         "ratio": round(result["rss_end_kb"] / result["rss_after_warmup_kb"], 3), "target": "< 10 %",
         "ok": result["rss_growth_pct"] < 10.0},
        {"figure": "soak: open fds before / after load", "value": "%d / %d (peak %d)" % (
            result["fds_before"], result["fds_after"], result["fds_peak"]), "unit": "", "baseline": None,
         "ratio": None, "target": "after <= before + 1", "ok": result["fds_after"] <= result["fds_before"] + 1},
        {"figure": "soak: threads before / after load", "value": "%d / %d (peak %d)" % (
            result["threads_before"], result["threads_after"], result["threads_peak"]), "unit": "",
         "baseline": None, "ratio": None, "target": "after <= before + 1",
         "ok": result["threads_after"] <= result["threads_before"] + 1},
        {"figure": "soak: reads / SSE sessions / probes", "value": "%d / %d / %d" % (
            result["reads"], result["sse_sessions"], result["probes"]), "unit": "", "baseline": None,
         "ratio": None, "target": "0 errors", "ok": result["read_errors"] == 0},
        # Probes are a Python child each, started by the monitor while the load runs.
        {"figure": "soak: periodic probes done / due at the %g s interval" % result["probe_interval_s"],
         "value": result["probes"], "unit": "probes", "baseline": round(result["load_s"] / result["probe_interval_s"], 1),
         "baseline_label": "load time / probe interval",
         "ratio": round(result["probes"] * result["probe_interval_s"] / result["load_s"], 2), "target": None,
         "ok": None},
        # A latency, so a benchmark figure: the pass criterion is only that
        # every checked session got its first frame (see Load._subscriber).
        {"figure": "soak: SSE first-frame latency p50 / max", "value": "%s / %s" % (
            result["sse_first_frame_p50_ms"], result["sse_first_frame_max_ms"]), "unit": "ms", "baseline": None,
         "ratio": None, "target": "max < 1000 ms", "ok": None if result["sse_first_frame_max_ms"] is None
         else result["sse_first_frame_max_ms"] < 1000.0},
    ]
    print(json.dumps({"figures": figures}))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
