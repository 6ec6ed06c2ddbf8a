"""The fleet past the tracker's budget, with the real engines (docs/fleet-prometheus.md).

One stand-in process serves 1,000 monitors' /metrics on 1,000 loopback
addresses; Debian's real Prometheus scrapes them every second from the file
`svc-cluster roster sd` writes, remote-writes to a real VictoriaMetrics, and
sends the shipped rules' alerts to a real Alertmanager, which delivers to a
loopback webhook. `svc-cluster status`, the doctor, `owner` and a real
monitor's /api/fleet then read the fleet from Prometheus (and the same queries
from VictoriaMetrics).
"""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from svcposture.cluster import promread
from tests.support.cli import run_cluster
from tests.support.engines import (query, start_alertmanager, start_prometheus, start_victoria, stop_all, tool,
                                   Webhook)
from tests.support.fleetmetrics import FleetMetrics
from tests.support.home import REPO, make_node, node_env, write_json
from tests.support.monitor import start_monitor
from tests.support.waiting import wait_until

PROM_DIR = REPO / "scripts" / "prometheus"
HOSTS = 1000
SHARED = 50          # hosts whose active account is one shared account near its limit
DOWN = 5             # hosts whose monitor refuses every scrape
MISSING = ["127.0.9.%d" % i for i in range(1, 6)]   # roster hosts Prometheus was never told about
INTERVAL_MS = 2000


def expected_states(fleet):
    states = {h: "live" for h in fleet.hosts}
    states.update({h: "stale" for h in fleet.hosts[-DOWN:]})
    states.update({h: "missing" for h in MISSING})
    return states


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    for name in ("prometheus", "victoria-metrics", "prometheus-alertmanager"):
        tool(name)
    work = tmp_path_factory.mktemp("engines")
    fleet = FleetMetrics(HOSTS)
    for host in fleet.hosts[-DOWN:]:
        fleet.take_down(host)
    fleet.start()
    engines = []
    hook = Webhook()
    try:
        home = make_node(work, fleet.hosts[0], fleet.hosts, token=None)
        env = node_env(home, EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS=str(INTERVAL_MS),
                       SVC_TRACKER_URL="http://127.0.0.1:9/graphql")
        sd = work / "svc-fleet.json"
        done = run_cluster(env, "roster", "sd", "--port", str(fleet.port), "--out", str(sd))
        assert done.returncode == 0, done.stderr
        # Roster hosts added after the targets were written: Prometheus has no series of them.
        write_json(home / "svc" / "cluster" / "cluster.json", {"roster": fleet.hosts + MISSING}, 0o644)
        vm = start_victoria(work)
        engines.append(vm)
        # The shipped Alertmanager config, delivering to the test's webhook; group_wait cut from
        # 30 s so the test need not wait, still long enough for every host's first alert.
        am_config = work / "alertmanager.yml"
        am_config.write_text((PROM_DIR / "alertmanager.yml").read_text()
                             .replace("http://127.0.0.1:9099/svc-alerts", hook.url)
                             .replace("group_wait: 30s", "group_wait: 10s"))
        am = start_alertmanager(work, am_config)
        engines.append(am)
        # The shipped rules, with their `for:` holds cut to nothing.
        (work / "svcposture.rules.yml").write_text(
            re.sub(r"for: \w+", "for: 0s", (PROM_DIR / "svcposture.rules.yml").read_text()))
        config = work / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
            "rule_files: [svcposture.rules.yml]\n"
            "alerting: {alertmanagers: [{static_configs: [{targets: ['127.0.0.1:%d']}]}]}\n"
            "remote_write: [{url: 'http://127.0.0.1:%d/api/v1/write', queue_config: {batch_send_deadline: 1s}}]\n"
            "scrape_configs:\n"
            "  - job_name: svc-monitor\n"
            "    file_sd_configs: [{files: ['%s'], refresh_interval: 1s}]\n" % (am.port, vm.port, sd))
        prom = start_prometheus(work, config)
        engines.append(prom)
        reader = dict(env, SVC_LIVENESS_READ_SOURCE="prometheus", SVC_PROMETHEUS_URL=prom.base)
        wait_until(lambda: len(query(prom.base, 'up{node!=""}')) == HOSTS, timeout=90, interval=0.5,
                   message="Prometheus scraping all %d targets\n%s" % (HOSTS, prom.log_tail()))
        # Once every target is scraped, one account shared by 50 hosts goes near its limit at
        # once: their alerts all reach Alertmanager within its group_wait.
        for host in fleet.hosts[:SHARED]:
            fleet.set_account(host, "acct-shared", 95.0, 40.0)
        yield {"fleet": fleet, "home": home, "env": env, "reader": reader, "prom": prom, "vm": vm, "am": am,
               "hook": hook, "work": work}
    finally:
        stop_all(engines)
        hook.stop()
        fleet.stop()


