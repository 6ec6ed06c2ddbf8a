"""Codex's part of `svc-monitor demo` (docs/vendors.md): one login, and the usage endpoint's answers to
the demo's simulated window states.

The demo's temporary directory gets one login's CODEX_HOME (an auth.json as
`codex login` writes it) and the demo home's accounts env file the line naming
it; the simulated provider answers `GET /backend-api/wham/usage` for its token
and account id in the endpoint's real shape: windows by their length, resets
in epoch seconds (docs/codex.md). The token is a fixed, public demo value.
Pure: the demo does the writing and the serving.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

from ..vendor import DemoAccount, DemoHome, DemoReply, DemoRequest
from .accounts import CODEX_HOME_PREFIX, LINES
from .child import USAGE_PATH
from .knobs import CODEX_URL

# (name, token, account id, email) of the demo's login; it follows the demo's `pace` story.
LOGIN = ("DEMO", "demo-codex-token-not-a-secret", "demo-codex-account", "hopper@demo.invalid")
HOME_DIR = "codex-home"
FIVE_HOUR_S, SEVEN_DAY_S = 18000, 604800


def usage_body(state: Mapping[str, Any], now_s: float) -> Dict[str, Any]:
    """`GET /backend-api/wham/usage`'s reply for a simulated state at `now_s`."""
    def window(short: str, seconds: int) -> Dict[str, Any]:
        fraction, _, reset = state[short]
        return {"used_percent": round(fraction * 100.0, 1), "limit_window_seconds": seconds,
                "reset_after_seconds": max(0, int(reset - now_s)), "reset_at": int(reset)}
    return {"plan_type": "plus",
            "rate_limit": {"allowed": True, "limit_reached": False,
                           "primary_window": window("5h", FIVE_HOUR_S), "secondary_window": window("7d", SEVEN_DAY_S)},
            "credits": {"has_credits": False, "unlimited": False, "balance": "0"}}


class CodexDemo:
    """The `DemoPart` of Codex."""

    accounts = (DemoAccount(LINES.label(LOGIN[0]), "pace"),)
    url_knobs = (CODEX_URL,)

    def home(self, root: Any, paths: Any) -> DemoHome:
        name, token, account_id, email = LOGIN
        codex_home = root / HOME_DIR
        lines = ("export %s%s='%s'  # %s" % (CODEX_HOME_PREFIX, name, codex_home, email), LINES.export_line(name))
        auth = {"OPENAI_API_KEY": None, "tokens": {"access_token": token, "account_id": account_id}}
        return DemoHome(lines, ((codex_home / "auth.json", auth),))

    def answer(self, request: DemoRequest, state: Callable[[str], Dict[str, Any]],
               now_s: float) -> Optional[DemoReply]:
        if request.method != "GET" or request.path != USAGE_PATH:
            return None
        auth = request.headers.get("authorization") or ""
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        if token != LOGIN[1] or request.headers.get("chatgpt-account-id") != LOGIN[2]:
            return DemoReply(401, {"detail": "Could not validate your token."})
        return DemoReply(200, usage_body(state(self.accounts[0].label), now_s))


DEMO = CodexDemo()
