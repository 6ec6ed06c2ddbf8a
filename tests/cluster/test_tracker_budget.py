"""The tracker's hourly budget (docs/fleet-prometheus.md): headers read on every reply, the publisher's
interval stretched to 60 % of the limit, RATELIMITED waited out, the doctor's tracker-budget
check, and 100 real publishers against a stand-in that enforces the budget on a scaled-down hour."""
from __future__ import annotations

import json
import threading
import time

import pytest

from svcposture.settings import Settings
from svcposture.cluster import budget, liveness, tracker
from svcposture.paths import Paths
from svcposture.settings import WINDOW_ENV
from tests.support.cli import run_cluster
from tests.support.home import BEARER, make_node, node_env
from tests.support.tracker import TrackerServer
from tests.support.waiting import wait_until

HOUR_MS = 3600 * 1000


@pytest.fixture
def srv():
    with TrackerServer(tokens=[BEARER]) as server:
        server.add_issue("OPS-1")
        yield server


def client(srv):
    return tracker.TrackerClient(srv.url, tracker.TrackerAuth(BEARER, "bot"))


# ---------------------------------------------------------------- the figures

def test_budget_interval_is_the_roster_share_of_sixty_percent():
    stated = budget.RateBudget(1500, None, None, None, None, None, None)
    # 40 hosts at 120 s are 1,200 requests an hour: 80 % of 1,500; 60 % needs 160 s.
    assert budget.budget_interval_ms(40, stated, HOUR_MS, 0) == 160000
    assert budget.interval_in_force_ms(120000, 40, stated, HOUR_MS, 0) == 160000
    assert budget.interval_in_force_ms(120000, 10, stated, HOUR_MS, 0) == 120000
    assert budget.interval_in_force_ms(120000, 100, stated, HOUR_MS, 0) == 400000
    # Nothing stated: nothing to stretch for.
    assert budget.interval_in_force_ms(120000, 1000, budget.NO_BUDGET, HOUR_MS, 0) == 120000
    # Complexity at 1,000 points a heartbeat against 250,000 an hour binds before the requests do:
    # 40 x 1,000 points every I within 60 % of 250,000 an hour is I = 960 s.
    costly = budget.RateBudget(1500, None, None, 250000, None, None, 1000)
    assert budget.budget_interval_ms(40, costly, HOUR_MS, 0) == 960000
    # Other keys of the user spent the window: at 160 s, 40 hosts would need 450 requests in the
    # 30 min to the reset, and 100 are left: the heartbeats share those 100 (720 s).
    drained = budget.RateBudget(1500, 100, 30 * 60000, None, None, None, None)
    assert budget.budget_interval_ms(40, drained, HOUR_MS, 0) == 720000
    plenty = budget.RateBudget(1500, 1400, 30 * 60000, None, None, None, None)
    assert budget.budget_interval_ms(40, plenty, HOUR_MS, 0) == 160000
    # Never past one window, whatever the figures.
    assert budget.budget_interval_ms(10 ** 6, stated, HOUR_MS, 0) == HOUR_MS


@pytest.mark.parametrize("headers", [
    {}, {"X-RateLimit-Requests-Limit": "lots"}, {"X-RateLimit-Requests-Limit": "-5"},
    {"X-RateLimit-Requests-Limit": "nan"}, {"X-RateLimit-Requests-Limit": "1e400"},
    {"X-RateLimit-Requests-Limit": "0"}, {"X-RateLimit-Requests-Limit": "9" * 100},
    {"X-RateLimit-Requests-Limit": "\x00\n"}, {"X-Complexity": "inf"},
])
def test_hostile_budget_headers_state_nothing(headers):
    stated = budget.budget_from_headers(headers)
    assert stated.requests_limit is None and stated.complexity_cost is None
    assert budget.interval_in_force_ms(120000, 50, stated, HOUR_MS, 0) == 120000


def test_headers_in_seconds_or_milliseconds_and_a_non_mapping():
    stated = budget.budget_from_headers({"X-RateLimit-Requests-Limit": "1500", "X-RateLimit-Requests-Reset":
                                         "1700000000", "X-RateLimit-Complexity-Reset": "1700000000123"})
    assert stated.requests_limit == 1500 and stated.requests_reset_ms == 1700000000000
    assert stated.complexity_reset_ms == 1700000000123
    assert budget.budget_from_headers(["not", "a", "mapping"]) == budget.NO_BUDGET
    assert budget.budget_from_headers(None) == budget.NO_BUDGET


# ---------------------------------------------------------------- the client