def status(env):
    done = run_cluster(env, "status", "--json", timeout=60)
    return done.returncode, json.loads(done.stdout)


def states_of(report):
    return {row["host"]: row["state"] for row in report["hosts"]}


def test_status_answers_for_all_thousand_hosts(stack):
    fleet = stack["fleet"]
    want = expected_states(fleet)

    def settled():
        code, report = status(stack["reader"])
        first = report["hosts"][0]["account"] or {}
        return (code, report) if states_of(report) == want and first.get("label") == "acct-shared" else None
    code, report = wait_until(settled, timeout=60, interval=0.5, message="every host in its state")
    assert code == 3 and report["source"] == "prometheus" and "error" not in report
    assert len(report["hosts"]) == HOSTS + len(MISSING)
    rows = {row["host"]: row for row in report["hosts"]}
    shared = rows[fleet.hosts[0]]["account"]
    assert shared["label"] == "acct-shared" and shared["five_hour_pct"] == 95.0
    assert shared["seven_day_pct"] == 40.0 and shared["status"] == "degraded" and shared["wall_at"]
    assert rows[fleet.hosts[0]]["quota"]["five_hour_pct"] == 95.0
    host = fleet.hosts[123]
    assert rows[host]["account"]["label"] == fleet.accounts[host][0]
    assert rows[host]["account"]["five_hour_pct"] == fleet.accounts[host][1]
    assert rows[host]["ageS"] is not None and rows[host]["ageS"] < 10
    assert all(rows[h]["account"] is None for h in MISSING + fleet.hosts[-DOWN:])
    # The table names the interval: no heartbeats, seen within two intervals.
    done = run_cluster(stack["reader"], "status", timeout=60)
    assert done.stdout.startswith("Fleet: heartbeats from Prometheus\n")
    assert "No heartbeats are published; a host is live when seen within 4s.\n" in done.stdout


def test_a_monitor_that_stops_answering_goes_stale(stack):
    fleet = stack["fleet"]
    victim = fleet.hosts[500]
    fleet.take_down(victim)
    wait_until(lambda: states_of(status(stack["reader"])[1])[victim] == "stale", timeout=30, interval=0.5,
               message="%s stale after its scrapes fail" % victim)


def test_api_fleet_of_a_real_monitor_reads_prometheus(stack):
    mon = start_monitor(stack["reader"], ["--no-probe"], timeout=30)
    try:
        code, body = mon.get_json("/api/fleet")
        assert code == 200 and body["source"] == "prometheus" and "error" not in body, body.get("error")
        assert len(body["hosts"]) == HOSTS + len(MISSING)
        counts = Counter(row["state"] for row in body["hosts"])
        assert counts["missing"] == len(MISSING) and counts["live"] >= HOSTS - DOWN - 1
        assert body["generatedAt"]
        assert mon.get("/fleet")[0] == 200
    finally:
        mon.stop(timeout=20, check=False)


def test_owner_candidates_are_the_live_hosts(stack):
    done = run_cluster(stack["reader"], "owner", "OPS-7", "--json", timeout=60)
    result = json.loads(done.stdout)
    assert result["livenessKnown"] is True
    assert not set(result["candidates"]) & set(MISSING + stack["fleet"].hosts[-DOWN:])
    assert len(result["candidates"]) >= HOSTS - DOWN - 1


