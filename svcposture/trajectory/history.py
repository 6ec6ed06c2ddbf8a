"""The history store of docs/trajectory.md: window pcts per probe, one file per UTC day.

`~/svc/history/<UTC YYYY-MM-DD>.jsonl` holds one row per account and probe:
`{"t": <probedAt ms>, "label", "fiveHour": {"pct", "resetsAt": <ms or null>} | null,
"sevenDay": ... }`, plus `"extra": [{"name", "seconds", "pct", "resetsAt"}]` for
an account that has extra windows (a model's own limit, a credit plan's
`credits`); rows without one are written as before. All rows of one probe go in with one locked append, so a
reader sees a probe whole or not at all. Files are owner-only (0600 in a
0700 directory) like everything under ~/svc.

Reads never scan more than the days asked for, skip any line that is not a
row (a torn write, a hand edit, a line of megabytes), and bound what they
return: the /api/history body keeps at most MAX_POINTS points per series.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from .cycle import same_cycle
from ..settings import InvalidSetting
from .._files import append_lines, iter_lines_reverse
from .._names import WINDOW_FIELDS
from .._text import is_int, loads_bounded, read_pct
from .. import _time
from .._time import iso_from_ms, parse_iso_ms
from ..errors import FACE, SvcpostureError
from ..paths import Paths
from ..settings import DEFAULT_HISTORY_DAYS as DEFAULT_DAYS
from ..vendors import is_account_label, provider_of_label

DEFAULT_HOURS = 24
MAX_HOURS = 192
MAX_POINTS = 500
# A row is about 150 bytes, 100 more per extra window; anything much longer is damage, skipped unread.
MAX_ROW_LINE = 8192
# Extra windows kept per row.
MAX_ROW_EXTRAS = 16
MAX_EXTRA_NAME = 64
DAY_MS = 86_400_000
HOUR_MS = 3_600_000

_DAY_FILE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.jsonl$")


class HistoryError(SvcpostureError, OSError):
    """Rows could not be appended; the file holds none of them."""

    __module__ = FACE


# ---------------------------------------------------------------- rows

def _ms(value: Any) -> Optional[int]:
    # Years 1..9999 only, so that every stored instant can be shown.
    if not is_int(value) or not -62135596800000 <= value <= 253402300799999:
        return None
    return value


def _window_of_summary(window: Any) -> Optional[Dict[str, Any]]:
    pct = read_pct(window.get("pct")) if isinstance(window, Mapping) else None
    if pct is None:
        return None
    resets = window.get("resetsAt")
    try:
        resets_ms: Optional[int] = parse_iso_ms(resets) if isinstance(resets, str) else None
    except ValueError:
        resets_ms = None
    return {"pct": pct, "resetsAt": resets_ms}


def rows_from_summary(summary: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The history rows of one probe: one per account that has a window pct.

    `summary` is a posture summary or body (docs/posture.md). A disabled or
    node-level error summary gives no row, nor does an account whose reading
    failed: the figures it shows are its last good reading's, already a row.
    """
    if summary.get("available") is not True or "error" in summary:
        return []
    probed_at = _ms(summary.get("probedAt"))
    accounts = summary.get("accounts")
    if probed_at is None or not isinstance(accounts, list):
        return []
    rows = []
    for account in accounts:
        if not isinstance(account, Mapping) or not isinstance(account.get("label"), str) or account.get("error"):
            continue
        windows = {field: _window_of_summary(account.get(field)) for field in WINDOW_FIELDS}
        extra = _extras_of_summary(account.get("extraWindows"))
        if any(windows.values()) or extra:
            row = {"t": probed_at, "label": account["label"], **windows}
            if extra:
                row["extra"] = extra
            rows.append(row)
    return rows


