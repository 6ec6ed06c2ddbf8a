"""One host's fast clock, odd label or odd name against Debian's real VictoriaMetrics and Prometheus
(docs/defences.md): the fleet read from Prometheus keeps every other host's row.

A handful of hosts (tests/support/bigfleet.py, fed through VictoriaMetrics' import API) where
one host's clock runs a year fast, one exports an account label ending in a newline, and a
series from outside the roster carries a node name ending in one. `svc-cluster status` and a
real monitor's /api/fleet/accounts read them; the values the read writes into its queries are
echoed back by both engines exactly."""
from __future__ import annotations

import json
from typing import List, Optional, Tuple

import pytest

from svcposture.cluster import promql, promread
from tests.support.bigfleet import BigFleet, email
from tests.support.cli import run_cluster
from tests.support.engines import query, start_prometheus, start_victoria, stop_all, tool
from tests.support.home import make_node, node_env
from tests.support.monitor import start_monitor
from tests.support.waiting import wait_until
from tests.monitor.test_metrics_openapi import _validate

YEAR_MS = 365 * 86400 * 1000
INTERVAL_MS = 600000
ADA, BOB, CY, SOLO, EVE = (email(k) for k in (1, 2, 3, 4, 5))
# host -> [(label, login, 5-hour pct)], the active account first. host-00000's clock runs a year
# fast: its reading of ADA says 10 %, the two fresh ones say ADA is exhausted; SOLO, its active
# account, only it reads.
# host-00003 exports BOB under a label ending in a newline, and holds its newest reading.
ACCOUNTS = [
    [("solo", SOLO, 40.0), ("work", ADA, 10.0)],
    [("acct1", ADA, 100.0)],
    [("acct1", ADA, 100.0), ("acct3", CY, 50.0)],
    [("acct2\n", BOB, 30.0)],
    [("acct2", BOB, 25.0), ("acct3", CY, 55.0)],
    # Not in the roster, named `evil` and a newline, holding EVE's newest reading.
    [("acct5", EVE, 5.0)],
]
FAST, ODD_LABEL, ODD_NODE = 0, 3, 5


class OddFleet(BigFleet):
    def __init__(self) -> None:
        super().__init__(len(ACCOUNTS))
        # As a scrape would store it: the import format unescapes `\n` in a label value.
        self.hosts[ODD_NODE] = "evil\\n"
        self.roster = self.hosts[:ODD_NODE] + ["gone-0"]

    def probed_ms(self, i: int) -> int:
        return self.now_ms + YEAR_MS if i == FAST else self.now_ms - 1000 * (i + 1)

    def logins(self, i: int) -> List[Tuple[str, Optional[str]]]:
        return [(label, login) for label, login, _ in ACCOUNTS[i]]

    def five_pct(self, i: int, slot: int) -> float:
        return ACCOUNTS[i][slot][2]

    def stale(self, i: int) -> bool:
        return False


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    tool("victoria-metrics")
    work = tmp_path_factory.mktemp("oddfleet")
    vm = start_victoria(work)
    try:
        fleet = OddFleet()
        fleet.feed(vm.base)
        wait_until(lambda: len(query(vm.base, 'up{node!=""}')) == len(ACCOUNTS), timeout=60, interval=0.5,
                   message="VictoriaMetrics holding every host\n%s" % vm.log_tail())
        home = make_node(work, fleet.hosts[1], fleet.roster, token=None)
        env = node_env(home, SVC_LIVENESS_READ_SOURCE="prometheus", SVC_PROMETHEUS_URL=vm.base,
                       EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS=str(INTERVAL_MS),
                       SVC_TRACKER_URL="http://127.0.0.1:9/graphql")
        yield {"vm": vm, "fleet": fleet, "env": env, "work": work}
    finally:
        stop_all([vm])


def test_one_hosts_odd_label_or_name_costs_no_other_row(odd):
    done = run_cluster(odd["env"], "status", "--json", timeout=120)
    report = json.loads(done.stdout)
    # 3: gone-0 is missing. Not 1 with every host unknown, as when the engine refused the query.
    assert done.returncode == 3 and "error" not in report, (report.get("error"), done.stderr)
    rows = {r["host"]: r for r in report["hosts"]}
    hosts = odd["fleet"].hosts
    assert [r["state"] for r in report["hosts"]] == ["live"] * 5 + ["missing"]
    # The odd label's own entry is dropped; its host's row is there, and the other hosts' BOB
    # carries a reading a row can show.
    assert rows[hosts[ODD_LABEL]]["accounts"] == [] and rows[hosts[ODD_LABEL]]["account"]["label"] is None
    bob = rows[hosts[4]]["account"]
    assert (bob["label"], bob["five_hour_pct"], bob["suspect"]) == ("acct2", 25.0, False)
    assert rows[hosts[2]]["account"]["five_hour_pct"] == 100.0
    assert "\n" not in json.dumps([r["accounts"] for r in report["hosts"]]).replace("\\n", "")


