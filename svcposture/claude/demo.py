"""Claude's part of `svc-monitor demo` (docs/vendors.md): three accounts, this machine's login, and
the provider's answers to the demo's simulated window states.

The demo home gets three `MODEL_TOKEN_*` accounts (acct1 active) and an
interactive login (the credentials and profile files of Claude Code) that is
acct1's; the simulated provider answers the header probe (`POST /v1/messages`)
of each account's token and the usage probe (`GET /api/oauth/usage`) of the
login's, in the wire format of `replies`. The tokens are fixed, public demo
values, not secrets. Pure: the demo does the writing and the serving.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from ..vendor import DemoAccount, DemoHome, DemoReply, DemoRequest
from .accounts import ACCOUNT_TOKEN_PREFIX, LINES
from .knobs import PROVIDER_URL
from .replies import error_body, message_body, reply_status, unified_headers, usage_body, usage_window

# (suffix, token, email, the demo's story): acct1 cycles, acct2 climbs to a wall, acct3 is near its week.
ACCOUNTS = (
    ("ACCT1", "demo-token-acct1-not-a-secret", "ada@demo.invalid", "cycle"),
    ("ACCT2", "demo-token-acct2-not-a-secret", "grace@demo.invalid", "wall"),
    ("ACCT3", "demo-token-acct3-not-a-secret", "linus@demo.invalid", "weekly"),
)
# This machine's interactive login: acct1's, with its own token.
LOGIN_TOKEN = "demo-login-token-not-a-secret"
MESSAGES_PATH = "/v1/messages"
USAGE_PATH = "/api/oauth/usage"


def _bearer(request: DemoRequest) -> str:
    auth = request.headers.get("authorization") or ""
    return auth[7:].strip() if auth.lower().startswith("bearer ") else ""


class ClaudeDemo:
    """The `DemoPart` of Claude."""

    accounts = tuple(DemoAccount(LINES.label(suffix), story) for suffix, _token, _email, story in ACCOUNTS)
    url_knobs = (PROVIDER_URL,)

    def __init__(self) -> None:
        self._labels = {token: LINES.label(suffix) for suffix, token, _email, _story in ACCOUNTS}

    def home(self, root: Any, paths: Any) -> DemoHome:
        lines = tuple("export %s%s='%s'  # %s" % (ACCOUNT_TOKEN_PREFIX, suffix, token, email)
                      for suffix, token, email, _story in ACCOUNTS) + (LINES.export_line(ACCOUNTS[0][0]),)
        files = ((paths.login_credentials, {"claudeAiOauth": {
                     "accessToken": LOGIN_TOKEN, "subscriptionType": "max", "rateLimitTier": "default_demo"}}),
                 (paths.login_profile, {"oauthAccount": {"emailAddress": ACCOUNTS[0][2]}}))
        return DemoHome(lines, files)

    def answer(self, request: DemoRequest, state: Callable[[str], Dict[str, Any]],
               now_s: float) -> Optional[DemoReply]:
        if request.method == "POST" and request.path == MESSAGES_PATH:
            return self._messages(request, state)
        if request.method == "GET" and request.path == USAGE_PATH:
            if _bearer(request) != LOGIN_TOKEN:
                return DemoReply(401, error_body("authentication_error", "invalid bearer token"))
            now = state(self.accounts[0].label)
            return DemoReply(200, usage_body(usage_window(now["5h"][0], now["5h"][2]),
                                             usage_window(now["7d"][0], now["7d"][2]),
                                             seven_day_opus={"utilization": 12.0, "resets_at": None}))
        return None

    def _messages(self, request: DemoRequest, state: Callable[[str], Dict[str, Any]]) -> DemoReply:
        """The header probe: the account's windows in the unified headers, 429 when it is rejected."""
        label = self._labels.get(_bearer(request))
        if label is None:
            return DemoReply(401, error_body("authentication_error", "invalid bearer token"))
        now = state(label)
        headers: Tuple[Tuple[str, str], ...] = tuple(unified_headers(now, digits=4).items())
        if reply_status(now["status"]) == 429:
            return DemoReply(429, error_body("rate_limit_error", "rate limited"), headers)
        return DemoReply(200, message_body("demo"), headers)


DEMO = ClaudeDemo()
