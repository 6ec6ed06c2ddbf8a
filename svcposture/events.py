"""The node's event log, the v2 telemetry envelope and the two account event kinds."""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from .settings import InvalidSetting
from ._dirs import ensure_dir
from ._files import append_line, iter_lines_reverse
from ._names import EDGE_STATUSES
from ._text import email_address, finite_number, is_int, is_number
from .vendors import DEFAULT_PROVIDER
from ._time import iso_from_ms, month_key, now_ms, parse_iso_ms
from ._version import __version__
from .errors import FACE, SvcpostureError
from .paths import Paths

RATELIMIT_SAMPLED = "account.ratelimit.sampled"
STATUS_CHANGED = "account.status.changed"
ACCOUNT_SWITCHED = "account.switched"
SWITCH_REASONS = ("manual", "best", "auto")

# The eight contract keys of account.ratelimit.sampled, in contract order.
QUOTA_KEYS = (
    "ratelimit.five_hour_pct",
    "ratelimit.seven_day_pct",
    "ratelimit.five_hour_resets_at",
    "ratelimit.seven_day_resets_at",
    "ratelimit.seven_day_large_pct",
    "ratelimit.seven_day_medium_pct",
    "subscription.type",
    "rate_limit.tier",
)

_LOG_NAME_RE = re.compile(r"^(\d{4})-(\d{2})\.jsonl$")
# An event is well under a kilobyte; a longer "line" is damage and is skipped
# without being loaded whole.
MAX_EVENT_LINE = 1024 * 1024


class EventLogError(SvcpostureError, OSError):
    """An event could not be appended; the caller must not advance any state."""

    __module__ = FACE


def host_id(node: str) -> str:
    return hashlib.sha256(node.encode("utf-8")).hexdigest()[:16]


def envelope(name: str, node: str, attributes: Mapping[str, Any], ts_ms: Optional[int] = None) -> Dict[str, Any]:
    """A v2 telemetry envelope. `attributes` are the kind's own keys."""
    stamp = iso_from_ms(now_ms() if ts_ms is None else ts_ms)
    attrs: Dict[str, Any] = {
        "event.name": name,
        "event.entity": "account",
        "event.action": name[len("account."):] if name.startswith("account.") else name,
    }
    attrs.update(attributes)
    return {
        "v": 2,
        "id": os.urandom(8).hex(),
        "ts": stamp,
        "observedTs": stamp,
        "severityText": "INFO",
        "severityNumber": 9,
        "resource": {
            "service.name": "svc.monitor",
            "service.namespace": "svc",
            "service.version": __version__,
            "host.name": node,
            "host.id": host_id(node),
        },
        "attributes": attrs,
        "body": {"message": name},
    }


def _is_number(value: Any) -> bool:
    # NaN and infinities would be written as bare NaN/Infinity: not JSON.
    return is_int(value) or finite_number(value) is not None


def ratelimit_sampled(node: str, email: Optional[str], values: Mapping[str, Any],
                      ts_ms: Optional[int] = None) -> Dict[str, Any]:
    """`account.ratelimit.sampled` from {contract key: value}.

    Each key is omitted when its value is None (absent means unknown, never zero);
    0 and 0.0 are kept. Keys outside the contract are refused, so no internal
    camelCase name can leak into the log.
    """
    unknown = set(values) - set(QUOTA_KEYS)
    if unknown:
        raise ValueError("not contract quota keys: %s" % ", ".join(sorted(unknown)))
    attrs: Dict[str, Any] = {"event.label": email or "login"}
    if email is not None:
        attrs["account.email"] = email
    for key in QUOTA_KEYS:
        value = values.get(key)
        if value is None:
            continue
        if key.endswith("_pct"):
            if not _is_number(value):
                raise ValueError("%s must be a number" % key)
        elif not isinstance(value, str):
            raise ValueError("%s must be a string" % key)
        attrs[key] = value
    return envelope(RATELIMIT_SAMPLED, node, attrs, ts_ms)