def _extra_id(value: Mapping[str, Any]) -> Optional[Tuple[Optional[str], Optional[int]]]:
    """(name, seconds) of an extra window when both are of the right kind (either may be null)."""
    name, seconds = value.get("name"), value.get("seconds")
    if name is not None and not (isinstance(name, str) and 0 < len(name) <= MAX_EXTRA_NAME and name.isprintable()):
        return None
    if seconds is not None and (not is_int(seconds) or not 0 < seconds <= 10 ** 9):
        return None
    return name, seconds


def _extras_of_summary(value: Any) -> List[Dict[str, Any]]:
    extras: List[Dict[str, Any]] = []
    for item in (value if isinstance(value, list) else []):
        window = _window_of_summary(item)
        ident = _extra_id(item) if window is not None else None
        if ident is not None and len(extras) < MAX_ROW_EXTRAS:
            extras.append(dict(window, name=ident[0], seconds=ident[1]))
    return extras


def _window_of_row(value: Any) -> Tuple[bool, Optional[Dict[str, Any]]]:
    """(valid, window) of one stored window: null, or pct and resetsAt."""
    if value is None:
        return True, None
    if not isinstance(value, dict):
        return False, None
    pct = read_pct(value.get("pct"))
    resets = value.get("resetsAt")
    if pct is None or (resets is not None and _ms(resets) is None):
        return False, None
    return True, {"pct": pct, "resetsAt": resets}


def parse_row(raw: bytes) -> Optional[Dict[str, Any]]:
    """One stored line as a row (fields whitelisted), or None for anything else."""
    try:
        obj = loads_bounded(raw, MAX_ROW_LINE)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    t, label = _ms(obj.get("t")), obj.get("label")
    if t is None or not is_account_label(label):
        return None
    row: Dict[str, Any] = {"t": t, "label": label}
    for field in WINDOW_FIELDS:
        valid, window = _window_of_row(obj.get(field))
        if not valid:
            return None
        row[field] = window
    extra = _extras_of_row(obj.get("extra"))
    if extra:
        row["extra"] = extra
    return row


def _extras_of_row(value: Any) -> List[Dict[str, Any]]:
    """The stored extra windows that are extra windows; anything else in the list is left out."""
    extras: List[Dict[str, Any]] = []
    for item in (value[:MAX_ROW_EXTRAS] if isinstance(value, list) else []):
        valid, window = _window_of_row(item)
        ident = _extra_id(item) if valid and window is not None else None
        if ident is not None:
            extras.append(dict(window, name=ident[0], seconds=ident[1]))
    return extras


# ---------------------------------------------------------------- files

def day_key(ms: int) -> str:
    """The UTC day of an instant, `YYYY-MM-DD`: the name of its file."""
    return iso_from_ms(ms)[:10]


def append_rows(paths: Paths, rows: Iterable[Mapping[str, Any]], *, fsync: bool = True) -> List[Path]:
    """Append rows, all of one day's file in ONE locked write; returns the files written.

    The rows of one probe share their `t`, so they land in one file with one
    write: a reader sees the whole probe or none of it. A row that is not a
    row (see parse_row) raises ValueError before anything is written; a
    failed write raises HistoryError and leaves the file without those rows.
    `fsync=False` skips the flush to disk: a crash may then lose the newest
    rows, never tear one.
    """
    by_day: Dict[str, List[str]] = {}
    for row in rows:
        stored = {"t": row.get("t"), "label": row.get("label"), "fiveHour": row.get("fiveHour"),
                  "sevenDay": row.get("sevenDay")}
        if row.get("extra"):
            stored["extra"] = row["extra"]
        line = json.dumps(stored, separators=(",", ":"), allow_nan=False)
        if parse_row(line.encode("utf-8")) is None:
            raise ValueError("not a history row: %s" % line[:200])
        by_day.setdefault(day_key(row["t"]), []).append(line)
    written = []
    for day, lines in sorted(by_day.items()):
        path = paths.history_dir / ("%s.jsonl" % day)
        try:
            append_lines(path, lines, fsync)
        except OSError as exc:
            raise HistoryError(exc.errno, "cannot append to %s: %s" % (path, exc.strerror or exc)) from None
        written.append(path)
    return written


