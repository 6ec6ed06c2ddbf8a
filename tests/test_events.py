"""The event log, the v2 envelope, both event kinds, the quota block and the newest-first reader."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from svcposture import events
from svcposture._time import parse_iso_ms
from svcposture._version import __version__
from svcposture.cluster.heartbeat import quota_block
from svcposture.events import (QUOTA_KEYS, RATELIMIT_SAMPLED, STATUS_CHANGED, EventLog, EventLogError, envelope,
                               event_name, parse_line, ratelimit_sampled, status_changed)

ISO_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
CAMEL = re.compile(r"[a-z][A-Z]")
FULL_VALUES = {
    "ratelimit.five_hour_pct": 41.5,
    "ratelimit.seven_day_pct": 73,
    "ratelimit.five_hour_resets_at": "2026-03-01T15:00:00.000Z",
    "ratelimit.seven_day_resets_at": "2026-03-05T00:00:00.000Z",
    "ratelimit.seven_day_large_pct": 99.9,
    "ratelimit.seven_day_medium_pct": 12.0,
    "subscription.type": "max",
    "rate_limit.tier": "default_large_max_20x",
}
MAR_2026 = parse_iso_ms("2026-03-01T12:00:00Z")


# ---------------------------------------------------------------- envelope

def test_envelope_is_exactly_design_v2() -> None:
    ev = envelope(RATELIMIT_SAMPLED, "node-a", {"event.label": "x@y"}, ts_ms=MAR_2026)
    assert list(ev) == ["v", "id", "ts", "observedTs", "severityText", "severityNumber", "resource",
                        "attributes", "body"]
    assert ev["v"] == 2
    assert re.match(r"^[0-9a-f]{16}$", ev["id"])
    assert ev["ts"] == ev["observedTs"] == "2026-03-01T12:00:00.000Z"
    assert (ev["severityText"], ev["severityNumber"]) == ("INFO", 9)
    assert ev["resource"] == {
        "service.name": "svc.monitor", "service.namespace": "svc", "service.version": __version__,
        "host.name": "node-a", "host.id": hashlib.sha256(b"node-a").hexdigest()[:16],
    }
    assert ev["attributes"] == {"event.name": RATELIMIT_SAMPLED, "event.entity": "account",
                                "event.action": "ratelimit.sampled", "event.label": "x@y"}
    assert ev["body"] == {"message": RATELIMIT_SAMPLED}
    ids = {envelope(STATUS_CHANGED, "n", {})["id"] for _ in range(200)}
    assert len(ids) == 200
    assert ISO_MS_Z.match(envelope(STATUS_CHANGED, "n", {})["ts"])


# ---------------------------------------------------------------- account.ratelimit.sampled

def test_ratelimit_sampled_full() -> None:
    ev = ratelimit_sampled("node-a", "dev@example.com", FULL_VALUES, ts_ms=MAR_2026)
    attrs = ev["attributes"]
    assert attrs["event.name"] == RATELIMIT_SAMPLED and attrs["event.label"] == "dev@example.com"
    assert attrs["account.email"] == "dev@example.com"
    assert {k: attrs[k] for k in QUOTA_KEYS} == FULL_VALUES
    assert set(attrs) == {"event.name", "event.entity", "event.action", "event.label", "account.email"} | set(QUOTA_KEYS)


def test_ratelimit_sampled_omits_none_keeps_zero() -> None:
    values = dict.fromkeys(QUOTA_KEYS)
    values.update({"ratelimit.five_hour_pct": 0, "ratelimit.seven_day_pct": 0.0, "subscription.type": ""})
    attrs = ratelimit_sampled("n", None, values)["attributes"]
    assert attrs["ratelimit.five_hour_pct"] == 0 and attrs["ratelimit.seven_day_pct"] == 0.0
    assert attrs["subscription.type"] == ""
    for key in QUOTA_KEYS:
        if key not in ("ratelimit.five_hour_pct", "ratelimit.seven_day_pct", "subscription.type"):
            assert key not in attrs
    assert "account.email" not in attrs
    empty = ratelimit_sampled("n", "e@x", {})["attributes"]
    assert not set(QUOTA_KEYS) & set(empty)


@pytest.mark.parametrize("values", [
    {"fiveHourPct": 1},
    {"sevenDayPct": 1}, {"opusPct": 1}, {"sonnetPct": 1},
    {"ratelimit.five_hour_pct": "41"},
    {"ratelimit.five_hour_pct": True},
    {"ratelimit.five_hour_pct": float("nan")},
    {"ratelimit.five_hour_pct": float("inf")},
    {"ratelimit.five_hour_resets_at": 1767225600},
    {"subscription.type": ["max"]},
])
def test_ratelimit_sampled_refuses_bad_values(values) -> None:
    with pytest.raises(ValueError):
        ratelimit_sampled("n", "e@x", values)


def test_no_camel_case_attribute_anywhere_in_the_log(home: Path) -> None:
    log = EventLog(home / "events")
    log.append(ratelimit_sampled("n", "e@x", FULL_VALUES))
    log.append(status_changed("n", "acct1", "e@x", "rejected", "seven_day"))
    text = "".join(p.read_text() for p in log.files_newest_first())
    for name in ("fiveHourPct", "sevenDayPct", "opusPct", "sonnetPct"):
        assert name not in text
    for raw in text.splitlines():
        attrs = json.loads(raw)["attributes"]
        assert not [k for k in attrs if CAMEL.search(k)]


# ---------------------------------------------------------------- account.status.changed

def test_status_changed_fields() -> None:
    ev = status_changed("node-a", "acct2", "b@example.com", "rejected", "seven_day", ts_ms=MAR_2026)
    assert ev["attributes"] == {
        "event.name": STATUS_CHANGED, "event.entity": "account", "event.action": "status.changed",
        "event.label": "b@example.com", "account.handle": "acct2", "account.email": "b@example.com",
        "account.status": "rejected", "account.binding_window": "seven_day", "node.name": "node-a",
    }
    assert ev["resource"]["host.name"] == "node-a"
    bare = status_changed("node-a", "acct3", None, "ok", None)["attributes"]
    assert bare["event.label"] == "acct3" and "account.email" not in bare and "account.binding_window" not in bare


@pytest.mark.parametrize("status", ["degraded", "error", "unknown", "OK", "", None])
def test_status_changed_only_edges(status) -> None:
    with pytest.raises(ValueError):
        status_changed("n", "acct1", None, status, "five_hour")


# ---------------------------------------------------------------- quota block

def test_quota_block_maps_and_is_pure() -> None:
    ev = ratelimit_sampled("n", "e@x", FULL_VALUES)
    frozen = copy.deepcopy(ev)
    block = quota_block(ev)
    assert block == {
        "five_hour_pct": 41.5, "seven_day_pct": 73, "seven_day_large_pct": 99.9, "seven_day_medium_pct": 12.0,
        "five_hour_resets_at": "2026-03-01T15:00:00.000Z", "seven_day_resets_at": "2026-03-05T00:00:00.000Z",
        "subscription_type": "max", "rate_limit_tier": "default_large_max_20x",
    }
    assert ev == frozen
    assert quota_block(ratelimit_sampled("n", None, {"ratelimit.seven_day_pct": 0})) == {"seven_day_pct": 0}


@pytest.mark.parametrize("thing", [
    None, "x", [], {}, {"attributes": None}, {"attributes": {"event.name": STATUS_CHANGED}},
])
def test_quota_block_of_non_samples_is_none(thing) -> None:
    assert quota_block(thing) is None


def test_quota_block_drops_mistyped_values_from_a_foreign_line() -> None:
    ev = {"attributes": {"event.name": RATELIMIT_SAMPLED, "ratelimit.five_hour_pct": "12",
                         "ratelimit.seven_day_pct": 5, "subscription.type": 3, "fiveHourPct": 9}}
    assert quota_block(ev) == {"seven_day_pct": 5}


# ---------------------------------------------------------------- the log

def test_append_to_monthly_utc_file_0600(home: Path) -> None:
    log = EventLog(home / "svc" / "events")
    path = log.append(ratelimit_sampled("n", "e@x", FULL_VALUES, ts_ms=parse_iso_ms("2026-01-31T23:59:59.999Z")))
    assert path.name == "2026-01.jsonl"
    path2 = log.append(ratelimit_sampled("n", "e@x", {}, ts_ms=parse_iso_ms("2026-02-01T00:00:00Z")))
    assert path2.name == "2026-02.jsonl"
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600
    raw = path.read_bytes()
    assert raw.count(b"\n") == 1 and raw.endswith(b"\n")
    assert json.loads(raw)["attributes"]["account.email"] == "e@x"


def test_newest_across_months_skipping_bad_lines(home: Path) -> None:
    d = home / "events"
    log = EventLog(d)
    old = log.append(ratelimit_sampled("n", "old@x", {"ratelimit.five_hour_pct": 1}, ts_ms=parse_iso_ms("2026-01-10T00:00:00Z")))
    log.append(status_changed("n", "acct1", None, "rejected", "five_hour", ts_ms=parse_iso_ms("2026-02-10T00:00:00Z")))
    new_month = d / "2026-02.jsonl"
    with open(str(new_month), "ab") as fh:
        fh.write(b"not json\n\xff\xfe\x00garbage\n[1,2]\n{\"attributes\": 5}\n\n{\"attributes\":{\"event.name\":\"account.ratelimit.sampled\"")
    (d / "notes.txt").write_text('{"attributes":{"event.name":"account.ratelimit.sampled"}}\n')
    newest = log.newest(RATELIMIT_SAMPLED)
    assert newest is not None and newest["attributes"]["account.email"] == "old@x"
    assert log.newest(STATUS_CHANGED)["attributes"]["account.handle"] == "acct1"
    assert log.newest("account.nothing") is None
    assert log.newest(RATELIMIT_SAMPLED, where=lambda e: e["attributes"].get("account.email") == "nobody") is None
    assert [p.name for p in log.files_newest_first()] == ["2026-02.jsonl", "2026-01.jsonl"]
    assert old.name == "2026-01.jsonl"


def test_torn_line_is_sealed_and_skipped(home: Path) -> None:
    log = EventLog(home / "events")
    first = log.append(status_changed("n", "acct1", None, "rejected", "five_hour", ts_ms=MAR_2026))
    with open(str(first), "ab") as fh:
        fh.write(b'{"v":2,"id":"deadbeef","attributes":{"event.name":"account.status.changed","account.han')
    second = status_changed("n", "acct1", None, "ok", "five_hour", ts_ms=MAR_2026 + 1)
    log.append(second)
    lines = first.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 4
    assert parse_line(lines[1]) is None
    assert [e["id"] for e in log.iter_newest_first()] == [second["id"], json.loads(lines[0])["id"]]


def test_huge_damaged_tail_does_not_hide_events(home: Path) -> None:
    log = EventLog(home / "events")
    path = log.append(ratelimit_sampled("n", "before@x", {}, ts_ms=MAR_2026))
    with open(str(path), "ab") as fh:
        fh.write(b"\x00" * (3 * events.MAX_EVENT_LINE))
    assert log.newest(RATELIMIT_SAMPLED)["attributes"]["account.email"] == "before@x"
    log.append(ratelimit_sampled("n", "after@x", {}, ts_ms=MAR_2026 + 1))
    assert log.newest(RATELIMIT_SAMPLED)["attributes"]["account.email"] == "after@x"


@pytest.mark.parametrize("raw", [b"", b"null", b"[]", b'"s"', b"{}", b'{"attributes": []}', b"\xff",
                                 b"1" * 5000, b"[" * 50000])
def test_parse_line_rejects_non_events(raw: bytes) -> None:
    assert parse_line(raw) is None
    assert event_name(parse_line(raw)) is None


def test_unwritable_log_raises_event_log_error_and_writes_nothing(home: Path) -> None:
    blocker = home / "svc"
    blocker.write_text("a file where ~/svc should be")
    log = EventLog(blocker / "events")
    with pytest.raises(EventLogError):
        log.check_writable()
    with pytest.raises(EventLogError) as info:
        log.append(ratelimit_sampled("n", "e@x", {}))
    assert isinstance(info.value, OSError)
    assert blocker.read_text() == "a file where ~/svc should be"
    assert log.newest(RATELIMIT_SAMPLED) is None


def _rchar() -> int:
    with open("/proc/self/io") as fh:
        for line in fh:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar")


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
def test_newest_reads_only_the_tail_of_a_huge_log(home: Path) -> None:
    # A 4 GiB sparse month file: reading it whole would be 4 GiB of read().
    # /proc/self/io counts the bytes this process actually read.
    log = EventLog(home / "events")
    path = log.path_for(MAR_2026)
    path.parent.mkdir(parents=True)
    with open(str(path), "wb") as fh:
        fh.truncate(4 * 1024 ** 3)
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n")
    log.append(ratelimit_sampled("n", "sample@x", {"ratelimit.five_hour_pct": 5}, ts_ms=MAR_2026))
    for i in range(300):
        log.append(status_changed("n", "acct%d" % i, None, "rejected", "five_hour", ts_ms=MAR_2026 + i))
    before = _rchar()
    newest = log.newest(RATELIMIT_SAMPLED)
    read = _rchar() - before
    assert newest["attributes"]["account.email"] == "sample@x"
    assert read < 1024 * 1024, "read %d bytes to find an event near the end" % read


# ---------------------------------------------------------------- concurrent appenders

_APPENDER = r"""
import os, sys, time
from svcposture.events import EventLog, ratelimit_sampled
directory, who, count, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
deadline = time.monotonic() + 30
while not os.path.exists(go):
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.001)
log = EventLog(directory)
pad = "p%d-" % who * 60   # lines of ~900 bytes
for i in range(count):
    log.append(ratelimit_sampled("node", "w%d-%d@x" % (who, i),
                                 {"ratelimit.five_hour_pct": i, "subscription.type": pad},
                                 ts_ms=1772366400000))
"""


def test_concurrent_appenders_never_interleave(home: Path, env: dict) -> None:
    writers, count = 4, 2000
    d = home / "events"
    go = home / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _APPENDER, str(d), str(w), str(count), str(go)], env=env)
             for w in range(writers)]
    go.write_text("go")
    for p in procs:
        assert p.wait(timeout=120) == 0
    files = list(d.iterdir())
    assert [f.name for f in files] == ["2026-03.jsonl"]
    raw = files[0].read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == writers * count
    seen = set()
    for line in lines:
        ev = json.loads(line)               # every line parses: nothing interleaved
        attrs = ev["attributes"]
        who, i = attrs["account.email"][1:-2].split("-")
        assert attrs["subscription.type"] == "p%s-" % who * 60
        assert attrs["ratelimit.five_hour_pct"] == int(i)
        seen.add((int(who), int(i)))
    assert seen == {(w, i) for w in range(writers) for i in range(count)}
