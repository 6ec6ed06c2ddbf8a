"""Parts 3, 4 and 5 of scripts/bench_fleet.py: the fleet past the tracker's budget (docs/fleet-prometheus.md).

3. Status for 1,000 hosts from Prometheus and from VictoriaMetrics (real engines on
   loopback, 1,000 stand-in monitors), against the tracker path for the same hosts.
4. Hosts per bot user on the tracker path, before and after budgeting.
5. 10,000 hosts of three accounts each beside 1,000, fed to a real VictoriaMetrics through
   its import API (tests/support/bigfleet.py): `svc-cluster status --json`, `svc-cluster
   owner ENG-1 --headroom --json` (the same read, then the owner around the wall), the read in
   process with its query count (and the owner command's), and a real monitor's GET
   /api/fleet/accounts.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

from svcposture.settings import Settings
from svcposture.cluster import liveness, promread
from svcposture.paths import Paths
from svcposture.settings import WINDOW_ENV
from tests.support.bigfleet import BigFleet
from tests.support.engines import query, start_prometheus, start_victoria, stop_all
from tests.support.monitor import start_monitor
from tests.support.fleet import populate
from tests.support.fleetmetrics import FleetMetrics
from tests.support.home import BEARER, make_node, node_env, write_json
from tests.support.tracker import TrackerServer
from tests.support.waiting import wait_until

HOSTS = 1000
INTERVAL_MS = 120000
TRACKER_LATENCY_S = 0.05
# The example config scrapes every 60 s; 10 s keeps the engines honest without letting 1,000
# scrapes a second (Python serving them on the same two cores) stand in for the query's cost.
SCRAPE = "10s"


# ---------------------------------------------------------------- part 3: status from the engines

# The command as installed, with the read's deadline raised: a loaded machine is timed, not failed.
_CLUSTER = ("import runpy, sys; from svcposture.cluster import promread; promread.READ_DEADLINE_S = 120.0; "
            "sys.argv = ['svcposture', 'cluster'] + sys.argv[1:]; runpy.run_module('svcposture', "
            "run_name='__main__', alter_sys=True)")
STATUS = ("status", "--json")
OWNER = ("owner", "ENG-1", "--headroom", "--json")


def _status_cli(env: Dict[str, str], runs: int, args: Tuple[str, ...] = STATUS) -> Tuple[float, Dict[str, Any]]:
    """(median wall seconds, the last report) of `svc-cluster ARGS > FILE` (default `status --json`):
    the report goes to a file, as a script saving it would, so that how fast this process drains
    a pipe is no part of the figure."""
    times: List[float] = []
    report: Dict[str, Any] = {}
    for _ in range(runs):
        with tempfile.TemporaryFile() as out:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", _CLUSTER] + list(args), env=env, stdout=out,
                           stderr=subprocess.DEVNULL, timeout=300, check=False)
            times.append(time.perf_counter() - start)
            out.seek(0)
            report = json.loads(out.read())
        if report.get("error") or (args == OWNER and report.get("owner") is None):
            raise RuntimeError("%s failed: %s" % (args[0], report.get("error") or report))
    return statistics.median(times), report


def _owner_queries(env: Dict[str, str]) -> int:
    """The HTTP requests of one `svc-cluster owner ENG-1 --headroom --json`, in this process."""
    import contextlib
    import io
    from svcposture.cli import cluster_main

    calls = [0]
    real_get = promread.http_get

    def counting_get(url: str, timeout_s: float, max_bytes: int) -> Tuple[int, bytes]:
        calls[0] += 1
        return real_get(url, timeout_s, max_bytes)

    kept_env = dict(os.environ)
    promread.http_get = counting_get
    kept_deadline, promread.READ_DEADLINE_S = promread.READ_DEADLINE_S, 120.0
    try:
        os.environ.clear()
        os.environ.update(env)
        with contextlib.redirect_stdout(io.StringIO()):
            cluster_main(list(OWNER))
    finally:
        os.environ.clear()
        os.environ.update(kept_env)
        promread.http_get = real_get
        promread.READ_DEADLINE_S = kept_deadline
    return calls[0]


def _in_process(env: Dict[str, str], hosts: List[str], runs: int) -> Tuple[float, int]:
    """(median seconds of promread.fleet_rows, HTTP requests of one read)."""
    calls = [0]
    real_get = promread.http_get

    def counting_get(url: str, timeout_s: float, max_bytes: int) -> Tuple[int, bytes]:
        calls[0] += 1
        return real_get(url, timeout_s, max_bytes)

    promread.http_get = counting_get
    kept_deadline, promread.READ_DEADLINE_S = promread.READ_DEADLINE_S, 120.0
    try:
        times = []
        for _ in range(runs):
            calls[0] = 0
            start = time.perf_counter()
            promread.fleet_rows(env["SVC_PROMETHEUS_URL"], hosts, INTERVAL_MS)
            times.append(time.perf_counter() - start)
    finally:
        promread.http_get = real_get
        promread.READ_DEADLINE_S = kept_deadline
    return statistics.median(times), calls[0]


def _tracker_baseline(root: Path, runs: int) -> Tuple[float, int]:
    with TrackerServer(tokens=[BEARER]) as srv:
        srv.add_issue("OPS-1")
        names = populate(srv, "OPS-1", HOSTS, stale_every=0, missing_every=0)
        home = make_node(root / "tracker", names[0], names, anchor="OPS-1")
        env = node_env(home, tracker_url=srv.url, interval_ms=INTERVAL_MS)
        srv.latency_s = TRACKER_LATENCY_S
        before = srv.count("issue")
        seconds, _ = _status_cli(env, runs)
        return seconds, (srv.count("issue") - before) // runs


def _engines(root: Path, fleet: FleetMetrics) -> Tuple[List[Any], Dict[str, str]]:
    home = make_node(root / "reader", fleet.hosts[0], fleet.hosts, token=None)
    sd = root / "svc-fleet.json"
    write_json(sd, [{"targets": ["%s:%d" % (h, fleet.port)], "labels": {"node": h}} for h in fleet.hosts], 0o644)
    vm = start_victoria(root)
    config = root / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: %s, scrape_timeout: 1s}\n"
        "remote_write: [{url: 'http://127.0.0.1:%d/api/v1/write', queue_config: {batch_send_deadline: 1s}}]\n"
        "scrape_configs: [{job_name: svc-monitor, file_sd_configs: [{files: ['%s']}]}]\n" % (SCRAPE, vm.port, sd))
    prom = start_prometheus(root, config)
    env = node_env(home, SVC_LIVENESS_READ_SOURCE="prometheus", SVC_PROMETHEUS_URL=prom.base,
                   EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS=str(INTERVAL_MS))
    return [prom, vm], env


def part_engines(root: Path, runs: int) -> List[Dict[str, Any]]:
    tracker_s, tracker_requests = _tracker_baseline(root, runs)
    fleet = FleetMetrics(HOSTS).start()
    engines: List[Any] = []
    figures = []
    try:
        engines, env = _engines(root, fleet)
        prom, vm = engines
        wait_until(lambda: len(query(prom.base, 'up{node!=""} == 1')) == HOSTS, timeout=120, interval=0.5,
                   message="Prometheus scraping every target")
        wait_until(lambda: len(query(vm.base, 'up{node!=""} == 1')) == HOSTS, timeout=120, interval=0.5,
                   message="VictoriaMetrics holding every target")
        for name, base in (("Prometheus", prom.base), ("VictoriaMetrics", vm.base)):
            engine_env = dict(env, SVC_PROMETHEUS_URL=base)
            _status_cli(engine_env, 1)  # warm-up
            seconds, report = _status_cli(engine_env, runs)
            live = sum(1 for row in report["hosts"] if row["state"] == "live")
            inproc_s, requests = _in_process(engine_env, fleet.hosts, runs)
            figures.append({"figure": "svc-cluster status --json, %d hosts from %s: wall time" % (HOSTS, name),
                            "value": round(seconds, 3), "unit": "s", "baseline": round(tracker_s, 3),
                            "baseline_label": "tracker path, %d pages at %d ms" % (tracker_requests,
                                                                                   TRACKER_LATENCY_S * 1000),
                            "ratio": round(seconds / tracker_s, 3), "target": "< 1 s", "ok": seconds < 1.0,
                            "live": live, "read_in_process_s": round(inproc_s, 3)})
            figures.append({"figure": "status, %d hosts from %s: queries per status" % (HOSTS, name),
                            "value": requests, "unit": "queries", "baseline": tracker_requests,
                            "baseline_label": "tracker requests for the same hosts",
                            "ratio": round(requests / float(tracker_requests), 3), "target": "<= 4",
                            "ok": requests <= 4})
    finally:
        stop_all(engines)
        fleet.stop()
    return figures


# ---------------------------------------------------------------- part 5: 10,000 hosts beside 1,000

SCALE_INTERVAL_MS = 600000  # the imported points stay inside the liveness window for the whole part


def _accounts_route(env: Dict[str, str], runs: int) -> float:
    """Median seconds from a cold GET /api/fleet/accounts on a fresh monitor to its first fresh answer
    (a reader waits for the read up to 3 s, then gets an answer saying the read is under way)."""
    times = []
    for _ in range(runs + 1):
        mon = start_monitor(dict(env, SVC_FLEET_TTL_S="3600"), ["--no-probe"], timeout=60)
        try:
            start = time.perf_counter()
            while True:
                status, _, raw = mon.get("/api/fleet/accounts")
                body = json.loads(raw)
                if status == 200 and "error" not in body and not body.get("stale"):
                    break
                if time.perf_counter() - start > 300:
                    raise RuntimeError("no accounts view within 300 s: %s" % raw[:300])
                time.sleep(0.02)
            times.append(time.perf_counter() - start)
        finally:
            mon.stop(timeout=20, check=False)
    return statistics.median(times[1:])  # the first read warms the engine's caches


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    import os
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def _read_cpu(vm: Any, roster: List[str], runs: int) -> Tuple[float, float]:
    """(median CPU seconds of one read in this process, of the engine answering it): what a loaded
    machine's wall time hides."""
    mine, theirs = [], []
    for _ in range(runs):
        engine, own = _cpu_s(vm.proc.pid), time.process_time()
        promread.fleet_rows(vm.base, roster, SCALE_INTERVAL_MS)
        mine.append(time.process_time() - own)
        theirs.append(_cpu_s(vm.proc.pid) - engine)
    return statistics.median(mine), statistics.median(theirs)


