"""A key vendor's part of `svc-monitor demo` (docs/vendors.md): one key, and its endpoint's answers.

The demo home's accounts env file gets the key's line and the export line naming it; the
simulated provider answers the vendor's request path for that key, with the scheme the real
endpoint takes, in the reply shape the vendor's own `body(state, now_s)` builds from the demo's
simulated window state; any other key is a 401. The key is a fixed, public demo value.
Pure: the demo does the writing and the serving.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from ..vendor import DemoAccount, DemoHome, DemoReply, DemoRequest


class KeyDemo:
    """The `DemoPart` of a key vendor: `account` is (NAME, key, email), `story` the demo's timeline
    it follows, `body` the endpoint's reply to a window state at the demo's clock."""

    def __init__(self, vendor: Any, account: Tuple[str, str, str], story: str,
                 body: Callable[[Dict[str, Any], float], Any]) -> None:
        self.vendor = vendor
        self.account = account
        self.accounts = (DemoAccount(vendor.lines.label(account[0]), story),)
        self.url_knobs = (vendor.url,)
        self._body = body

    def home(self, root: Any, paths: Any) -> DemoHome:
        name, key, email = self.account
        lines = self.vendor.lines
        return DemoHome(("export %s%s='%s'  # %s" % (lines.entry_prefix, name, key, email),
                         lines.export_line(name)), ())

    def answer(self, request: DemoRequest, state: Callable[[str], Dict[str, Any]],
               now_s: float) -> Optional[DemoReply]:
        if request.method != "GET" or request.path != self.vendor.path:
            return None
        if request.headers.get("authorization") != "%s %s" % (self.vendor.scheme, self.account[1]):
            return DemoReply(401, {"message": "Bad credentials"})
        return DemoReply(200, self._body(state(self.accounts[0].label), now_s))
