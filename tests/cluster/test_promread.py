"""Liveness read from Prometheus (SVC_LIVENESS_READ_SOURCE=prometheus) against a scripted
query API: the states and account blocks it derives, at most four queries, and every broken
or hostile reply making liveness unknown (exit 1, one line) rather than anyone dead."""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcposture.settings import Settings
from svcposture.cluster import liveness, promql, promread
from svcposture.monitor.exposition import render_metrics
from svcposture.paths import Paths
from tests.support.cli import run_cluster
from tests.support.home import REPO, make_node, node_env
from tests.support.httpserver import StandInServer
from tests.support.monitor import start_monitor

ROSTER = ["alpha", "bravo", "charlie", "delta", "echo"]


class PromStub:
    """/api/v1/query on 127.0.0.1: `answer(query) -> (status, raw body)`; queries recorded."""

    def __init__(self, answer: Callable[[str], Tuple[int, bytes]]) -> None:
        self.answer = answer
        self.queries: List[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                parts = urllib.parse.urlsplit(self.path)
                text = urllib.parse.parse_qs(parts.query).get("query", [""])[0]
                owner.queries.append(text)
                status, raw = owner.answer(text)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(raw)

        self._httpd = StandInServer(("127.0.0.1", 0), self, Handler)
        self.url = "http://127.0.0.1:%d" % self._httpd.server_address[1]

    def __enter__(self) -> "PromStub":
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def vector(samples: List[Tuple[Dict[str, str], Any]]) -> bytes:
    now = time.time()
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [now, str(v)]} for m, v in samples]}}).encode()


KEY = "0123456789abcdef"


def healthy(text: str) -> Tuple[int, bytes]:
    now = time.time()
    if text.startswith("max by (node) (max_over_time"):
        return 200, vector([({"node": "alpha"}, 1), ({"node": "bravo"}, 1), ({"node": "charlie"}, 0),
                            ({"node": "echo"}, 1), ({"node": "not-in-roster"}, 1)])
    if text.startswith("max by (node, provider, account, account_key) (svc_account_probed_at_seconds"):
        return 200, vector([
            ({"node": "alpha", "account": "acct-a", "account_key": KEY, "provider": "claude"}, now - 30),
            ({"node": "alpha", "account": "other", "provider": "claude"}, now - 30),
            ({"node": "bravo", "account": "b\x1b[31mad", "provider": "claude"}, now),
            # A series no roster target labelled, and a provider no node knows: set aside.
            ({"account": "orphan", "account_key": KEY, "provider": "claude"}, now + 60),
            ({"node": "alpha", "account": "odd", "provider": "Not A Provider"}, now)])
    if text.startswith("max by (node, provider, account) (timestamp(svc_node_active_account))"):
        # Each active account valued when it was scraped; bravo's probes fail.
        return 200, vector([({"node": "alpha", "account": "acct-a", "provider": "claude"}, now - 2),
                            ({"node": "bravo", "account": "b\x1b[31mad"}, now),
                            ({"node": "bravo", "provider": "claude", "status": "error"}, 1),
                            ({"node": "alpha", "provider": "claude", "status": "error"}, 0)])
    figures = [({"__name__": "svc_account_utilization_percent", "node": "alpha", "account": "acct-a",
                 "provider": "claude", "window": "five_hour"}, 91.5),
               ({"__name__": "svc_account_utilization_percent", "node": "alpha", "account": "acct-a",
                 "provider": "claude", "window": "seven_day"}, 12),
               ({"__name__": "svc_account_utilization_percent", "node": "alpha", "account": "other",
                 "provider": "claude", "window": "five_hour"}, 3),
               ({"__name__": "svc_account_window_resets_at_seconds", "node": "alpha", "account": "acct-a",
                 "provider": "claude", "window": "five_hour"}, now + 3600),
               ({"__name__": "svc_account_forecast_wall_timestamp_seconds", "node": "alpha", "account": "acct-a",
                 "provider": "claude", "window": "five_hour"}, now + 600),
               # Asked apart with `== 1`, a status series comes back without its name.
               ({"node": "alpha", "account": "acct-a", "provider": "claude", "status": "degraded"}, 1),
               ({"__name__": "svc_account_utilization_percent", "node": "bravo", "account": "b\x1b[31mad",
                 "provider": "claude", "window": "five_hour"}, 1e300)]
    return 200, vector(figures)


