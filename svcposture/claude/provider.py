"""The provider's wire, as the token-scoped child speaks it (docs/posture.md).

Two requests: the header probe (`POST /v1/messages`, read for its
`anthropic-ratelimit-unified-*` headers whatever the status) and the usage
probe (`GET /api/oauth/usage`). Each returns token-free data or an error in
the fixed vocabulary of `errors`: exception text and response bodies never
reach the output, since any of them could quote the bearer token.

Both go through svcposture._http's Exchange (a total deadline, no redirect, the
reply whatever its status), which imports urllib only when one is sent: the
parsers here cost nothing to import.
"""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Dict, Mapping, Optional

from .. import _time
from .._names import WINDOW_STATUSES
from .._text import MAX_PCT, loads_bounded, word
from .._version import __version__
from .errors import MESSAGES, error
from .._http import Exchange
from ..probe.providerhttp import classify_transport, retry_after_s
from ..settings import knob_value
from .knobs import PROBE_MODEL, PROVIDER_URL
from .usage import usage_extras, usage_values
from ..windows import FIVE_HOUR_S, SEVEN_DAY_S

UNIFIED = "anthropic-ratelimit-unified-"
MAX_USAGE_BODY = 1024 * 1024

# Header prefix of each window and its body field.
_HEADER_WINDOWS = (("5h", "fiveHour"), ("7d", "sevenDay"))
# Each window's claim word and length, for a retry-after that stands in for a missing reset.
_WINDOW_CLAIMS = {"fiveHour": ("five_hour", FIVE_HOUR_S), "sevenDay": ("seven_day", SEVEN_DAY_S)}
# The unified headers read; any other `anthropic-ratelimit-unified-*` header is ignored.
_KNOWN_UNIFIED = frozenset(["status", "representative-claim"] + [
    short + "-" + part for short, _ in _HEADER_WINDOWS for part in ("utilization", "reset", "status")])
_NO_VIEW: Dict[str, Any] = {"overallStatus": None, "representativeClaim": None, "fiveHour": None,
                            "sevenDay": None}


# ---------------------------------------------------------------- header values

def pct_from_fraction(raw: str) -> float:
    """'0.123' -> 12.3 (fraction x 100, half-up to one decimal). ValueError on junk."""
    try:
        value = Decimal(raw.strip())
    except (InvalidOperation, AttributeError):
        raise ValueError("not a number") from None
    # A fraction beyond MAX_PCT / 100 is not a utilization (read_pct's line); it also
    # keeps the decimal arithmetic below from overflowing.
    if not value.is_finite() or value < 0 or value > Decimal(MAX_PCT) / 100:
        raise ValueError("not a usable fraction")
    try:
        return float((value * 100).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))
    except ArithmeticError:
        raise ValueError("not a usable fraction") from None


def iso_from_reset(raw: str) -> str:
    """Epoch seconds as text to ISO-8601 UTC `...Z`. ValueError on junk."""
    try:
        value = Decimal(raw.strip())
    except (InvalidOperation, AttributeError):
        raise ValueError("not a number") from None
    if not value.is_finite() or value < 0 or value > Decimal(10) ** 11:
        raise ValueError("not a usable epoch")
    try:
        return _time.iso_from_epoch(float(value))
    except (ArithmeticError, OverflowError):
        raise ValueError("not a usable epoch") from None


def _word(raw: Optional[str]) -> Optional[str]:
    if raw is None:
        return None
    value = raw.strip()
    if word(value) is None:
        raise ValueError("not a status word")
    return value


def _status(raw: Optional[str]) -> Optional[str]:
    """A status header's value, which must be one of WINDOW_STATUSES.

    A shape check alone would let a lower-case word through, and a provider
    (or anyone on the path of an http:// provider URL) that echoes the bearer
    token as the status would have it shown on the API and the stream.
    """
    if raw is None:
        return None
    value = raw.strip()
    if value not in WINDOW_STATUSES:
        raise ValueError("not a status word")
    return value


