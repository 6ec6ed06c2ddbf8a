"""The heartbeat's `account` block (DESIGN §11): built by the publisher, whitelisted by readers.

The block is the active account of the publishing host, in snake_case like the
contract's quota block (§6.2):

    {"label", "status", "five_hour_pct", "five_hour_resets_at", "seven_day_pct",
     "seven_day_resets_at", "wall_at", "probed_at", "probe_interval_ms"}

`probed_at` and `probe_interval_ms` go beyond the seven fields of DESIGN §11:
without them a reader cannot tell a value probed a minute ago from one probed
an hour ago (§14, staleness in the open). `wall_at` is the wall forecast of the
active account's binding window, computed from the node's history store by
svcposture.forecast; null while the history holds too few points for a rate.

A peer's metadata is not ours to echo: readers copy each field only when it has
the expected type and shape, and drop anything else.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Mapping, Optional

from .._numbers import finite_number, is_int
from .._names import FIELD_OF_CLAIM, NODE_STATUSES
from .._text import has_control
from .._time import now_ms, parse_iso_ms
from ..paths import Paths

PCT_FIELDS = ("five_hour_pct", "seven_day_pct")
TIME_FIELDS = ("five_hour_resets_at", "seven_day_resets_at", "wall_at", "probed_at")
ACCOUNT_FIELDS = ("label", "status") + PCT_FIELDS + TIME_FIELDS + ("probe_interval_ms",)
MAX_LABEL = 64
MAX_TIME_TEXT = 40
# A pct beyond this is not a utilization, it is junk.
MAX_PCT = 1e6
_WINDOW_OF_PREFIX = {"five_hour": "fiveHour", "seven_day": "sevenDay"}


# ---------------------------------------------------------------- building (publisher)

def account_block(summary: Optional[Mapping[str, Any]], *, wall_at: Optional[str] = None,
                  probe_interval_ms: Optional[int] = None) -> Optional[Dict[str, Any]]:
    """The block of a posture body, or None when the node has no active account (or no posture)."""
    if not isinstance(summary, Mapping) or summary.get("available") is not True:
        return None
    active = summary.get("active")
    if not isinstance(active, Mapping) or not isinstance(active.get("label"), str):
        return None
    block: Dict[str, Any] = {"label": active["label"], "status": summary.get("status")}
    for prefix, field in _WINDOW_OF_PREFIX.items():
        window = active.get(field)
        window = window if isinstance(window, Mapping) else {}
        block[prefix + "_pct"] = window.get("pct")
        block[prefix + "_resets_at"] = window.get("resetsAt")
    block["wall_at"] = wall_at
    probed = summary.get("probedAt")
    block["probed_at"] = _iso(probed) if is_int(probed) else None
    block["probe_interval_ms"] = probe_interval_ms
    return block


def _iso(ms: int) -> Optional[str]:
    from .._time import iso_from_ms
    try:
        return iso_from_ms(ms)
    except (ValueError, OverflowError):
        return None


def binding_wall_at(paths: Paths, summary: Mapping[str, Any]) -> Optional[str]:
    """`wallAt` of the forecast of the active account's binding window, from the history store.

    None when there is no active account, no binding window, or too few points
    in the history for a rate (DESIGN §10: 3 points over 10 min / 2 h).
    """
    from .. import history
    from ..forecast import LOOKBACK_MS, forecast

    active = summary.get("active")
    probed = summary.get("probedAt")
    if not isinstance(active, Mapping) or not isinstance(probed, int):
        return None
    claim = active.get("bindingWindow")
    field = FIELD_OF_CLAIM.get(claim) if isinstance(claim, str) else None
    window = active.get(field) if field else None
    if not isinstance(window, Mapping) or not isinstance(window.get("pct"), (int, float)):
        return None
    resets_ms: Optional[int] = None
    if isinstance(window.get("resetsAt"), str):
        try:
            resets_ms = parse_iso_ms(window["resetsAt"])
        except ValueError:
            resets_ms = None
    rows = history.read_rows(paths, start_ms=probed - LOOKBACK_MS[claim], end_ms=probed)
    points = history.cycle_points(rows, active["label"], field, resets_ms)
    if not any(t == probed for t, _ in points):
        points.append((probed, float(window["pct"])))
    result = forecast(points, now_ms=probed, resets_at_ms=resets_ms, window=field)
    return result.get("wallAt") if result else None


def account_source(paths: Paths, current: Callable[[], Optional[Mapping[str, Any]]],
                   probe_interval_s: float) -> Callable[[], Optional[Dict[str, Any]]]:
    """The publisher's account callable: the block of the newest posture, its
    forecast computed once per probe (the history is read only when the probe changed)."""
    lock = threading.Lock()
    memo: Dict[str, Any] = {"probedAt": None, "wall": None}
    interval_ms = int(round(probe_interval_s * 1000))

    def source() -> Optional[Dict[str, Any]]:
        summary = current()
        if not isinstance(summary, Mapping) or summary.get("available") is not True:
            return None
        probed = summary.get("probedAt")
        with lock:
            if memo["probedAt"] != probed:
                try:
                    wall = binding_wall_at(paths, summary)
                except (OSError, ValueError):
                    wall = None
                memo.update(probedAt=probed, wall=wall)
            wall = memo["wall"]
        return account_block(summary, wall_at=wall, probe_interval_ms=interval_ms)

    return source


# ---------------------------------------------------------------- reading (status, /api/fleet)

def _text(value: Any, limit: int) -> Optional[str]:
    if isinstance(value, str) and 0 < len(value) <= limit and not has_control(value):
        return value
    return None


def _time_text(value: Any) -> Optional[str]:
    text = _text(value, MAX_TIME_TEXT)
    if text is None:
        return None
    try:
        parse_iso_ms(text)
    except (ValueError, OverflowError):
        return None
    return text


def _number(value: Any, high: float) -> Optional[float]:
    number = finite_number(value)
    return number if number is not None and 0 <= number <= high else None


def peer_account(value: Any, *, publish_interval_ms: float, now: Optional[int] = None) -> Optional[Dict[str, Any]]:
    """A peer's block, whitelisted field by field, plus what a reader derives from it:

    `age_s`, seconds since `probed_at` (null when unknown), and `stale`, true
    when that age exceeds twice the longer of the peer's publish interval and
    its probe interval: such values are shown greyed with their age, never as
    current. A label may hold any printable text (a page shows it escaped);
    a status outside the node-status vocabulary becomes null.
    """
    if not isinstance(value, dict):
        return None
    block: Dict[str, Any] = {"label": _text(value.get("label"), MAX_LABEL)}
    status = value.get("status")
    block["status"] = status if isinstance(status, str) and status in NODE_STATUSES else None
    for field in PCT_FIELDS:
        block[field] = _number(value.get(field), MAX_PCT)
    for field in TIME_FIELDS:
        block[field] = _time_text(value.get(field))
    interval = _number(value.get("probe_interval_ms"), 365 * 86400 * 1000.0)
    block["probe_interval_ms"] = int(interval) if interval else None
    age_s: Optional[float] = None
    if block["probed_at"] is not None:
        current = now_ms() if now is None else now
        age_s = round(max(0, current - parse_iso_ms(block["probed_at"])) / 1000.0, 1)
    block["age_s"] = age_s
    limit_ms = 2 * max(publish_interval_ms, block["probe_interval_ms"] or 0)
    block["stale"] = age_s is not None and age_s * 1000 > limit_ms
    return block


MAX_UNLISTED = 100


def unlisted_rows(roster: Any, published: Mapping[str, Optional[int]], now: int) -> list:
    """Heartbeats of hosts that are not in the roster: shown apart, never counted live.

    A name absent from the roster owns no tickets, so such a host is either a
    typo or a host about to be added. At most MAX_UNLISTED rows, names made
    printable and cut to 200 characters (they come from whoever can attach to
    the anchor).
    """
    from .._text import printable

    members = set(roster)
    rows = []
    for host in sorted(h for h in published if h not in members)[:MAX_UNLISTED]:
        stamp = published[host]
        rows.append({"host": printable(host)[:200],
                     "ageS": None if stamp is None else round(max(0, now - stamp) / 1000.0, 1)})
    return rows