def reader_env(tmp_path, url: Optional[str], **more: str) -> Dict[str, str]:
    home = make_node(tmp_path, "alpha", ROSTER, token=None)
    env = node_env(home, EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS="60000", SVC_LIVENESS_READ_SOURCE="prometheus",
                   SVC_TRACKER_URL="http://127.0.0.1:9/graphql", **more)
    if url is not None:
        env["SVC_PROMETHEUS_URL"] = url
    return env


def test_states_and_account_blocks_from_four_queries(tmp_path):
    with PromStub(healthy) as prom:
        done = run_cluster(reader_env(tmp_path, prom.url), "status", "--json")
        assert len(prom.queries) == 4
        # Three are independent and asked at once; the fourth follows the accounts' reply, so on a
        # loaded machine it may reach the engine before a slow one of the three.
        first = promread.fleet_queries(60000)
        assert sorted(q for q in prom.queries if q in first) == sorted(first)
        readings = [q for q in prom.queries if q not in first]
        # It asks for the figures of the node holding acct-a's newest reading, and of accounts
        # without a key.
        assert len(readings) == 1 and 'node=~"alpha"' in readings[0] and 'account_key=""' in readings[0]
        assert "orphan" not in readings[0]
    report = json.loads(done.stdout)
    assert done.returncode == 3 and report["source"] == "prometheus" and report["publishIntervalMs"] == 60000
    rows = {r["host"]: r for r in report["hosts"]}
    assert [r["host"] for r in report["hosts"]] == ROSTER
    assert {h: r["state"] for h, r in rows.items()} == {"alpha": "live", "bravo": "live", "charlie": "stale",
                                                        "delta": "missing", "echo": "live"}
    alpha = rows["alpha"]["account"]
    assert alpha["label"] == "acct-a" and alpha["key"] == KEY
    assert alpha["five_hour_pct"] == 91.5 and alpha["seven_day_pct"] == 12
    assert alpha["status"] == "degraded" and alpha["wall_at"] and alpha["five_hour_resets_at"]
    assert alpha["probed_at"] and alpha["stale"] is False and 1 <= rows["alpha"]["ageS"] < 30
    assert rows["alpha"]["quota"]["five_hour_pct"] == 91.5
    entries = {e["label"]: e for e in rows["alpha"]["accounts"]}
    assert entries["acct-a"]["active"] is True and entries["other"]["active"] is False
    assert entries["other"]["key"] is None and entries["other"]["five_hour_pct"] == 3
    # A hostile label and an absurd figure are dropped field by field, never echoed.
    assert rows["bravo"]["account"]["label"] is None and rows["bravo"]["account"]["five_hour_pct"] is None
    assert rows["bravo"]["accounts"] == []
    # bravo's probes fail: its active block says so, whatever the account's newest reading says.
    assert rows["bravo"]["account"]["status"] == "error" and alpha["status"] == "degraded"
    assert 0 <= rows["bravo"]["ageS"] < 30
    # A live host without an active account has no series saying when it was scraped.
    assert rows["echo"]["ageS"] is None and rows["echo"]["account"] is None
    assert rows["charlie"]["account"] is None and rows["charlie"]["ageS"] is None
    assert rows["delta"] == {"host": "delta", "state": "missing", "ageS": None, "quota": None, "account": None,
                             "accounts": []}


