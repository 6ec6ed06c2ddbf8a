"""The posture body (docs/posture.md), every vendor's: pure functions over account views.

A vendor's package whitelists its child's block into account views (every
field copied by name, at every depth, so nothing a hostile env file or reply
put there rides along); the functions here build the body from those views:
the binding window, the node status, the sibling with headroom, the node-level
error body, and one reply's fields. No I/O here: the posture service
(svcposture.posture.service) runs the probes and caches what these build.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from . import _time
from ._names import (ALLOWED, CLAIM_OF_FIELD, ERROR, FIELD_OF_CLAIM, NODE_STATUS_OF, STATUS_RANK, UNKNOWN,
                     WINDOW_FIELDS)
from .errors import clean_error



def disabled_body(node: str) -> Dict[str, Any]:
    return {"available": False, "node": node}


def binding_window(view: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """(bindingWindow, bindingStatus) of one account view (docs/posture.md).

    A claim that names something other than a window (`overage`) takes the
    worst window as bindingWindow and overallStatus as bindingStatus: an
    account that may continue on overage is not shown as rejected.
    """
    claim = view.get("representativeClaim")
    if claim in FIELD_OF_CLAIM:
        window = view.get(FIELD_OF_CLAIM[claim])
        status = window.get("status") if isinstance(window, Mapping) else None
        return claim, status if status is not None else view.get("overallStatus")
    worst, status = _worst_window(view)
    if claim is not None:
        return worst, view.get("overallStatus")
    return worst, status


def _worst_window(view: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """(the worst window, its status, else overallStatus); (None, overallStatus) without a window."""
    best: Optional[Tuple[int, float, int]] = None
    chosen: Optional[str] = None
    # Worst status first, then the higher pct, then five_hour (the first field).
    for order, field in enumerate(WINDOW_FIELDS):
        window = view.get(field)
        if not isinstance(window, Mapping):
            continue
        pct = window.get("pct")
        key = (STATUS_RANK.get(window.get("status") or "", 0),
               pct if isinstance(pct, float) else -1.0, -order)
        if best is None or key > best:
            best, chosen = key, field
    if chosen is None:
        return None, _worst_extra_status(view) or view.get("overallStatus")
    status = view[chosen].get("status")
    return CLAIM_OF_FIELD[chosen], status if status is not None else view.get("overallStatus")


def _worst_extra_status(view: Mapping[str, Any]) -> Optional[str]:
    """The worst status among the extra windows, for an account that has no 5-hour or weekly
    window (a monthly quota, a credit limit): it binds the account then, so the node status
    says rejected at its wall rather than unknown."""
    statuses = [w.get("status") for w in view.get("extraWindows") or () if isinstance(w, Mapping)]
    ranked = [s for s in statuses if isinstance(s, str) and s in STATUS_RANK]
    return max(ranked, key=lambda s: STATUS_RANK[s]) if ranked else None


def node_status(active: Optional[Mapping[str, Any]]) -> str:
    """The node status of docs/posture.md from the active account's view (None: no active account)."""
    if active is None:
        return UNKNOWN
    if active.get("error"):
        return ERROR
    return NODE_STATUS_OF.get(active.get("bindingStatus") or "", UNKNOWN)


def sibling_with_headroom(accounts: List[Dict[str, Any]], reserve_pct: int = 0) -> Optional[Dict[str, Any]]:
    """The contract's rule; with a human reserve, siblings below it come first
    (with none, the first key is False for all and the rule is unchanged)."""
    best: Optional[Tuple[bool, float, int]] = None
    chosen: Optional[Dict[str, Any]] = None
    for order, acct in enumerate(accounts):
        if acct["active"] or acct["error"] or acct["bindingStatus"] != ALLOWED:
            continue
        used = max((acct[f]["pct"] if acct[f] and acct[f]["pct"] is not None else 100.0) for f in WINDOW_FIELDS)
        key = (bool(reserve_pct) and used >= 100 - reserve_pct, used, order)
        if best is None or key < best:
            best, chosen = key, acct
    return {"label": chosen["label"], "email": chosen["email"]} if chosen else None


# What an account view of a vendor other than the default one carries beyond the posture fields,
# from the outcome it shows (its own sample or error, or the last one remembered).
VENDOR_FIELDS = ("extraWindows", "codeReview", "planType", "credits", "resetCredits", "source", "sampledAt")


def account_view(row: Mapping[str, Any], provider: str, shown: Mapping[str, Any]) -> Dict[str, Any]:
    """One account of a vendor other than the default one, in the posture account shape plus its
    vendor fields (pure): `row` is a whitelisted row of the vendor's block, `shown` the outcome
    to show (windows, error and the VENDOR_FIELDS). The vendor sends no status words, so the
    overall status and claim are null and the binding window is the worst one."""
    view: Dict[str, Any] = {
        "label": row["label"], "email": row.get("email"), "active": row.get("active") is True,
        "overallStatus": None, "representativeClaim": None, "bindingWindow": None, "bindingStatus": None,
        "fiveHour": shown.get("fiveHour"), "sevenDay": shown.get("sevenDay"), "error": shown.get("error"),
        "provider": provider}
    view.update((key, shown.get(key)) for key in VENDOR_FIELDS)
    view["envLine"] = row.get("envLine")
    view["extraWindows"] = view["extraWindows"] or []
    view["bindingWindow"], view["bindingStatus"] = binding_window(view)
    return view


def error_summary(node: str, probed_at: int, err: Any) -> Dict[str, Any]:
    """The node-level error body (without the per-reply generatedAt/cached)."""
    return {"available": True, "node": node, "probedAt": probed_at, "status": ERROR, "active": None,
            "accounts": [], "siblingWithHeadroom": None, "error": clean_error(err, with_status=False)}


def posture_body(node: str, probed_at: int, views: Iterable[Optional[Dict[str, Any]]],
                 reserve_pct: int = 0) -> Dict[str, Any]:
    """The available posture body over account views of any vendor (pure, docs/vendors.md).

    A view that is None or repeats a label is left out; the first active view
    is `active` and any later one is marked inactive; status and
    siblingWithHeadroom follow from them.
    """
    accounts: List[Dict[str, Any]] = []
    labels = set()
    active: Optional[Dict[str, Any]] = None
    for view in views:
        if view is None or view["label"] in labels:
            continue
        labels.add(view["label"])
        if view["active"]:
            if active is None:
                active = view
            else:
                view["active"] = False
        accounts.append(view)
    return {
        "available": True,
        "node": node,
        "probedAt": probed_at,
        "status": node_status(active),
        "active": dict(active) if active is not None else None,
        "accounts": accounts,
        "siblingWithHeadroom": sibling_with_headroom(accounts, reserve_pct),
    }


def reply(summary: Mapping[str, Any], cached: bool, generated_ms: Optional[int] = None) -> Dict[str, Any]:
    """The endpoint body for one reply: summary fields in contract order plus generatedAt/cached."""
    if summary.get("available") is not True:
        return disabled_body(str(summary.get("node")))
    body: Dict[str, Any] = {
        "available": True,
        "node": summary["node"],
        "generatedAt": _time.iso_from_ms(_time.now_ms() if generated_ms is None else generated_ms),
        "probedAt": summary["probedAt"],
        "cached": cached,
        "status": summary["status"],
        "active": summary["active"],
        "accounts": summary["accounts"],
        "siblingWithHeadroom": summary["siblingWithHeadroom"],
    }
    if "error" in summary:
        body["error"] = summary["error"]
    return body


def is_node_error(summary: Optional[Mapping[str, Any]]) -> bool:
    return bool(summary) and "error" in summary  # type: ignore[operator]


