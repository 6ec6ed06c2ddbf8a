"""Kimi Code's `GET /coding/v1/usages` reply as windows (pure, docs/kimi.md).

Three parts, each read on its own, in this order:

- `usage {limit, used, remaining, resetTime}`: the weekly window (the provider's own client
  calls it the weekly limit); a reply may have none;
- `limits[] {window {duration, timeUnit}, detail {limit, used, remaining, resetTime}}`: each
  placed by its length, `duration` times its `TIME_UNIT_SECOND`/`MINUTE`/`HOUR`/`DAY`
  (300 minutes is the 5-hour window); named by the entry's or its detail's `name`, if any;
- `usages {<name>: {used_ratio, reset_time}}`: the ratio pools of the newer shape, which has
  no `usage`. A pool's length is in its name (`limit_5h`, `limit_7d`, `limit_1w`; `month`
  for the monthly ones), and a pool whose length's slot an earlier part already holds is
  left out: it is that part again, as a ratio.

Counts come as strings as often as numbers. A quota whose limit is 0 or below is no window.
Resets are ISO-8601 with up to nine fractional digits (`resetTime`, `resetAt`, `reset_time`,
`reset_at`), truncated to the millisecond. The plan word is `user.membership.level`, else
`subType`. An object with none of the three parts is not this endpoint's reply (ValueError).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional

from .._text import read_number
from ..keyvendor.quota import (MAX_QUOTAS, MONTH_S, Found, first_iso, length_s, place, plan_word,
                               quota_window, slots_of)
from ..windows import SEVEN_DAY_S

UNIT_S = {"TIME_UNIT_SECOND": 1, "TIME_UNIT_MINUTE": 60, "TIME_UNIT_HOUR": 3600, "TIME_UNIT_DAY": 86400}
POOL_UNIT_S = {"h": 3600, "d": 86400, "w": 7 * 86400}
RESET_KEYS = ("resetTime", "resetAt", "reset_time", "reset_at")
_POOL_RE = re.compile(r"^limit_(\d{1,4})([hdw])$")


def _detail(detail: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(detail, Mapping):
        return None
    return quota_window(entitlement=detail.get("limit"), used=detail.get("used"), remaining=detail.get("remaining"),
                        resets_at=first_iso(detail, RESET_KEYS))


def _limit(item: Any) -> Optional[Found]:
    if not isinstance(item, Mapping):
        return None
    detail = item.get("detail")
    window = _detail(detail)
    frame = item.get("window") if isinstance(item.get("window"), Mapping) else {}
    unit = frame.get("timeUnit")
    seconds = length_s(frame.get("duration"), UNIT_S[unit]) if isinstance(unit, str) and unit in UNIT_S else None
    name = item.get("name") or (detail.get("name") if isinstance(detail, Mapping) else None)
    return (seconds, name, window) if window is not None else None


def _pool_length(name: str) -> Optional[int]:
    found = _POOL_RE.match(name)
    if found:
        return length_s(found.group(1), POOL_UNIT_S[found.group(2)])
    return MONTH_S if "month" in name else None


def _pools(value: Any, taken: "frozenset[str]") -> List[Found]:
    found: List[Found] = []
    for name, pool in list(value.items())[:MAX_QUOTAS] if isinstance(value, Mapping) else ():
        ratio = read_number(pool.get("used_ratio")) if isinstance(pool, Mapping) and isinstance(name, str) else None
        seconds = _pool_length(name) if ratio is not None else None
        window = quota_window(pct=ratio * 100.0, resets_at=first_iso(pool, RESET_KEYS)) if ratio is not None else None
        if window is not None and not slots_of([(seconds, name, window)]) & taken:
            found.append((seconds, name, window))
    return found


def parse_reply(body: Any, now_s: float) -> Dict[str, Any]:
    """fiveHour, sevenDay, extraWindows and planType of the reply (above)."""
    if not isinstance(body, Mapping) or not any(key in body for key in ("usage", "limits", "usages")):
        raise ValueError("the reply holds no usage")
    weekly = _detail(body.get("usage"))
    found: List[Found] = [(SEVEN_DAY_S, None, weekly)] if weekly is not None else []
    limits = body.get("limits")
    found += [q for q in (_limit(item) for item in (limits[:MAX_QUOTAS] if isinstance(limits, list) else ()))
              if q is not None]
    found += _pools(body.get("usages"), slots_of(found))
    placed = place(found)
    user = body.get("user") if isinstance(body.get("user"), Mapping) else {}
    membership = user.get("membership") if isinstance(user.get("membership"), Mapping) else {}
    placed["planType"] = plan_word(membership.get("level")) or plan_word(body.get("subType"))
    return placed
