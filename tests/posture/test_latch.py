"""The durable per-account edge latch: one account.status.changed per edge, across restarts and crashes."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcposture.events import STATUS_CHANGED, EventLog, EventLogError, status_changed
from svcposture.posture.latch import Latch, LatchError, read_latch
from svcposture.paths import Paths

HOLDING = ["degraded", "error", "unknown", "disabled", "unavailable", ""]


def make(paths: Paths) -> Latch:
    latch = Latch(paths.latch, EventLog.for_paths(paths), "node-a")
    latch.load()
    return latch


def edges(paths: Paths) -> List[Tuple[str, str]]:
    """(handle, status) of every status event in the log, oldest first."""
    out = [(e["attributes"]["account.handle"], e["attributes"]["account.status"])
           for e in EventLog.for_paths(paths).iter_newest_first() if e["attributes"]["event.name"] == STATUS_CHANGED]
    out.reverse()
    return out


def latch_file(paths: Paths) -> dict:
    return json.loads(paths.latch.read_text())


# ---------------------------------------------------------------- edges

def test_rejected_then_ok_one_event_each(paths: Paths) -> None:
    latch = make(paths)
    assert not paths.latch.exists() or latch_file(paths)["accounts"] == {}
    ev = latch.observe("acct1", "a@x", "rejected", "seven_day")
    assert ev is not None
    attrs = ev["attributes"]
    assert (attrs["account.handle"], attrs["account.email"], attrs["account.status"],
            attrs["account.binding_window"], attrs["node.name"]) == ("acct1", "a@x", "rejected", "seven_day", "node-a")
    assert latch.is_latched("acct1")
    for _ in range(3):
        assert latch.observe("acct1", "a@x", "rejected", "seven_day") is None
    assert latch.observe("acct1", "a@x", "ok", "five_hour")["attributes"]["account.status"] == "ok"
    assert not latch.is_latched("acct1")
    assert latch.observe("acct1", "a@x", "ok", "five_hour") is None
    assert edges(paths) == [("acct1", "rejected"), ("acct1", "ok")]


def test_latch_file_format_and_mode(paths: Paths) -> None:
    latch = make(paths)
    ev = latch.observe("acct2", "b@x", "rejected", "five_hour")
    data = latch_file(paths)
    assert data == {"version": 1, "accounts": {"acct2": {
        "latched": True, "bindingWindow": "five_hour", "since": ev["ts"], "eventId": ev["id"]}}}
    assert stat.S_IMODE(os.stat(str(paths.latch)).st_mode) == 0o600
    assert read_latch(paths.latch) == data
    assert latch.snapshot() == data["accounts"]


@pytest.mark.parametrize("status", HOLDING)
def test_other_statuses_hold_in_both_states(paths: Paths, status: str) -> None:
    latch = make(paths)
    assert latch.observe("acct1", None, status, "five_hour") is None
    assert not latch.is_latched("acct1")
    latch.observe("acct1", None, "rejected", "five_hour")
    assert latch.observe("acct1", None, status, "five_hour") is None
    assert latch.is_latched("acct1")
    assert edges(paths) == [("acct1", "rejected")]


def test_ok_without_latch_and_no_active_account_emit_nothing(paths: Paths) -> None:
    latch = make(paths)
    assert latch.observe("acct1", None, "ok", "five_hour") is None
    assert latch.observe(None, None, "rejected", "five_hour") is None
    assert latch.observe("", None, "rejected", "five_hour") is None
    assert edges(paths) == []


def test_each_account_moves_only_its_own_entry(paths: Paths) -> None:
    latch = make(paths)
    latch.observe("acct1", None, "rejected", "five_hour")
    latch.observe("acct2", None, "rejected", "seven_day")
    latch.observe("acct1", None, "ok", "five_hour")
    assert not latch.is_latched("acct1") and latch.is_latched("acct2")
    assert latch.observe("acct2", None, "rejected", "seven_day") is None
    assert edges(paths) == [("acct1", "rejected"), ("acct2", "rejected"), ("acct1", "ok")]


def test_bad_binding_window_is_omitted(paths: Paths) -> None:
    ev = make(paths).observe("acct1", None, "rejected", "fortnight")
    assert "account.binding_window" not in ev["attributes"]


# ---------------------------------------------------------------- restarts and reconciliation

def test_restart_mid_episode_does_not_re_emit(paths: Paths) -> None:
    make(paths).observe("acct1", None, "rejected", "five_hour")
    again = make(paths)
    assert again.is_latched("acct1")
    assert again.observe("acct1", None, "rejected", "five_hour") is None
    assert again.observe("acct1", None, "ok", "five_hour") is not None
    assert edges(paths) == [("acct1", "rejected"), ("acct1", "ok")]


@pytest.mark.parametrize("garbage", [
    b"", b"{", b"null", b"[]", b'{"version": 2, "accounts": {}}', b'{"version": 1, "accounts": []}',
    b'{"version": 1, "accounts": {"acct1": {"latched": "yes"}}}', b"\xff\xfe", b"1" * 5000,
])
def test_corrupt_latch_is_moved_aside_and_rebuilt_from_log(paths: Paths, garbage: bytes) -> None:
    make(paths).observe("acct1", None, "rejected", "five_hour")
    paths.latch.write_bytes(garbage)
    latch = make(paths)
    aside = latch.moved_aside
    assert aside is not None and aside.read_bytes() == garbage, "the corrupt file is kept, not dropped"
    assert latch.is_latched("acct1")
    assert latch_file(paths)["accounts"]["acct1"]["latched"] is True
    assert latch.observe("acct1", None, "rejected", "five_hour") is None
    assert edges(paths) == [("acct1", "rejected")]


def test_latch_deleted_or_corrupted_under_a_running_latch(paths: Paths) -> None:
    latch = make(paths)
    latch.observe("acct1", None, "rejected", "five_hour")
    paths.latch.unlink()
    assert latch.observe("acct1", None, "rejected", "five_hour") is None
    assert latch_file(paths)["accounts"]["acct1"]["latched"] is True
    paths.latch.write_text("{corrupt")
    assert latch.observe("acct1", None, "rejected", "five_hour") is None
    assert latch.moved_aside is not None and latch.moved_aside.read_text() == "{corrupt"
    assert edges(paths) == [("acct1", "rejected")]


def test_missing_latch_rebuilt_from_the_whole_log(paths: Paths) -> None:
    log = EventLog.for_paths(paths)
    log.append(status_changed("node-a", "acct1", None, "rejected", "five_hour", ts_ms=1767225600000))
    log.append(status_changed("node-a", "acct2", None, "rejected", "seven_day", ts_ms=1769904000000))
    log.append(status_changed("node-a", "acct2", None, "ok", "seven_day", ts_ms=1769904000001))
    latch = make(paths)
    assert latch.is_latched("acct1") and not latch.is_latched("acct2")
    assert latch_file(paths)["accounts"]["acct1"]["bindingWindow"] == "five_hour"
    assert latch.observe("acct1", None, "rejected", "five_hour") is None
    assert latch.observe("acct2", None, "rejected", "five_hour") is not None


def test_log_wins_per_account_when_latch_disagrees(paths: Paths) -> None:
    latch = make(paths)
    latch.observe("acct2", None, "rejected", "seven_day")
    latch.observe("acct1", None, "rejected", "five_hour")
    # A hand-edited (valid) latch that contradicts the log on acct2, whose event is
    # older than the newest one the latch knows.
    data = latch_file(paths)
    data["accounts"]["acct2"]["latched"] = False
    paths.latch.write_text(json.dumps(data))
    again = make(paths)
    assert again.is_latched("acct2")
    assert again.observe("acct2", None, "rejected", "seven_day") is None
    assert latch_file(paths)["accounts"]["acct2"]["latched"] is True


def test_stale_latch_from_before_later_edges_catches_up(paths: Paths) -> None:
    latch = make(paths)
    latch.observe("acct1", None, "rejected", "five_hour")
    backup = paths.latch.read_bytes()
    latch.observe("acct3", None, "rejected", "five_hour")
    latch.observe("acct1", None, "ok", "five_hour")
    paths.latch.write_bytes(backup)            # e.g. restored from an older backup
    again = make(paths)
    assert again.is_latched("acct3") and not again.is_latched("acct1")


# ---------------------------------------------------------------- failures

def test_append_failure_advances_nothing_and_retries(home: Path) -> None:
    latch_path = home / "state" / "latch.json"
    blocker = home / "events-blocker"
    blocker.write_text("file, not a directory")
    latch = Latch(latch_path, EventLog(blocker / "events"), "node-a")
    latch.load()
    before = latch_path.read_bytes()
    with pytest.raises(EventLogError):
        latch.observe("acct1", None, "rejected", "five_hour")
    assert not latch.is_latched("acct1")
    assert latch_path.read_bytes() == before
    blocker.unlink()
    assert latch.observe("acct1", None, "rejected", "five_hour") is not None, "the edge is retried next tick"
    assert latch.is_latched("acct1")


def test_unwritable_latch_still_emits_once(home: Path) -> None:
    blocker = home / "latch-blocker"
    blocker.write_text("file, not a directory")
    log = EventLog(home / "events")
    latch = Latch(blocker / "latch.json", log, "node-a")
    with pytest.raises(LatchError):
        latch.load()
    assert latch.observe("acct1", None, "rejected", "five_hour") is not None
    assert latch.observe("acct1", None, "rejected", "five_hour") is None, "memory guards the repeat"
    blocker.unlink()
    assert latch.observe("acct1", None, "rejected", "five_hour") is None
    assert json.loads((blocker / "latch.json").read_text())["accounts"]["acct1"]["latched"] is True
    assert [e["attributes"]["account.status"] for e in log.iter_newest_first()] == ["rejected"]


def test_read_latch_missing_and_corrupt(home: Path) -> None:
    assert read_latch(home / "none.json") == {"version": 1, "accounts": {}}
    (home / "bad.json").write_text('{"version": 9}')
    with pytest.raises(ValueError):
        read_latch(home / "bad.json")


# ---------------------------------------------------------------- crash between emit and advance

_CRASH_CHILD = r"""
import os, signal, sys
from svcposture.events import EventLog
from svcposture.posture.latch import Latch
from svcposture.paths import Paths
handle, status = sys.argv[1], sys.argv[2]
paths = Paths()
latch = Latch(paths.latch, EventLog.for_paths(paths), "node-a")
latch.load()
if sys.argv[3] == "crash":
    # Test-side fault injection: die the instant the event is durable, before
    # the latch file can advance.
    def _die(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    Latch._advance = _die
event = latch.observe(handle, None, status, "seven_day")
print("EMITTED" if event else "NONE")
"""


def run_child(env: dict, handle: str, status: str, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CRASH_CHILD, handle, status, mode], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("prior", ["none", "other-account", "previous-episode"])
def test_sigkill_between_emit_and_advance_yields_no_duplicate(paths: Paths, env: dict, prior: str) -> None:
    if prior == "other-account":
        assert run_child(env, "acct2", "rejected", "normal").stdout.strip() == "EMITTED"
    elif prior == "previous-episode":
        assert run_child(env, "acct1", "rejected", "normal").stdout.strip() == "EMITTED"
        assert run_child(env, "acct1", "ok", "normal").stdout.strip() == "EMITTED"
    before = edges(paths)
    entry_before = latch_file(paths)["accounts"].get("acct1") if paths.latch.exists() else None

    crashed = run_child(env, "acct1", "rejected", "crash")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert "EMITTED" not in crashed.stdout
    assert edges(paths) == before + [("acct1", "rejected")], "the event was durable before the kill"
    # load() may have written the (reconciled) latch, but the edge never reached it.
    assert latch_file(paths)["accounts"].get("acct1") == entry_before, "the latch must not have advanced"

    restarted = run_child(env, "acct1", "rejected", "normal")
    assert restarted.returncode == 0, restarted.stderr
    assert restarted.stdout.strip() == "NONE", "restart re-emitted the edge"
    assert edges(paths) == before + [("acct1", "rejected")]
    newest = EventLog.for_paths(paths).newest(STATUS_CHANGED)
    entry = latch_file(paths)["accounts"]["acct1"]
    assert entry == {"latched": True, "bindingWindow": "seven_day", "since": newest["ts"], "eventId": newest["id"]}

    assert run_child(env, "acct1", "ok", "normal").stdout.strip() == "EMITTED"
    assert edges(paths) == before + [("acct1", "rejected"), ("acct1", "ok")]


# ---------------------------------------------------------------- property: latch == model

HANDLES = ["acct1", "acct2", "acct3"]
STATUSES = ["ok", "rejected", "degraded", "error", "unknown", "disabled"]

step = st.one_of(
    st.tuples(st.just("observe"), st.sampled_from(HANDLES + [None]), st.sampled_from(STATUSES)),
    st.tuples(st.just("restart")),
    st.tuples(st.just("crash"), st.sampled_from(HANDLES), st.sampled_from(STATUSES)),
    st.tuples(st.just("delete")),
    st.tuples(st.just("corrupt")),
)


class _Crash(Exception):
    pass


def _crash_advance(*args, **kwargs):
    raise _Crash()


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=40))
def test_latch_matches_model(steps) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = Paths(tmp, environ={"HOME": tmp})
        latch = make(paths)
        model: Dict[str, bool] = {}
        expected: List[Tuple[str, str]] = []
        for op in steps:
            kind = op[0]
            if kind in ("observe", "crash"):
                handle, status = op[1], op[2]
                edge = None
                if handle and status == "rejected" and not model.get(handle):
                    edge = "rejected"
                elif handle and status == "ok" and model.get(handle):
                    edge = "ok"
                if edge:
                    model[handle] = edge == "rejected"
                    expected.append((handle, edge))
                if kind == "crash":
                    # Die after the append, before the advance; the object is dropped.
                    latch._advance = _crash_advance  # type: ignore[assignment]
                    try:
                        result = latch.observe(handle, None, status, "five_hour")
                    except _Crash:
                        result = "crashed"
                    assert (result == "crashed") == bool(edge)
                    latch = make(paths)
                else:
                    result = latch.observe(handle, None, status, "five_hour")
                    assert (result is not None) == bool(edge)
            elif kind == "restart":
                latch = make(paths)
            elif kind == "delete":
                if paths.latch.exists():
                    paths.latch.unlink()
            elif kind == "corrupt":
                paths.latch.parent.mkdir(parents=True, exist_ok=True)
                paths.latch.write_text('{"version": 1, "accounts": ')
            assert {h: latch.is_latched(h) for h in HANDLES} == {h: model.get(h, False) for h in HANDLES}
        assert edges(paths) == expected
        final = make(paths)
        assert {h: final.is_latched(h) for h in HANDLES} == {h: model.get(h, False) for h in HANDLES}


def test_odd_ids_in_latch_and_log_do_not_crash(paths: Paths) -> None:
    paths.latch.parent.mkdir(parents=True)
    paths.latch.write_text(json.dumps({"version": 1, "accounts": {"acct9": {"latched": True, "eventId": [1]}}}))
    events_dir = paths.events_dir
    events_dir.mkdir(parents=True)
    (events_dir / "2026-03.jsonl").write_text(
        json.dumps({"id": {"x": 1}, "attributes": {"event.name": STATUS_CHANGED, "account.handle": "acct1",
                                                    "account.status": "rejected"}}) + "\n")
    latch = make(paths)
    assert latch.is_latched("acct1") and latch.is_latched("acct9")
    assert latch.observe("acct1", None, "rejected", "five_hour") is None


def test_observe_without_load_still_knows_the_episode(paths: Paths) -> None:
    make(paths).observe("acct1", None, "rejected", "five_hour")
    fresh = Latch(paths.latch, EventLog.for_paths(paths), "node-a")   # load() forgotten
    assert fresh.observe("acct1", None, "rejected", "five_hour") is None
    assert edges(paths) == [("acct1", "rejected")]