def sick(text: str) -> Tuple[int, bytes]:
    """healthy(), with health: alpha's `other` rate-limited, and bravo holding an account whose token
    the provider refused before it was ever read (no reading time: only its health says it is there)."""
    status, raw = healthy(text)
    if not text.startswith("max by (node, provider, account, account_key) (svc_account_probed_at_seconds"):
        if "svc_account_health" not in text:
            return status, raw
        # The readings query: the health of the accounts that are not ok, by their nodes.
        assert re.search(r'svc_account_health\{node=~"[^"]*",health!="ok"\} == 1', text), text
        found = json.loads(raw)["data"]["result"]
        extra = [({"node": "alpha", "account": "other", "provider": "claude", "health": "limited"}, 1),
                 ({"node": "bravo", "account": "never", "provider": "claude", "health": "refused"}, 1)]
        return 200, vector([(e["metric"], e["value"][1]) for e in found] + extra)
    found = json.loads(raw)["data"]["result"]
    flags = [({"node": "alpha", "account": "other", "provider": "claude", "health": "ok"}, 0),
             ({"node": "bravo", "account": "never", "account_key": "fedcba9876543210", "provider": "claude",
               "health": "ok"}, 0)]
    return 200, vector([(e["metric"], e["value"][1]) for e in found] + flags)


def test_health_comes_in_the_same_four_queries(tmp_path):
    with PromStub(sick) as prom:
        done = run_cluster(reader_env(tmp_path, prom.url), "status", "--json")
        assert len(prom.queries) == 4
        assert 'svc_account_health{health="ok"} == 0' in promread.fleet_queries(60000)[1]
        assert node_filters(prom.queries[3])[-1] == "(?:alpha|bravo)"
    rows = {r["host"]: r for r in json.loads(done.stdout)["hosts"]}
    healths = {(h, e["label"]): e["health"] for h, r in rows.items() for e in r["accounts"]}
    assert healths == {("alpha", "acct-a"): "ok", ("alpha", "other"): "limited", ("bravo", "never"): "refused"}
    never = rows["bravo"]["accounts"][0]
    assert never["key"] == "fedcba9876543210" and never["probed_at"] is None and never["five_hour_pct"] is None
    # Without a sick account the readings query asks no health.
    with PromStub(healthy) as prom:
        run_cluster(reader_env(tmp_path / "well", prom.url), "status", "--json")
        assert "svc_account_health" not in prom.queries[3]


