"""The posture summary (docs/posture.md) as pure functions of the probe child's report.

The summary is derived by copying whitelisted fields only, at every depth, so
nothing the child (or a hostile env file) printed can ride along into a
response. No I/O here: the posture service (posture.py) runs the probes and
caches what these functions build.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from . import _time
from ._names import (ALLOWED, CLAIM_OF_FIELD, ERROR, FIELD_OF_CLAIM, NODE_STATUS_OF, STATUS_RANK, UNKNOWN,
                     WINDOW_FIELDS)
from ._text import EMAIL, account_label, read_pct, word
from .errors import MESSAGES, clean_error

# Anchored with `^...$` and used with match(), as it always was: the address
# must be the whole field (`$` also lets one trailing newline through).
_EMAIL_RE = re.compile("^%s$" % EMAIL)
_ISO_Z_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def disabled_body(node: str) -> Dict[str, Any]:
    return {"available": False, "node": node}


def _window(value: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(value, Mapping):
        return None
    resets = value.get("resetsAt")
    return {
        "pct": read_pct(value.get("pct")),
        "resetsAt": resets if isinstance(resets, str) and _ISO_Z_RE.match(resets) else None,
        "status": word(value.get("status")),
    }


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
        return None, view.get("overallStatus")
    status = view[chosen].get("status")
    return CLAIM_OF_FIELD[chosen], status if status is not None else view.get("overallStatus")


def account_view(raw: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(raw, Mapping):
        return None
    label = account_label(raw.get("label"))
    if label is None:
        return None
    email = raw.get("email")
    view: Dict[str, Any] = {
        "label": label,
        "email": email if isinstance(email, str) and len(email) <= 254 and _EMAIL_RE.match(email) else None,
        "active": raw.get("active") is True,
        "overallStatus": word(raw.get("overallStatus")),
        "representativeClaim": word(raw.get("representativeClaim")),
        "bindingWindow": None,
        "bindingStatus": None,
        "fiveHour": _window(raw.get("fiveHour")),
        "sevenDay": _window(raw.get("sevenDay")),
        "error": clean_error(raw.get("error")),
    }
    view["bindingWindow"], view["bindingStatus"] = binding_window(view)
    return view


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


def error_summary(node: str, probed_at: int, err: Any) -> Dict[str, Any]:
    """The node-level error body (without the per-reply generatedAt/cached)."""
    return {"available": True, "node": node, "probedAt": probed_at, "status": ERROR, "active": None,
            "accounts": [], "siblingWithHeadroom": None, "error": clean_error(err, with_status=False)}


def derive_summary(report: Any, node: str, probed_at: int, reserve_pct: int = 0) -> Dict[str, Any]:
    """The posture summary from a probe report; pure and whitelist-only.

    Returns the disabled body, a node-level error body, or the full summary.
    The per-reply fields generatedAt and cached are added by `reply`.
    """
    if not isinstance(report, Mapping):
        return error_summary(node, probed_at, {"kind": "internal"})
    if report.get("error") is not None:
        return error_summary(node, probed_at, report.get("error"))
    if report.get("available") is not True:
        return disabled_body(node)
    raw_accounts = report.get("accounts")
    if not isinstance(raw_accounts, list):
        return error_summary(node, probed_at, {"kind": "internal", "message": MESSAGES["internal"].bad_result})
    return posture_body(node, probed_at, (account_view(raw) for raw in raw_accounts), reserve_pct)


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


