"""The monitor's in-memory index of its history files, behind /api/history.

A day file is parsed once: past days never change, and today's only grows,
so it is read on from where the last read stopped (a file that shrank or was
replaced or rewritten is read again from the start). Each file becomes, per account and
window, a list of times and a list of pcts. A request then costs a bisect
and a C-level max() per bucket instead of a JSON parse per row, so 8 days at
a 30 s probe interval (~92k rows) answer in a few milliseconds.

The body is the one history.history_body builds from rows (the library's
read_history), with the same rules: rows inside [now - hours, now], at most
MAX_POINTS points per series, each of equal time spans keeping its peak.
"""
from __future__ import annotations

import bisect
import os
import threading
from typing import Any, Dict, List, Optional, Tuple

from .. import _time
from .._names import WINDOW_FIELDS
from .history import HOUR_MS, MAX_POINTS, MAX_ROW_LINE, _day_files, check_hours, day_key, parse_row
from ..paths import Paths
from ..vendors import provider_of_label

Series = Tuple[List[int], List[float]]
Part = Tuple[List[int], List[float], int, int, Optional[List[float]]]
# A bucket of a week's 500 is ~46 probes at 30 s: block maxima of 8 let max() touch a third of them.
BLOCK = 8


class _DayFile:
    __slots__ = ("identity", "head", "offset", "series", "sorted", "blocks")

    def __init__(self) -> None:
        self.identity: Tuple[int, int] = (-1, -1)
        self.head = b""  # the first bytes read, to tell a rewritten file from a grown one
        self.offset = 0
        self.series: Dict[Tuple[str, Any], Series] = {}
        self.sorted = True
        # Per series, the max of each BLOCK consecutive pcts (the last block may be partial).
        self.blocks: Dict[Tuple[str, Any], List[float]] = {}

    def add(self, row: Dict[str, Any]) -> None:
        t = row["t"]
        keyed: List[Tuple[Any, Any]] = [(field, row.get(field)) for field in WINDOW_FIELDS]
        keyed += [(("extra", e["name"], e["seconds"]), e) for e in row.get("extra") or ()]
        for field, window in keyed:
            if window is None:
                continue
            times, pcts = self.series.setdefault((row["label"], field), ([], []))
            if times and t < times[-1]:
                self.sorted = False  # a clock that stepped back: sort before use
            times.append(t)
            pcts.append(window["pct"])

    def sorted_series(self) -> Dict[Tuple[str, Any], Series]:
        if not self.sorted:
            for key, (times, pcts) in list(self.series.items()):
                pairs = sorted(zip(times, pcts))
                self.series[key] = ([t for t, _ in pairs], [p for _, p in pairs])
            self.sorted = True
            self.blocks.clear()
        return self.series

    def block_maxima(self, key: Tuple[str, Any]) -> List[float]:
        """The block maxima of one (sorted) series, brought up to date with its growth."""
        pcts = self.series[key][1]
        blocks = self.blocks.setdefault(key, [])
        # Only the last (partial) block and the blocks after it can have changed.
        first = max(0, len(blocks) - 1)
        del blocks[first:]
        blocks.extend(max(pcts[i:i + BLOCK]) for i in range(first * BLOCK, len(pcts), BLOCK))
        return blocks


