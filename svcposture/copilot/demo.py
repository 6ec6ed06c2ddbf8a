"""Copilot's part of `svc-monitor demo` (docs/vendors.md): one token, and `/copilot_internal/user`'s answers.

The demo's Copilot account follows the `weekly` story: its premium requests stand at that
story's weekly figure, renewing at its weekly reset, out of a Pro plan's 300; chat and
completions are unlimited, as on a paid plan. The shape is the endpoint's (reply.py).
"""
from __future__ import annotations

from typing import Any, Dict

from .. import _time
from ..keyvendor.demo import KeyDemo
from .vendor import VENDOR

# (NAME, token, email) of the demo's account: a fixed, public demo value.
ACCOUNT = ("DEMO", "demo-copilot-token-not-a-secret", "octo@demo.invalid")
PREMIUM = 300


def user_body(state: Dict[str, Any], now_s: float) -> Dict[str, Any]:
    """The endpoint's reply for a simulated state: premium requests at the weekly figure."""
    fraction, _status, reset = state["7d"]
    left = round(PREMIUM * (1.0 - fraction), 1)
    unlimited = {"entitlement": 0, "remaining": 0, "percent_remaining": 100.0, "unlimited": True}
    return {"login": "octo-demo", "copilot_plan": "individual_pro", "access_type_sku": "copilot_pro",
            "quota_reset_date_utc": _time.iso_from_epoch(reset),
            "quota_snapshots": {"chat": dict(unlimited, quota_id="chat"),
                                "completions": dict(unlimited, quota_id="completions"),
                                "premium_interactions": {"entitlement": PREMIUM, "remaining": left,
                                                         "percent_remaining": round(left / PREMIUM * 100, 3),
                                                         "unlimited": False, "quota_id": "premium_interactions"}}}


DEMO = KeyDemo(VENDOR, ACCOUNT, "weekly", user_body)
