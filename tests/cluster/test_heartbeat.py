"""The heartbeat's format in one module: pure builders, the wall from the trajectory in memory, the readers."""
from __future__ import annotations

import pytest

from svcposture.settings import Settings
from svcposture.trajectory import history
from svcposture._version import __version__
from svcposture.cluster import heartbeat, liveness
from svcposture.cluster.tracker import Heartbeat
from svcposture.events import ratelimit_sampled

WALL = "2027-01-15T08:20:00.000Z"


def _summary(binding="five_hour", label="acct1"):
    view = {"label": label, "active": True, "bindingWindow": binding,
            "fiveHour": {"pct": 80.0, "resetsAt": "2027-01-15T11:00:00.000Z"},
            "sevenDay": {"pct": 5.0, "resetsAt": "2027-01-20T00:00:00.000Z"}}
    return {"available": True, "status": "ok", "probedAt": 1_800_000_000_000, "active": view, "accounts": [view]}


def _trajectory(label="acct1", five=WALL, seven=None):
    def window(wall):
        return {"pct": 1.0, "resetsAt": None, "forecast": None if wall is None else {"wallAt": wall}}
    return {"node": "n", "probedAt": 1_800_000_000_000, "alerts": [],
            "accounts": [{"label": "other", "fiveHour": window("2030-01-01T00:00:00.000Z")},
                         {"label": label, "fiveHour": window(five), "sevenDay": window(seven)}]}


def test_metadata_is_pure_and_always_has_every_field():
    meta = heartbeat.metadata(host="a", published_at="t", publish_interval_ms=60000, version=__version__,
                              account_status="degraded", quota={"five_hour_pct": 1}, account={"label": "x"})
    assert tuple(meta) == heartbeat.METADATA_FIELDS
    assert meta["accountStatus"] == "degraded" and meta["quota"] == {"five_hour_pct": 1}
    for junk in (None, "", 3, ["ok"]):
        meta = heartbeat.metadata(host="a", published_at="t", publish_interval_ms=1, version="v",
                                  account_status=junk, quota=junk, account=junk)
        assert meta["accountStatus"] == heartbeat.UNAVAILABLE and meta["quota"] is None and meta["account"] is None


def test_the_wall_is_the_binding_windows_forecast_in_the_trajectory():
    assert heartbeat.binding_wall_at(_summary(), _trajectory()) == WALL
    assert heartbeat.binding_wall_at(_summary("seven_day"), _trajectory(seven="2027-01-18T00:00:00.000Z")) \
        == "2027-01-18T00:00:00.000Z"
    assert heartbeat.binding_wall_at(_summary("seven_day"), _trajectory()) is None   # no forecast yet
    assert heartbeat.binding_wall_at(_summary(label="gone"), _trajectory()) is None  # not in the trajectory
    assert heartbeat.binding_wall_at(_summary(binding=None), _trajectory()) is None


@pytest.mark.parametrize("body", [
    None, {}, {"available": False, "node": "n"}, {"accounts": "x"}, {"accounts": [None, 3, "acct1"]},
    {"accounts": [{"label": "acct1", "fiveHour": "x"}]},
    {"accounts": [{"label": "acct1", "fiveHour": {"forecast": {"wallAt": 12}}}]},
    {"accounts": [{"label": "acct1", "fiveHour": {"forecast": ["wallAt"]}}]},
])
def test_a_trajectory_without_a_usable_forecast_gives_no_wall(body):
    assert heartbeat.binding_wall_at(_summary(), body) is None


def test_the_account_source_reads_the_trajectory_in_memory_never_the_history(monkeypatch):
    def no_reads(*args, **kwargs):
        raise AssertionError("the history store was read")
    monkeypatch.setattr(history, "read_rows", no_reads)
    bodies = {"trajectory": _trajectory()}
    source = heartbeat.account_source(_summary, lambda: bodies["trajectory"], 300)
    block = source()
    assert block["wall_at"] == WALL and block["label"] == "acct1" and block["probe_interval_ms"] == 300000
    assert set(block) == set(heartbeat.ACCOUNT_FIELDS)
    bodies["trajectory"] = _trajectory(five="2027-01-15T09:00:00.000Z")  # the next probe's forecast
    assert source()["wall_at"] == "2027-01-15T09:00:00.000Z"


def test_the_publisher_sends_what_the_builders_build(tmp_path):
    from svcposture.events import EventLog
    from svcposture.paths import Paths

    paths = Paths(tmp_path, {"HOME": str(tmp_path)})
    log = EventLog.for_paths(paths)
    log.append(ratelimit_sampled("a", None, {"ratelimit.five_hour_pct": 12.5, "rate_limit.tier": "t"}))
    publisher = liveness.Publisher(paths, Settings(), "a", lambda: "ok", log,
                                   blocks=[("account", heartbeat.account_source(_summary, _trajectory, 300))])
    meta = publisher._metadata("2027-01-15T08:00:00.000Z")  # noqa: SLF001 (the builder under test)
    assert meta == heartbeat.metadata(
        host="a", published_at="2027-01-15T08:00:00.000Z", publish_interval_ms=publisher.interval_ms,
        version=__version__, account_status="ok", quota={"five_hour_pct": 12.5, "rate_limit_tier": "t"},
        account=heartbeat.account_block(_summary(), wall_at=WALL, probe_interval_ms=300000))


