"""One home per fact: the cycle tolerance, killing a process group, what a
number is and what a word is. Each fact is asserted where it is used."""
from __future__ import annotations

import subprocess

import pytest

from svcposture.trajectory import cycle as _cycle, alerts, history, notify, service as trajectory
from svcposture import _spawn, _text
from svcposture.claude import summary
from svcposture.probe import runner as probe
from svcposture.cluster import liveness, tracker
from tests.support.waiting import wait_until

BASE = 1_800_000_000_000
MIN = 60_000


@pytest.mark.parametrize("tolerance", [_cycle.CYCLE_TOLERANCE_MS, 5_000])
def test_history_forecasts_and_alerts_split_cycles_at_the_same_place(monkeypatch, tolerance):
    monkeypatch.setattr(_cycle, "CYCLE_TOLERANCE_MS", tolerance)
    inside, outside = BASE + tolerance, BASE + tolerance + 1
    rows = [{"t": 1, "label": "a", "fiveHour": {"pct": 1.0, "resetsAt": inside}},
            {"t": 2, "label": "a", "fiveHour": {"pct": 2.0, "resetsAt": outside}}]
    assert history.cycle_points(rows, "a", "fiveHour", BASE) == [(1, 1.0)]
    assert alerts.find_cycle([{"resetsAt": outside}, {"resetsAt": inside}], BASE) == {"resetsAt": inside}
    now = BASE - 3 * 3_600_000
    points = [(now - m * MIN, 10.0 + 30 - m, inside) for m in (30, 20, 10)]
    points += [(now - m * MIN, 50.0, outside) for m in (25, 15, 5)]
    view = trajectory.window_view({"pct": 40.0, "resetsAt": BASE}, points, now, "fiveHour")
    assert view["forecast"]["samples"] == 3


def test_the_tolerance_is_two_minutes_and_unknown_resets_are_their_own_cycle():
    assert _cycle.CYCLE_TOLERANCE_MS == 120_000
    assert _cycle.same_cycle(None, None) and not _cycle.same_cycle(None, BASE) and not _cycle.same_cycle(BASE, None)
    assert _cycle.same_cycle(BASE, BASE - 120_000) and not _cycle.same_cycle(BASE, BASE + 120_001)


def test_probe_and_notify_kill_groups_through_the_one_helper():
    assert probe.kill_group is _spawn.kill_group and notify.kill_group is _spawn.kill_group
    assert not hasattr(probe, "_kill_group") and not hasattr(notify, "_kill_group")


def _gone(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_kill_group_kills_the_child_and_what_it_started():
    proc = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE,
                            start_new_session=True)
    try:
        grandchild = int(proc.stdout.readline())
        _spawn.kill_group(proc.pid)
        assert proc.wait(timeout=10) == -9
        wait_until(lambda: _gone(grandchild), timeout=10, message="the grandchild dies with its group")
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _spawn.kill_group(proc.pid)  # a group already gone is not an error


@pytest.mark.parametrize("value,number,integer,finite", [
    (True, False, False, None), (False, False, False, None), (0, True, True, 0), (-3, True, True, -3),
    (2.5, True, False, 2.5), (float("nan"), True, False, None), (float("inf"), True, False, None),
    (10 ** 400, True, True, None), ("1", False, False, None), (None, False, False, None), ([1], False, False, None),
])
def test_a_number_is_never_a_bool(value, number, integer, finite):
    assert _text.is_number(value) is number
    assert _text.is_int(value) is integer
    assert _text.finite_number(value) == finite if finite is not None else _text.finite_number(value) is None


def _heartbeat(host, metadata):
    return tracker.Heartbeat(url=liveness.heartbeat_url(host), subtitle=None, metadata=metadata,
                             updated_at="2027-01-15T08:00:00.000Z")


def test_a_peer_with_numbers_too_big_for_a_float_is_read_not_crashed_on():
    """math.isfinite(10**400) raises OverflowError: the one number rule catches it."""
    huge = 10 ** 400
    meta = {"publishedAt": "2027-01-15T08:00:00.000Z", "publishIntervalMs": huge,
            "quota": {"five_hour_pct": huge, "seven_day_pct": 7.0},
            "account": {"label": "a", "five_hour_pct": huge, "probe_interval_ms": huge}}
    rows = liveness.peer_states(["p"], [_heartbeat("p", meta)], BASE + 2 * 60_000 + 1, 60_000)
    assert rows[0]["quota"] == {"seven_day_pct": 7.0}
    assert rows[0]["account"]["five_hour_pct"] is None and rows[0]["account"]["probe_interval_ms"] is None
    # The peer's interval is unusable, so the reader's own applies.
    assert rows[0]["state"] == "stale"


@pytest.mark.parametrize("text,is_word", [
    ("ok", True), ("allowed_warning", True), ("five_hour", True), ("a" * 40, True), ("a" * 41, False),
    ("Ok", False), ("ok\n", False), ("\nok", False), ("1ok", False), ("", False), ("o k", False),
])
def test_a_word_is_the_whole_string(text, is_word):
    assert (_text.word(text) == text) is is_word
    assert _text.word(b"ok") is None and _text.word(None) is None


def test_posture_and_history_drop_a_word_or_label_with_a_trailing_newline():
    view = summary.account_view({"label": "acct1", "overallStatus": "allowed\n", "representativeClaim": "five_hour"})
    assert view["overallStatus"] is None and view["representativeClaim"] == "five_hour"
    assert summary.account_view({"label": "acct1\n"}) is None
    assert history.parse_row(b'{"t": 1800000000000, "label": "acct1\\n"}') is None
    assert history.parse_row(b'{"t": 1800000000000, "label": "acct1"}')["label"] == "acct1"
    assert _text.account_label("a" * 64) and _text.account_label("a" * 65) is None


def test_error_sentences_are_addressed_by_name_and_stay_in_order():
    from svcposture.claude.errors import KNOWN_MESSAGES, MESSAGES, error
    from svcposture.errors import Sentences

    config = MESSAGES["config"]
    assert isinstance(config, Sentences) and isinstance(config, tuple)
    assert config.default == config[0] == config.group_writable
    assert config.symlink == "The accounts env file is a symbolic link; it is not sourced."
    assert MESSAGES["internal"].stopping == "The probe was stopped because the monitor is stopping."
    assert error("config", config.open_directory)["message"] == config.open_directory
    assert error("config", "made up")["message"] == config.default
    # Every sentence has exactly one name, and the names are the only attributes.
    for kind, sentences in MESSAGES.items():
        assert list(vars(sentences).values()) == list(sentences), kind
    assert config.shell_syntax == "The accounts env file is not valid shell: the shell stopped at a syntax error."
    assert len(KNOWN_MESSAGES) == sum(len(s) for s in MESSAGES.values()) == 25
    with pytest.raises(AttributeError):
        config.no_such_sentence  # noqa: B018


def test_no_module_indexes_a_sentence_by_position():
    import pathlib
    import re

    package = pathlib.Path(_text.__file__).parent
    indexed = [str(p) for p in package.rglob("*.py") if re.search(r"MESSAGES\[[^\]]+\]\[\d", p.read_text())]
    assert indexed == []
