"""What a heartbeat may claim (docs/fleet-prometheus.md): the interval its first beat states, and the
longest staleness a claim can buy. Through the real monitor and the real `svc-cluster status`
against the stand-in tracker that states (and enforces) a budget."""
from __future__ import annotations

import json

from svcposture._time import iso_from_ms, now_ms
from svcposture.cluster import budget
from tests.support.cli import run_json
from tests.support.home import make_node, node_env
from tests.support.monitor import start_monitor
from tests.support.waiting import wait_until

HEARTBEAT = "svc://heartbeat/%s"


def own_beat(anchor_tracker, host):
    return anchor_tracker.attachments("OPS-1").get(HEARTBEAT % host)


def test_the_first_heartbeat_states_the_interval_in_force(tmp_path, anchor_tracker):
    """100 hosts configured at 120 s against 1,500 requests an hour: the budget stretches them to
    400 s, and the monitor's very first heartbeat says so (readers judge staleness by it)."""
    anchor_tracker.enforce_budget(limit=1500, window_s=3600)
    names = ["h%03d" % i for i in range(100)]
    home = make_node(tmp_path, names[0], names, anchor="OPS-1")
    mon = start_monitor(node_env(home, tracker_url=anchor_tracker.url, interval_ms=120000), ["--no-probe"])
    try:
        beat = wait_until(lambda: own_beat(anchor_tracker, names[0]), timeout=60, message="the first heartbeat")
        assert beat["metadata"]["publishIntervalMs"] == 400000, beat["metadata"]
        writes = [c for c in anchor_tracker.calls if c["op"] == "attachmentCreate"]
        assert len(writes) == 1
    finally:
        mon.stop()


def test_a_reply_stating_a_tiny_limit_cannot_buy_hours_of_liveness(tmp_path, anchor_tracker):
    """A tracker stating a limit of 3 an hour would stretch two hosts to the whole hour, and peers
    would then call a dead host live for two; the stretch, and so the claim, stops at 15 minutes."""
    anchor_tracker.enforce_budget(limit=3, window_s=3600)
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    mon = start_monitor(node_env(home, tracker_url=anchor_tracker.url, interval_ms=1000), ["--no-probe"])
    try:
        def stretched():
            beat = own_beat(anchor_tracker, "a")
            claimed = beat["metadata"]["publishIntervalMs"] if beat else None
            return claimed if claimed and claimed > 1000 else None
        claimed = wait_until(stretched, timeout=60, message="a heartbeat stating the stretched interval")
        assert claimed == budget.MAX_STRETCH_MS == 15 * 60 * 1000
    finally:
        mon.stop()


def test_a_peer_claiming_two_hours_is_stale_after_half_an_hour(tmp_path, anchor_tracker):
    """Whatever a peer's heartbeat claims (an old build, a hostile writer), readers honour at most
    the longest stretch: a host silent for 40 minutes is stale, not live."""
    home = make_node(tmp_path, "a", ["a", "b", "c"], anchor="OPS-1")
    published = now_ms()
    for host, age_min, claim in (("b", 40, 2 * 3600 * 1000), ("c", 20, 2 * 3600 * 1000)):
        at = iso_from_ms(published - age_min * 60000)
        anchor_tracker.put_attachment("OPS-1", HEARTBEAT % host, subtitle=at,
                                      metadata={"host": host, "publishedAt": at, "publishIntervalMs": claim})
    code, report = run_json(node_env(home, tracker_url=anchor_tracker.url), "status", "--json")
    states = {h["host"]: h["state"] for h in report["hosts"]}
    assert states == {"a": "missing", "b": "stale", "c": "live"}, json.dumps(report)[:400]
    assert code == 3
