"""The zero-call path: the newest rate-limit sample in a Codex login's session logs."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from svcposture._time import parse_iso_ms
from svcposture.codex import session
from svcposture.codex.session import newest_session_sample
from tests.support.codex import other_line, session_path, token_count_line, write_session

def _now_ms() -> int:
    return int(time.time() * 1000)


def test_both_reset_spellings_and_window_lengths(tmp_path):
    now = time.time()  # read in the test: the file may run long after the suite started
    at = now - 60
    write_session(tmp_path, at, [
        other_line(at - 5),
        token_count_line(at, (42.0, 300, 1000), (91.5, 10080, 5000), spelling="resets_in_seconds"),
    ])
    sample = newest_session_sample(str(tmp_path), None, _now_ms())
    assert sample["fiveHour"]["pct"] == 42.0 and sample["sevenDay"]["status"] == "allowed_warning"
    # resets_in_seconds counts from the line's own time, not from now.
    assert abs(parse_iso_ms(sample["fiveHour"]["resetsAt"]) / 1000 - (at + 1000)) < 1
    write_session(tmp_path, at + 1, [token_count_line(at + 1, (5, 300, 1893456000), (100, 60, 1894060800))],
                  name="b")
    sample = newest_session_sample(str(tmp_path), None, _now_ms())
    assert sample["fiveHour"]["resetsAt"] == "2030-01-01T00:00:00.000Z"
    assert sample["sevenDay"] is None
    assert sample["extraWindows"] == [{"pct": 100.0, "resetsAt": "2030-01-08T00:00:00.000Z", "status": "rejected",
                                       "derived": True, "seconds": 3600, "name": None}]


def test_torn_and_hostile_lines_are_skipped(tmp_path):
    now = time.time()  # read in the test: the file may run long after the suite started
    at = now - 100
    good = token_count_line(at, (33.0, 300, 500), (44.0, 10080, 900), spelling="resets_in_seconds")
    hostile = [
        token_count_line(at + 1, rate_limits=None),
        token_count_line(at + 2, rate_limits={"primary": {"used_percent": 50}}),  # no length: no window
        token_count_line(at + 3, rate_limits=[1, 2]),
        json.dumps({"timestamp": "yesterday", "type": "event_msg",
                    "payload": {"type": "token_count", "rate_limits": {}}}),
        # stamped in the future
        token_count_line(now + 86400, (1.0, 300, 3600), None, spelling="resets_in_seconds"),
        json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "response_item",
                    "payload": {"type": "message", "text": "token_count rate_limits"}}),
        "[" * 50000 + "token_count rate_limits" + "]" * 50000,
        "\xff\xfe token_count rate_limits",
        '{"type": "event_msg", "payload": {"type": "token_count", "rate_limits": ' + "x" * 300 + "}}",
        "{}",
        "",
    ]
    path = write_session(tmp_path, at, [good] + hostile, tail="")
    with open(str(path), "ab") as fh:
        fh.write(b"\n\xff\xfe{token_count rate_limits}\x00\n")
        fh.write(good[: len(good) // 2].encode())  # torn: the CLI is mid-write
    sample = newest_session_sample(str(tmp_path), None, _now_ms())
    assert sample["fiveHour"]["pct"] == 33.0 and sample["sevenDay"]["pct"] == 44.0
    assert abs(sample["sampledAt"] / 1000 - at) < 1


def test_windows_that_have_reset_since_the_line_are_left_out(tmp_path):
    now = time.time()  # read in the test: the file may run long after the suite started
    at = now - 6 * 3600
    # Logged six hours ago: the 5-hour window has reset since, the weekly one has not.
    write_session(tmp_path, at, [token_count_line(at, (100.0, 300, 1800), (70.0, 10080, 86400),
                                                  spelling="resets_in_seconds")])
    sample = newest_session_sample(str(tmp_path), None, _now_ms())
    assert sample["fiveHour"] is None and sample["sevenDay"]["pct"] == 70.0
    # Every window reset since: no sample at all, so the endpoint is asked instead.
    other = tmp_path / "other"
    write_session(other, at, [token_count_line(at, (100.0, 300, 1800), (70.0, 10080, 3600),
                                               spelling="resets_in_seconds")])
    assert newest_session_sample(str(other), None, _now_ms()) is None


def test_only_a_sample_newer_than_the_last_one(tmp_path):
    now = time.time()  # read in the test: the file may run long after the suite started
    at = now - 100
    write_session(tmp_path, at, [token_count_line(at, (10.0, 300, 3600), None, spelling="resets_in_seconds")])
    sample = newest_session_sample(str(tmp_path), None, _now_ms())
    assert newest_session_sample(str(tmp_path), sample["sampledAt"], _now_ms()) is None
    assert newest_session_sample(str(tmp_path), sample["sampledAt"] - 1, _now_ms()) is not None


def test_newest_file_first_by_modification(tmp_path):
    now = time.time()  # read in the test: the file may run long after the suite started
    old_day, new_day = now - 3 * 86400, now - 60
    # A long session started days ago and still writing: its file is the newest though its directory is not.
    write_session(tmp_path, old_day, [token_count_line(now - 10, (70.0, 300, 3600), None,
                                                       spelling="resets_in_seconds")],
                  name="long", mtime=now - 10)
    write_session(tmp_path, new_day, [token_count_line(new_day, (20.0, 300, 3600), None, spelling="resets_in_seconds")],
                  name="short", mtime=new_day)
    assert newest_session_sample(str(tmp_path), None, _now_ms())["fiveHour"]["pct"] == 70.0


def test_a_file_not_modified_since_the_last_sample_is_not_read(tmp_path):
    now = time.time()  # read in the test: the file may run long after the suite started
    at = now - 100
    write_session(tmp_path, at, [token_count_line(at, (10.0, 300, 3600), None, spelling="resets_in_seconds")],
                  mtime=now - 1000)
    # Its line claims to be newer than the last sample, but the file was last written before it.
    assert newest_session_sample(str(tmp_path), int((now - 500) * 1000), _now_ms()) is None


def test_no_symlink_is_followed(tmp_path):
    now = time.time()  # read in the test: the file may run long after the suite started
    at = now - 60
    elsewhere = tmp_path / "elsewhere"
    real = write_session(elsewhere, at, [token_count_line(at, (10.0, 300, 3600), None,
                                                          spelling="resets_in_seconds")])
    home = tmp_path / "home"
    link = session_path(home, at, "link")
    link.parent.mkdir(parents=True)
    os.symlink(str(real), str(link))
    assert newest_session_sample(str(home), None, _now_ms()) is None
    # A symlinked day directory, and a symlinked sessions directory.
    home2 = tmp_path / "home2"
    day = session_path(home2, at).parent
    day.parent.mkdir(parents=True)
    os.symlink(str(real.parent), str(day))
    assert newest_session_sample(str(home2), None, _now_ms()) is None
    home3 = tmp_path / "home3"
    home3.mkdir()
    os.symlink(str(elsewhere / "sessions"), str(home3 / "sessions"))
    assert newest_session_sample(str(home3), None, _now_ms()) is None
    assert newest_session_sample(str(elsewhere), None, _now_ms())["fiveHour"]["pct"] == 10.0


def test_missing_or_odd_trees(tmp_path):
    assert newest_session_sample(str(tmp_path / "nope"), None, _now_ms()) is None
    (tmp_path / "sessions").write_text("a file, not a directory")
    assert newest_session_sample(str(tmp_path), None, _now_ms()) is None
    other = tmp_path / "other"
    (other / "sessions" / "notayear" / "01" / "01").mkdir(parents=True)
    (other / "sessions" / "2026" / "13" / "xx").mkdir(parents=True)
    assert newest_session_sample(str(other), None, _now_ms()) is None


def _big_log(tmp_path: Path, size: int, tail_lines, now: float) -> Path:
    """A log of `size` bytes (sparse where the file system allows) ending with `tail_lines`, named
    for `now` (the caller's one clock read: a second log written later has the same name)."""
    path = session_path(tmp_path, now - 60, "big")
    path.parent.mkdir(parents=True, exist_ok=True)
    tail = ("\n" + "\n".join(tail_lines) + "\n").encode()
    with open(str(path), "wb") as fh:
        fh.truncate(size - len(tail))
        fh.seek(size - len(tail))
        fh.write(tail)
    return path


def test_a_100_mb_log_reads_only_its_tail(tmp_path):
    now = time.time()  # read in the test: the file may run long after the suite started
    at = now - 60
    line = token_count_line(at, (55.0, 300, 3600), (66.0, 10080, 3600), spelling="resets_in_seconds")
    path = _big_log(tmp_path, 100 * 1024 * 1024, [line], now)
    assert path.stat().st_size == 100 * 1024 * 1024
    assert newest_session_sample(str(tmp_path), None, _now_ms())["sevenDay"]["pct"] == 66.0
    # A sample further back than the last 1 MB is not looked for.
    filler = [other_line(at)] * (session.TAIL_BYTES // len(other_line(at)) + 10)
    assert _big_log(tmp_path, 100 * 1024 * 1024, [line] + filler, now) == path
    assert newest_session_sample(str(tmp_path), None, _now_ms()) is None


def test_read_tail_drops_the_cut_first_line(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"A" * 10 + b"\nBB\nCC\n")
    assert session.read_tail(str(path), limit=8) == b"BB\nCC\n"
    assert session.read_tail(str(path), limit=100) == b"A" * 10 + b"\nBB\nCC\n"
    assert session.read_tail(str(tmp_path / "absent")) == b""


_json_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
_limit = st.one_of(_json_scalar, st.fixed_dictionaries({}, optional={
    "used_percent": _json_scalar, "window_minutes": st.one_of(_json_scalar, st.sampled_from([300, 10080])),
    "resets_at": _json_scalar, "resets_in_seconds": _json_scalar}))


_token_count = st.builds(
    lambda stamp, limits: json.dumps({"timestamp": stamp, "type": "event_msg", "payload": {
        "type": "token_count", "rate_limits": limits}}).encode(),
    st.one_of(_json_scalar, st.just("2026-11-25T10:00:00Z")),
    st.one_of(_json_scalar, st.fixed_dictionaries({}, optional={"primary": _limit, "secondary": _limit})))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), _token_count))
def test_fuzzed_lines_never_raise(line):
    now = _now_ms()
    sample = session.sample_of_line(line, now)
    if sample is not None:
        json.dumps(sample, allow_nan=False)
        assert sample["sampledAt"] <= now + session.MAX_FUTURE_MS
        assert sample["fiveHour"] or sample["sevenDay"] or sample["extraWindows"]
    assert session.newest_in_log(line + b"\n" + line, None, now) == sample
