"""An account's health (docs/posture.md, "Health"): pure functions, the same for every vendor.

Health says whether an account's figures may be trusted, beside them: `ok`
(the last reading is good and fresh), `refused` (the provider refused the
credential), `limited` (the reader was rate-limited), `unreachable` (the
provider could not be reached), `stale` (the figures shown are not the newest
reading's) or `unread` (no good reading yet). It is a function of the view,
the time it is judged at and the probe interval; the vendor says which health
each of its errors means (its optional `error_health` member).

A reading that fails does not wipe the figures: the last good reading of each
account is kept (by the posture service, between probes) and shown beside the
error, with `readAt`, the time it was read, so its age is in the open. The
service applies `apply_health` to every vendor's summary; no vendor package
knows about it.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .._names import ERROR_HEALTHS, HEALTH_OK, STALE, STALE_INTERVALS, UNREAD
from .._text import is_int
from ..summary import sibling_with_headroom

# What names an account, never part of its reading: kept figures never overwrite these.
IDENTITY = frozenset(("label", "email", "active", "provider", "error", "health", "readAt", "envLine"))
# The fields that carry figures: a view with one of them and no error is a reading.
FIGURES = ("fiveHour", "sevenDay", "extraWindows")
ErrorHealth = Callable[[Any], Optional[str]]
# label -> the reading fields of its last good view, readAt included.
Kept = Dict[str, Dict[str, Any]]


def has_figures(view: Mapping[str, Any]) -> bool:
    """Whether the view carries any window (fiveHour, sevenDay, an extra window)."""
    return any(view.get(field) for field in FIGURES)


def account_health(view: Mapping[str, Any], at_ms: int, interval_ms: float,
                   error_health: Optional[ErrorHealth] = None) -> str:
    """The health of one account view judged at `at_ms` with probes every `interval_ms` (pure).

    An error the vendor names (refused, limited, unreachable) is that health,
    whatever figures are kept. Otherwise: no reading (`readAt` null) is
    `unread`; a reading older than STALE_INTERVALS probe intervals, or figures
    kept beside an error the vendor does not name (the newest reading failed
    for another reason), are `stale`; else `ok`.
    """
    error = view.get("error")
    if error:
        named = error_health(error) if error_health is not None else None
        if named in ERROR_HEALTHS:
            return str(named)
    read_at = view.get("readAt")
    if not is_int(read_at):
        return UNREAD
    if error or at_ms - read_at > STALE_INTERVALS * interval_ms:
        return STALE
    return HEALTH_OK


def _read_at(view: Mapping[str, Any], probed_at: int) -> int:
    """When a good view was read: its own sample time where the vendor gives one, else the probe's."""
    sampled = view.get("sampledAt")
    return sampled if is_int(sampled) and sampled > 0 else probed_at


def _judged(view: Dict[str, Any], kept: Kept, probed_at: int) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
    """(the view with readAt, kept figures shown beside an error; what to keep of it)."""
    view = dict(view)
    label = view["label"]
    if not view.get("error") and has_figures(view):
        view["readAt"] = _read_at(view, probed_at)
        return view, {k: v for k, v in view.items() if k not in IDENTITY or k == "readAt"}
    last = kept.get(label)
    if view.get("error") and last is not None:
        # The newest reading failed: the last good figures stay, with their age.
        view.update((k, v) for k, v in last.items())
        return view, last
    # No figures to show (nothing read yet, or a reply without windows): nothing to date.
    view["readAt"] = None
    return view, last


def apply_health(summary: Dict[str, Any], kept: Kept, interval_ms: float,
                 error_health: Optional[ErrorHealth] = None) -> Tuple[Dict[str, Any], Kept]:
    """(the summary with `health` and `readAt` on every account view, the figures to keep) (pure).

    `kept` is what the previous call returned for the same vendor. A
    node-level error keeps every account's figures (it says nothing about
    them); a disabled body forgets them. An account no longer in the body is
    forgotten. `siblingWithHeadroom` never names an account whose health is
    not `ok`.
    """
    if summary.get("available") is not True:
        return summary, {}
    if "error" in summary or not isinstance(summary.get("accounts"), list):
        return summary, dict(kept)
    probed_at = summary.get("probedAt") if is_int(summary.get("probedAt")) else 0
    views: List[Dict[str, Any]] = []
    now_kept: Kept = {}
    for raw in summary["accounts"]:
        if not isinstance(raw, dict) or not isinstance(raw.get("label"), str):
            continue
        view, keep = _judged(raw, kept, probed_at)
        view["health"] = account_health(view, probed_at, interval_ms, error_health)
        if keep is not None:
            now_kept[view["label"]] = keep
        views.append(view)
    out = dict(summary, accounts=views)
    active = summary.get("active")
    if isinstance(active, Mapping):
        out["active"] = next((dict(v) for v in views if v["label"] == active.get("label")), dict(active))
    sibling = summary.get("siblingWithHeadroom")
    if isinstance(sibling, Mapping) and any(v["label"] == sibling.get("label") and v["health"] != HEALTH_OK
                                            for v in views):
        out["siblingWithHeadroom"] = sibling_with_headroom([v for v in views if v["health"] == HEALTH_OK])
    return out, now_kept
