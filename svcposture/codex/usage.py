"""Codex's limits as windows, from the usage reply and from the session log (pure, no I/O).

Both sources carry a list of windows, each with a used percent, its length and
its reset. A window is placed by its length, never by its position, with the
tolerance of svcposture.windows (`window_minutes: 299` is the 5-hour window,
`10079` the weekly one); any other length is kept as an extra window with its
seconds. Three more kinds of limit are extra windows, named:

- one model's own limit (an `additional_rate_limits[]` entry, or a session
  `rate_limits` object whose `limit_id` is not `"codex"`), named by its
  `limit_name`, else its `limit_id`: never the account's 5h/7d;
- a credit plan's `individual_limit {limit, used, remaining_percent,
  resets_at}` (enterprise accounts, both windows null), named `credits`, with
  no length: pct = 100 - remaining_percent, else used / limit.

Every field may be missing, null, a string number or out of range; a window
without a readable percent or length is left out on its own, and a reset that
cannot be read is null. The vendor sends no status word, so the status is
derived from the percent and says so (`derived: true`).

Two more readings of a reply. Its `x-codex-*` headers (`x-codex-primary-used-percent`,
`-window-minutes`, `-reset-at`, `-reset-after-seconds`, the same for `secondary`,
`x-codex-<limit>-...` for a model's own limit, `x-codex-credits-*`, `x-codex-plan-type`),
which the vendor's CLI reads on its own replies, give the same fields where the body
gives none (`header_limits`). And a 429 whose body says `usage_limit_reached` is the
login's limit, reached until the body's `resets_at` (epoch s) or `resets_in_seconds`,
with no `retry-after`: an extra window named `usage limit` at 100 %, rejected, until
then (`usage_limit_window`). `rate_limit_reset_credits {available_count,
applicable_available_count}` (the login's banked resets) is `resetCredits {available,
applicable}`.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .. import _time
from .._text import NUMBER_RE, read_number, read_pct
from ..windows import derived_status, field_of_length
# Beyond these a figure is not a window length, an epoch or a delay (nor a percent: _text.MAX_PCT).
MAX_WINDOW_S = 10 * 366 * 86400
MAX_EPOCH_S = 1e11
MAX_DELAY_S = 10 * 366 * 86400
# Real replies carry a handful of additional limits.
MAX_ADDITIONAL = 32
MAX_NAME = 64
# Amounts of a credit limit beyond this are not money.
MAX_AMOUNT = 1e15
CREDITS_NAME = "credits"
USAGE_LIMIT_NAME = "usage limit"
# Banked resets beyond this are not a count.
MAX_RESET_CREDITS = 10000
# Where a reply's headers carry its limits, and how each header names a window's field.
HEADER_PREFIX = "x-codex-"
_HEADER_FIELDS = ("used-percent", "window-minutes", "reset-at", "reset-after-seconds")
HEADER_KEYS = ("used-percent", "window-minutes", 60, "reset-at", "reset-after-seconds")
_LIMIT_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# The limit_id of the account's own limits; any other is one model's.
ACCOUNT_LIMIT_ID = "codex"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:()+/-]*$")
_PLAN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")

# How each source spells a window: percent, length (and its unit in seconds), absolute reset, relative reset.
API_KEYS = ("used_percent", "limit_window_seconds", 1, "reset_at", "reset_after_seconds")
SESSION_KEYS = ("used_percent", "window_minutes", 60, "resets_at", "resets_in_seconds")


def _seconds(value: Any, unit: int) -> Optional[int]:
    number = read_number(value)
    if number is None:
        return None
    if not 0 < number * unit <= MAX_WINDOW_S:
        return None
    # Whole seconds: a length under half a second is no window at all.
    seconds = int(round(number * unit))
    return seconds if seconds > 0 else None


def _absolute_reset(value: Any) -> Optional[str]:
    if isinstance(value, str) and not NUMBER_RE.match(value.strip()):
        try:
            return _time.normalize_iso(value)
        except ValueError:
            return None
    seconds = read_number(value)
    if seconds is None or not 0 < seconds <= MAX_EPOCH_S:
        return None
    try:
        return _time.iso_from_epoch(seconds)
    except (ValueError, OverflowError):
        return None


def _relative_reset(value: Any, base_s: float) -> Optional[str]:
    delay = read_number(value)
    if delay is None or not 0 <= delay <= MAX_DELAY_S:
        return None
    return _absolute_reset(base_s + delay)


def read_window(raw: Any, keys: Tuple[Any, ...], base_s: float) -> Optional[Tuple[int, Dict[str, Any]]]:
    """(length in seconds, window) of one window object, or None when it cannot be read.

    `base_s` is the instant a relative reset counts from: now for a reply, the
    log line's own time for a session sample.
    """
    if not isinstance(raw, Mapping):
        return None
    pct_key, length_key, unit, absolute_key, relative_key = keys
    pct = read_pct(raw.get(pct_key), text=True)
    seconds = _seconds(raw.get(length_key), unit)
    if pct is None or seconds is None:
        return None
    pct = round(pct, 1)  # to a tenth, as the header probe's figures are
    resets_at = _absolute_reset(raw.get(absolute_key))
    if resets_at is None:
        resets_at = _relative_reset(raw.get(relative_key), base_s)
    return seconds, {"pct": pct, "resetsAt": resets_at, "status": derived_status(pct), "derived": True}


def _extra(seconds: Optional[int], window: Dict[str, Any], name: Optional[str]) -> Dict[str, Any]:
    return dict(window, seconds=seconds, name=name)


def place_windows(found: List[Tuple[int, Dict[str, Any]]]) -> Dict[str, Any]:
    """fiveHour, sevenDay and extraWindows from windows in any order; the first of a length wins its slot."""
    placed: Dict[str, Any] = {"fiveHour": None, "sevenDay": None, "extraWindows": []}
    for seconds, window in found:
        slot = field_of_length(seconds)
        if slot is not None and placed[slot] is None:
            placed[slot] = window
        else:
            placed["extraWindows"].append(_extra(seconds, window, None))
    return placed


def _pair(limit: Any, names: Tuple[str, str], keys: Tuple[Any, ...], base_s: float) -> List[Tuple[int, Dict[str, Any]]]:
    if not isinstance(limit, Mapping):
        return []
    found = [read_window(limit.get(name), keys, base_s) for name in names]
    return [w for w in found if w is not None]


def _name(value: Any) -> Optional[str]:
    if isinstance(value, str) and len(value) <= MAX_NAME and _NAME_RE.match(value):
        return value
    return None


def plan_type(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and _PLAN_RE.match(value) else None


def _flag(value: Any) -> Optional[bool]:
    return value if isinstance(value, bool) else None


def credits_of(value: Any) -> Optional[Dict[str, Any]]:
    """`credits {has_credits, unlimited, balance}` (balance may be a string number), else None."""
    if not isinstance(value, Mapping):
        return None
    balance = read_number(value.get("balance"))
    if balance is not None and abs(balance) > 1e15:
        balance = None
    return {"hasCredits": _flag(value.get("has_credits")), "unlimited": _flag(value.get("unlimited")),
            "balance": balance}


def _amount(value: Any) -> Optional[float]:
    number = read_number(value)
    return number if number is not None and 0 <= number <= MAX_AMOUNT else None


def credit_window(value: Any, now_s: float) -> Optional[Dict[str, Any]]:
    """A credit plan's `individual_limit` as the extra window named `credits` (no length), or None.

    pct = 100 - remaining_percent when that is a percent, else used / limit.
    The reset is `resets_at` or `reset_at` (epoch s), else `reset_after_seconds`.
    """
    if not isinstance(value, Mapping):
        return None
    remaining = read_number(value.get("remaining_percent"))
    pct: Optional[float] = None
    if remaining is not None and 0 <= remaining <= 100:
        pct = 100.0 - remaining
    else:
        limit, used = _amount(value.get("limit")), _amount(value.get("used"))
        if limit and used is not None:
            pct = used / limit * 100.0
    pct = read_pct(pct)
    if pct is None:
        return None
    pct = round(pct, 1)
    resets_at = _absolute_reset(value.get("resets_at")) or _absolute_reset(value.get("reset_at")) \
        or _relative_reset(value.get("reset_after_seconds"), now_s)
    return {"pct": pct, "resetsAt": resets_at, "status": derived_status(pct), "derived": True, "seconds": None,
            "name": CREDITS_NAME}


def _credits_of_reply(body: Mapping[str, Any], now_s: float) -> Optional[Dict[str, Any]]:
    """The credit limit of a reply: under `rate_limit`, else under `spend_control` (team plans)."""
    for holder in ("rate_limit", "spend_control"):
        part = body.get(holder)
        window = credit_window(part.get("individual_limit"), now_s) if isinstance(part, Mapping) else None
        if window is not None:
            return window
    return None


def _additional(value: Any, now_s: float) -> List[Dict[str, Any]]:
    extras: List[Dict[str, Any]] = []
    if not isinstance(value, list):
        return extras
    for item in value[:MAX_ADDITIONAL]:
        if not isinstance(item, Mapping):
            continue
        name = _name(item.get("limit_name")) or _name(item.get("limit_id")) or _name(item.get("metered_feature"))
        for seconds, window in _pair(item.get("rate_limit"), ("primary_window", "secondary_window"),
                                     API_KEYS, now_s):
            extras.append(_extra(seconds, window, name))
    return extras


def _count(value: Any) -> Optional[int]:
    number = read_number(value)
    if number is None or not 0 <= number <= MAX_RESET_CREDITS or number != int(number):
        return None
    return int(number)


def reset_credits(value: Any) -> Optional[Dict[str, Any]]:
    """`rate_limit_reset_credits {available_count, applicable_available_count}` as
    `{available, applicable}` (banked resets, and those usable now), else None."""
    if not isinstance(value, Mapping):
        return None
    available = _count(value.get("available_count"))
    if available is None:
        return None
    return {"available": available, "applicable": _count(value.get("applicable_available_count"))}


def parse_usage_reply(body: Any, now_s: float) -> Dict[str, Any]:
    """The usage reply as fiveHour, sevenDay, extraWindows, codeReview, planType, credits.

    Raises ValueError only when the reply is not a JSON object at all.
    """
    if not isinstance(body, Mapping):
        raise ValueError("usage reply is not an object")
    names = ("primary_window", "secondary_window")
    placed = place_windows(_pair(body.get("rate_limit"), names, API_KEYS, now_s))
    placed["extraWindows"].extend(_additional(body.get("additional_rate_limits"), now_s))
    credit = _credits_of_reply(body, now_s)
    if credit is not None:
        placed["extraWindows"].append(credit)
    review = [_extra(s, w, None) for s, w in _pair(body.get("code_review_rate_limit"), names, API_KEYS, now_s)]
    placed["codeReview"] = review or None
    placed["planType"] = plan_type(body.get("plan_type"))
    placed["credits"] = credits_of(body.get("credits"))
    placed["resetCredits"] = reset_credits(body.get("rate_limit_reset_credits"))
    return placed


def _header_window(headers: Mapping[str, str], prefix: str, now_s: float) -> Optional[Tuple[int, Dict[str, Any]]]:
    raw = {field: headers.get(prefix + field) for field in _HEADER_FIELDS}
    return read_window(raw, HEADER_KEYS, now_s)


def _header_limit_ids(headers: Mapping[str, str]) -> List[str]:
    """The model limits a reply's headers name (`x-codex-<id>-primary-used-percent`), in name order."""
    ids = set()
    for name in headers:
        if name.startswith(HEADER_PREFIX) and name.endswith("-primary-used-percent"):
            limit_id = name[len(HEADER_PREFIX):-len("-primary-used-percent")]
            if limit_id != "primary" and _LIMIT_ID_RE.match(limit_id):
                ids.add(limit_id)
    return sorted(ids)[:MAX_ADDITIONAL]


