"""The token-scoped child's Claude part (docs/posture.md): the header probes' rows, the login's usage and email.

The child takes tokens from its own environment only and returns token-free
data; every error it reports comes from the fixed vocabulary. The sweep that
runs these beside the Codex logins is svcposture/child.py.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional

from .._text import EMAIL_RE, loads_bounded
from ..envfile.entries import usable
from .errors import MESSAGES, error
from .jsonscan import top_level_member
from ..paths import Paths
from ..settings import probe_timeout_s
from .provider import MAX_USAGE_BODY, fetch_usage, unanswered

# ~/.claude.json keeps every project's history and passes a megabyte on a busy machine; it is
# streamed, never loaded, so this bounds only how long the email is looked for.
MAX_PROFILE_BYTES = 32 * 1024 * 1024


def claude_rows(entries: List[Dict[str, Any]], futures: List[Any]) -> List[Dict[str, Any]]:
    accounts = []
    for entry, future in zip(entries, futures):
        if future.done() and future.exception() is None:
            view = future.result()
        else:
            view = unanswered(error("internal") if future.done()
                              else error("timeout", MESSAGES["timeout"].sweep_deadline))
        accounts.append({"label": entry["label"], "email": entry["email"], "active": entry["active"],
                         "overallStatus": view["overallStatus"],
                         "representativeClaim": view["representativeClaim"],
                         "fiveHour": view["fiveHour"], "sevenDay": view["sevenDay"], "error": view["error"],
                         "envLine": entry.get("line")})
    return accounts


def _json_file(path: "os.PathLike[str] | str") -> Any:
    with open(str(path), "rb") as fh:
        return loads_bounded(fh.read(MAX_USAGE_BODY + 1), MAX_USAGE_BODY)


def _optional_str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value.strip() and len(value) <= 200 else None


def _login_email(paths: Paths) -> Optional[str]:
    """`oauthAccount.emailAddress` of the login profile, when it is an address. The profile
    grows with every project's history, so only that member is read, from a stream."""
    try:
        with open(str(paths.login_profile), "rb") as fh:
            account = top_level_member(fh, "oauthAccount", limit=MAX_PROFILE_BYTES)
    except (OSError, ValueError):
        return None
    address = account.get("emailAddress") if isinstance(account, dict) else None
    if isinstance(address, str) and EMAIL_RE.fullmatch(address.strip()):
        return address.strip()
    return None


def usage(environ: Mapping[str, str]) -> Dict[str, Any]:
    """The interactive login's usage: `{"ok": True, "email", "values", "extraWindows", "extraUsage"}` or
    `{"ok": False, "error", ...}`."""
    paths = Paths(environ=environ)
    creds_path = paths.login_credentials
    if not creds_path.exists():
        return {"ok": False, "error": error("config", MESSAGES["config"].no_credentials)}
    try:
        creds = _json_file(creds_path)
    except OSError:
        return {"ok": False, "error": error("config", MESSAGES["config"].credentials_unreadable)}
    except ValueError:
        return {"ok": False, "error": error("config", MESSAGES["config"].credentials_shape)}
    oauth = creds.get("claudeAiOauth") if isinstance(creds, dict) else None
    if not isinstance(oauth, dict):
        return {"ok": False, "error": error("config", MESSAGES["config"].credentials_shape)}
    token = oauth.get("accessToken")
    if not isinstance(token, str) or not usable(token):
        return {"ok": False, "error": error("auth", MESSAGES["auth"].no_access_token)}
    subscription = _optional_str(oauth.get("subscriptionType"))
    tier = _optional_str(oauth.get("rateLimitTier"))
    email = _login_email(paths)
    result = fetch_usage(token.strip(), environ, probe_timeout_s(environ), subscription, tier)
    if result.get("ok") is not True:
        return result
    return {"ok": True, "email": email, "values": result["values"], "extraWindows": result.get("extraWindows"),
            "extraUsage": result.get("extraUsage")}


def login(environ: Mapping[str, str]) -> Dict[str, Any]:
    """Who the interactive login is, without the network: `{"ok", "email"}`.

    The monitor asks before a usage poll, to know which host of the cluster polls
    this login (docs/posture.md); the profile file may hold a key, so only a child reads it.
    """
    paths = Paths(environ=environ)
    if not paths.login_credentials.exists():
        return {"ok": False, "error": error("config", MESSAGES["config"].no_credentials)}
    return {"ok": True, "email": _login_email(paths)}