def test_doctor_reads_prometheus(stack):
    done = run_cluster(stack["reader"], "doctor", "--json", timeout=60)
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["liveness-anchor"]["status"] == "INFO" and "Prometheus" in checks["liveness-anchor"]["detail"]
    budget = checks["tracker-budget"]
    assert budget["status"] == "INFO" and "roster host(s) live" in budget["detail"]


def test_at_most_four_queries_and_plain_promql(stack):
    # The queries a status sends are these four, whatever the fleet size.
    queries = list(promread.fleet_queries(INTERVAL_MS)) + [
        promread.readings_query([(h, "acct-%d" % (i % 7)) for i, h in enumerate(stack["fleet"].hosts[:100])],
                                keyless=True)]
    assert len(queries) == 4
    for text in queries:
        assert isinstance(query(stack["prom"].base, text), list)
    calls = []
    real = promread.http_get

    def counting(url, timeout_s, max_bytes):
        calls.append(url)
        return real(url, timeout_s, max_bytes)
    promread.http_get = counting
    try:
        rows = promread.fleet_rows(stack["prom"].base, stack["fleet"].hosts, INTERVAL_MS)
    finally:
        promread.http_get = real
    assert len(calls) == 4 and len(rows) == HOSTS


def test_victoria_metrics_answers_the_same_states(stack):
    fleet = stack["fleet"]
    # A window of 20 s for both readers: remote_write delivers in batches, seconds late on a
    # loaded machine, and a 4 s window would call that lag a missing host.
    prom_reader = dict(stack["reader"], EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS="10000")
    vm_reader = dict(prom_reader, SVC_PROMETHEUS_URL=stack["vm"].base)

    seen = []

    def same():
        _, prom_report = status(prom_reader)
        _, vm_report = status(vm_reader)
        prom_states, vm_states = states_of(prom_report), states_of(vm_report)
        seen[:] = [vm_report.get("error"), vm_report["hosts"][0]["account"],
                   {h: (s, vm_states.get(h)) for h, s in prom_states.items() if vm_states.get(h) != s}]
        if "error" in vm_report or (vm_report["hosts"][0]["account"] or {}).get("label") != "acct-shared":
            return None
        return (prom_report, vm_report) if prom_states == vm_states else None
    try:
        prom_report, vm_report = wait_until(same, timeout=60, interval=1, message="VictoriaMetrics agreeing")
    except AssertionError:
        raise AssertionError("VictoriaMetrics disagrees: %r\n%s" % (seen, stack["vm"].log_tail(800))) from None
    assert vm_report["source"] == "prometheus" and len(vm_report["hosts"]) == HOSTS + len(MISSING)
    vm_rows = {row["host"]: row for row in vm_report["hosts"]}
    assert vm_rows[fleet.hosts[0]]["account"]["label"] == "acct-shared"
    assert vm_rows[fleet.hosts[0]]["account"]["five_hour_pct"] == 95.0


def test_alertmanager_delivers_one_grouped_notification(stack):
    hook = stack["hook"]

    def near_limit():
        found = [n for n in hook.received() if n.get("groupLabels", {}).get("account") == "acct-shared"
                 and n["groupLabels"].get("alertname") == "SvcAccountNearLimit"]
        return found or None
    found = wait_until(near_limit, timeout=60, interval=0.5, message="the grouped notification\n%s"
                       % stack["am"].log_tail())
    assert len(found) == 1
    alerts = found[0]["alerts"]
    assert len(alerts) == SHARED and found[0]["groupLabels"] == {"alertname": "SvcAccountNearLimit",
                                                                 "account": "acct-shared",
                                                                 "window": "five_hour"}
    assert len({a["labels"]["instance"] for a in alerts}) == SHARED


def test_shipped_alertmanager_config_passes_amtool():
    done = __import__("subprocess").run([tool("amtool"), "check-config", str(PROM_DIR / "alertmanager.yml")],
                                        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_amtool_check_config_can_fail(tmp_path):
    broken = tmp_path / "alertmanager.yml"
    broken.write_text((PROM_DIR / "alertmanager.yml").read_text().replace("receiver: svc-team", "receiver: nobody"))
    done = __import__("subprocess").run([tool("amtool"), "check-config", str(broken)], capture_output=True,
                                        text=True, timeout=60)
    assert done.returncode != 0