def _settle(vm: Any, timeout_s: float = 120.0) -> None:
    """Merge the imported parts, then wait until the engine is idle: the figures are of an engine
    in its steady state, as one that has scraped a fleet for hours is, not of one still merging
    the parts of an import made a second ago (which costs every query a lookup in each part)."""
    import urllib.request
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    month = time.strftime("%Y_%m", time.gmtime())
    opener.open(vm.base + "/internal/force_merge?partition_prefix=" + month, timeout=60).read()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = _cpu_s(vm.proc.pid)
        time.sleep(1.0)
        if _cpu_s(vm.proc.pid) - before < 0.03:
            return
    raise RuntimeError("VictoriaMetrics still busy %g s after the import" % timeout_s)


def _scale_figures(root: Path, hosts: int, runs: int, compiled: Dict[str, str]) -> Dict[str, Any]:
    work = root / ("scale-%d" % hosts)
    work.mkdir()
    vm = start_victoria(work)
    try:
        fleet = BigFleet(hosts)
        fleet.feed(vm.base)
        wait_until(lambda: len(query(vm.base, 'up{node!=""}')) == hosts, timeout=180, interval=1,
                   message="VictoriaMetrics holding %d hosts" % hosts)
        _settle(vm)
        home = make_node(work, fleet.hosts[0], fleet.roster, token=None)
        env = node_env(home, SVC_LIVENESS_READ_SOURCE="prometheus", SVC_PROMETHEUS_URL=vm.base,
                       EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS=str(SCALE_INTERVAL_MS), **compiled)
        _status_cli(env, 1)  # warm-up: the engine's caches
        # The two commands alternate, so that a loaded machine's moods fall on both alike.
        status_times, owner_times = [], []
        for _ in range(runs):
            seconds, report = _status_cli(env, 1)
            status_times.append(seconds)
            owner_times.append(_status_cli(env, 1, OWNER)[0])
        cli_s, owner_s = statistics.median(status_times), statistics.median(owner_times)
        global INTERVAL_MS
        kept, INTERVAL_MS = INTERVAL_MS, SCALE_INTERVAL_MS
        try:
            inproc_s, requests = _in_process(env, fleet.roster, runs)
        finally:
            INTERVAL_MS = kept
        kept_deadline, promread.READ_DEADLINE_S = promread.READ_DEADLINE_S, 120.0
        try:
            client_cpu, engine_cpu = _read_cpu(vm, fleet.roster, runs)
        finally:
            promread.READ_DEADLINE_S = kept_deadline
        return {"status": cli_s, "owner": owner_s, "read": inproc_s, "queries": requests,
                "owner_queries": _owner_queries(env), "route": _accounts_route(env, runs),
                "client_cpu": client_cpu, "engine_cpu": engine_cpu,
                "live": sum(1 for row in report["hosts"] if row["state"] == "live")}
    finally:
        stop_all([vm])


