"""A key vendor's block from the child, whitelisted at every depth before the monitor reads it.

The child's stdout is only as trustworthy as the accounts env file it sourced: no field is
copied without a check of its shape. A row whose label is not one of the vendor's is dropped;
unknown keys go; windows are rebuilt (svcposture.windows), errors rebuilt from the vendor's
vocabulary, one account at most is active (the one the block names).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from .._text import email_address
from .._time import read_ms
from ..windows import clean_extra, clean_window
from .quota import MAX_QUOTAS, plan_word

MAX_ROWS = 1000


def _extras(value: Any) -> List[Dict[str, Any]]:
    windows = (clean_extra(v) for v in (value[:MAX_QUOTAS] if isinstance(value, list) else ()))
    return [w for w in windows if w is not None]


def clean_row(value: Any, label_re: "re.Pattern[str]", provider: str, errors: Any) -> Optional[Dict[str, Any]]:
    """One account row, or None when its label is not one of the vendor's."""
    if not isinstance(value, dict) or not isinstance(value.get("label"), str) or not label_re.match(value["label"]):
        return None
    source = "api" if value.get("source") == "api" else None
    return {"label": value["label"], "email": email_address(value.get("email")), "active": value.get("active") is True,
            "provider": provider, "source": source,
            "sampledAt": read_ms(value.get("sampledAt")) if source else None,
            "fiveHour": clean_window(value.get("fiveHour")), "sevenDay": clean_window(value.get("sevenDay")),
            "extraWindows": _extras(value.get("extraWindows")), "planType": plan_word(value.get("planType")),
            "error": errors.clean(value.get("error"))}


def clean_block(value: Any, label_prefix: str, provider: str, errors: Any) -> Optional[Dict[str, Any]]:
    """The vendor's block, whitelisted; None when it is not an object."""
    if not isinstance(value, dict):
        return None
    label_re = re.compile(r"^%s[a-z0-9_]{1,64}$" % re.escape(label_prefix))
    rows: Dict[str, Dict[str, Any]] = {}
    raw = value.get("accounts")
    for item in raw[:MAX_ROWS] if isinstance(raw, list) else ():
        row = clean_row(item, label_re, provider, errors)
        if row is not None:
            rows.setdefault(row["label"], row)
    active = value.get("active") if value.get("active") in rows else None
    for row in rows.values():
        row["active"] = row["label"] == active
    return {"available": value.get("available") is True and bool(rows), "probedAt": read_ms(value.get("probedAt")),
            "active": active, "accounts": list(rows.values())}
