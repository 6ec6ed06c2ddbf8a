"""The zero-call path: the newest rate-limit sample in a Codex login's session logs.

The `codex` CLI logs every reply's limits in
`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, as lines
`{"timestamp", "type": "event_msg", "payload": {"type": "token_count",
"rate_limits": {"primary": {...}, "secondary": {...}}}}`. The newest such line
that is newer than the monitor's last sample is as good as a request, and costs
the vendor nothing.

The log interleaves the account's own limits (`limit_id` absent or "codex")
with one model's own limits (`limit_id: "codex_bengalfox"`, `limit_name:
"GPT-5.3-Codex-Spark"`). The account's newest line and each model's newest
line are found apart: the sample is the account's line, with the models'
windows as named extra windows, so a newer model line never hides an older
account line within the read tail. With no account line in the tail there is
no sample (the endpoint is asked, and its reply carries the models' limits too).

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
from .usage import limit_owner, parse_model_limits, parse_session_limits

TAIL_BYTES = 1024 * 1024
# Day directories listed, newest first; a session that started before them is not looked for.
MAX_DAY_DIRS = 7
# Log files opened per sweep and account, newest modification first.
MAX_FILES = 4
# Entries read from one directory: a tree holding more is not a sessions tree.
MAX_DIR_ENTRIES = 10000
# A line stamped further ahead than this is not believed: it would shadow every real sample.
MAX_FUTURE_MS = 5 * 60 * 1000
# Lines with limits read past the account's newest line, for the models' own lines logged before it.
MODEL_LOOKBACK = 64

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


def _logs(sessions: str, newer_than_ms: Optional[int]) -> List[Tuple[int, str]]:
    """(modified ms, path) of the logs modified after `newer_than_ms`, newest first, at most MAX_FILES."""
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
    return [(mtime_ns // 1000000, path) for mtime_ns, path in logs[:MAX_FILES]]


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


Reading = Tuple[int, Optional[str], Any]  # (line ms, model limit_id or None for the account, what it says)


def reading_of_line(line: bytes, now_ms: int) -> Optional[Reading]:
    """What a log line says: (its time, None, the account's sample) or (its time, limit_id, that model's
    extra windows); None when it says nothing readable."""
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
    rate_limits = payload.get("rate_limits")
    owner = limit_owner(rate_limits)
    if owner is None:
        return None
    limit_id, name = owner
    if limit_id is None:
        sample = parse_session_limits(rate_limits, at_ms / 1000.0)
        return (at_ms, None, sample) if sample is not None else None
    windows = parse_model_limits(rate_limits, at_ms / 1000.0, name)
    return (at_ms, limit_id, windows) if windows else None


def sample_of_line(line: bytes, now_ms: int) -> Optional[Dict[str, Any]]:
    """The account's sample a log line holds: {"sampledAt": epoch ms, fiveHour, ...}, or None
    (a model's own line included)."""
    reading = reading_of_line(line, now_ms)
    if reading is None or reading[1] is not None:
        return None
    at_ms, _, sample = reading
    if not _drop_reset_windows(sample, now_ms):
        return None
    sample["sampledAt"] = at_ms
    return sample


def _current(window: Optional[Dict[str, Any]], now_ms: int) -> bool:
    resets = window.get("resetsAt") if window else None
    return window is not None and (resets is None or _time.parse_iso_ms(resets) > now_ms)


def _drop_reset_windows(sample: Dict[str, Any], now_ms: int) -> bool:
    """Leave out the windows that have reset since the line was logged; False when none is left.

    An old log line would otherwise show a window as full long after it
    emptied (a host that does not poll the login has nothing newer).
    """
    for field in ("fiveHour", "sevenDay"):
        if not _current(sample[field], now_ms):
            sample[field] = None
    sample["extraWindows"] = [w for w in sample["extraWindows"] if _current(w, now_ms)]
    return bool(sample["fiveHour"] or sample["sevenDay"] or sample["extraWindows"])


class _Found:
    """The newest account reading and the newest reading of each model, over one or more log tails."""

    def __init__(self) -> None:
        self.account: Optional[Tuple[int, Dict[str, Any]]] = None
        self.models: Dict[str, Tuple[int, List[Dict[str, Any]]]] = {}

    def scan(self, data: bytes, now_ms: int) -> None:
        """Newest line first, up to MODEL_LOOKBACK lines with limits past the account's line."""
        past: Optional[int] = None
        end = len(data)
        while end > 0:
            start = data.rfind(b"\n", 0, end - 1) + 1 if end > 1 else 0
            reading = reading_of_line(data[start:end], now_ms)
            if reading is not None:
                at_ms, limit_id, said = reading
                if limit_id is None:
                    if self.account is None or at_ms > self.account[0]:
                        self.account = (at_ms, said)
                    past = 0 if past is None else past
                elif limit_id not in self.models or at_ms > self.models[limit_id][0]:
                    self.models[limit_id] = (at_ms, said)
                if past is not None:
                    past += 1
                    if past > MODEL_LOOKBACK:
                        return
            end = start - 1 if start > 0 else 0

    def sample(self, newer_than_ms: Optional[int], now_ms: int) -> Optional[Dict[str, Any]]:
        """The account's newest sample with the models' current windows; None when there is no
        account line with a current window, or nothing newer than `newer_than_ms`."""
        if self.account is None:
            return None
        at_ms, sample = self.account[0], dict(self.account[1])
        sample["extraWindows"] = list(sample["extraWindows"])
        if not _drop_reset_windows(sample, now_ms):
            return None
        newest = at_ms
        for limit_id in sorted(self.models):
            model_ms, windows = self.models[limit_id]
            newest = max(newest, model_ms)
            sample["extraWindows"].extend(w for w in windows if _current(w, now_ms))
        if newer_than_ms is not None and newest <= newer_than_ms:
            return None
        sample["sampledAt"] = newest
        return sample


def newest_in_log(data: bytes, newer_than_ms: Optional[int], now_ms: int) -> Optional[Dict[str, Any]]:
    """The sample a log's tail holds (the account's newest line and the models' newest lines), when
    one of those lines is newer than `newer_than_ms`."""
    found = _Found()
    found.scan(data, now_ms)
    return found.sample(newer_than_ms, now_ms)


def newest_session_sample(codex_home: str, newer_than_ms: Optional[int], now_ms: int) -> Optional[Dict[str, Any]]:
    """The newest `token_count` sample of this login newer than `newer_than_ms`, or None. Never raises OSError."""
    sessions = os.path.join(codex_home, "sessions")
    try:
        if not stat.S_ISDIR(os.lstat(sessions).st_mode):
            return None
    except OSError:
        return None
    logs = _logs(sessions, None)
    if not logs or (newer_than_ms is not None and logs[0][0] <= newer_than_ms):
        return None  # no log written since the last sample: nothing is opened
    found = _Found()
    for _, path in logs:
        found.scan(read_tail(path), now_ms)
        if found.account is not None:
            break  # an older log holds no newer account line
    return found.sample(newer_than_ms, now_ms)