def provider_attrs(attrs: Dict[str, Any], provider: Optional[str]) -> None:
    """Tag a non-Claude account's event with `account.provider` (docs/codex.md).

    Claude's events stay the contract's, byte for byte: no key is added for them.
    """
    if provider is not None and provider != DEFAULT_PROVIDER:
        attrs["account.provider"] = provider


def status_changed(node: str, handle: str, email: Optional[str], status: str,
                   binding_window: Optional[str], ts_ms: Optional[int] = None,
                   provider: Optional[str] = None) -> Dict[str, Any]:
    if status not in EDGE_STATUSES:
        raise ValueError("account.status must be rejected or ok")
    attrs: Dict[str, Any] = {"event.label": email or handle, "account.handle": handle}
    if email is not None:
        attrs["account.email"] = email
    provider_attrs(attrs, provider)
    attrs["account.status"] = status
    if binding_window is not None:
        attrs["account.binding_window"] = binding_window
    attrs["node.name"] = node
    return envelope(STATUS_CHANGED, node, attrs, ts_ms)


def account_switched(node: str, provider: str, from_label: Optional[str], to_label: str, reason: str,
                     email: Optional[str] = None, ts_ms: Optional[int] = None) -> Dict[str, Any]:
    """`account.switched` (docs/steering.md): the accounts env file's export line now names `to_label`."""
    if reason not in SWITCH_REASONS:
        raise ValueError("switch.reason must be one of %s" % ", ".join(SWITCH_REASONS))
    # The email may come from whatever answered at --url: only an address is a label.
    attrs: Dict[str, Any] = {"event.label": email_address(email) or to_label, "account.from": from_label,
                             "account.to": to_label, "account.provider": provider, "switch.reason": reason,
                             "node.name": node}
    return envelope(ACCOUNT_SWITCHED, node, attrs, ts_ms)


def event_name(event: Any) -> Optional[str]:
    if isinstance(event, dict):
        attrs = event.get("attributes")
        if isinstance(attrs, dict):
            name = attrs.get("event.name")
            if isinstance(name, str):
                return name
    return None