def compiled_package(root: Path) -> Dict[str, str]:
    """The environment under which the commands run as an installed package does: compiled.
    pip compiles a package's modules as it installs it; a checkout run with
    PYTHONDONTWRITEBYTECODE set (as CI machines often are) would compile every module at every
    start instead, which is not what an operator's `svc-cluster status` costs. The package is
    copied and compiled under the benchmark's own directory, never in the checkout."""
    site = root / "site"
    package = Path(__file__).resolve().parent.parent / "svcposture"
    shutil.copytree(str(package), str(site / "svcposture"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site)], check=True, stdout=subprocess.DEVNULL)
    return {"PYTHONPATH": os.pathsep.join([str(site), str(package.parent)])}


def part_scale(root: Path, runs: int) -> List[Dict[str, Any]]:
    compiled = compiled_package(root)
    small = _scale_figures(root, 1000, runs, compiled)
    big = _scale_figures(root, 10000, runs, compiled)
    figures = []
    for key, what in (("status", "svc-cluster status --json"), ("owner", "svc-cluster owner ENG-1 --headroom --json"),
                      ("route", "GET /api/fleet/accounts"),
                      ("read", "the read in process"), ("client_cpu", "CPU of the read in process"),
                      ("engine_cpu", "CPU of VictoriaMetrics answering the read")):
        figures.append({"figure": "%s, 10,000 hosts x 3 accounts from VictoriaMetrics" % what,
                        "value": round(big[key], 3), "unit": "s", "baseline": round(small[key], 3),
                        "baseline_label": "1,000 hosts, same run", "ratio": round(big[key] / small[key], 2),
                        "target": "< 1 s" if key in ("status", "owner", "route") else "ratio < 10",
                        "ok": big[key] < 1.0 if key in ("status", "owner", "route") else big[key] / small[key] < 10,
                        "live": big["live"]})
    figures.append({"figure": "queries per read, 10,000 hosts", "value": big["queries"], "unit": "queries",
                    "baseline": small["queries"], "baseline_label": "1,000 hosts",
                    "ratio": round(big["queries"] / float(small["queries"]), 2), "target": "<= 4",
                    "ok": big["queries"] <= 4})
    figures.append({"figure": "queries per owner --headroom, 10,000 hosts", "value": big["owner_queries"],
                    "unit": "queries", "baseline": big["queries"], "baseline_label": "the read alone",
                    "ratio": round(big["owner_queries"] / float(big["queries"]), 2), "target": "<= the read's",
                    "ok": big["owner_queries"] <= big["queries"]})
    return figures


