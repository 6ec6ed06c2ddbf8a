"""10,000 hosts of three accounts each, from Debian's real VictoriaMetrics fed through its import
API (tests/support/bigfleet.py; no 10,000 processes): `svc-cluster status`, the read in process
and a real monitor's /api/fleet/accounts find every host and each account's newest reading, in
at most four queries (counted, never timed: docs/performance.md has the times)."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from svcposture._time import iso_from_ms
from svcposture.accountkey import account_key
from svcposture.cluster import promread
from svcposture.cluster.fleetaccounts import accounts_view
from tests.support.bigfleet import MISSING, BigFleet
from tests.support.cli import run_cluster
from tests.support.engines import query, start_victoria, stop_all, tool
from tests.support.home import make_node, node_env, write_json
from tests.support.monitor import start_monitor
from tests.support.waiting import wait_until

HOSTS = 10000
# Twenty minutes: every imported point is inside the liveness window for the whole test.
INTERVAL_MS = 600000


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    tool("victoria-metrics")
    work = tmp_path_factory.mktemp("bigfleet")
    vm = start_victoria(work)
    try:
        fleet = BigFleet(HOSTS)
        fleet.feed(vm.base)
        wait_until(lambda: len(query(vm.base, 'up{node!=""}')) == HOSTS, timeout=120, interval=1,
                   message="VictoriaMetrics holding every host\n%s" % vm.log_tail())
        home = make_node(work, fleet.hosts[0], fleet.roster, token=None)
        env = node_env(home, SVC_LIVENESS_READ_SOURCE="prometheus", SVC_PROMETHEUS_URL=vm.base,
                       EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS=str(INTERVAL_MS),
                       SVC_TRACKER_URL="http://127.0.0.1:9/graphql")
        yield {"vm": vm, "fleet": fleet, "env": env, "home": home}
    finally:
        stop_all([vm])


def expected_state(fleet, host):
    if host not in fleet.hosts:
        return "missing"
    return "stale" if fleet.stale(fleet.hosts.index(host)) else "live"


def test_ten_thousand_hosts_are_read_in_at_most_four_queries(big, monkeypatch):
    fleet = big["fleet"]
    calls = []
    real = promread.http_get

    def counting(url, timeout_s, max_bytes):
        calls.append(url)
        return real(url, timeout_s, max_bytes)
    monkeypatch.setattr(promread, "http_get", counting)
    monkeypatch.setattr(promread, "READ_DEADLINE_S", 120.0)  # a loaded machine; the count is what is checked
    rows = promread.fleet_rows(big["vm"].base, fleet.roster, INTERVAL_MS)
    assert 1 <= len(calls) <= 4
    assert [r["host"] for r in rows] == fleet.roster
    states = Counter(r["state"] for r in rows)
    assert states == Counter(expected_state(fleet, h) for h in fleet.roster)
    assert states["live"] == HOSTS - HOSTS // 500 and states["missing"] == MISSING
    # Every host lists its three accounts, the first active; keys where the email is known.
    live = [r for r in rows if r["state"] == "live"]
    assert all(len(r["accounts"]) == 3 and sum(e["active"] for e in r["accounts"]) == 1 for r in live)
    # Each account's health on its host, from the same queries: refused where the provider refused
    # the token (never read, so no figures), ok everywhere else.
    refused = {(fleet.hosts[i], label) for i in range(HOSTS) for slot, (label, _) in enumerate(fleet.logins(i))
               if fleet.refused(i, slot)}
    healths = Counter((e["health"], (r["host"], e["label"]) in refused) for r in live for e in r["accounts"])
    assert set(healths) == {("ok", False), ("refused", True)} and healths[("refused", True)] >= HOSTS // 100 - 2
    assert all(e["five_hour_pct"] is None for r in live for e in r["accounts"] if e["health"] == "refused")
    view = accounts_view({"hosts": rows, "source": "prometheus", "generatedAt": iso_from_ms(fleet.now_ms)})
    newest = fleet.expected_newest()
    keyed = [a for a in view["accounts"] if a["key"]]
    assert len(keyed) == len(newest) == 1000
    holders = Counter(account_key("claude", mail) for i in range(HOSTS) if not fleet.stale(i)
                      for _, mail in fleet.logins(i) if mail)
    for account in keyed:
        host, pct = newest[account["key"]]
        assert (account["fiveHour"]["host"], account["fiveHour"]["pct"]) == (host, pct), account["key"]
        assert len(account["hosts"]) == holders[account["key"]] and account["sevenDay"]["resetsAt"]
    keyless = [a for a in view["accounts"] if a["key"] is None]
    assert len(keyless) == HOSTS // 50 and all(len(a["hosts"]) == 1 for a in keyless)
    assert keyless[0]["fiveHour"]["pct"] is not None and keyless[0]["fiveHour"]["probedAt"]
    # Most urgent first.
    statuses = [a["status"] for a in view["accounts"]]
    assert statuses[0] == "rejected" and "rejected" not in statuses[statuses.index("degraded"):]
    # The active account block of a host carries its account's newest reading.
    row = [r for r in live if r["host"] == fleet.hosts[1234]][0]
    key = row["account"]["key"]
    assert row["account"]["five_hour_pct"] == newest[key][1] and row["account"]["probed_at"]


def test_status_and_a_monitor_answer_for_ten_thousand_hosts(big):
    fleet = big["fleet"]
    done = run_cluster(big["env"], "status", "--json", timeout=300)
    report = json.loads(done.stdout)
    assert done.returncode == 3 and "error" not in report and report["source"] == "prometheus"
    assert "\n" not in done.stdout.strip()  # past 1,000 hosts on one line, not indented
    assert len(report["hosts"]) == HOSTS + MISSING
    assert Counter(r["state"] for r in report["hosts"]) == Counter(expected_state(fleet, h) for h in fleet.roster)
    mon = start_monitor(big["env"], ["--no-probe"], timeout=60)
    try:
        def answered():
            body = mon.get_json("/api/fleet/accounts")[1]
            return body if "error" not in body else None
        body = wait_until(answered, timeout=120, interval=1, message="the monitor's first read")
        assert body["source"] == "prometheus" and len(body["accounts"]) == 1000 + HOSTS // 50
        assert sum(len(a["hosts"]) for a in body["accounts"]) == 3 * (HOSTS - HOSTS // 500)
        # The owner around the wall answers from the same read: no query of its own.
        reads = mon.get_json("/api/fleet")[1]["generatedAt"]
        owner = mon.get_json("/api/fleet/owner?ticket=ENG-1")[1]
        assert owner["owner"] in owner["candidates"] and len(owner["candidates"]) == HOSTS - HOSTS // 500
        assert owner["livenessKnown"] is True and mon.get_json("/api/fleet")[1]["generatedAt"] == reads
    finally:
        mon.stop(timeout=20, check=False)
