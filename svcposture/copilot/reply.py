"""GitHub Copilot's `GET /copilot_internal/user` reply as windows (pure, docs/copilot.md).

Every quota the endpoint reports is monthly (it renews on `quota_reset_date`), so none is a
5-hour or weekly window: each is an extra window named by its key, a month long
(keyvendor.quota.MONTH_S). Two shapes, both read:

- `quota_snapshots {<name>: {entitlement, remaining, percent_remaining, unlimited, has_quota}}`
  (`premium_interactions`, `chat`, `completions`, and any other name that appears): a quota
  from its entitlement and remaining, else 100 - percent_remaining. Not a window: `unlimited`,
  `has_quota: false`, or an entitlement of 0 or below (the free plan's premium bucket, a
  Business seat whose chat is unlimited, the `-1` sentinel);
- the free plan's older `monthly_quotas {chat, completions}` (the entitlement) with
  `limited_user_quotas {...}` (what is left), for a quota the snapshots do not hold.

The reset is `quota_reset_date_utc`, else `quota_reset_date`, else `limited_user_reset_date`
(a date is midnight UTC). The plan word is `copilot_plan`, else `access_type_sku`. An object
holding neither shape is not this endpoint's reply (ValueError).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ..keyvendor.quota import MAX_QUOTAS, MONTH_S, Found, count, first_iso, place, plan_word, quota_window

RESET_KEYS = ("quota_reset_date_utc", "quota_reset_date", "limited_user_reset_date")


def _snapshot(value: Any, resets_at: Optional[str]) -> Optional[Dict[str, Any]]:
    if not isinstance(value, Mapping) or value.get("has_quota") is False:
        return None
    percent_left = count(value.get("percent_remaining"))
    return quota_window(entitlement=value.get("entitlement"), remaining=value.get("remaining"),
                        pct=100.0 - percent_left if percent_left is not None else None,
                        unlimited=value.get("unlimited"), resets_at=resets_at)


def parse_reply(body: Any, now_s: float) -> Dict[str, Any]:
    """fiveHour (none), sevenDay (none), extraWindows and planType of the reply (above)."""
    if not isinstance(body, Mapping):
        raise ValueError("the reply is not an object")
    snapshots = body.get("quota_snapshots")
    monthly, left = body.get("monthly_quotas"), body.get("limited_user_quotas")
    if not isinstance(snapshots, Mapping) and not isinstance(monthly, Mapping):
        raise ValueError("the reply holds no quota")
    resets_at = first_iso(body, RESET_KEYS)
    found: List[Found] = []
    seen = set()
    for name, value in list(snapshots.items())[:MAX_QUOTAS] if isinstance(snapshots, Mapping) else ():
        seen.add(name)
        window = _snapshot(value, resets_at)
        if window is not None:
            found.append((MONTH_S, name, window))
    for name, value in list(monthly.items())[:MAX_QUOTAS] if isinstance(monthly, Mapping) else ():
        window = None if name in seen else quota_window(
            entitlement=value, remaining=left.get(name) if isinstance(left, Mapping) else None, resets_at=resets_at)
        if window is not None:
            found.append((MONTH_S, name, window))
    placed = place(found)
    placed["planType"] = plan_word(body.get("copilot_plan")) or plan_word(body.get("access_type_sku"))
    return placed