def _day_files(paths: Paths) -> Iterator[Tuple[str, Path]]:
    """(YYYY-MM-DD, path) of every history file, in no particular order."""
    try:
        names = os.listdir(str(paths.history_dir))
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        if _DAY_FILE_RE.match(name):
            yield name[:10], paths.history_dir / name


def prune(paths: Paths, days: int = DEFAULT_DAYS, now_ms: Optional[int] = None) -> List[Path]:
    """Delete the day files older than `days` days (docs/trajectory.md); returns what went.

    A file is kept while its day is within `days` days of today (UTC), so
    `days` days of hours can always be read back; files of later days (a
    clock that was ahead) are kept too. Other files are never touched.
    """
    if not is_int(days) or days < 1:
        raise InvalidSetting("days must be a positive integer, not %r" % (days,))
    oldest = day_key((_time.now_ms() if now_ms is None else now_ms) - days * DAY_MS)
    removed = []
    for day, path in _day_files(paths):
        if day < oldest:
            try:
                os.unlink(str(path))
            except FileNotFoundError:
                continue
            removed.append(path)
    return sorted(removed)


def read_rows(paths: Paths, *, start_ms: int, end_ms: int) -> Iterator[Dict[str, Any]]:
    """Rows with start_ms <= t <= end_ms, reading only the day files of that span.

    Newest file first, each file newest line first; unparseable lines are skipped.
    """
    if end_ms < start_ms:
        return
    first, last = day_key(start_ms), day_key(end_ms)
    for day, path in sorted(_day_files(paths), reverse=True):
        if not first <= day <= last:
            continue
        for raw in iter_lines_reverse(path, max_line=MAX_ROW_LINE):
            row = parse_row(raw)
            if row is not None and start_ms <= row["t"] <= end_ms:
                yield row


# ---------------------------------------------------------------- the /api/history body

def check_hours(hours: Any) -> int:
    """`hours` as the /api/history and read_history take it: an integer 1..192."""
    if not is_int(hours) or not 1 <= hours <= MAX_HOURS:
        raise InvalidSetting("hours must be an integer from 1 to %d, not %r" % (MAX_HOURS, hours))
    return hours


