"""z.ai's part of `svc-monitor demo` (docs/vendors.md): one key, and the quota endpoint's answers.

The demo's z.ai account follows the `wall` story: its 5-hour and weekly credit limits are that
story's figures, in the endpoint's envelope with the renamed `CREDIT_LIMIT` type, beside the
monthly tool-call limit (reply.py).
"""
from __future__ import annotations

from typing import Any, Dict

from ..keyvendor.demo import KeyDemo
from .vendor import VENDOR

# (NAME, key, email) of the demo's account: a fixed, public demo value.
ACCOUNT = ("DEMO", "demo-zai-key-not-a-secret", "glm@demo.invalid")


def _credit(unit: int, number: int, fraction: float, reset_s: float) -> Dict[str, Any]:
    return {"type": "CREDIT_LIMIT", "unit": unit, "number": number, "usage": 10000,
            "currentValue": int(10000 * fraction), "remaining": 10000 - int(10000 * fraction),
            "percentage": int(fraction * 100), "nextResetTime": int(reset_s * 1000)}


def quota_body(state: Dict[str, Any], now_s: float) -> Dict[str, Any]:
    """The endpoint's reply for a simulated state: the story's windows as credit limits."""
    limits = [_credit(3, 5, state["5h"][0], state["5h"][2]), _credit(6, 1, state["7d"][0], state["7d"][2]),
              {"type": "TIME_LIMIT", "unit": 5, "number": 1, "usage": 1000, "currentValue": 42, "remaining": 958,
               "percentage": 4, "nextResetTime": int((now_s + 12 * 86400) * 1000)}]
    return {"code": 200, "msg": "Operation successful", "success": True, "data": {"limits": limits, "level": "pro"}}


DEMO = KeyDemo(VENDOR, ACCOUNT, "wall", quota_body)
