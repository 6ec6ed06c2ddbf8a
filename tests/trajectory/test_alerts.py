"""Threshold and forecast alerts: the rules of docs/trajectory.md, the latch file, and the log reconciliation."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from svcposture.trajectory import alerts
from svcposture._time import iso_from_ms, now_ms
from svcposture.trajectory.alerts import AlertLatch, thresholds_to_fire
from svcposture.settings import parse_thresholds
from svcposture.events import EventLog

HOUR = 3_600_000


@pytest.mark.parametrize("text, expected, problems", [
    (None, (80, 90), 0),
    ("", (80, 90), 0),
    ("  ", (80, 90), 0),
    ("80,90", (80, 90), 0),
    ("90, 50 ,75", (50, 75, 90), 0),
    ("0", (80, 90), 2),            # out of range, then nothing usable
    ("101", (80, 90), 2),
    ("abc", (80, 90), 2),
    ("80,80,90", (80, 90), 1),     # duplicate counted once
    ("80,,90", (80, 90), 1),       # empty item
    ("-5,95", (95,), 1),
    ("1.5,100", (100,), 1),
    ("８０", (80, 90), 2),          # not ASCII digits
])
def test_thresholds_setting(text, expected, problems):
    got, found = parse_thresholds(text)
    assert got == expected
    assert len(found) == problems, found
    assert all(isinstance(p, str) and p for p in found)


def test_highest_crossed_only_and_upward_only():
    assert thresholds_to_fire([], 79.9, (80, 90)) == (None, [])
    assert thresholds_to_fire([], 80.0, (80, 90)) == (80, [80])
    # A jump past both fires 90 only and marks 80 fired.
    assert thresholds_to_fire([], 95.0, (80, 90)) == (90, [80, 90])
    # Already fired: a dip and a new rise fire nothing.
    assert thresholds_to_fire([80, 90], 99.0, (80, 90)) == (None, [80, 90])
    assert thresholds_to_fire([80], 85.0, (80, 90)) == (None, [80])
    assert thresholds_to_fire([80], 91.0, (80, 90)) == (90, [80, 90])


def _account(pct, resets_ms, label="acct1", active=True, forecast=None, field="fiveHour"):
    window = {"pct": pct, "resetsAt": iso_from_ms(resets_ms) if resets_ms is not None else None, "forecast": forecast}
    other = "sevenDay" if field == "fiveHour" else "fiveHour"
    return {"label": label, "email": "a@example.com", "active": active, field: window, other: None}


def _latch(tmp_path: Path) -> AlertLatch:
    latch = AlertLatch(tmp_path / "svc" / "alert-latch.json", EventLog(tmp_path / "svc" / "events"), "node-a")
    latch.load()
    return latch


def _alert_events(tmp_path: Path):
    log = EventLog(tmp_path / "svc" / "events")
    return [e for e in log.iter_newest_first() if e["attributes"]["event.name"].startswith("account.quota.")]


def test_a_cycle_fires_each_threshold_once_and_a_new_cycle_rearms(tmp_path):
    latch = _latch(tmp_path)
    reset = now_ms() + HOUR
    fired = []
    for pct in (50, 81, 79, 85, 95, 60, 99):
        fired += latch.observe([_account(pct, reset)])
    assert [e["attributes"]["ratelimit.threshold"] for e in fired] == [80, 90]
    attrs = fired[0]["attributes"]
    assert attrs["account.handle"] == "acct1" and attrs["ratelimit.window"] == "five_hour"
    assert attrs["ratelimit.pct"] == 81.0 and attrs["node.name"] == "node-a"
    assert attrs["ratelimit.resets_at"] == iso_from_ms(reset)
    # Within 120 s of the same reset is the same cycle; a later reset re-arms.
    assert latch.observe([_account(99, reset + 90_000)]) == []
    again = latch.observe([_account(92, reset + 5 * HOUR)])
    assert [e["attributes"]["ratelimit.threshold"] for e in again] == [90]
    assert len(_alert_events(tmp_path)) == 3


def test_a_reset_that_jumps_back_and_forth_fires_nothing_twice(tmp_path):
    latch = _latch(tmp_path)
    a, b = now_ms() + HOUR, now_ms() + 3 * HOUR
    sequence = [(95, a), (95, b), (95, a), (95, b), (95, None), (95, None), (95, a)]
    fired = []
    for pct, reset in sequence:
        fired += latch.observe([_account(pct, reset)])
    keys = [(e["attributes"].get("ratelimit.resets_at"), e["attributes"]["ratelimit.threshold"]) for e in fired]
    assert len(keys) == len(set(keys)) == 3  # a, b and "no reset known", once each


def test_a_crash_between_emit_and_advance_does_not_fire_again(tmp_path):
    latch = _latch(tmp_path)
    reset = now_ms() + HOUR
    assert len(latch.observe([_account(91, reset)])) == 1
    # The latch write never happened (kill -9 after the append): the file is gone.
    (tmp_path / "svc" / "alert-latch.json").unlink()
    fresh = _latch(tmp_path)
    assert fresh.observe([_account(95, reset)]) == []
    assert len(_alert_events(tmp_path)) == 1
    # And a latch file that is older than the log (written before the event).
    (tmp_path / "svc" / "alert-latch.json").write_text(json.dumps({"version": 1, "windows": {}}))
    assert _latch(tmp_path).observe([_account(99, reset)]) == []


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"version": 1, "windows": {"acct1/five_hour": [{"fired": "x"}]}}',
                                     b'{"version": 2, "windows": {}}', b"\x00" * 100, b'{"version":1,"windows":' + b"[" * 5000])
def test_a_corrupt_latch_is_moved_aside_and_rebuilt_from_the_log(tmp_path, content):
    latch = _latch(tmp_path)
    reset = now_ms() + HOUR
    latch.observe([_account(85, reset)])
    path = tmp_path / "svc" / "alert-latch.json"
    path.write_bytes(content)
    rebuilt = _latch(tmp_path)
    assert rebuilt.observe([_account(86, reset)]) == []  # 80 was fired: the log says so
    assert [e["attributes"]["ratelimit.threshold"] for e in rebuilt.observe([_account(90, reset)])] == [90]
    if content:
        assert list(path.parent.glob("alert-latch.json.corrupt*")), "corrupt latch kept aside"


def test_a_failed_append_advances_nothing_and_is_retried(tmp_path):
    latch = _latch(tmp_path)
    events = tmp_path / "svc" / "events"
    events.write_text("a file where the log directory should be")  # every append fails, even as root
    reset = now_ms() + HOUR
    assert latch.observe([_account(95, reset)]) == []
    assert latch.snapshot()["acct1/five_hour"][0]["fired"] == []
    events.unlink()
    assert [e["attributes"]["ratelimit.threshold"] for e in latch.observe([_account(95, reset)])] == [90]


def _forecast(wall_in_ms, before=True, rate=60.0):
    return {"ratePctPerHour": rate, "wallAt": iso_from_ms(now_ms() + wall_in_ms), "beforeReset": before,
            "pctAtReset": 120.0, "samples": 5}


def test_forecast_alert_only_for_the_active_account_within_an_hour_once_per_cycle(tmp_path):
    latch = _latch(tmp_path)
    reset = now_ms() + 2 * HOUR
    # A sibling never gets one; a wall beyond 60 min or after the reset neither.
    assert latch.observe([_account(50, reset, active=False, forecast=_forecast(20 * 60_000))]) == []
    assert latch.observe([_account(50, reset, forecast=_forecast(90 * 60_000))]) == []
    assert latch.observe([_account(50, reset, forecast=_forecast(20 * 60_000, before=False))]) == []
    fired = latch.observe([_account(50, reset, forecast=_forecast(30 * 60_000))])
    assert [e["attributes"]["event.name"] for e in fired] == [alerts.FORECAST]
    attrs = fired[0]["attributes"]
    assert attrs["ratelimit.rate_pct_per_hour"] == 60.0 and attrs["ratelimit.window"] == "five_hour"
    assert attrs["ratelimit.resets_at"] == iso_from_ms(reset) and attrs["ratelimit.wall_at"].endswith("Z")
    assert latch.observe([_account(55, reset, forecast=_forecast(25 * 60_000))]) == []
    # Restarted without its file: the log still says it fired.
    (tmp_path / "svc" / "alert-latch.json").unlink()
    assert _latch(tmp_path).observe([_account(56, reset, forecast=_forecast(20 * 60_000))]) == []


def test_both_windows_and_every_account_are_watched(tmp_path):
    latch = _latch(tmp_path)
    reset = now_ms() + HOUR
    fired = latch.observe([_account(82, reset, label="acct1"), _account(93, reset, label="acct2", active=False,
                                                                          field="sevenDay")])
    got = sorted((e["attributes"]["account.handle"], e["attributes"]["ratelimit.window"],
                  e["attributes"]["ratelimit.threshold"]) for e in fired)
    assert got == [("acct1", "five_hour", 80), ("acct2", "seven_day", 90)]


def test_recent_alerts_are_newest_first_and_bounded(tmp_path):
    latch = _latch(tmp_path)
    base = now_ms() + HOUR
    for i in range(25):
        latch.observe([_account(95, base + i * 10 * HOUR)])
    recent = alerts.recent_alerts(EventLog(tmp_path / "svc" / "events"), 20)
    assert len(recent) == 20
    stamps = [e["attributes"]["ratelimit.resets_at"] for e in recent]
    assert stamps == sorted(stamps, reverse=True)


# ---------------------------------------------------------------- the wall, and usable again

def _both(five, five_reset, seven, seven_reset, label="acct1"):
    """An account with both windows: (pct, reset ms) each."""
    account = _account(five, five_reset, label=label)
    account["sevenDay"] = {"pct": seven, "resetsAt": iso_from_ms(seven_reset), "forecast": None}
    return account


def _names(events):
    return [(e["attributes"]["event.name"].rsplit(".", 1)[1], e["attributes"]["ratelimit.window"]) for e in events]


def test_the_wall_says_when_the_account_is_usable_again_and_its_reset_names_it_once(tmp_path):
    latch = _latch(tmp_path)
    five, seven = now_ms() + HOUR, now_ms() + 50 * HOUR
    assert _names(latch.observe([_both(95, five, 40, seven)])) == [("threshold", "five_hour")]
    fired = latch.observe([_both(100.4, five, 40, seven)])
    assert _names(fired) == [("wall", "five_hour")]
    attrs = fired[0]["attributes"]
    assert attrs["ratelimit.usable_at"] == attrs["ratelimit.resets_at"] == iso_from_ms(five)
    assert attrs["ratelimit.pct"] == 100.4 and attrs["account.handle"] == "acct1"
    # Still at the wall, and at it again in the same cycle: nothing more.
    assert latch.observe([_both(102, five, 40, seven)]) == []
    # The week reaches its limit too: its own wall alert, and the account is usable only when both reset.
    fired = latch.observe([_both(102, five, 100, seven)])
    assert _names(fired) == [("threshold", "seven_day"), ("wall", "seven_day")]
    assert fired[1]["attributes"]["ratelimit.usable_at"] == iso_from_ms(seven)
    # The 5-hour window resets; the week still holds: not usable yet.
    later = five + 5 * HOUR
    assert latch.observe([_both(3, later, 100, seven)]) == []
    # The week resets: one usable alert names the account, after the window that held it.
    fired = latch.observe([_both(5, later, 2, seven + 7 * 24 * HOUR)])
    assert _names(fired) == [("usable", "seven_day")]
    assert fired[0]["attributes"]["ratelimit.pct"] == 2.0
    assert latch.observe([_both(6, later, 2, seven + 7 * 24 * HOUR)]) == []
    kinds = [e["attributes"]["event.name"] for e in _alert_events(tmp_path)]
    assert kinds.count(alerts.USABLE) == 1 and kinds.count(alerts.WALL) == 2


def test_wall_and_usable_are_exactly_once_across_a_crash(tmp_path):
    latch = _latch(tmp_path)
    reset = now_ms() + HOUR
    assert _names(latch.observe([_account(101, reset)])) == [("threshold", "five_hour"), ("wall", "five_hour")]
    # kill -9 after the append, before the latch write: the file is gone, the log says held.
    (tmp_path / "svc" / "alert-latch.json").unlink()
    fresh = _latch(tmp_path)
    assert fresh.observe([_account(101, reset)]) == []
    assert _names(fresh.observe([_account(1, reset + 5 * HOUR)])) == [("usable", "five_hour")]
    # Again after the usable alert: the newest of the two says the account is not held.
    (tmp_path / "svc" / "alert-latch.json").write_text(json.dumps({"version": 1, "windows": {},
                                                                   "held": {"acct1": "five_hour"}}))
    assert _latch(tmp_path).observe([_account(2, reset + 5 * HOUR)]) == []
    # A monitor down across the reset: its first reading after it names the account all the same.
    latch = _latch(tmp_path)
    assert _names(latch.observe([_account(100, reset + 5 * HOUR)])) == [("threshold", "five_hour"),
                                                                         ("wall", "five_hour")]
    assert _names(_latch(tmp_path).observe([_account(0, reset + 10 * HOUR)])) == [("usable", "five_hour")]
    # A latch file from before these alerts (no `held`, cycles without `wall`) is read as it is.
    (tmp_path / "svc" / "alert-latch.json").write_text(json.dumps(
        {"version": 1, "windows": {"acct1/five_hour": [{"resetsAt": 1, "fired": [80], "forecast": False}]}}))
    assert _latch(tmp_path).moved_aside is None
