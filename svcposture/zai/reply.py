"""z.ai's `GET /api/monitor/usage/quota/limit` reply as windows (pure, docs/zai.md).

The reply is an envelope, `{code, msg, success, data: {limits: [...], level}}`, and z.ai
puts its errors in it under HTTP 200: `success: false`, or a `code` other than 200, is the
error that code names (a refused key is `{"code": 401, "msg": "token expired or incorrect",
"success": false}`; its business codes 1000-1004 are refused keys too, 1302, 1303 and 1305
rate limits), raised as exchange.BodyError.

Each `limits[]` entry is one quota, read from its unit and length, never from its `type`:
z.ai renamed the types in the field (`TOKENS_LIMIT` became `CREDIT_LIMIT`), so the type is
only the extra window's name, in lower case. Its length is `number` units of `unit`: 3 an
hour, 6 a week, 1 a day, 5 a month (the monthly tool-call quota is `unit: 5, number: 1`, its
reset a month ahead); another unit gives no length. Its pct comes from `usage` (the
entitlement), `currentValue` (used) and `remaining` when they are there, else from
`percentage`; its reset is `nextResetTime` (epoch milliseconds), null when absent, as it is
for a 5-hour window not yet started. The plan word is `data.level`.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from .._text import is_int
from ..keyvendor.exchange import BodyError
from ..keyvendor.quota import (MAX_QUOTAS, MONTH_S, Found, iso_of_ms, length_s, place, plan_word,
                               quota_window)

UNIT_S = {1: 86400, 3: 3600, 5: MONTH_S, 6: 7 * 86400}
# The business codes of the envelope that stand for an HTTP status (z.ai's API reference).
REFUSED_CODES = frozenset((401, 403, 1000, 1001, 1002, 1003, 1004))
LIMITED_CODES = frozenset((429, 1302, 1303, 1305))


def _envelope_error(body: Mapping[str, Any]) -> Optional[BodyError]:
    code = body.get("code")
    if body.get("success") is not False and (code is None or code == 200):
        return None
    code = code if is_int(code) else None
    if code in REFUSED_CODES:
        return BodyError(401)
    return BodyError(429 if code in LIMITED_CODES else None)


def _name(value: Any) -> Optional[str]:
    return value.lower() if isinstance(value, str) else None


def _quota(item: Mapping[str, Any]) -> Optional[Found]:
    unit = item.get("unit")
    seconds = length_s(item.get("number"), UNIT_S[unit]) if is_int(unit) and unit in UNIT_S else None
    window = quota_window(entitlement=item.get("usage"), used=item.get("currentValue"),
                          remaining=item.get("remaining"), pct=item.get("percentage"),
                          resets_at=iso_of_ms(item.get("nextResetTime")))
    return (seconds, _name(item.get("type")), window) if window is not None else None


def parse_reply(body: Any, now_s: float) -> Dict[str, Any]:
    """fiveHour, sevenDay, extraWindows and planType of the reply (above)."""
    if not isinstance(body, Mapping):
        raise ValueError("the reply is not an object")
    error = _envelope_error(body)
    if error is not None:
        raise error
    data = body.get("data")
    limits = data.get("limits") if isinstance(data, Mapping) else None
    if not isinstance(limits, list):
        raise ValueError("the reply holds no limits")
    found: List[Found] = [q for q in (_quota(item) for item in limits[:MAX_QUOTAS] if isinstance(item, Mapping))
                          if q is not None]
    placed = place(found)
    placed["planType"] = plan_word(data.get("level")) or plan_word(data.get("planName"))
    return placed