def test_queries_are_plain_promql_over_twice_the_interval():
    hosts_q, accounts_q, active_q = promread.fleet_queries(120000)
    assert hosts_q.startswith('max by (node) (max_over_time(up[240s]))')
    assert accounts_q.startswith("max by (node, provider, account, account_key) (svc_account_probed_at_seconds")
    assert active_q.startswith("max by (node, provider, account) (timestamp(svc_node_active_account))")
    # Each node is asked for the account it holds the newest reading of, grouped by label.
    readings = promread.readings_query([("a.b", "work"), ("c", "work"), ("c", "home")], keyless=False)
    assert node_filters(readings) == ["c", "(?:c|a\\\\.b)"] * 2 and 'account_key=""' not in readings
    assert readings.count('account="home",node=~"c"') == 2 and readings.count('account="work"') == 2
    assert "topk" not in readings and "svc_account_status{" in readings
    # More labels than a query should carry, or one that would need escaping: asked by node alone.
    for labels in (["l%d" % i for i in range(promread.MAX_LABEL_GROUPS + 1)], ['a"b']):
        by_node = promread.readings_query([("h%d" % i, label) for i, label in enumerate(labels)], keyless=False)
        assert 'account="' not in by_node and len(node_filters(by_node)) == 2
    # A fleet's names share their prefixes: 3,000 of them still fit, written once per prefix.
    many = [("host-%05d" % i, "acct%d" % (i // 1000)) for i in range(3000)]
    assert len(node_filters(promread.readings_query(many, keyless=True))) == 6
    # Labels taking turns along the names split them into groups that share little: by node.
    turns = [("host-%05d" % i, "acct%d" % (i % 3)) for i in range(3000)]
    assert len(node_filters(promread.readings_query(turns, keyless=True))) == 2
    # Names too unlike each other to fit twice are written once; past that, or with a name that is
    # no host name, every node is asked.
    scattered = [(hashlib.sha1(str(i).encode()).hexdigest()[:12], "acct") for i in range(1500)]
    assert "topk" in promread.readings_query(scattered[:800], keyless=False)
    assert node_filters(promread.readings_query(scattered, keyless=False)) == []
    assert 'node!=""' in promread.readings_query([('a"b', "acct")], keyless=False)
    assert promread.readings_query([], keyless=False) is None
    assert all(len(promread.readings_query(p, keyless=True)) <= promread.MAX_QUERY
               for p in (many, scattered[:800], scattered))


def node_filters(query):
    return re.findall(r'node=~"([^"]*)"', query)


@given(st.sets(st.text(alphabet="ab.-_19", min_size=1, max_size=6), min_size=1, max_size=30),
       st.sets(st.text(alphabet="ab.-_19", min_size=1, max_size=6), max_size=30))
@settings(max_examples=300, deadline=None)
def test_the_node_filter_matches_exactly_the_names_it_is_given(names, others):
    # What the engine reads: PromQL unescapes the string once, then matches the whole label value.
    pattern = re.compile("(?:%s)" % promread.node_pattern(sorted(names)).replace("\\\\", "\\"))
    assert {n for n in names | others if pattern.fullmatch(n)} == names


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)


def unquoted(inside):
    # What the engine reads back from a double-quoted PromQL string: the escapes promql.py writes
    # are JSON's (tests/cluster/test_fleet_odd_hosts.py has both real engines echo them).
    return json.loads('"%s"' % inside)


@given(TEXT)
@settings(max_examples=300, deadline=None)
def test_a_value_written_as_a_promql_string_reads_back_exactly(value):
    written = promql.promql_string(value)
    assert "\n" not in written and unquoted(written) == value


@given(st.sets(TEXT, min_size=1, max_size=20), st.sets(TEXT, max_size=20))
@settings(max_examples=300, deadline=None)
def test_the_node_filter_matches_exactly_any_names_it_is_given(names, others):
    pattern = re.compile("(?:%s)" % unquoted(promql.node_pattern(sorted(names))), re.S)
    assert {n for n in names | others if pattern.fullmatch(n)} == names


@pytest.mark.parametrize("places", [[("node-a", "acct1\n")], [("node-a\n", "acct1")], [("node-a", 'x"y')],
                                    [("node-a", "acct1"), ("node-\\b", "acct1")]])
def test_a_name_or_label_ending_in_a_newline_is_never_written_raw(places):
    query = promread.readings_query(places, keyless=True)
    # `$` matches before a final newline: the names and labels are matched whole, or left out.
    assert "\n" not in query and "acct1\\n" not in query
    assert re.findall(r'account="([^"]*)"', query) in ([], ["acct1"] * 2)


BROKEN = {
    "garbage": (200, b"\x00\xffnot json{{"),
    "html": (502, b"<html>bad gateway</html>"),
    "empty": (200, b""),
    "not-object": (200, b"[1, 2, 3]"),
    "error-status": (400, json.dumps({"status": "error", "errorType": "bad_data",
                                      "error": "parse error\n\x1b[31m" + "x" * 500}).encode()),
    "matrix": (200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode()),
    "bad-sample": (200, json.dumps({"status": "success", "data": {"resultType": "vector",
                                                                  "result": [{"metric": "x", "value": 1}]}}).encode()),
    "bad-value": (200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"node": "alpha"}, "value": [1, "many"]}]}}).encode()),
    "non-string-label": (200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"node": ["alpha"]}, "value": [1, "1"]}]}}).encode()),
    "deep": (200, b'{"status": "success", "data": ' + b"[" * 100000),
    "success-with-500": (500, vector([({"node": "alpha"}, 1)])),
}


@pytest.mark.parametrize("mode", sorted(BROKEN))
def test_a_broken_reply_makes_liveness_unknown_never_dead(tmp_path, mode):
    with PromStub(lambda text: BROKEN[mode]) as prom:
        env = reader_env(tmp_path, prom.url)
        done = run_cluster(env, "status", "--json")
        text = run_cluster(env, "status")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["error"].startswith("Prometheus") and "\n" not in report["error"]
    assert {r["state"] for r in report["hosts"]} == {"unknown"}
    assert text.returncode == 1 and len(text.stderr.strip().splitlines()) == 1 and "Traceback" not in text.stderr
    assert "\x1b" not in done.stdout + text.stderr


