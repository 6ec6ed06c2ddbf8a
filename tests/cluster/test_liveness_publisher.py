"""The heartbeat publisher, in-process against the GraphQL test server, with short intervals."""
from __future__ import annotations

import json
import logging
import time

import pytest

from tests.support.cli import ListHandler
from tests.support.home import CANARY, make_node
from tests.support.waiting import wait_until
from svcposture.settings import Settings
from svcposture.cluster import liveness
from svcposture._time import parse_iso_ms
from svcposture.events import EventLog, ratelimit_sampled
from svcposture.paths import Paths

INTERVAL_MS = 200


@pytest.fixture
def logs():
    handler = ListHandler()
    logger = logging.getLogger(liveness.LOGGER_NAME)
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old)


@pytest.fixture
def running():
    publishers = []
    yield publishers
    for p in publishers:
        p.stop()


def start(home, anchor_tracker, running, host="a", status=lambda: "ok", log=None, **extra):
    environ = {"HOME": str(home), "SVC_TRACKER_URL": anchor_tracker.url,
               liveness.INTERVAL_ENV: str(extra.pop("interval_ms", INTERVAL_MS))}
    environ.update(extra)
    paths = Paths(home, environ)
    publisher = liveness.start_publisher(paths, Settings.from_environ(environ), host, status, log)
    running.append(publisher)
    return publisher


def test_first_heartbeat_is_immediate_with_the_contract_metadata(tmp_path, anchor_tracker, running, logs):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    log = EventLog.for_paths(Paths(home, {}))
    log.append(ratelimit_sampled("a", "a@example.com", {"ratelimit.five_hour_pct": 12.5,
                                                        "ratelimit.seven_day_pct": 40.0,
                                                        "subscription.type": "max"}))
    before = int(time.time() * 1000)
    # A long interval: only the immediate first heartbeat can satisfy the wait.
    publisher = start(home, anchor_tracker, running, status=lambda: "degraded", log=log, interval_ms=60000)
    wait_until(lambda: anchor_tracker.attachments("OPS-1"), timeout=5)
    attachment = anchor_tracker.attachments("OPS-1")["svc://heartbeat/a"]
    meta = attachment["metadata"]
    assert attachment["title"] == "svc heartbeat a"
    assert attachment["subtitle"] == meta["publishedAt"]
    assert set(meta) == {"host", "publishedAt", "publishIntervalMs", "version", "accountStatus", "quota", "account",
                         "accounts"}
    assert meta["account"] is None  # no account source: the field is present, null
    assert meta["host"] == "a" and meta["publishIntervalMs"] == 60000 and meta["accountStatus"] == "degraded"
    assert meta["quota"] == {"five_hour_pct": 12.5, "seven_day_pct": 40.0, "subscription_type": "max"}
    assert parse_iso_ms(meta["publishedAt"]) >= before - 1
    # The tracker holds the attachment as soon as it has answered; the publisher notes the answer after.
    wait_until(lambda: publisher.snapshot()["state"] == "publishing", timeout=5, message="the publisher's state")
    assert "published to anchor OPS-1" in logs.text()


def test_repeats_every_interval_and_keeps_one_attachment(tmp_path, anchor_tracker, running):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    publisher = start(home, anchor_tracker, running)
    wait_until(lambda: publisher.snapshot()["published"] >= 3)
    assert list(anchor_tracker.attachments("OPS-1")) == ["svc://heartbeat/a"]
    assert all(c["authorized"] for c in anchor_tracker.calls)


def test_account_status_failure_or_junk_is_unavailable(tmp_path, anchor_tracker, running):
    def broken():
        raise RuntimeError("posture not ready")
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    start(home, anchor_tracker, running, status=broken)
    wait_until(lambda: anchor_tracker.attachments("OPS-1"))
    assert anchor_tracker.attachments("OPS-1")["svc://heartbeat/a"]["metadata"]["accountStatus"] == "unavailable"
    assert anchor_tracker.attachments("OPS-1")["svc://heartbeat/a"]["metadata"]["quota"] is None


@pytest.mark.parametrize("case,expect", [
    ("no-anchor", "no liveness anchor configured"),
    ("no-token", "no tracker token"),
    ("roster-one", "roster has 1 host"),
    ("roster-missing", "roster has 0 host"),
    ("loki", "SVC_LIVENESS_READ_SOURCE=loki"),
    ("roster-corrupt", "cannot read the roster"),
])
def test_off_conditions_log_one_clear_line_and_send_nothing(tmp_path, anchor_tracker, running, logs, case, expect):
    home = make_node(tmp_path, "a", ["a"] if case == "roster-one" else None if case == "roster-missing" else ["a", "b"],
                     anchor=None if case == "no-anchor" else "OPS-1", token=None if case == "no-token" else CANARY)
    if case == "roster-corrupt":
        (home / "svc" / "cluster" / "cluster.json").write_text('{"roster": "a,b"}')
    extra = {"SVC_LIVENESS_READ_SOURCE": "loki"} if case == "loki" else {}
    publisher = start(home, anchor_tracker, running, interval_ms=100, **extra)
    wait_until(lambda: publisher.snapshot()["state"] == "off")
    time.sleep(0.35)  # several ticks: the line must not repeat
    lines = [line for line in logs.lines if "publisher off" in line]
    assert len(lines) == 1 and expect in lines[0], logs.lines
    assert anchor_tracker.count() == 0