def bucket_max(points: Sequence[Tuple[int, float]], start_ms: int, end_ms: int,
               limit: int = MAX_POINTS) -> List[List[Any]]:
    """At most `limit` points of a series sorted by time, as [t, pct] pairs.

    A longer series is cut into `limit` equal spans of [start_ms, end_ms] and
    each span keeps its highest point (the earliest of equals) at its own
    time, so peaks survive the thinning and the order stays oldest first.
    """
    if len(points) <= limit:
        return [[t, pct] for t, pct in points]
    width = max(1, end_ms - start_ms + 1)
    kept: Dict[int, Tuple[int, float]] = {}
    for t, pct in points:
        slot = min(limit - 1, (t - start_ms) * limit // width)
        best = kept.get(slot)
        if best is None or pct > best[1]:
            kept[slot] = (t, pct)
    return [[t, pct] for _, (t, pct) in sorted(kept.items())]


def _add_point(by_time: Dict[int, float], t: int, window: Any) -> None:
    pct = read_pct(window.get("pct")) if isinstance(window, Mapping) else None
    if pct is not None and by_time.get(t, -1.0) < pct:
        by_time[t] = pct


def _extra_sort_key(ident: Tuple[Optional[str], Optional[int]]) -> Tuple[str, int]:
    return ident[0] or "", ident[1] or 0


def history_body(rows: Iterable[Mapping[str, Any]], *, node: str, now_ms: int, hours: int) -> Dict[str, Any]:
    """The /api/history body from rows (pure): `{"node", "from", "to", "accounts"}`.

    `accounts` maps each label (sorted) to `{"provider", "fiveHour": [[t, pct], ...],
    "sevenDay": [...]}` (provider: `claude`, or `codex` for a `codex-*` label),
    oldest first, rows outside [now - hours, now] left out, at most MAX_POINTS points per series (see bucket_max). When
    several rows share a time, the series keeps the highest pct. An account with extra windows adds
    `"extraWindows": [{"name", "seconds", "points": [[t, pct], ...]}]`, by name then length.
    """
    end = int(now_ms)
    start = end - check_hours(hours) * HOUR_MS
    series: Dict[str, Dict[Any, Dict[int, float]]] = {}
    for row in rows:
        t = row.get("t")
        if not isinstance(t, int) or not start <= t <= end:
            continue
        account = series.setdefault(str(row.get("label")), {field: {} for field in WINDOW_FIELDS})
        for field in WINDOW_FIELDS:
            _add_point(account[field], t, row.get(field))
        for extra in row.get("extra") or ():
            _add_point(account.setdefault((extra.get("name"), extra.get("seconds")), {}), t, extra)
    accounts: Dict[str, Any] = {}
    for label, account in sorted(series.items()):
        body: Dict[str, Any] = dict({"provider": provider_of_label(label)},
                                    **{field: bucket_max(sorted(account[field].items()), start, end)
                                       for field in WINDOW_FIELDS})
        extras = sorted((key for key in account if isinstance(key, tuple)), key=_extra_sort_key)
        if extras:
            body["extraWindows"] = [{"name": key[0], "seconds": key[1],
                                     "points": bucket_max(sorted(account[key].items()), start, end)}
                                    for key in extras]
        accounts[label] = body
    return {"node": node, "from": start, "to": end, "accounts": accounts}


def read_history_body(paths: Paths, *, node: str, hours: int = DEFAULT_HOURS,
                      now_ms: Optional[int] = None) -> Dict[str, Any]:
    """The /api/history body of a node, read from its day files."""
    end = _time.now_ms() if now_ms is None else int(now_ms)
    start = end - check_hours(hours) * HOUR_MS
    return history_body(read_rows(paths, start_ms=start, end_ms=end), node=node, now_ms=end, hours=hours)


def cycle_points(rows: Iterable[Mapping[str, Any]], label: str, field: str,
                 resets_at_ms: Optional[int]) -> List[Tuple[int, float]]:
    """The (t, pct) points of one account's window in the cycle that resets at `resets_at_ms`.

    A row belongs to the cycle when its resetsAt names the same cycle
    (_cycle.same_cycle: a reset starts a new series); with no reset time known, only rows
    that know none either. The input of forecast().
    """
    points = []
    for row in rows:
        window = row.get(field)
        if row.get("label") != label or not isinstance(window, Mapping):
            continue
        resets = window.get("resetsAt")
        if (resets is None or is_int(resets)) and same_cycle(resets, resets_at_ms):
            points.append((row["t"], window["pct"]))
    return points


def read_history(home: "Optional[os.PathLike[str] | str]" = None, *, hours: int = DEFAULT_HOURS) -> Dict[str, Any]:
    """The /api/history body of the node at `home` for the last `hours` hours (docs/trajectory.md).

    `home` is the node's home directory (None: $HOME). `hours` is an integer
    from 1 to 192 (else InvalidSetting). Returns `{"node", "from", "to",
    "accounts": {label: {"fiveHour": [[t, pct], ...], "sevenDay": [...]}}}`
    with times in epoch ms, oldest first, at most 500 points per series (each
    bucket keeps its peak). Reads only the day files those hours cover;
    a missing history is an empty `accounts`. Raises ConfigError for a corrupt
    node.json (the node name comes from it).
    """
    from ..config import node_name

    check_hours(hours)
    paths = Paths.for_home(home)
    return read_history_body(paths, node=node_name(paths), hours=hours)
