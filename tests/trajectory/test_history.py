"""The history store (docs/trajectory.md): rows per probe in day files, and the /api/history body."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcposture import SvcpostureError
from svcposture.trajectory import history
from svcposture._time import iso_from_ms, parse_iso_ms
from svcposture.trajectory.history import (
    MAX_POINTS, append_rows, bucket_max, cycle_points, history_body, parse_row, prune, read_history_body, read_rows,
    rows_from_summary,
)
from svcposture.paths import Paths
from svcposture.claude.summary import derive_summary

NOW = parse_iso_ms("2026-01-10T12:00:00Z")
HOUR = 3_600_000
DAY = 24 * HOUR
RESET_5H = parse_iso_ms("2026-01-10T14:00:00Z")


@pytest.fixture
def node(home: Path) -> Paths:
    return Paths.for_home(home, {"HOME": str(home)})


def row(t: int, label: str = "acct1", five=12.5, seven=40.0, resets=RESET_5H):
    return {"t": t, "label": label,
            "fiveHour": None if five is None else {"pct": five, "resetsAt": resets},
            "sevenDay": None if seven is None else {"pct": seven, "resetsAt": None}}


def day_file(node: Paths, ms: int) -> Path:
    return node.history_dir / ("%s.jsonl" % iso_from_ms(ms)[:10])


# ---------------------------------------------------------------- writing

def test_rows_of_a_probe_come_from_the_summary():
    report = {"available": True, "accounts": [
        {"label": "a", "active": True, "fiveHour": {"pct": 12.3, "resetsAt": "2026-01-10T14:00:00.000Z",
                                                    "status": "allowed"}, "sevenDay": None, "error": None},
        {"label": "b", "fiveHour": {"pct": None, "resetsAt": None, "status": None}, "sevenDay": None,
         "error": {"kind": "auth"}},
        {"label": "c", "fiveHour": None, "sevenDay": {"pct": 101.5, "resetsAt": None, "status": "rejected"}},
    ]}
    rows = rows_from_summary(derive_summary(report, "n", NOW))
    assert rows == [
        {"t": NOW, "label": "a", "fiveHour": {"pct": 12.3, "resetsAt": RESET_5H}, "sevenDay": None},
        {"t": NOW, "label": "c", "fiveHour": None, "sevenDay": {"pct": 101.5, "resetsAt": None}},
    ]
    assert rows_from_summary(derive_summary({"error": {"kind": "timeout"}}, "n", NOW)) == []
    assert rows_from_summary(derive_summary({"available": False}, "n", NOW)) == []


def test_append_is_one_locked_write_owner_only(node, monkeypatch):
    writes = []
    real = history.append_lines
    monkeypatch.setattr(history, "append_lines", lambda path, lines, *fsync: (writes.append(list(lines)),
                                                                              real(path, lines, *fsync)))
    rows = [row(NOW, "a"), row(NOW, "b", five=None)]
    assert append_rows(node, rows) == [day_file(node, NOW)]
    assert len(writes) == 1 and len(writes[0]) == 2
    path = day_file(node, NOW)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(node.history_dir.stat().st_mode) == 0o700
    assert [json.loads(line) for line in path.read_text().splitlines()] == rows
    append_rows(node, [row(NOW + 1000, "a")])
    assert len(path.read_text().splitlines()) == 3


def test_append_refuses_a_bad_row_before_writing(node):
    for bad in ({"t": NOW, "label": "Bad Label"}, {"t": "x", "label": "a"}, {"t": True, "label": "a"},
                {"t": NOW, "label": "a", "fiveHour": {"pct": float("nan"), "resetsAt": None}},
                {"t": NOW, "label": "a", "fiveHour": {"pct": -1, "resetsAt": None}}):
        with pytest.raises(ValueError):
            append_rows(node, [row(NOW), bad])
    assert not node.history_dir.exists()


def test_an_unwritable_store_is_a_history_error(node):
    node.svc_dir.mkdir(parents=True)
    node.history_dir.write_text("not a directory")
    with pytest.raises(SvcpostureError) as info:
        append_rows(node, [row(NOW)])
    assert isinstance(info.value, OSError)


# ---------------------------------------------------------------- reading

def test_corrupt_truncated_and_huge_lines_are_skipped(node):
    append_rows(node, [row(NOW - 3 * HOUR, five=10.0)])
    path = day_file(node, NOW)
    with open(str(path), "ab") as fh:
        fh.write(b"not json\n")
        fh.write(b'{"t": %d, "label": "acct1", "fiveHour": {"pct": 11' % (NOW - 2 * HOUR))  # torn, then sealed
        fh.write(b"\n" + b"x" * (5 * 1024 * 1024) + b"\n")  # a line of megabytes
        fh.write(b'{"t": %d, "label": "acct1", "fiveHour": {"pct": NaN, "resetsAt": null}, "sevenDay": null}\n'
                 % (NOW - 2 * HOUR))
        fh.write(b'{"t": %d, "label": "acct1", "fiveHour": {"pct": "12", "resetsAt": null}, "sevenDay": null}\n'
                 % (NOW - 2 * HOUR))
        fh.write(b'[1, 2]\n\xff\xfe garbage\n' + b"[" * 100000 + b"\n")
        fh.write(b'{"t": %d, "label": "acct1", "fiveHour": {"pct": 30, "resetsAt": null}, "sevenDay": null,'
                 b' "extra": "dropped"}\n' % (NOW - HOUR))
        fh.write(b'{"t": %d, "label": "acct1", "fiveHour": {"pct": 99' % (NOW - 1000))  # torn last line
    rows = list(read_rows(node, start_ms=NOW - DAY, end_ms=NOW))
    assert [(r["t"], r["fiveHour"]["pct"]) for r in rows] == [(NOW - HOUR, 30.0), (NOW - 3 * HOUR, 10.0)]
    assert all(set(r) == {"t", "label", "fiveHour", "sevenDay"} for r in rows)
    # A writer appending after the torn line starts on a line of its own.
    append_rows(node, [row(NOW - 500, five=50.0)])
    assert [r["fiveHour"]["pct"] for r in read_rows(node, start_ms=NOW - 600, end_ms=NOW)] == [50.0]


@pytest.mark.parametrize("raw", [b"", b"{}", b"null", b'{"t": 1.5, "label": "a"}', b'{"t": 1, "label": 7}',
                                 b'{"t": 1, "label": "a", "fiveHour": []}',
                                 b'{"t": 1, "label": "a", "fiveHour": {"pct": 1, "resetsAt": "soon"}}',
                                 b'{"t": 1e400, "label": "a"}', b'{"t": 10000000000000000000000, "label": "a"}'])
def test_parse_row_refuses_what_is_not_a_row(raw):
    assert parse_row(raw) is None


def test_only_the_day_files_the_hours_cover_are_read(node, monkeypatch):
    opened = []
    real = history.iter_lines_reverse
    monkeypatch.setattr(history, "iter_lines_reverse", lambda path, **kw: (opened.append(Path(path).name),
                                                                           real(path, **kw))[1])
    for day in range(-5, 3):
        append_rows(node, [row(NOW + day * DAY, five=float(day + 10))])
    # Files from the future (a clock that was ahead) and stray names are never read.
    (node.history_dir / "notes.txt").write_text("x")
    misplaced = day_file(node, NOW + 2 * DAY)
    with open(str(misplaced), "a") as fh:
        fh.write(json.dumps(row(NOW - HOUR, five=77.0)) + "\n")
    body = read_history_body(node, node="n", hours=30, now_ms=NOW)
    assert sorted(opened) == ["2026-01-09.jsonl", "2026-01-10.jsonl"]
    assert body["accounts"]["acct1"]["fiveHour"] == [[NOW - DAY, 9.0], [NOW, 10.0]]
    assert 77.0 not in [p for _, p in body["accounts"]["acct1"]["fiveHour"]]


def test_a_missing_store_is_empty(node):
    assert read_history_body(node, node="n", hours=24, now_ms=NOW) == {
        "node": "n", "from": NOW - 24 * HOUR, "to": NOW, "accounts": {}}


@pytest.mark.parametrize("hours", [0, 193, -1, True, 1.5, "24", None])
def test_hours_outside_1_to_192_are_refused(node, hours):
    with pytest.raises(SvcpostureError):
        read_history_body(node, node="n", hours=hours, now_ms=NOW)
    with pytest.raises(ValueError):
        history_body([], node="n", now_ms=NOW, hours=hours)


@pytest.mark.parametrize("hours", [1, 24, 192])
def test_hours_bound_the_body(hours):
    start = NOW - hours * HOUR
    rows = [row(t, five=float(i)) for i, t in enumerate([start - 1, start, NOW - 1, NOW, NOW + 1])]
    body = history_body(rows, node="n", now_ms=NOW, hours=hours)
    assert (body["from"], body["to"]) == (start, NOW)
    assert body["accounts"]["acct1"]["fiveHour"] == [[start, 1.0], [NOW - 1, 2.0], [NOW, 3.0]]


def test_body_is_oldest_first_per_label_and_window():
    rows = [row(NOW - HOUR, "b", five=5.0, seven=None), row(NOW - 2 * HOUR, "a", five=1.0),
            row(NOW - 3 * HOUR, "a", five=2.0), row(NOW - 2 * HOUR, "a", five=7.0)]  # same t twice: the max
    body = history_body(rows, node="n", now_ms=NOW, hours=24)
    assert list(body["accounts"]) == ["a", "b"]
    assert body["accounts"]["a"] == {"provider": "claude", "fiveHour": [[NOW - 3 * HOUR, 2.0], [NOW - 2 * HOUR, 7.0]],
                                     "sevenDay": [[NOW - 3 * HOUR, 40.0], [NOW - 2 * HOUR, 40.0]]}
    assert body["accounts"]["b"] == {"provider": "claude", "fiveHour": [[NOW - HOUR, 5.0]], "sevenDay": []}


# ---------------------------------------------------------------- bucketing

def test_bucketing_keeps_the_peaks():
    start = NOW - 192 * HOUR
    series = [(start + i * 30_000, 10.0 + (i % 7)) for i in range(192 * 120)]
    series[12345] = (series[12345][0], 99.9)  # one spike among 23040 points
    rows = [row(t, five=p, seven=None) for t, p in series]
    out = history_body(rows, node="n", now_ms=NOW, hours=192)["accounts"]["acct1"]["fiveHour"]
    assert len(out) <= MAX_POINTS
    assert [series[12345][0], 99.9] in out
    assert [t for t, _ in out] == sorted(t for t, _ in out)


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(0, 10 ** 7), st.floats(0, 150)), min_size=0, max_size=2000,
                unique_by=lambda p: p[0]), st.integers(1, 600))
def test_bucket_max_properties(points, limit):
    points.sort()
    out = bucket_max(points, 0, 10 ** 7, limit)
    assert len(out) <= limit
    assert [t for t, _ in out] == sorted({t for t, _ in out})
    assert all((t, p) in set(points) for t, p in out)
    if points:
        assert max(p for _, p in out) == max(p for _, p in points)
    if len(points) <= limit:
        assert out == [[t, p] for t, p in points]


# ---------------------------------------------------------------- pruning and cycles

def test_prune_deletes_only_old_day_files(node):
    for day in range(-12, 3):
        append_rows(node, [row(NOW + day * DAY)])
    (node.history_dir / "keep-me.txt").write_text("x")
    removed = prune(node, 8, NOW)
    assert [p.name for p in removed] == ["2025-12-29.jsonl", "2025-12-30.jsonl", "2025-12-31.jsonl",
                                         "2026-01-01.jsonl"]
    left = sorted(os.listdir(str(node.history_dir)))
    assert left[0] == "2026-01-02.jsonl" and "2026-01-12.jsonl" in left and "keep-me.txt" in left
    # 192 hours back from NOW is still readable after the prune.
    assert read_history_body(node, node="n", hours=192, now_ms=NOW)["accounts"]["acct1"]["fiveHour"][0][0] \
        == NOW - 8 * DAY
    assert prune(node, 8, NOW) == []
    with pytest.raises(SvcpostureError):
        prune(node, 0, NOW)


def test_cycle_points_follow_the_reset():
    rows = [row(NOW - 3 * HOUR, five=80.0, resets=RESET_5H - 5 * HOUR),   # the previous cycle
            row(NOW - 2 * HOUR, five=5.0, resets=RESET_5H + 60_000),
            row(NOW - HOUR, five=9.0, resets=RESET_5H - 119_000),
            row(NOW, "other", five=50.0),
            row(NOW, five=12.0, resets=RESET_5H)]
    assert cycle_points(rows, "acct1", "fiveHour", RESET_5H) == [(NOW - 2 * HOUR, 5.0), (NOW - HOUR, 9.0),
                                                                 (NOW, 12.0)]
    assert cycle_points(rows, "acct1", "sevenDay", None) == [(r["t"], 40.0) for r in rows
                                                            if r["label"] == "acct1"]