def test_client_reads_the_budget_on_every_reply(srv):
    gate = srv.enforce_budget(limit=5, window_s=3600, complexity_limit=1000, cost=7)
    c = client(srv)
    c.fetch_issue("OPS-1")
    assert c.budget.requests_limit == 5 and c.budget.requests_remaining == 4
    assert c.budget.complexity_limit == 1000 and c.budget.complexity_remaining == 993 and c.budget.complexity_cost == 7
    c.fetch_issue("OPS-1")
    assert c.budget.requests_remaining == 3
    for _ in range(3):
        c.fetch_issue("OPS-1")
    with pytest.raises(tracker.TrackerRateLimitedError) as info:
        c.fetch_issue("OPS-1")
    # Refused replies carry the headers too, and the wait is until the stated reset.
    assert c.budget.requests_remaining == 0 and gate.refused == 1
    assert 3000 < info.value.retry_after_s <= 3600


@pytest.mark.parametrize("status", [400, 429])
def test_ratelimited_waits_until_the_stated_reset(srv, status):
    srv.enforce_budget(limit=1, window_s=40, refusal_status=status)
    c = client(srv)
    c.fetch_issue("OPS-1")
    with pytest.raises(tracker.TrackerRateLimitedError) as info:
        c.fetch_issue("OPS-1")
    assert 1 <= info.value.retry_after_s <= 40


def test_publisher_stretches_its_interval_and_says_so_in_the_heartbeat(tmp_path, srv):
    srv.enforce_budget(limit=1500, window_s=3600)
    names = ["h%03d" % i for i in range(100)]
    home = make_node(tmp_path, names[0], names, anchor="OPS-1")
    environ = {"HOME": str(home), "SVC_TRACKER_URL": srv.url, liveness.INTERVAL_ENV: "120000"}
    publisher = liveness.Publisher(Paths(home, environ), Settings.from_environ(environ), names[0], lambda: "ok", None)
    publisher.arm()
    try:
        assert publisher.tick() == "publishing"
        # The anchor was read for the budget before the first beat, so even the first one claims
        # the interval in force: 100 hosts in 60 % of 1,500 an hour.
        first = srv.attachments("OPS-1")[liveness.heartbeat_url(names[0])]["metadata"]
        assert first["publishIntervalMs"] == 400000 and publisher._next_wait_s() == 400.0
        assert [c["op"] for c in srv.calls] == ["issue", "attachmentCreate"]
        publisher.tick()
        second = srv.attachments("OPS-1")[liveness.heartbeat_url(names[0])]["metadata"]
        assert second["publishIntervalMs"] == 400000 and publisher._next_wait_s() == 400.0
        # Asked once: later beats learn the budget from their own replies.
        assert [c["op"] for c in srv.calls] == ["issue", "attachmentCreate", "attachmentCreate"]
        assert publisher.snapshot()["configuredIntervalMs"] == 120000
    finally:
        publisher.stop()


def test_publisher_rate_limited_waits_for_the_reset(tmp_path, srv):
    # Two requests a window: the budget lookup before the first beat, and that beat.
    srv.enforce_budget(limit=2, window_s=30)
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    environ = {"HOME": str(home), "SVC_TRACKER_URL": srv.url, liveness.INTERVAL_ENV: "200"}
    publisher = liveness.Publisher(Paths(home, environ), Settings.from_environ(environ), "a", lambda: "ok", None)
    publisher.arm()
    assert publisher.tick() == "publishing"
    assert publisher.tick() == "backoff"
    assert 1 <= publisher._next_wait_s() <= 30
    calls = len(srv.calls)
    assert publisher.tick() == "backoff" and len(srv.calls) == calls  # no request before the reset


# ---------------------------------------------------------------- a fleet on a scaled-down hour

# The hour scaled down to 9 s and the limit with it, so that the figures hold whatever the machine's
# speed: the budgeted fleet needs a few requests a second, while the unbudgeted one asks for 67 a
# second and is past the limit after about 100 requests, which even a loaded machine sends in time.
WINDOW_S = 9.0
HOSTS = 20
LIMIT = 100
# 20 hosts within 60 % of 100 requests per 9 s window: one beat every 3 s each.
BUDGET_INTERVAL_MS = 3000
# The reader below asks every 0.5 s: 18 requests a window, within the 40 % left for reads.
READS_PER_WINDOW = int(WINDOW_S / 0.5)


class UnbudgetedPublisher(liveness.Publisher):
    """The publisher as it was before budgeting: it reads nothing from the replies."""

    def _apply_budget(self, stated):
        pass

    def _learn_budget(self, client, anchor):
        pass