def parse_line(raw: bytes) -> Optional[Dict[str, Any]]:
    """One log line to an event dict, or None for anything that is not one."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("attributes"), dict):
        return None
    return obj


class EventLog:
    """`~/svc/events/<UTC YYYY-MM>.jsonl`, one JSON object per line."""

    def __init__(self, directory: "os.PathLike[str] | str") -> None:
        self.directory = Path(directory)

    @classmethod
    def for_paths(cls, paths: Paths) -> "EventLog":
        return cls(paths.events_dir)

    def path_for(self, ts_ms: int) -> Path:
        return self.directory / ("%s.jsonl" % month_key(ts_ms))

    def append(self, event: Mapping[str, Any]) -> Path:
        """Append and fsync one event to the file of its own month.

        Raises EventLogError when the record is not durably on disk; in that case
        the file holds no part of it.
        """
        line = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        ts = event.get("ts")
        try:
            month_ms = parse_iso_ms(ts) if isinstance(ts, str) else now_ms()
        except ValueError:
            month_ms = now_ms()
        path = self.path_for(month_ms)
        try:
            append_line(path, line)
        except OSError as exc:
            raise EventLogError(exc.errno, "cannot append to %s: %s" % (path, exc.strerror or exc)) from None
        return path

    def files_newest_first(self) -> List[Path]:
        try:
            names = [n for n in os.listdir(str(self.directory)) if _LOG_NAME_RE.match(n)]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [self.directory / n for n in sorted(names, reverse=True)]

    def iter_newest_first(self, contains: Optional[bytes] = None) -> Iterator[Dict[str, Any]]:
        """Every parseable event, newest first, across months; bad lines skipped.

        With `contains`, lines without those bytes are skipped before parsing,
        which makes looking for a rare kind cheap.
        """
        for path in self.files_newest_first():
            for raw in iter_lines_reverse(path, max_line=MAX_EVENT_LINE):
                if contains is not None and contains not in raw:
                    continue
                event = parse_line(raw)
                if event is not None:
                    yield event

    def read(self, name: Optional[str] = None, since_ms: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """Events newest first, of kind `name` and with `ts` at or after `since_ms` when given.

        Month files wholly before `since_ms` are not opened: events are filed
        by the month of their own `ts`. With `since_ms`, an event whose `ts`
        does not parse is left out.
        """
        needle = json.dumps(name, ensure_ascii=False).encode("utf-8") if name is not None else None
        first_month = month_key(since_ms) if since_ms is not None else None
        for path in self.files_newest_first():
            if first_month is not None and path.name[:7] < first_month:
                return
            for raw in iter_lines_reverse(path, max_line=MAX_EVENT_LINE):
                if needle is not None and needle not in raw:
                    continue
                event = parse_line(raw)
                if event is None or (name is not None and event_name(event) != name):
                    continue
                if since_ms is None or _ts_ms(event) >= since_ms:
                    yield event

    def newest(self, name: str, where: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Optional[Dict[str, Any]]:
        """The newest event of kind `name`, reading back only as far as needed."""
        # The name as append() writes it: a cheap pre-filter, confirmed after parsing.
        needle = json.dumps(name, ensure_ascii=False).encode("utf-8")
        for event in self.iter_newest_first(contains=needle):
            if event_name(event) == name and (where is None or where(event)):
                return event
        return None

    def check_writable(self) -> None:
        """Raise EventLogError when the directory cannot take an append."""
        try:
            ensure_dir(self.directory)
        except OSError as exc:
            raise EventLogError(exc.errno, "cannot create %s: %s" % (self.directory, exc.strerror)) from None
        if not os.access(str(self.directory), os.W_OK | os.X_OK):
            raise EventLogError(13, "%s is not writable" % self.directory)


def _ts_ms(event: Mapping[str, Any]) -> float:
    """Epoch ms of an event's `ts`; minus infinity when it has none that parses."""
    ts = event.get("ts")
    try:
        return parse_iso_ms(ts) if isinstance(ts, str) else -math.inf
    except ValueError:
        return -math.inf


def _since_ms(since: Any) -> Optional[int]:
    if since is None:
        return None
    if isinstance(since, str):
        try:
            return parse_iso_ms(since)
        except ValueError:
            raise InvalidSetting("since=%r is not an ISO-8601 instant" % (since[:80],)) from None
    try:
        if not is_number(since):
            raise ValueError("not a number")
        since_ms = math.ceil(since)
        iso_from_ms(since_ms)  # years 1..9999 only
    except (ValueError, OverflowError):
        raise InvalidSetting("since must be an ISO-8601 string or epoch milliseconds, not %r" % (since,)) from None
    return since_ms


def read_events(home: "Optional[os.PathLike[str] | str]" = None, *, name: Optional[str] = None,
                since: "Optional[str | int | float]" = None) -> Iterator[Dict[str, Any]]:
    """The node's events, newest first, as an iterator of v2 envelopes (dicts).

    `home` is the node's home directory (None: $HOME); the log is its
    `svc/events/*.jsonl`. `name` keeps one kind (`account.status.changed`,
    `account.ratelimit.sampled`, ...). `since` keeps events whose `ts` is at
    or after an instant given as an ISO-8601 string (`2026-01-05T00:00:00Z`;
    no zone means UTC) or as epoch milliseconds (int or float); month files
    wholly before it are not read. Lines that are not events are skipped; a
    missing log yields nothing. Reading is lazy: stop iterating and nothing
    more is read. A `since` that is neither raises InvalidSetting at the call.
    """
    since_ms = _since_ms(since)
    if name is not None and not isinstance(name, str):
        raise InvalidSetting("name must be an event name string, not %r" % (name,))
    return EventLog.for_paths(Paths.for_home(home)).read(name, since_ms)
