"""The child's `codex` block, whitelisted at every depth before the monitor reads it.

The child's stdout is only as trustworthy as the accounts env file it sourced,
so nothing in the block is copied without a check of its shape: unknown keys
are dropped, values of the wrong shape become null, a row without a valid
label is dropped, and errors are rebuilt from the Codex vocabulary.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional

from .._text import EMAIL_RE
from ..envfile.entries import env_line
from ..windows import clean_extra, clean_window
from .errors import clean_codex_error
from .state import MAX_HOSTS, is_host, is_label, read_ms
from .usage import credits_of, plan_type, reset_credits

_KEY_RE = re.compile(r"^[0-9a-f]{16}$")
MAX_ROWS = 1000
MAX_EXTRA = 64
_SOURCES = ("api", "session")
_SKIPS = ("floor", "owner")


def _number(value: Any, low: float, high: float) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(number) and low <= number <= high else None


def _extras(value: Any) -> List[Dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [w for w in (clean_extra(v) for v in value[:MAX_EXTRA]) if w is not None]


def _email(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and len(value) <= 254 and EMAIL_RE.fullmatch(value) else None


def _credits(value: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(value, dict):
        return None
    balance = _number(value.get("balance"), -1e15, 1e15)
    raw = {"has_credits": value.get("hasCredits"), "unlimited": value.get("unlimited"), "balance": balance}
    return credits_of(raw)


def _reset_credits(value: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(value, dict):
        return None
    available, applicable = value.get("available"), value.get("applicable")
    return reset_credits({"available_count": available if isinstance(available, int) else None,
                          "applicable_available_count": applicable if isinstance(applicable, int) else None})


def clean_row(value: Any) -> Optional[Dict[str, Any]]:
    """One account row of the block, or None when it has no valid label."""
    if not isinstance(value, dict) or not is_label(value.get("label")):
        return None
    source = value.get("source") if value.get("source") in _SOURCES else None
    key = value.get("accountKey")
    retry = _number(value.get("retryAfterS"), 0, 1e9)
    review = _extras(value.get("codeReview"))
    return {"label": value["label"], "email": _email(value.get("email")), "active": value.get("active") is True,
            "provider": "codex", "source": source,
            "sampledAt": read_ms(value.get("sampledAt")) if source is not None else None,
            "polledAt": read_ms(value.get("polledAt")),
            "skipped": value.get("skipped") if value.get("skipped") in _SKIPS else None,
            "pollOwner": value.get("pollOwner") if is_host(value.get("pollOwner")) else None,
            "accountKey": key if isinstance(key, str) and _KEY_RE.match(key) else None,
            "fiveHour": clean_window(value.get("fiveHour")), "sevenDay": clean_window(value.get("sevenDay")),
            "extraWindows": _extras(value.get("extraWindows")), "codeReview": review or None,
            "planType": plan_type(value.get("planType")), "credits": _credits(value.get("credits")),
            "resetCredits": _reset_credits(value.get("resetCredits")),
            "retryAfterS": retry, "error": clean_codex_error(value.get("error")),
            "envLine": env_line(value.get("envLine"))}


def _labels(value: Any) -> List[str]:
    if not isinstance(value, list):
        return []
    return list(dict.fromkeys(v for v in value[:MAX_HOSTS] if is_label(v)))


def codex_block_of(report: Any) -> Optional[Dict[str, Any]]:
    """The whitelisted `codex` block of a whole child report; None when it has none."""
    return clean_codex_block(report.get("codex")) if isinstance(report, dict) else None


def clean_codex_block(value: Any) -> Optional[Dict[str, Any]]:
    """The child's `codex` block, whitelisted; None when it is not an object."""
    if not isinstance(value, dict):
        return None
    rows: List[Dict[str, Any]] = []
    seen = set()
    raw_rows = value.get("accounts")
    for raw in (raw_rows[:MAX_ROWS] if isinstance(raw_rows, list) else []):
        row = clean_row(raw)
        if row is not None and row["label"] not in seen:
            seen.add(row["label"])
            rows.append(row)
    active = value.get("active") if value.get("active") in seen else None
    for row in rows:
        # One active login at most, the one the block names.
        row["active"] = row["label"] == active
    return {"available": value.get("available") is True and bool(rows), "probedAt": read_ms(value.get("probedAt")),
            "active": active, "duplicateActive": _labels(value.get("duplicateActive")),
            "unusable": _labels(value.get("unusable")), "accounts": rows}
