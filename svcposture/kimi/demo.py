"""Kimi's part of `svc-monitor demo` (docs/vendors.md): one key, and the usages endpoint's answers.

The demo's Kimi account follows the `pace` story: its weekly `usage` and its 300-minute
entry of `limits[]` are that story's figures, the counts as strings, as the endpoint sends
them (reply.py).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from .. import _time
from ..keyvendor.demo import KeyDemo
from .vendor import VENDOR

# (NAME, key, email) of the demo's account: a fixed, public demo value.
ACCOUNT = ("DEMO", "demo-kimi-key-not-a-secret", "moon@demo.invalid")
LIMIT = 100


def _detail(window: Tuple[float, Any, float]) -> Dict[str, str]:
    used = min(LIMIT, int(round(window[0] * LIMIT)))
    return {"limit": str(LIMIT), "used": str(used), "remaining": str(LIMIT - used),
            "resetTime": _time.iso_from_epoch(window[2])}


def usages_body(state: Dict[str, Any], now_s: float) -> Dict[str, Any]:
    """The endpoint's reply for a simulated state: the story's week and 5 hours."""
    return {"usage": _detail(state["7d"]),
            "limits": [{"window": {"duration": 300, "timeUnit": "TIME_UNIT_MINUTE"}, "detail": _detail(state["5h"])}],
            "user": {"membership": {"level": "LEVEL_INTERMEDIATE"}}}


DEMO = KeyDemo(VENDOR, ACCOUNT, "pace", usages_body)