def test_the_readings_query_failing_fails_the_whole_read(tmp_path):
    def readings_fail(text: str) -> Tuple[int, bytes]:
        return BROKEN["garbage"] if text.startswith("max by (__name__") else healthy(text)
    with PromStub(readings_fail) as prom:
        done = run_cluster(reader_env(tmp_path, prom.url), "status", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and {r["state"] for r in report["hosts"]} == {"unknown"}


@pytest.mark.parametrize("url,needle", [(None, "SVC_PROMETHEUS_URL is unset"),
                                        ("ftp://127.0.0.1:9", "http(s) URL"),
                                        ("http://127.0.0.1:9", "cannot reach Prometheus")])
def test_unset_bad_or_unreachable_url(tmp_path, url, needle):
    done = run_cluster(reader_env(tmp_path, url), "status")
    assert done.returncode == 1 and needle in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "unknown" in done.stdout and "missing" not in done.stdout


def test_a_hanging_prometheus_is_cut_by_the_read_deadline(tmp_path, monkeypatch):
    def slow(text: str) -> Tuple[int, bytes]:
        time.sleep(1.5)
        return healthy(text)
    monkeypatch.setattr(promread, "READ_DEADLINE_S", 2.0)
    with PromStub(slow) as prom:
        env = reader_env(tmp_path, prom.url)
        start = time.monotonic()
        with pytest.raises(promread.PrometheusUnreachableError):
            promread.fleet_rows(env["SVC_PROMETHEUS_URL"], ROSTER, 60000)
        assert time.monotonic() - start < 4.5


def test_api_fleet_says_prometheus_is_unreachable_and_marks_nobody_dead(tmp_path):
    mon = start_monitor(reader_env(tmp_path, "http://127.0.0.1:9"), ["--no-probe"], timeout=30)
    try:
        code, body = mon.get_json("/api/fleet")
    finally:
        mon.stop(timeout=20, check=False)
    assert code == 200 and body["source"] == "prometheus" and "cannot reach Prometheus" in body["error"]
    assert {r["state"] for r in body["hosts"]} == {"unknown"}


def test_publisher_is_off_and_owner_uses_prometheus(tmp_path):
    env = reader_env(tmp_path, "http://127.0.0.1:9")
    paths = Paths(env["HOME"], env)
    publisher = liveness.Publisher(paths, Settings.from_environ(env), "alpha", lambda: "ok", None)
    publisher.arm()
    assert publisher.tick() == "off" and "prometheus" in publisher.detail
    with PromStub(healthy) as prom:
        done = run_cluster(reader_env(tmp_path, prom.url), "owner", "OPS-1", "--json")
    result = json.loads(done.stdout)
    assert result["livenessKnown"] is True and result["candidates"] == ["alpha", "bravo", "echo"]


def test_monitor_exports_its_active_account_for_the_fleet():
    last = {"available": True, "node": 'no"de\\x', "status": "ok", "accounts": [],
            "active": {"label": "acct-1", "fiveHour": None, "sevenDay": None}}
    text = render_metrics([("claude", {"last": last})], subscribers=0, subscribers_max=1)
    assert '# TYPE svc_node_active_account gauge' in text
    assert 'svc_node_active_account{node="no\\"de\\\\x",account="acct-1",provider="claude"} 1' in text
    for last in (None, {"available": False, "node": "n"}, dict(last, active=None)):
        text = render_metrics([("claude", {"last": last})], subscribers=0, subscribers_max=1)
        assert "svc_node_active_account{" not in text


def test_the_queries_in_the_docs_are_the_ones_sent():
    # docs/fleet-prometheus.md shows the queries for a 120 s interval, node-a and node-b holding the
    # newest readings of accounts they both call `work`.
    text = (REPO / "docs" / "fleet-prometheus.md").read_text()
    section = text.split("### The queries are plain PromQL", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```text\n(.*?)```", section, re.S)
    shown = [" ".join(q.split()) for block in blocks[:2] for q in block.split("\n\n")]
    sent = list(promread.fleet_queries(120000)) + [promread.readings_query([("node-a", "work"), ("node-b", "work")],
                                                                           keyless=False)]
    assert [q.replace("( ", "(") for q in shown] == sent
