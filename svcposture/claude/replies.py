"""The provider's side of the wire format (docs/posture.md), for stand-ins of the provider.

The demo's simulated provider (through Claude's demo part, `demo.py`) and the
test suite's fake provider both answer the header probe and the usage probe;
this module is the one place that turns a window state into what the real
provider sends. Pure functions, no I/O.

A *state* is `{"status": <overall status>, "claim": <representative claim>,
"5h": <window>, "7d": <window>}`; a window is `(utilization, status, reset)`
with the utilization a fraction (1.0 = 100 %) and the reset in epoch seconds,
or None for a window the reply leaves out. Any part that is None is left out
too; a str part is sent verbatim (a fake provider may send garbage on purpose).
"""
from __future__ import annotations

import time
from typing import Any, Dict, Mapping, Optional, Sequence

from .provider import UNIFIED

WINDOWS = ("5h", "7d")


def _text(value: Any, digits: Optional[int] = None) -> str:
    if isinstance(value, str):
        return value
    if digits is not None:
        return "%.*f" % (digits, value)
    return str(value)


def unified_headers(state: Mapping[str, Any], digits: Optional[int] = None) -> Dict[str, str]:
    """The `anthropic-ratelimit-unified-*` headers of one header-probe reply.

    `digits` fixes the decimals of the utilization fractions (None: `str()`)."""
    headers: Dict[str, str] = {}
    if state.get("status") is not None:
        headers[UNIFIED + "status"] = _text(state["status"])
    if state.get("claim") is not None:
        headers[UNIFIED + "representative-claim"] = _text(state["claim"])
    for short in WINDOWS:
        window: Optional[Sequence[Any]] = state.get(short)
        if window is None:
            continue
        fraction, status, reset = window
        if fraction is not None:
            headers[UNIFIED + short + "-utilization"] = _text(fraction, digits)
        if status is not None:
            headers[UNIFIED + short + "-status"] = _text(status)
        if reset is not None:
            headers[UNIFIED + short + "-reset"] = reset if isinstance(reset, str) else str(int(reset))
    return headers


def reply_status(overall_status: Optional[str], http_status: int = 200) -> int:
    """The HTTP status of a header-probe reply: a rejected account gets 429."""
    return 429 if http_status == 200 and overall_status == "rejected" else http_status


def message_body(name: str) -> Dict[str, Any]:
    """The body of a successful `POST /v1/messages` with max_tokens 1."""
    return {"id": "msg_" + name, "type": "message", "role": "assistant", "model": name,
            "content": [{"type": "text", "text": "h"}], "stop_reason": "max_tokens",
            "usage": {"input_tokens": 8, "output_tokens": 1}}


def error_body(kind: str, message: str) -> Dict[str, Any]:
    """The provider's error envelope, e.g. ("rate_limit_error", "rate limited")."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def usage_window(fraction: float, reset: float) -> Dict[str, Any]:
    """One bucket of the usage reply: percent to 1 decimal, `resets_at` ISO with microseconds."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(reset)) + ".000000+00:00"
    return {"utilization": round(fraction * 100, 1), "resets_at": stamp}


def usage_body(five_hour: Any, seven_day: Any, seven_day_opus: Any = None,
               seven_day_sonnet: Any = None) -> Dict[str, Any]:
    """The body of `GET /api/oauth/usage`; each bucket is a usage_window() dict or None."""
    return {"five_hour": five_hour, "seven_day": seven_day, "seven_day_opus": seven_day_opus,
            "seven_day_sonnet": seven_day_sonnet}
