"""The fleet through `svc-cluster status`: paged anchor reads, 500 hosts, the account block, hostile peers."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest

from svcposture.settings import Settings
from svcposture._time import iso_from_ms
from svcposture.cluster import liveness, tracker
from svcposture.cluster.heartbeat import account_block, peer_account
from svcposture.paths import Paths
from tests.support.cli import run_inproc, run_json
from tests.support.fleet import populate
from tests.support.home import BEARER, CANARY, make_node, node_env


def client(anchor_tracker):
    return tracker.TrackerClient(anchor_tracker.url, tracker.TrackerAuth(BEARER, "bot"))


def post(anchor_tracker, query, variables):
    request = urllib.request.Request(anchor_tracker.url, data=json.dumps({"query": query, "variables": variables}).encode(),
                                     headers={"Authorization": BEARER, "Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def beat(anchor_tracker, host, age_s=1.0, url=None, **meta):
    published = iso_from_ms(int((time.time() - age_s) * 1000))
    metadata = {"host": host, "publishedAt": published, "publishIntervalMs": 60000}
    metadata.update(meta)
    anchor_tracker.put_attachment("OPS-1", url or liveness.heartbeat_url(host), subtitle=published, metadata=metadata)


# ---------------------------------------------------------------- pagination

def test_the_test_tracker_pages_like_linear(anchor_tracker):
    populate(anchor_tracker, "OPS-1", 120, stale_every=0, missing_every=0)
    unpaged = ("query($id: String!, $prefix: String!) { issue(id: $id) {id attachments(filter:{url:{startsWith: "
               "$prefix}}){nodes{url} pageInfo{hasNextPage endCursor}}} }")
    status, body = post(anchor_tracker, unpaged, {"id": "OPS-1", "prefix": "svc://heartbeat/"})
    page = body["data"]["issue"]["attachments"]
    # Linear's default page is 50: a reader that ignores pageInfo loses the rest.
    assert status == 200 and len(page["nodes"]) == 50 and page["pageInfo"]["hasNextPage"] is True
    too_big = tracker.ISSUE_QUERY.replace("first: 100", "first: 300")
    status, body = post(anchor_tracker, too_big, {"id": "OPS-1", "prefix": "svc://heartbeat/", "after": None})
    assert status == 400 and body["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    status, body = post(anchor_tracker, tracker.ISSUE_QUERY, {"id": "OPS-1", "prefix": "svc://heartbeat/", "after": "forged"})
    assert status == 400


def test_500_heartbeats_are_read_in_5_pages_of_100(anchor_tracker):
    names = populate(anchor_tracker, "OPS-1", 500, stale_every=0, missing_every=0)
    issue = client(anchor_tracker).fetch_issue("OPS-1")
    assert sorted(liveness.host_of_heartbeat_url(h.url) for h in issue.heartbeats) == names
    calls = [c for c in anchor_tracker.calls if c["op"] == "issue"]
    assert len(calls) == 5
    assert all("first: 100" in c["query"] for c in calls)
    assert calls[0]["variables"]["after"] is None and all(c["variables"]["after"] for c in calls[1:])


def test_a_cursor_loop_that_never_ends_stops_at_50_pages(tmp_path, anchor_tracker, monkeypatch, capsys):
    populate(anchor_tracker, "OPS-1", 3, stale_every=0, missing_every=0)
    anchor_tracker.endless_pages = True
    with pytest.raises(tracker.TrackerPaginationError, match="did not end within 50 pages"):
        client(anchor_tracker).fetch_issue("OPS-1")
    assert anchor_tracker.count("issue") == 50
    home = make_node(tmp_path, "host-000", ["host-000", "host-001"], anchor="OPS-1")
    code, out, err = run_inproc(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url), "status", "--json")
    report = json.loads(out)
    assert code == 1 and "50 pages" in report["error"]
    assert [h["state"] for h in report["hosts"]] == ["unknown", "unknown"]


def test_a_next_page_without_a_new_cursor_is_an_error(anchor_tracker):
    anchor_tracker.fail_next("wrong_shape", count=-1, body={"data": {"issue": {
        "id": "x", "attachments": {"nodes": [], "pageInfo": {"hasNextPage": True, "endCursor": None}}}}})
    with pytest.raises(tracker.TrackerPaginationError, match="no new endCursor"):
        client(anchor_tracker).fetch_issue("OPS-1")
    assert anchor_tracker.count("issue") == 1


@pytest.mark.parametrize("mode", ["internal_error", "ratelimit", "garbage"])
def test_errors_on_page_3_make_liveness_unknown(tmp_path, anchor_tracker, monkeypatch, capsys, mode):
    names = populate(anchor_tracker, "OPS-1", 300, stale_every=0, missing_every=0)
    anchor_tracker.fail_next(mode, count=-1, op="issue", page=3)
    home = make_node(tmp_path, names[0], names, anchor="OPS-1")
    code, out, err = run_inproc(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url), "status", "--json")
    report = json.loads(out)
    # A partial list would show 100 live hosts as missing: the whole read fails instead.
    assert code == 1 and report["error"] and CANARY not in out + err
    assert {h["state"] for h in report["hosts"]} == {"unknown"}
    assert anchor_tracker.count("issue") == 3


def test_500_publishers_all_live(tmp_path, anchor_tracker):
    names = ["host-%03d" % i for i in range(500)]
    home = make_node(tmp_path, names[0], names, anchor="OPS-1")
    env = node_env(home, tracker_url=anchor_tracker.url, interval_ms=60000)
    paths = Paths(home, env)
    for i, name in enumerate(names):
        block = {"label": "acct%d" % (i % 3), "status": "ok", "five_hour_pct": float(i % 100)}
        publisher = liveness.Publisher(paths, Settings.from_environ(env), name, lambda: "ok", None, blocks=[("account", lambda b=block: b)])
        publisher.arm()
        assert publisher.tick() == "publishing", publisher.detail
    assert len(anchor_tracker.attachments("OPS-1")) == 500
    code, report = run_json(env, "status", "--json")
    assert code == 0 and "error" not in report
    assert [h["host"] for h in report["hosts"]] == names
    assert all(h["state"] == "live" for h in report["hosts"])
    assert report["hosts"][499]["account"]["five_hour_pct"] == 99.0
    assert report["unlisted"] == []


# ---------------------------------------------------------------- the account block

def test_account_block_of_a_posture_body():
    body = {"available": True, "status": "degraded", "probedAt": 1700000000000,
            "active": {"label": "acct2", "bindingWindow": "five_hour",
                       "fiveHour": {"pct": 85.0, "resetsAt": "2023-11-14T23:00:00.000Z", "status": "allowed_warning"},
                       "sevenDay": None}}
    block = account_block(body, wall_at="2023-11-14T22:40:00.000Z", probe_interval_ms=300000)
    assert block == {"key": None, "label": "acct2", "status": "degraded", "five_hour_pct": 85.0,
                     "five_hour_resets_at": "2023-11-14T23:00:00.000Z", "seven_day_pct": None,
                     "seven_day_resets_at": None, "wall_at": "2023-11-14T22:40:00.000Z",
                     "probed_at": "2023-11-14T22:13:20.000Z", "probe_interval_ms": 300000}
    assert account_block(dict(body, active=None)) is None
    assert account_block({"available": False, "node": "n"}) is None
    assert account_block(None) is None


def test_account_staleness_follows_the_longer_interval():
    now = 1700000000000
    block = {"label": "a", "probed_at": iso_from_ms(now - 500_000), "probe_interval_ms": 300000}
    view = peer_account(block, publish_interval_ms=120000, now=now)
    assert view["age_s"] == 500.0 and view["stale"] is False      # 500 s < 2 x 300 s
    view = peer_account(dict(block, probe_interval_ms=None), publish_interval_ms=120000, now=now)
    assert view["stale"] is True                                  # 500 s > 2 x 120 s
    assert peer_account({"label": "a"}, publish_interval_ms=1, now=now)["stale"] is False  # age unknown


HOSTILE_ACCOUNTS = {
    "huge": ({"label": "x" * 100000, "status": "ok", "five_hour_pct": 1e300}, {"label": None, "five_hour_pct": None}),
    "wrong types": ({"label": 7, "status": ["ok"], "five_hour_pct": "50", "seven_day_pct": True,
                     "wall_at": 12, "probe_interval_ms": "x"},
                    {"label": None, "status": None, "five_hour_pct": None, "seven_day_pct": None, "wall_at": None}),
    "controls": ({"label": "acct\x1b[31m1", "status": "ok\n", "five_hour_resets_at": "2026-01-01T00:00:00Z\r"},
                 {"label": None, "status": None, "five_hour_resets_at": None}),
    "html": ({"label": "<script>alert(1)</script>", "status": "<b>ok</b>", "wall_at": "<img src=x>"},
             {"label": "<script>alert(1)</script>", "status": None, "wall_at": None}),
    "nan and negatives": ({"five_hour_pct": -5, "seven_day_pct": float("nan")},
                          {"five_hour_pct": None, "seven_day_pct": None}),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_ACCOUNTS))
def test_hostile_account_blocks_are_whitelisted(case):
    raw, expect = HOSTILE_ACCOUNTS[case]
    view = peer_account(raw, publish_interval_ms=60000)
    for key, value in expect.items():
        assert view[key] == value, key
    assert set(view) == {"key", "label", "status", "five_hour_pct", "five_hour_resets_at", "seven_day_pct",
                         "seven_day_resets_at", "wall_at", "probed_at", "probe_interval_ms", "age_s", "stale",
                         "suspect"}


def test_hostile_peer_metadata_through_the_real_command(tmp_path, anchor_tracker):
    roster = ["a", "b", "c", "d", "e", "f"]
    home = make_node(tmp_path, "a", roster, anchor="OPS-1")
    beat(anchor_tracker, "a", account={"label": "acct1", "status": "ok", "five_hour_pct": 12.0, "extra": "dropped"},
         quota=None)
    deep = current = {}
    for _ in range(400):
        current["x"] = {}
        current = current["x"]
    beat(anchor_tracker, "b", account=deep, quota=deep)
    beat(anchor_tracker, "c", account="not an object", quota=[1, 2], filler="y" * 200000)
    beat(anchor_tracker, "d", account={"label": "<script>alert(1)</script>", "status": "rejected"})
    # Duplicates: one host under two urls, and one node served twice; the newest beat wins.
    beat(anchor_tracker, "e", age_s=500, account={"label": "old"})
    beat(anchor_tracker, "e", age_s=2, url="svc://heartbeat/%65", account={"label": "new"})
    anchor_tracker.add_raw_node("OPS-1", {"url": "svc://heartbeat/e", "subtitle": None, "updatedAt": None,
                               "metadata": {"publishedAt": iso_from_ms(int(time.time() * 1000) - 900000),
                                            "account": {"label": "older"}}})
    # Not in the roster: listed apart, never counted live.
    beat(anchor_tracker, "stranger\x1b[2J", account={"label": "acct9"})
    anchor_tracker.add_raw_node("OPS-1", {"url": 5, "metadata": None})
    code, report = run_json(node_env(home, tracker_url=anchor_tracker.url), "status", "--json")
    rows = {h["host"]: h for h in report["hosts"]}
    # 0 or 3 (f is missing): the exit code is the status command's own business.
    assert list(rows) == roster and code in (0, 3) and "error" not in report
    assert rows["a"]["account"]["label"] == "acct1" and "extra" not in rows["a"]["account"]
    assert rows["a"]["quota"] is None
    assert rows["b"]["state"] == "live" and rows["b"]["account"]["label"] is None and rows["b"]["quota"] == {}
    assert rows["c"]["state"] == "live" and rows["c"]["account"] is None and rows["c"]["quota"] is None
    assert rows["d"]["account"]["label"] == "<script>alert(1)</script>"
    assert rows["e"]["state"] == "live" and rows["e"]["account"]["label"] == "new"
    assert rows["f"]["state"] == "missing"
    assert [u["host"] for u in report["unlisted"]] == ["stranger?[2J"]
    assert "stranger" not in {h["host"] for h in report["hosts"]}


def test_no_stamp_from_the_future_makes_a_heartbeat_fresh(tmp_path, anchor_tracker):
    now = time.time()

    def stamped(host, published_s, updated_s, url=None, label="acct1"):
        published = iso_from_ms(int((now + published_s) * 1000))
        anchor_tracker.put_attachment("OPS-1", url or liveness.heartbeat_url(host), subtitle=published,
                                      updated_at=iso_from_ms(int((now + updated_s) * 1000)),
                                      metadata={"host": host, "publishedAt": published, "publishIntervalMs": 60000,
                                                "account": {"label": label}})
    year = 365 * 86400.0
    # A host whose clock ran a year fast, and which the tracker last heard from an hour ago: dead,
    # however fresh its own stamp says it is.
    stamped("gone", year, -3600)
    # A live host with a fast clock: the tracker heard it a moment ago.
    stamped("fast", year, -2)
    # Both stamps from the future: nothing tells when it published.
    stamped("lost", year, year)
    # A minute's drift is a clock's ordinary error.
    stamped("drift", 30, 30)
    # One host under two urls: a beat from the future does not hide the newest real one.
    stamped("dup", 2, -2, label="real")
    stamped("dup", year, -7200, url="svc://heartbeat/%64up", label="from the future")
    anchor_tracker.put_attachment("OPS-1", liveness.heartbeat_url("stranger"), subtitle=None,
                                  updated_at=iso_from_ms(int((now - 600) * 1000)),
                                  metadata={"publishedAt": iso_from_ms(int((now + year) * 1000))})
    roster = ["gone", "fast", "lost", "drift", "dup"]
    home = make_node(tmp_path, "dup", roster, anchor="OPS-1")
    code, report = run_json(node_env(home, tracker_url=anchor_tracker.url), "status", "--json")
    rows = {h["host"]: h for h in report["hosts"]}
    assert code == 3 and "error" not in report
    assert rows["gone"]["state"] == "stale" and 3599 <= rows["gone"]["ageS"] < 3700, rows["gone"]
    assert rows["fast"]["state"] == "live" and 1 <= rows["fast"]["ageS"] < 60, rows["fast"]
    assert rows["lost"]["state"] == "stale" and rows["lost"]["ageS"] is None
    assert rows["drift"]["state"] == "live" and rows["drift"]["ageS"] is not None
    assert rows["dup"]["state"] == "live" and rows["dup"]["account"]["label"] == "real"
    assert [(u["host"], 599 <= u["ageS"] < 700) for u in report["unlisted"]] == [("stranger", True)]


def test_wall_at_comes_from_the_forecast_of_the_binding_window(tmp_path):
    from svcposture.cluster.heartbeat import account_source
    from svcposture.events import EventLog
    from svcposture.trajectory.service import TrajectoryService

    paths = Paths(tmp_path, {"HOME": str(tmp_path)})
    now = int(time.time() * 1000)
    resets = iso_from_ms(now + 3 * 3_600_000)

    def body(t, pct):
        view = {"label": "acct1", "active": True, "bindingWindow": "five_hour",
                "fiveHour": {"pct": pct, "resetsAt": resets, "status": "allowed"},
                "sevenDay": {"pct": 5.0, "resetsAt": iso_from_ms(now + 86_400_000), "status": "allowed"}}
        return {"available": True, "status": "ok", "probedAt": t, "active": view, "accounts": [view]}

    trajectory = TrajectoryService(paths, node="n", event_log=EventLog.for_paths(paths), environ=paths.environ)
    trajectory.load()
    current = {"body": body(now, 80.0)}
    source = account_source(lambda: current["body"], trajectory.body, 300)
    assert source()["wall_at"] is None              # no trajectory yet: too few points for a rate
    for minutes, pct in ((30, 50.0), (20, 60.0), (10, 70.0)):
        trajectory.observe(body(now - minutes * 60_000, pct))
    current["body"] = body(now + 1, 80.0)          # a new probe: the trajectory forecasts it
    trajectory.observe(current["body"])
    block = source()
    # 60 % an hour from 80 %: the wall is 20 minutes after the probe, before the reset.
    assert block["wall_at"] == iso_from_ms(now + 1 + 20 * 60_000)
    assert block["label"] == "acct1" and block["five_hour_pct"] == 80.0 and block["probe_interval_ms"] == 300000
    current["body"] = {"available": False, "node": "n"}
    assert source() is None