def _beat(host, published=None, subtitle=None, updated=None, **meta):
    if published is not None:
        meta["publishedAt"] = published
    return Heartbeat(url=heartbeat.heartbeat_url(host), subtitle=subtitle, metadata=meta, updated_at=updated)


def test_published_at_falls_back_to_the_subtitle_then_the_update_time():
    assert heartbeat.published_ms(_beat("a", "1970-01-01T00:00:01.000Z", "x", "y")) == 1000
    assert heartbeat.published_ms(_beat("a", "junk", "1970-01-01T00:00:02.000Z", "y")) == 2000
    assert heartbeat.published_ms(_beat("a", 5, None, "1970-01-01T00:00:03.000Z")) == 3000
    assert heartbeat.published_ms(_beat("a", None, None, None)) is None


def test_the_newest_of_duplicate_hosts_wins_and_foreign_urls_are_dropped():
    old, new = _beat("a", "1970-01-01T00:00:01.000Z"), _beat("a", "1970-01-01T00:00:09.000Z")
    foreign = Heartbeat(url="https://example.com/x", subtitle=None, metadata={}, updated_at=None)
    assert heartbeat.newest_by_host([new, foreign, old]) == {"a": new}
    assert heartbeat.host_of_heartbeat_url(heartbeat.heartbeat_url("a b/c")) == "a b/c"


@pytest.mark.parametrize("value,expect", [
    (60000, 60000), (0.5, 0.5), (0, 7), (-1, 7), (True, 7), ("60000", 7), (float("nan"), 7), (float("inf"), 7),
    (10 ** 400, 7), (None, 7),
])
def test_a_peers_interval_is_its_own_only_when_it_is_a_positive_finite_number(value, expect):
    assert heartbeat.peer_interval_ms(value, 7) == expect


def test_the_peer_quota_keeps_only_well_shaped_fields():
    raw = {"five_hour_pct": 1.5, "seven_day_pct": True, "seven_day_large_pct": "9", "subscription_type": "max",
           "rate_limit_tier": "x" * 101, "seven_day_resets_at": "\x1b[2J", "extra": 1}
    assert heartbeat.peer_quota(raw) == {"five_hour_pct": 1.5, "subscription_type": "max"}
    assert heartbeat.peer_quota(["x"]) is None


def test_the_fleet_schemas_name_every_field_the_readers_return():
    account = heartbeat.peer_account({"label": "a"}, publish_interval_ms=1, now=0)
    schema = heartbeat.account_schema()
    assert set(schema["properties"]) == set(account)
    # The demo's simulated fleet writes its blocks without `suspect`: every reader sets it.
    assert set(schema["required"]) == set(account) - {"suspect"}
    assert set(heartbeat.quota_schema()["properties"]) == set(heartbeat.QUOTA_BLOCK_FIELDS.values())


# ---------------------------------------------------------------- through a real monitor

def test_a_monitors_heartbeat_carries_the_wall_its_trajectory_serves(tmp_path, monitors):
    import json
    import time

    from svcposture._time import iso_from_ms
    from svcposture.paths import Paths
    from tests.support.home import BEARER, canary, make_node, monitor_env
    from tests.support.provider import ProviderServer
    from tests.support.tracker import TrackerServer
    from tests.support.waiting import wait_until

    token = canary("hbwall")
    now_s = int(time.time())
    resets = iso_from_ms((now_s + 3 * 3600) * 1000)
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    # Three points of this cycle in the history: with the probe's own, enough for a rate.
    paths = Paths(home, {"HOME": str(home)})
    for minutes, pct in ((30, 12.0), (20, 22.0), (10, 32.0)):
        view = {"label": "acct1", "active": True, "fiveHour": {"pct": pct, "resetsAt": resets},
                "sevenDay": {"pct": 10.0, "resetsAt": iso_from_ms((now_s + 4 * 86400) * 1000)}}
        body = {"available": True, "probedAt": (now_s - minutes * 60) * 1000, "accounts": [view], "active": view}
        history.append_rows(paths, history.rows_from_summary(body))
    with TrackerServer(tokens=[BEARER]) as srv, ProviderServer() as provider:
        srv.add_issue("OPS-1")
        provider.set_account(token, five_hour=(0.42, "allowed"), seven_day=(0.10, "allowed"),
                             reset_5h=now_s + 3 * 3600)
        env = monitor_env(home, provider.url, accounts=[("ACCT1", token, "a@example.com")], active="ACCT1",
                          SVC_TRACKER_URL=srv.url, EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS="300",
                          SVC_PROBE_INTERVAL_S="3", SVC_POSTURE_TTL_S="3")
        mon = monitors.start(env)
        try:
            def agreeing():
                meta = srv.attachments("OPS-1").get(liveness.heartbeat_url("a"), {}).get("metadata") or {}
                block = meta.get("account")
                trajectory = mon.get_json("/api/trajectory")[1]
                if not block or not block.get("wall_at") or not trajectory.get("probedAt"):
                    return None
                if block["probed_at"] != iso_from_ms(trajectory["probedAt"]):
                    return None  # a probe in between: look again
                return block, trajectory
            block, trajectory = wait_until(agreeing, timeout=30, message="a heartbeat and a trajectory of one probe")
            account = [a for a in trajectory["accounts"] if a["label"] == "acct1"][0]
            assert block["wall_at"] == account["fiveHour"]["forecast"]["wallAt"]
            assert token not in json.dumps(srv.attachments("OPS-1"))
        finally:
            mon.stop()