def _header_credits(headers: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    flags = {}
    for field in ("has-credits", "unlimited"):
        value = (headers.get(HEADER_PREFIX + "credits-" + field) or "").strip().lower()
        flags[field] = True if value == "true" else False if value == "false" else None
    balance = headers.get(HEADER_PREFIX + "credits-balance")
    if flags["has-credits"] is None and flags["unlimited"] is None and balance is None:
        return None
    return credits_of({"has_credits": flags["has-credits"], "unlimited": flags["unlimited"], "balance": balance})


def header_limits(headers: Mapping[str, str], now_s: float) -> Dict[str, Any]:
    """The `x-codex-*` headers of a reply (names in lower case) as the fields parse_usage_reply gives."""
    found = [w for w in (_header_window(headers, HEADER_PREFIX + slot + "-", now_s)
                         for slot in ("primary", "secondary")) if w is not None]
    placed = place_windows(found)
    for limit_id in _header_limit_ids(headers):
        prefix = HEADER_PREFIX + limit_id + "-"
        name = _name(headers.get(prefix + "limit-name")) or _name(limit_id.replace("-", "_"))
        for slot in ("primary", "secondary"):
            window = _header_window(headers, prefix + slot + "-", now_s)
            if window is not None:
                placed["extraWindows"].append(_extra(window[0], window[1], name))
    placed["codeReview"] = None
    placed["planType"] = plan_type(headers.get(HEADER_PREFIX + "plan-type"))
    placed["credits"] = _header_credits(headers)
    placed["resetCredits"] = None
    return placed


def usage_limit_window(body: Any, now_s: float) -> Optional[Dict[str, Any]]:
    """A 429 body's `error {type|code: "usage_limit_reached", resets_at | resets_in_seconds}` as the
    extra window `usage limit` (100 %, rejected, until the reset), else None."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping) or "usage_limit_reached" not in (error.get("type"), error.get("code")):
        return None
    resets_at = _absolute_reset(error.get("resets_at")) or _relative_reset(error.get("resets_in_seconds"), now_s)
    return {"pct": 100.0, "resetsAt": resets_at, "status": derived_status(100.0), "derived": True, "seconds": None,
            "name": USAGE_LIMIT_NAME}


def limit_owner(rate_limits: Any) -> Optional[Tuple[Optional[str], Optional[str]]]:
    """Whose limits a session `rate_limits` object holds: (None, None) for the account's own
    (`limit_id` absent, null or "codex"), (limit_id, name) for one model's (name: its
    `limit_name`, else its `limit_id`, None when neither is a name), None when it cannot be told."""
    if not isinstance(rate_limits, Mapping):
        return None
    limit_id = rate_limits.get("limit_id")
    if limit_id is None or limit_id == ACCOUNT_LIMIT_ID:
        return None, None
    if not isinstance(limit_id, str) or not limit_id:
        return None
    return limit_id[:MAX_NAME], _name(rate_limits.get("limit_name")) or _name(limit_id)


def parse_model_limits(rate_limits: Any, line_s: float, name: Optional[str]) -> List[Dict[str, Any]]:
    """One model's own windows from a session `rate_limits` object, as extra windows named `name`."""
    return [_extra(seconds, window, name)
            for seconds, window in _pair(rate_limits, ("primary", "secondary"), SESSION_KEYS, line_s)]


def parse_session_limits(rate_limits: Any, line_s: float) -> Optional[Dict[str, Any]]:
    """A session log's `rate_limits` (the account's own) as the same fields, or None when no window
    can be read."""
    if not isinstance(rate_limits, Mapping):
        return None
    found = _pair(rate_limits, ("primary", "secondary"), SESSION_KEYS, line_s)
    credit = credit_window(rate_limits.get("individual_limit"), line_s)
    if not found and credit is None:
        return None
    placed = place_windows(found)
    if credit is not None:
        placed["extraWindows"].append(credit)
    placed["codeReview"] = None
    placed["planType"] = plan_type(rate_limits.get("plan_type"))
    placed["credits"] = credits_of(rate_limits.get("credits"))
    placed["resetCredits"] = None
    return placed


def has_window(sample: Mapping[str, Any]) -> bool:
    return bool(sample.get("fiveHour") or sample.get("sevenDay") or sample.get("extraWindows")
                or sample.get("codeReview"))