def test_off_conditions_are_rechecked_every_tick(tmp_path, anchor_tracker, running, logs):
    home = make_node(tmp_path, "a", ["a"], anchor="OPS-1", token=None)
    publisher = start(home, anchor_tracker, running, interval_ms=100)
    wait_until(lambda: publisher.snapshot()["state"] == "off")
    (home / "svc" / "cluster" / "cluster.json").write_text(json.dumps({"roster": ["a", "b"]}))
    wait_until(lambda: "no tracker token" in publisher.snapshot()["detail"])
    # The token is re-read every tick too.
    make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    wait_until(lambda: publisher.snapshot()["published"] >= 1)
    assert "svc://heartbeat/a" in anchor_tracker.attachments("OPS-1")


def test_anchor_is_read_once_at_arming(tmp_path, anchor_tracker, running):
    anchor_tracker.add_issue("OPS-2")
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    publisher = start(home, anchor_tracker, running)
    wait_until(lambda: publisher.snapshot()["published"] >= 1)
    make_node(tmp_path, "a", ["a", "b"], anchor="OPS-2")
    count = publisher.snapshot()["published"]
    wait_until(lambda: publisher.snapshot()["published"] >= count + 3)
    assert anchor_tracker.attachments("OPS-2") == {}
    assert publisher.anchor == "OPS-1"


def test_failures_log_once_per_change_and_retry(tmp_path, anchor_tracker, running, logs):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    anchor_tracker.fail_next("http500", count=-1)
    publisher = start(home, anchor_tracker, running, interval_ms=100)
    wait_until(lambda: anchor_tracker.count() >= 4)
    assert publisher.snapshot()["state"] == "error"
    anchor_tracker.clear_failures()
    wait_until(lambda: publisher.snapshot()["state"] == "publishing")
    failures = [line for line in logs.lines if "failed" in line]
    assert len(failures) == 1 and "HTTP 500" in failures[0]
    assert sum("published to anchor" in line for line in logs.lines) == 1


def test_rate_limit_backs_off_without_hammering(tmp_path, anchor_tracker, running, logs):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    anchor_tracker.fail_next("ratelimit", count=1, retry_after=1, reset_in_s=0)
    publisher = start(home, anchor_tracker, running, interval_ms=100)
    wait_until(lambda: publisher.snapshot()["state"] == "backoff")
    wait_until(lambda: publisher.snapshot()["state"] == "publishing", timeout=10)
    # Nothing was sent inside the back-off window: the next request came a whole second after the
    # refused one (the stand-in stamps each request as it arrives; a slow machine only widens the gap).
    refused, retried = anchor_tracker.calls[0], anchor_tracker.calls[1]
    assert retried["at"] - refused["at"] >= 1.0, retried["at"] - refused["at"]
    assert sum("backing off" in line for line in logs.lines) == 1


def test_archived_anchor_is_logged_once_and_still_published(tmp_path, anchor_tracker, running, logs):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    anchor_tracker.set_issue("OPS-1", archived=True)
    publisher = start(home, anchor_tracker, running, interval_ms=100)
    wait_until(lambda: publisher.snapshot()["published"] >= 3)
    assert sum("is archived" in line for line in logs.lines) == 1
    anchor_tracker.set_issue("OPS-1", archived=False)
    wait_until(lambda: publisher.snapshot()["state"] == "publishing")


def test_missing_anchor_issue_is_an_error_state(tmp_path, anchor_tracker, running, logs):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-404")
    publisher = start(home, anchor_tracker, running, interval_ms=100)
    wait_until(lambda: anchor_tracker.count() >= 3)
    assert publisher.snapshot()["state"] == "error"
    assert sum("Entity not found" in line for line in logs.lines) == 1


@pytest.mark.parametrize("mode", ["garbage", "huge", "wrong_shape", "echo_token", "drop", "auth"])
def test_canary_token_never_logged(tmp_path, anchor_tracker, running, logs, mode):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    anchor_tracker.fail_next(mode, count=-1)
    publisher = start(home, anchor_tracker, running, interval_ms=100)
    wait_until(lambda: anchor_tracker.count() >= 2)
    publisher.stop()
    assert logs.lines and CANARY not in logs.text()
    assert "Traceback" not in logs.text()


def test_stop_is_prompt_and_final(tmp_path, anchor_tracker, running):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    publisher = start(home, anchor_tracker, running, interval_ms=60000)
    wait_until(lambda: publisher.snapshot()["published"] >= 1)
    t0 = time.monotonic()
    publisher.stop()
    assert time.monotonic() - t0 < 2.0
    count = anchor_tracker.count()
    time.sleep(0.2)
    assert anchor_tracker.count() == count


def test_interval_setting():
    assert liveness.publish_interval_ms({}) == 120000
    assert liveness.publish_interval_ms({liveness.INTERVAL_ENV: "5000"}) == 5000
    assert liveness.publish_interval_ms({liveness.INTERVAL_ENV: " 250 "}) == 250
    for junk in ("", "abc", "-5", "0", "99", "1e3", "9" * 400, "\x00", str(25 * 3600 * 1000)):
        assert liveness.publish_interval_ms({liveness.INTERVAL_ENV: junk}) == 120000


def test_host_names_round_trip_through_the_url():
    for host in ("a", "node-1.example", "weird host/with?chars"):
        url = liveness.heartbeat_url(host)
        assert url.startswith("svc://heartbeat/") and liveness.host_of_heartbeat_url(url) == host
    assert liveness.heartbeat_url("mac-mini-2") == "svc://heartbeat/mac-mini-2"
