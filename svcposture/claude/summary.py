"""Claude's posture summary (docs/posture.md): the contract's body from the child's Claude block (pure).

The block is copied by whitelisted fields only, at every depth: a label that
is a label, an email that is an address, a window's number, ISO time and
status word, an error rebuilt from Claude's vocabulary. The body around the
views is every vendor's (svcposture.summary).
"""
from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional

from .._text import EMAIL, account_label, read_pct, word
from ..envfile.entries import env_line
from ..summary import binding_window, disabled_body, error_summary, posture_body
from .errors import MESSAGES, clean_error

# Anchored with `^...$` and used with match(): the address must be the whole
# field (`$` also lets one trailing newline through).
_EMAIL_RE = re.compile("^%s$" % EMAIL)
_ISO_Z_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def _window(value: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(value, Mapping):
        return None
    resets = value.get("resetsAt")
    return {
        "pct": read_pct(value.get("pct")),
        "resetsAt": resets if isinstance(resets, str) and _ISO_Z_RE.match(resets) else None,
        "status": word(value.get("status")),
    }


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
        "envLine": env_line(raw.get("envLine")),
    }
    view["bindingWindow"], view["bindingStatus"] = binding_window(view)
    return view


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