class HistoryIndex:
    """Parsed day files of one node, refreshed on each read; thread-safe."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._lock = threading.Lock()
        self._days: Dict[str, _DayFile] = {}

    def _refresh(self, day: str, path: Any) -> Optional[_DayFile]:
        try:
            fd = os.open(str(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            self._days.pop(day, None)
            return None
        try:
            st = os.fstat(fd)
            entry = self._days.get(day)
            identity = (st.st_ino, st.st_dev)
            if entry is None or entry.identity != identity or st.st_size < entry.offset or \
                    (entry.head and os.pread(fd, len(entry.head), 0) != entry.head):
                entry = _DayFile()
                entry.identity = identity
                self._days[day] = entry
            if st.st_size > entry.offset:
                data = os.pread(fd, st.st_size - entry.offset, entry.offset)
                end = data.rfind(b"\n") + 1  # a torn last line waits for its end
                for raw in data[:end].split(b"\n"):
                    if raw and len(raw) <= MAX_ROW_LINE:
                        row = parse_row(raw)
                        if row is not None:
                            entry.add(row)
                if not entry.offset:
                    entry.head = data[:min(end, 256)]
                entry.offset += end
            return entry
        finally:
            os.close(fd)

    def body(self, *, node: str, hours: int, now_ms: Optional[int] = None) -> Dict[str, Any]:
        """The /api/history body (see history.history_body)."""
        end = _time.now_ms() if now_ms is None else int(now_ms)
        start = end - check_hours(hours) * HOUR_MS
        first, last = day_key(start), day_key(end)
        parts: Dict[Tuple[str, Any], List[Part]] = {}
        with self._lock:
            wanted = sorted((d, p) for d, p in _day_files(self.paths) if first <= d <= last)
            for day in [d for d in self._days if not first <= d <= last]:
                if day < day_key(end - 9 * 86_400_000):
                    del self._days[day]  # pruned away: keep memory bounded
            for day, path in wanted:
                entry = self._refresh(day, path)
                if entry is None:
                    continue
                for key, (times, pcts) in entry.sorted_series().items():
                    lo = bisect.bisect_left(times, start)
                    hi = bisect.bisect_right(times, end)
                    if hi > lo:
                        # Day files are disjoint in time and taken in order: no copy, no merge.
                        parts.setdefault(key, []).append((times, pcts, lo, hi, entry.block_maxima(key)))
        accounts: Dict[str, Dict[str, Any]] = {}
        for (label, field), series in sorted(parts.items(), key=_part_order):
            account = accounts.setdefault(label, dict({"provider": provider_of_label(label)},
                                                      **{f: [] for f in WINDOW_FIELDS}))
            if isinstance(field, tuple):  # an extra window: ("extra", name, seconds)
                account.setdefault("extraWindows", []).append(
                    {"name": field[1], "seconds": field[2], "points": thin_parts(series, start, end)})
            else:
                account[field] = thin_parts(series, start, end)
        return {"node": node, "from": start, "to": end, "accounts": accounts}


def _part_order(item: Tuple[Tuple[str, Any], Any]) -> Tuple[str, int, str, int]:
    """Accounts by label; their 5h and 7d first, then the extra windows by name and length."""
    label, field = item[0]
    if isinstance(field, tuple):
        return label, 1, field[1] or "", field[2] or 0
    return label, 0, field, 0


def _peak(pcts: List[float], blocks: Optional[List[float]], lo: int, hi: int) -> Tuple[float, int]:
    """(max of pcts[lo:hi], index of its first occurrence), using the block maxima when given."""
    first, last = -(-lo // BLOCK), hi // BLOCK  # the whole blocks inside [lo, hi)
    if blocks is None or last - first < 2:
        peak = max(pcts[lo:hi])
        return peak, pcts.index(peak, lo, hi)
    head, tail = first * BLOCK, last * BLOCK
    peak = max(blocks[first:last])
    if lo < head:
        peak = max(peak, max(pcts[lo:head]))
    if tail < hi:
        peak = max(peak, max(pcts[tail:hi]))
    # The earliest occurrence: the head, then the first block holding it, then the tail.
    if lo < head and peak in pcts[lo:head]:
        return peak, pcts.index(peak, lo, head)
    if peak in blocks[first:last]:
        block = blocks.index(peak, first, last)
        return peak, pcts.index(peak, block * BLOCK, block * BLOCK + BLOCK)
    return peak, pcts.index(peak, tail, hi)


def thin_parts(parts: List[Part], start: int, end: int, limit: int = MAX_POINTS) -> List[List[Any]]:
    """thin() of the concatenation of parts[i] = (times, pcts, lo, hi, block maxima or None),
    oldest part first."""
    if sum(hi - lo for _, _, lo, hi, _ in parts) <= limit:
        times: List[int] = []
        pcts: List[float] = []
        for part_times, part_pcts, lo, hi, _ in parts:
            times.extend(part_times[lo:hi])
            pcts.extend(part_pcts[lo:hi])
        return thin(times, pcts, start, end, limit)
    width = max(1, end - start + 1)
    kept: Dict[int, List[Any]] = {}
    for times, pcts, lo, hi, blocks in parts:
        # Only the slots this part can reach: from its first time's slot to its last's.
        first = min(limit - 1, (times[lo] - start) * limit // width)
        last = min(limit - 1, (times[hi - 1] - start) * limit // width)
        for slot in range(first, last + 1):
            bound = start + -(-(slot + 1) * width // limit)
            upper = bisect.bisect_left(times, bound, lo, hi) if slot < limit - 1 else hi
            if upper > lo:
                peak, where = _peak(pcts, blocks, lo, upper)
                best = kept.get(slot)
                if best is None or peak > best[1]:  # an earlier part wins a tie: the earliest of equals
                    kept[slot] = [times[where], peak]
            lo = upper
    return [kept[slot] for slot in sorted(kept)]


def thin(times: List[int], pcts: List[float], start: int, end: int, limit: int = MAX_POINTS) -> List[List[Any]]:
    """At most `limit` [t, pct] points, oldest first; equal times keep their highest pct.

    A longer series is cut into `limit` equal spans of [start, end] and each
    keeps its highest point (the earliest of equals), as history.bucket_max.
    """
    if len(times) <= limit:
        out: List[List[Any]] = []
        for t, pct in zip(times, pcts):
            if out and out[-1][0] == t:
                out[-1][1] = max(out[-1][1], pct)
            else:
                out.append([t, pct])
        return out
    width = max(1, end - start + 1)
    out = []
    lo = 0
    n = len(times)
    for slot in range(limit):
        # The first time whose slot is past this one: (t - start) * limit // width > slot.
        bound = start + -(-(slot + 1) * width // limit)
        hi = bisect.bisect_left(times, bound, lo, n) if slot < limit - 1 else n
        if hi > lo:
            peak = max(pcts[lo:hi])
            out.append([times[pcts.index(peak, lo, hi)], peak])
        lo = hi
    return out