# ---------------------------------------------------------------- part 4: hosts per bot user

# An hour scaled to 24 s: the default 120 s becomes 800 ms, long enough that a loaded
# machine's scheduling jitter does not pass for a dead host.
WINDOW_S = 24.0


class UnbudgetedPublisher(liveness.Publisher):
    """The publisher before budgeting: the configured interval whatever the replies say."""

    def _apply_budget(self, stated: Any) -> None:
        pass


def _fleet_survives(root: Path, hosts: int, publisher_class: type) -> Tuple[bool, int, int, float]:
    """(no request refused and no host seen not live in the judged window, requests refused in it,
    refused over the whole run, the busiest window's share of the limit)."""
    with TrackerServer(tokens=[BEARER]) as srv:
        srv.add_issue("OPS-1")
        gate = srv.enforce_budget(limit=1500, window_s=WINDOW_S)
        names = ["host-%04d" % i for i in range(hosts)]
        home = make_node(root / ("%s-%d" % (publisher_class.__name__, hosts)), names[0], names, anchor="OPS-1")
        environ = {"HOME": str(home), "SVC_TRACKER_URL": srv.url,
                   liveness.INTERVAL_ENV: str(int(INTERVAL_MS * WINDOW_S / 3600)),
                   WINDOW_ENV: str(int(WINDOW_S * 1000))}
        paths = Paths(home, environ)
        publishers = [publisher_class(paths, Settings.from_environ(environ), name, lambda: "ok", None) for name in names]
        alive = True
        refused_before = 0
        try:
            for p in publishers:
                p.start()
            wait_until(lambda: all(p.published for p in publishers), timeout=60, message="first beats")
            # Capacity is a steady-state figure: the first window (every host starting in the
            # same second, at the configured interval until the first reply) is not judged.
            time.sleep(WINDOW_S)
            refused_before = gate.refused
            deadline = time.monotonic() + WINDOW_S
            while time.monotonic() < deadline and alive:
                report = liveness.collect_status(paths, Settings.from_environ(environ, strict=False))
                alive = not report.get("error") and all(h["state"] == "live" for h in report["hosts"])
                time.sleep(WINDOW_S / 60.0)  # a reader once a (scaled) minute
        except AssertionError:
            alive = False
        finally:
            stoppers = [threading.Thread(target=p.stop) for p in publishers]
            for t in stoppers:
                t.start()
            for t in stoppers:
                t.join()
        judged = gate.refused - refused_before
        return alive and judged == 0, judged, gate.refused, gate.busiest_share()