def test_a_reading_from_a_fast_clock_is_suspect_and_never_the_newest(odd):
    done = run_cluster(odd["env"], "status", "--json", timeout=120)
    rows = {r["host"]: r for r in json.loads(done.stdout)["hosts"]}
    hosts = odd["fleet"].hosts
    # ADA's newest believable reading is host-00001's: exhausted, on every host that uses it.
    for host in hosts[1:3]:
        ada = rows[host]["account"]
        assert (ada["status"], ada["five_hour_pct"]) == ("rejected", 100.0), host
        assert ada["suspect"] is False and ada["stale"] is False
    fast = rows[hosts[FAST]]
    assert [(e["label"], e["five_hour_pct"]) for e in fast["accounts"]] == [("solo", 40.0), ("work", None)]
    # SOLO is read by the fast clock only: shown, marked, with no age, never as current.
    solo = fast["account"]
    assert (solo["label"], solo["five_hour_pct"], solo["suspect"], solo["stale"], solo["age_s"]) == \
        ("solo", 40.0, True, True, None)
    mon = start_monitor(odd["env"], ["--no-probe"], timeout=60)
    try:
        body = wait_until(lambda: (lambda b: b if "error" not in b else None)(mon.get_json("/api/fleet/accounts")[1]),
                          timeout=60, interval=0.5, message="the monitor's first read")
        _validate(json.loads(mon.get("/api/openapi.json")[2]), {"$ref": "#/components/schemas/FleetAccounts"}, body)
    finally:
        mon.stop(timeout=20, check=False)
    first = body["accounts"][0]
    assert first["labels"] == ["work", "acct1"] and first["status"] == "rejected", body["accounts"][:2]
    assert (first["fiveHour"]["host"], first["fiveHour"]["pct"], first["fiveHour"]["suspect"]) == \
        (hosts[1], 100.0, False)
    solo = [a for a in body["accounts"] if a["labels"] == ["solo"]][0]
    assert solo["fiveHour"]["pct"] == 40.0 and solo["fiveHour"]["suspect"] is True


NASTY = ["acct1\n", 'a"b', "a\\b", "a\\nb", "tab\there", "cr\r", "nul\x00", "del\x7f", "c1\x85", "\u2028sep",
         "bidi\u202e", "emoji\U0001F600", "é", "{}[]()|.*+?^$", "a-b_c.d", "=~!"]


@pytest.fixture(scope="module")
def prometheus(odd):
    config = odd["work"] / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1h}\n")
    prom = start_prometheus(odd["work"], config)
    try:
        yield prom
    finally:
        stop_all([prom])


@pytest.mark.parametrize("engine", ["victoria-metrics", "prometheus"])
def test_every_value_written_into_a_query_is_read_back_exactly(odd, prometheus, engine):
    base = odd["vm"].base if engine == "victoria-metrics" else prometheus.base
    for value in NASTY:
        echoed = query(base, 'label_replace(vector(1), "v", "%s", "", "")' % promql.promql_string(value))
        assert [s["metric"].get("v") for s in echoed] == [value], (engine, value)
    # A node filter matches exactly the names it is given, whatever they hold.
    pattern = promql.node_pattern(sorted(NASTY))
    for name in NASTY + ["acct1", "a", "ab", "acct1\n\n", "x"]:
        named = 'label_replace(vector(1), "node", "%s", "", "")' % promql.promql_string(name)
        found = query(base, 'label_replace(%s, "hit", "yes", "node", "%s")' % (named, pattern))
        assert [s["metric"].get("hit") or None for s in found] == (["yes"] if name in NASTY else [None]), (engine, name)
    # The readings query of such places is one the engine accepts.
    places = [("host-1", label) for label in NASTY] + [(name, "acct") for name in NASTY]
    assert isinstance(query(base, promread.readings_query(places, keyless=True)), list)
