"""The zero-call path: the newest rate-limit sample in a Codex login's session logs.

The `codex` CLI logs every reply's limits in
`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, as lines
`{"timestamp", "type": "event_msg", "payload": {"type": "token_count",
"rate_limits": {"primary": {...}, "secondary": {...}}}}`. The newest such line
that is newer than the monitor's last sample is as good as a request, and costs
the vendor nothing.

Bounded whatever is on disk: only the newest day directories are listed, a
file not modified since the last sample is never opened, only the newest few
files are read, and of each only its last 1 MB. No symlink is followed (not
the sessions tree, a day directory nor a log), and a torn, oversized or hostile
line is skipped like any line that is not a sample. A window that has reset
since its line was logged is left out: it no longer says anything.
"""
from __future__ import annotations

import os
import re
import stat
from typing import Any, Dict, List, Optional, Tuple

from .. import _time
from .._text import loads_bounded
from .usage import parse_session_limits

TAIL_BYTES = 1024 * 1024
# Day directories listed, newest first; a session that started before them is not looked for.
MAX_DAY_DIRS = 7
# Log files opened per sweep and account, newest modification first.
MAX_FILES = 4
# Entries read from one directory: a tree holding more is not a sessions tree.
MAX_DIR_ENTRIES = 10000
# A line stamped further ahead than this is not believed: it would shadow every real sample.
MAX_FUTURE_MS = 5 * 60 * 1000

_YEAR_RE = re.compile(r"^\d{4}$")
_TWO_RE = re.compile(r"^\d{2}$")
_LOG_RE = re.compile(r"^rollout-.*\.jsonl$")


def _subdirs(path: str, pattern: "re.Pattern[str]") -> List[str]:
    """Names of the real (not symlinked) subdirectories of `path` matching `pattern`, newest name first."""
    names: List[str] = []
    try:
        with os.scandir(path) as it:
            for count, entry in enumerate(it):
                if count >= MAX_DIR_ENTRIES:
                    break
                if pattern.match(entry.name) and entry.is_dir(follow_symlinks=False):
                    names.append(entry.name)
    except OSError:
        return []
    return sorted(names, reverse=True)


def day_dirs(sessions: str) -> List[str]:
    """The newest MAX_DAY_DIRS `YYYY/MM/DD` directories under `sessions`, newest first."""
    found: List[str] = []
    for year in _subdirs(sessions, _YEAR_RE):
        for month in _subdirs(os.path.join(sessions, year), _TWO_RE):
            for day in _subdirs(os.path.join(sessions, year, month), _TWO_RE):
                found.append(os.path.join(sessions, year, month, day))
                if len(found) >= MAX_DAY_DIRS:
                    return found
    return found


def recent_logs(sessions: str, newer_than_ms: Optional[int]) -> List[str]:
    """Log files modified after `newer_than_ms`, newest modification first, at most MAX_FILES."""
    logs: List[Tuple[int, str]] = []
    for day in day_dirs(sessions):
        try:
            with os.scandir(day) as it:
                for count, entry in enumerate(it):
                    if count >= MAX_DIR_ENTRIES:
                        break
                    if not _LOG_RE.match(entry.name) or not entry.is_file(follow_symlinks=False):
                        continue
                    mtime_ns = entry.stat(follow_symlinks=False).st_mtime_ns
                    if newer_than_ms is None or mtime_ns // 1000000 > newer_than_ms:
                        logs.append((mtime_ns, entry.path))
        except OSError:
            continue
    logs.sort(reverse=True)
    return [path for _, path in logs[:MAX_FILES]]


def read_tail(path: str, limit: int = TAIL_BYTES) -> bytes:
    """The whole lines in the last `limit` bytes of a regular file (no symlink followed); b"" otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return b""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return b""
        start = max(0, st.st_size - limit)
        data = os.pread(fd, st.st_size - start, start)
    except OSError:
        return b""
    finally:
        os.close(fd)
    if start > 0:
        # The first line is cut at the window's edge: not a line.
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else b""
    return data


def sample_of_line(line: bytes, now_ms: int) -> Optional[Dict[str, Any]]:
    """The sample a log line holds: {"sampledAt": epoch ms, fiveHour, ...}, or None."""
    if b"token_count" not in line or b"rate_limits" not in line:
        return None
    try:
        obj = loads_bounded(line, TAIL_BYTES)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("type") != "event_msg":
        return None
    payload = obj.get("payload")
    stamp = obj.get("timestamp")
    if not isinstance(payload, dict) or payload.get("type") != "token_count" or not isinstance(stamp, str):
        return None
    try:
        at_ms = _time.parse_iso_ms(stamp)
    except (ValueError, OverflowError):
        return None
    if at_ms <= 0 or at_ms > now_ms + MAX_FUTURE_MS:
        return None
    sample = parse_session_limits(payload.get("rate_limits"), at_ms / 1000.0)
    if sample is None or not _drop_reset_windows(sample, now_ms):
        return None
    sample["sampledAt"] = at_ms
    return sample


def _drop_reset_windows(sample: Dict[str, Any], now_ms: int) -> bool:
    """Leave out the windows that have reset since the line was logged; False when none is left.

    An old log line would otherwise show a window as full long after it
    emptied (a host that does not poll the login has nothing newer).
    """
    def current(window: Optional[Dict[str, Any]]) -> bool:
        resets = window.get("resetsAt") if window else None
        return window is not None and (resets is None or _time.parse_iso_ms(resets) > now_ms)

    for field in ("fiveHour", "sevenDay"):
        if not current(sample[field]):
            sample[field] = None
    sample["extraWindows"] = [w for w in sample["extraWindows"] if current(w)]
    return bool(sample["fiveHour"] or sample["sevenDay"] or sample["extraWindows"])


def newest_in_log(data: bytes, newer_than_ms: Optional[int], now_ms: int) -> Optional[Dict[str, Any]]:
    """The last sample in a log's tail that is newer than `newer_than_ms`.

    Lines are appended in time order, so the search stops at the first sample
    that is not newer.
    """
    end = len(data)
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1 if end > 1 else 0
        sample = sample_of_line(data[start:end], now_ms)
        if sample is not None:
            if newer_than_ms is not None and sample["sampledAt"] <= newer_than_ms:
                return None
            return sample
        end = start - 1 if start > 0 else 0
    return None


def newest_session_sample(codex_home: str, newer_than_ms: Optional[int], now_ms: int) -> Optional[Dict[str, Any]]:
    """The newest `token_count` sample of this login newer than `newer_than_ms`, or None. Never raises OSError."""
    sessions = os.path.join(codex_home, "sessions")
    try:
        if not stat.S_ISDIR(os.lstat(sessions).st_mode):
            return None
    except OSError:
        return None
    for path in recent_logs(sessions, newer_than_ms):
        sample = newest_in_log(read_tail(path), newer_than_ms, now_ms)
        if sample is not None:
            return sample
    return None