def run_fleet(tmp_path, srv, publisher_class, windows):
    """HOSTS publishers and one reader (every 0.5 s) for `windows` windows; (reports, gate)."""
    gate = srv.enforce_budget(limit=LIMIT, window_s=WINDOW_S)
    names = ["host-%03d" % i for i in range(HOSTS)]
    home = make_node(tmp_path, names[0], names, anchor="OPS-1")
    # The default 120 s interval in an hour, scaled to the window: 300 ms in 9 s.
    environ = {"HOME": str(home), "SVC_TRACKER_URL": srv.url,
               liveness.INTERVAL_ENV: str(int(120000 * WINDOW_S / 3600)),
               WINDOW_ENV: str(int(WINDOW_S * 1000))}
    paths = Paths(home, environ)
    publishers = [publisher_class(paths, Settings.from_environ(environ), name, lambda: "ok", None) for name in names]
    reports = []
    try:
        for p in publishers:
            p.start()
        # Judged from every host's first beat on: each claims the interval in force from the start.
        wait_until(lambda: all(p.published >= 1 for p in publishers), timeout=60,
                   message="every host's first beat")
        deadline = time.monotonic() + windows * WINDOW_S
        while time.monotonic() < deadline:
            reports.append(liveness.collect_status(paths, Settings.from_environ(environ, strict=False)))
            time.sleep(0.5)  # the reader's pace, not a wait for anything
    finally:
        stoppers = [threading.Thread(target=p.stop) for p in publishers]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
    return reports, gate


def test_a_budgeted_fleet_publishes_within_budget_and_none_is_marked_dead(tmp_path, srv):
    reports, gate = run_fleet(tmp_path, srv, liveness.Publisher, windows=2)
    assert gate.refused == 0, gate.per_window
    # After the first window (each host's one budget lookup falls in it) heartbeats and reads
    # stay within the heartbeats' 60 % and the reads' share.
    assert max(gate.per_window[1:-1] or [0]) <= 0.6 * LIMIT + READS_PER_WINDOW + 2, gate.per_window
    assert reports and all(not r.get("error") for r in reports)
    dead = [(h["host"], h["state"]) for r in reports for h in r["hosts"] if h["state"] != "live"]
    assert dead == []
    assert {r["publishIntervalMs"] for r in reports[-3:]} == {BUDGET_INTERVAL_MS}


def test_without_budgeting_the_same_fleet_is_refused_and_looks_dead(tmp_path, srv):
    # The control: the same hosts at the configured interval drain the limit, are refused,
    # and readers see them unknown or stale.
    reports, gate = run_fleet(tmp_path, srv, UnbudgetedPublisher, windows=1)
    assert gate.refused > 0
    assert any(r.get("error") or any(h["state"] != "live" for h in r["hosts"]) for r in reports)


# ---------------------------------------------------------------- doctor and status

def doctor_budget(env):
    done = run_cluster(env, "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    return done.returncode, checks["tracker-budget"]


@pytest.mark.parametrize("hosts,status,percent", [(10, "PASS", "20 %"), (40, "WARN", "80 %"),
                                                  (60, "FAIL", "120 %")])
def test_doctor_tracker_budget(tmp_path, srv, hosts, status, percent):
    srv.enforce_budget(limit=1500, window_s=3600)
    names = ["h%02d" % i for i in range(hosts)]
    home = make_node(tmp_path, names[0], names, anchor="OPS-1")
    code, check = doctor_budget(node_env(home, tracker_url=srv.url))
    assert check["status"] == status, check
    assert percent in check["detail"] and "1500" in check["detail"]
    if status == "PASS":
        assert "prometheus" not in check["detail"]
    else:
        assert "SVC_LIVENESS_READ_SOURCE=prometheus" in check["detail"]
        assert "%g s" % (hosts * 3600 / 900.0) in check["detail"]
    assert (code == 1) is (status == "FAIL")


def test_doctor_tracker_budget_without_stated_limit_is_info(tmp_path, srv):
    names = ["h%02d" % i for i in range(60)]
    home = make_node(tmp_path, names[0], names, anchor="OPS-1")
    code, check = doctor_budget(node_env(home, tracker_url=srv.url))
    assert check["status"] == "INFO" and "120 %" in check["detail"] and "stated no rate limit" in check["detail"]


def test_status_prints_the_interval_in_force(tmp_path, srv):
    srv.enforce_budget(limit=1500, window_s=3600)
    names = ["h%03d" % i for i in range(100)]
    home = make_node(tmp_path, names[0], names, anchor="OPS-1")
    env = node_env(home, tracker_url=srv.url)
    done = run_cluster(env, "status")
    assert "A heartbeat every 6m 40s; a host is live when seen within 13m 20s (stretched from 2m" in done.stdout, \
        done.stdout[:400]
    done = run_cluster(env, "status", "--json")
    assert json.loads(done.stdout)["publishIntervalMs"] == 400000
    small = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1", name="small")
    done = run_cluster(node_env(small, tracker_url=srv.url), "status")
    assert "A heartbeat every 2m; a host is live when seen within 4m.\n" in done.stdout
