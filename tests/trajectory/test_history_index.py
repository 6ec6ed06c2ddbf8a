"""The monitor's history index answers exactly what the library's read_history answers."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from svcposture.trajectory.history import DAY_MS, HOUR_MS, append_rows, read_history_body
from svcposture.trajectory.historyindex import BLOCK, HistoryIndex, thin, thin_parts
from svcposture.trajectory.history import bucket_max
from svcposture.paths import Paths

NOW = 1_800_000_000_000


def _paths(root: Path) -> Paths:
    return Paths(root, environ={"HOME": str(root)})


rows_strategy = st.lists(st.tuples(st.integers(-9 * DAY_MS, 0), st.sampled_from(["a", "b"]),
                                   st.one_of(st.none(), st.floats(0, 150, allow_nan=False)),
                                   st.one_of(st.none(), st.floats(0, 150, allow_nan=False))),
                         max_size=80)


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, hours=st.integers(1, 192), later=rows_strategy)
def test_index_equals_the_library_read(rows, hours, later):
    with tempfile.TemporaryDirectory() as tmp:
        paths = _paths(Path(tmp))
        index = HistoryIndex(paths)

        def write(batch):
            # One append per row, in the given (unsorted: a clock that steps back) order.
            for dt, label, five, seven in batch:
                if five is None and seven is None:
                    continue
                append_rows(paths, [{"t": NOW + dt, "label": label,
                                     "fiveHour": None if five is None else {"pct": five, "resetsAt": None},
                                     "sevenDay": None if seven is None else {"pct": seven, "resetsAt": NOW}}],
                            fsync=False)
        write(rows)
        assert index.body(node="n", hours=hours, now_ms=NOW) == read_history_body(paths, node="n", hours=hours,
                                                                                   now_ms=NOW)
        write(later)  # today's file grows: read on from where the index stopped
        assert index.body(node="n", hours=hours, now_ms=NOW) == read_history_body(paths, node="n", hours=hours,
                                                                                   now_ms=NOW)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.floats(0, 200, allow_nan=False)), max_size=400),
       st.integers(1, 50))
def test_thin_equals_bucket_max(points, limit):
    merged = {}
    for t, p in points:
        merged[t] = max(merged.get(t, -1.0), p)
    ordered = sorted(merged.items())
    times, pcts = [t for t, _ in ordered], [p for _, p in ordered]
    assert thin(times, pcts, 0, 10_000, limit) == bucket_max(ordered, 0, 10_000, limit)


def test_damaged_files_replaced_and_truncated_files_are_read_again(tmp_path):
    paths = _paths(tmp_path)
    index = HistoryIndex(paths)
    row = {"t": NOW - HOUR_MS, "label": "a", "fiveHour": {"pct": 10.0, "resetsAt": None}, "sevenDay": None}
    append_rows(paths, [row], fsync=False)
    day = sorted(paths.history_dir.glob("*.jsonl"))[0]
    assert index.body(node="n", hours=2, now_ms=NOW)["accounts"]["a"]["fiveHour"] == [[NOW - HOUR_MS, 10.0]]
    # A torn line at the end is not read until it is whole.
    with open(str(day), "ab") as fh:
        fh.write(json.dumps(dict(row, t=NOW - 1000)).encode()[:20])
    assert len(index.body(node="n", hours=2, now_ms=NOW)["accounts"]["a"]["fiveHour"]) == 1
    # The file replaced by a shorter one (a restore, a hand edit): read from the start.
    day.write_text(json.dumps(dict(row, fiveHour={"pct": 3.0, "resetsAt": None})) + "\n")
    assert index.body(node="n", hours=2, now_ms=NOW)["accounts"]["a"]["fiveHour"] == [[NOW - HOUR_MS, 3.0]]
    day.unlink()
    assert index.body(node="n", hours=2, now_ms=NOW)["accounts"] == {}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.one_of(st.floats(0, 200, allow_nan=False),
                                                            st.sampled_from([1.0, 2.0, 3.0]))), max_size=300),
       st.integers(1, 40), st.lists(st.integers(0, 10_000), max_size=4))
def test_thin_over_day_parts_equals_bucket_max(points, limit, cuts):
    merged = {}
    for t, p in points:
        merged[t] = max(merged.get(t, -1.0), p)
    ordered = sorted(merged.items())
    times, pcts = [t for t, _ in ordered], [p for _, p in ordered]
    # Cut the series into disjoint runs, as day files cut it, each with some rows outside [lo, hi).
    bounds = sorted(set([0, len(times)] + [c % (len(times) + 1) for c in cuts]))
    expected = bucket_max(ordered, 0, 10_000, limit)
    parts = [(times, pcts, a, b, None) for a, b in zip(bounds, bounds[1:]) if b > a]
    assert thin_parts(parts, 0, 10_000, limit) == expected
    # With block maxima (as the index keeps them), the same answer.
    blocks = [max(pcts[i:i + BLOCK]) for i in range(0, len(pcts), BLOCK)]
    assert thin_parts([p[:4] + (blocks,) for p in parts], 0, 10_000, limit) == expected


def test_a_week_is_thinned_to_500_points_keeping_the_peak(tmp_path):
    paths = _paths(tmp_path)
    rows = [{"t": NOW - i * 30_000, "label": "a", "fiveHour": {"pct": float(i % 97), "resetsAt": None},
             "sevenDay": None} for i in range(8 * 2880)]
    rows[5000]["fiveHour"]["pct"] = 150.0
    append_rows(paths, rows, fsync=False)
    index = HistoryIndex(paths)
    body = index.body(node="n", hours=192, now_ms=NOW)
    series = body["accounts"]["a"]["fiveHour"]
    assert len(series) == 500 and [NOW - 5000 * 30_000, 150.0] in series
    assert body == read_history_body(paths, node="n", hours=192, now_ms=NOW)
    # Today's file grows (its block maxima with it): still the library's answer.
    later = NOW + 3 * 3_600_000
    append_rows(paths, [{"t": NOW + i * 30_000, "label": "a", "fiveHour": {"pct": float(i % 13) * 9, "resetsAt": None},
                         "sevenDay": None} for i in range(1, 360)], fsync=False)
    assert index.body(node="n", hours=192, now_ms=later) == read_history_body(paths, node="n", hours=192, now_ms=later)
    assert index.body(node="n", hours=7, now_ms=later) == read_history_body(paths, node="n", hours=7, now_ms=later)
