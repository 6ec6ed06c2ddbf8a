"""acme's part of `svc-monitor demo`: one key, and its quota endpoint's answers to the demo's window states.

Built, like every vendor's part, on the package's public names only
(`svcposture.vendor`): the demo knows it only through the `demo` member.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from svcposture.vendor import DemoAccount, DemoHome, DemoReply, DemoRequest

from .vendor import URL, VENDOR

# (name, key, email) of the demo's one acme account; it follows the demo's `wall` story.
KEY = ("DEMO", "demo-acme-key-not-a-secret", "wile@demo.invalid")
QUOTA_PATH = "/v1/quota"


def quota_reply(five_used: float, seven_used: float, reset_5h: int, reset_7d: int) -> Dict[str, Any]:
    """The endpoint's reply: `used` a fraction, `resets` epoch seconds, the weekly window first."""
    return {"windows": [{"seconds": 604800, "used": seven_used, "resets": reset_7d},
                        {"seconds": 18000, "used": five_used, "resets": reset_5h}]}


class AcmeDemo:
    accounts = (DemoAccount(VENDOR.lines.label(KEY[0]), "wall"),)
    url_knobs = (URL,)

    def home(self, root: Any, paths: Any) -> DemoHome:
        name, key, email = KEY
        lines = ("export %s%s='%s'  # %s" % (VENDOR.lines.entry_prefix, name, key, email),
                 VENDOR.lines.export_line(name))
        return DemoHome(lines, ())

    def answer(self, request: DemoRequest, state: Callable[[str], Dict[str, Any]],
               now_s: float) -> Optional[DemoReply]:
        if request.method != "GET" or request.path != QUOTA_PATH:
            return None
        if request.headers.get("authorization") != "Bearer " + KEY[1]:
            return DemoReply(401, {"error": "bad key"})
        now = state(self.accounts[0].label)
        return DemoReply(200, quota_reply(now["5h"][0], now["7d"][0], int(now["5h"][2]), int(now["7d"][2])))


DEMO = AcmeDemo()