def parse_unified_headers(headers: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    """The `anthropic-ratelimit-unified-*` headers (lower-case keys) to a token-free view.

    None when there is no such header it knows. ValueError when a value does not
    parse. A window is present when any of its three headers is.
    """
    # Unknown unified headers (overage-*, fallback-*, ...) are ignored (docs/posture.md).
    unified = {k[len(UNIFIED):]: v for k, v in headers.items()
               if k.startswith(UNIFIED) and k[len(UNIFIED):] in _KNOWN_UNIFIED}
    if not unified:
        return None
    view: Dict[str, Any] = {
        "overallStatus": _status(unified.get("status")),
        "representativeClaim": _word(unified.get("representative-claim")),
    }
    for short, field in _HEADER_WINDOWS:
        util = unified.get(short + "-utilization")
        reset = unified.get(short + "-reset")
        status = unified.get(short + "-status")
        if util is None and reset is None and status is None:
            view[field] = None
            continue
        view[field] = {
            "pct": pct_from_fraction(util) if util is not None else None,
            "resetsAt": iso_from_reset(reset) if reset is not None else None,
            "status": _status(status),
        }
    return view


def reset_from_retry_after(view: Dict[str, Any], retry_after: Optional[float], now_s: float) -> Dict[str, Any]:
    """A 429's `retry-after` as the reset of the window it must belong to, when that window came
    without its `-reset` header: the window the representative claim names, else the one rejected
    window; else, for a wait longer than five hours, the 7-day window (no other window lasts that
    long). The wait must fit in the window's length; a reset the headers gave is never replaced."""
    if retry_after is None or retry_after <= 0:
        return view
    missing = {field: length for field, (claim, length) in _WINDOW_CLAIMS.items()
               if isinstance(view.get(field), dict) and view[field].get("resetsAt") is None and retry_after <= length}
    claimed = [field for field in missing if _WINDOW_CLAIMS[field][0] == view.get("representativeClaim")]
    rejected = [field for field in missing if view[field].get("status") == "rejected"]
    if claimed:
        field = claimed[0]
    elif len(rejected) == 1:
        field = rejected[0]
    elif retry_after > FIVE_HOUR_S and "sevenDay" in missing:
        field = "sevenDay"
    else:
        return view
    return dict(view, **{field: dict(view[field], resetsAt=_time.iso_from_epoch(now_s + retry_after))})


# ---------------------------------------------------------------- transport

def provider_url(environ: Mapping[str, str]) -> str:
    return knob_value(environ, PROVIDER_URL)


# ---------------------------------------------------------------- header probe

def probe_account(token: str, environ: Mapping[str, str], timeout_s: float) -> Dict[str, Any]:
    """One header probe; returns {overallStatus, representativeClaim, fiveHour, sevenDay, error}."""
    import json

    body = json.dumps({
        "model": knob_value(environ, PROBE_MODEL),
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "hi"}],
    }).encode("utf-8")
    headers = {
        "authorization": "Bearer " + token,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "oauth-2025-04-20",
        "content-type": "application/json",
        "user-agent": "svcposture/" + __version__,
    }
    try:
        with Exchange(provider_url(environ) + "/v1/messages", timeout_s, headers, data=body,
                      method="POST") as reply:
            status = reply.status
            headers = {k.lower(): v for k, v in reply.headers.items()}
            retry_after = retry_after_s(headers.get("retry-after"))
            try:
                reply.read(65536)
            except Exception:  # noqa: BLE001 - the body is never used
                pass
    except Exception as exc:  # noqa: BLE001 - mapped to the fixed vocabulary
        return dict(_NO_VIEW, error=error(classify_transport(exc)))
    if status in (401, 403):
        return dict(_NO_VIEW, error=error("auth", http_status=status))
    try:
        view = parse_unified_headers(headers)
    except ValueError:
        return dict(_NO_VIEW, error=error("parse", http_status=status))
    if view is None:
        kind = "no_headers" if (200 <= status < 300 or status == 429) else "http"
        return dict(_NO_VIEW, error=error(kind, http_status=status))
    if status == 429:
        import time
        view = reset_from_retry_after(view, retry_after, time.time())
    view["error"] = None
    return view


def unanswered(err: Dict[str, Any]) -> Dict[str, Any]:
    """The view of an account whose probe gave no answer, with `err`."""
    return dict(_NO_VIEW, error=err)


# ---------------------------------------------------------------- usage probe

def fetch_usage(token: str, environ: Mapping[str, str], timeout_s: float, subscription: Optional[str],
                tier: Optional[str]) -> Dict[str, Any]:
    """One usage probe: `{"ok": True, "values": {...}, "extraWindows", "extraUsage"}` or
    `{"ok": False, "error", ["retryAfterS"]}`."""
    headers = {
        "authorization": "Bearer " + token,
        "anthropic-beta": "oauth-2025-04-20",
        "user-agent": "svcposture/" + __version__,
    }
    try:
        with Exchange(provider_url(environ) + "/api/oauth/usage", timeout_s, headers) as reply:
            status = reply.status
            retry_after = retry_after_s(reply.headers.get("retry-after"))
            raw = reply.read(MAX_USAGE_BODY + 1)
    except Exception as exc:  # noqa: BLE001 - mapped to the fixed vocabulary
        return {"ok": False, "error": error(classify_transport(exc))}
    if status in (401, 403):
        return {"ok": False, "error": error("auth", http_status=status)}
    if status == 429:
        return {"ok": False, "error": error("http", MESSAGES["http"].usage_rate_limited, http_status=status),
                "retryAfterS": retry_after}
    if not 200 <= status < 300:
        return {"ok": False, "error": error("http", http_status=status)}
    try:
        body = loads_bounded(raw, MAX_USAGE_BODY)
        values = usage_values(body, subscription, tier)
    except ValueError:
        # Not a JSON object: bad UTF-8, too large or nested too deeply alike. A
        # window that cannot be read is left out by usage_values on its own.
        return {"ok": False, "error": error("parse", MESSAGES["parse"].usage_reply, http_status=status)}
    return dict(usage_extras(body), ok=True, values=values)