def part_budget(root: Path, quick: bool) -> List[Dict[str, Any]]:
    plans = {"before": (UnbudgetedPublisher, [30, 40, 50] if quick else [30, 40, 45, 50, 60]),
             "after": (liveness.Publisher, [100, 400] if quick else [100, 200, 400])}
    figures = []
    best: Dict[str, int] = {}
    for label, (cls, sizes) in plans.items():
        best[label] = 0
        for hosts in sizes:
            alive, judged, refused, share = _fleet_survives(root, hosts, cls)
            print("  %s budgeting: %4d hosts: %s; refused %d in the judged window (%d in all); busiest window "
                  "%.0f %% of the limit" % (label, hosts, "all live" if alive else "NOT all live", judged, refused,
                                           share * 100), flush=True)
            if alive:
                best[label] = hosts
    for label in ("before", "after"):
        figures.append({"figure": "tracker path, hosts per bot user at the default 120 s (%s budgeting)" % label,
                        "value": best[label], "unit": "hosts", "baseline": best["before"],
                        "baseline_label": "before budgeting", "ratio": round(best[label] / max(1, best["before"]), 2),
                        "target": ">= 100 after", "ok": label == "before" or best[label] >= 100})
    return figures


def run_scale(parts: Set[str], quick: bool) -> None:
    import logging
    # Hundreds of publishers each log their RATELIMITED once: the counts below say it.
    logging.getLogger(liveness.LOGGER_NAME).setLevel(logging.ERROR)
    root = Path(tempfile.mkdtemp(prefix="svc-bench-fleet-scale-"))
    figures: List[Dict[str, Any]] = []
    try:
        if "3" in parts:
            figures += part_engines(root, 3 if quick else 5)
        if "4" in parts:
            figures += part_budget(root, quick)
        if "5" in parts:
            figures += part_scale(root, 3 if quick else 5)
    finally:
        shutil.rmtree(str(root), ignore_errors=True)
    header = ("figure", "value", "baseline", "ratio", "target")
    rows = [(f["figure"], "%s %s" % (f["value"], f["unit"]), "%s (%s)" % (f["baseline"], f["baseline_label"]),
             "%.2fx" % f["ratio"], f["target"]) for f in figures]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(5)]
    for row in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    print(json.dumps({"figures": figures}))
