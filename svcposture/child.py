"""The token-scoped child: what runs after /bin/sh has sourced the accounts env file.

`python -m svcposture.probe headers|usage|check --json --child` lands here
(docs/posture.md). The child takes tokens from its own environment only, probes the
provider and returns token-free data; `probe.main` prints it. Every error it
reports comes from the fixed vocabulary, and anything unexpected becomes
`internal`, never a traceback, which could quote a token.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Mapping, Optional

from . import _time
from ._env import env_number
from ._text import EMAIL_RE, loads_bounded
from .accounts import MAX_ENV_FILE_BYTES, entries_from_env, placeholder_lines, resolve_active, usable
from .errors import MESSAGES, error
from .jsonscan import top_level_member
from .paths import Paths
from .provider import (DEFAULT_REQUEST_TIMEOUT_S, MAX_USAGE_BODY, fetch_usage, probe_account,
                       unanswered)
# The sweep deadline is a knob of the monitor (which kills the child then) as of the child (which answers
# a little before it): its reader lives with the monitor's settings.
from .settings import DEFAULT_DEADLINE_S, MIN_DEADLINE_S, sweep_deadline_s  # noqa: F401

# Header probes in flight at once (docs/posture.md).
MAX_IN_FLIGHT = 4
# ~/.claude.json keeps every project's history and passes a megabyte on a busy machine; it is
# streamed, never loaded, so this bounds only how long the email is looked for.
MAX_PROFILE_BYTES = 32 * 1024 * 1024


def request_timeout_s(environ: Mapping[str, str]) -> float:
    return env_number(environ, "SVC_PROBE_TIMEOUT_S", DEFAULT_REQUEST_TIMEOUT_S, low=0.01)


def main(subcommand: str, environ: Mapping[str, str], env_fd: Optional[int] = None) -> Dict[str, Any]:
    """The child's report for `headers`, `usage`, `login` or `check`; never raises."""
    try:
        if subcommand == "usage":
            return usage(environ)
        if subcommand == "login":
            return login(environ)
        return headers(environ, check_only=(subcommand == "check"), env_fd=env_fd)
    except Exception:  # noqa: BLE001 - never a traceback, it could quote a token
        return {"error": error("internal")}


# ---------------------------------------------------------------- header sweep

def _sweep_budget(environ: Mapping[str, str], started: float) -> float:
    """Seconds left for the probes: the parent's kill instant less a margin."""
    deadline = sweep_deadline_s(environ)
    # Answer a little before the parent's kill so that the accounts that did
    # finish are not lost with the ones that did not.
    margin = min(2.0, deadline * 0.2)
    deadline_at = env_number(environ, "SVC_PROBE_DEADLINE_AT", 0.0, low=0.0)
    if deadline_at > 0:
        return deadline_at - margin - time.time()
    return deadline - margin - (time.monotonic() - started)


def _env_text(env_fd: Optional[int]) -> str:
    """The accounts env file's text, read from the descriptor the parent checked
    and the shell sourced (pread: the shell may have moved its offset)."""
    if env_fd is None:
        raise OSError("no accounts env file descriptor")
    return os.pread(env_fd, MAX_ENV_FILE_BYTES + 1, 0).decode("utf-8", "replace")


def headers(environ: Mapping[str, str], check_only: bool = False, env_fd: Optional[int] = None) -> Dict[str, Any]:
    """Probe every usable entry of the accounts env file (or only list them, `check_only`)."""
    from concurrent.futures import ThreadPoolExecutor, wait

    started = time.monotonic()
    try:
        text = _env_text(env_fd)
    except OSError:
        return {"error": error("config", MESSAGES["config"].unreadable)}
    from .codex.child import CodexSweep

    entries, unusable = entries_from_env(text, environ)
    active, duplicates = resolve_active(entries)
    codex = CodexSweep(text, environ, [e["token"] for e in entries])
    if check_only:
        listed: Dict[str, Any] = {"available": bool(entries), "usable": [e["label"] for e in entries],
                                  "unusable": unusable, "active": active, "duplicateActive": duplicates,
                                  "placeholders": placeholder_lines(text, environ)}
        return _with_codex(listed, codex.check())
    if not entries and not codex.present:
        return {"available": False}
    timeout_s = request_timeout_s(environ)
    budget = _sweep_budget(environ, started)
    pool = ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT)
    # Codex logins get their own pool: Claude's header probes keep their pace whatever Codex does.
    codex_pool = ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT)
    futures = [pool.submit(probe_account, e["token"], environ, timeout_s) for e in entries]
    wait(futures + codex.submit(codex_pool, timeout_s), timeout=max(0.0, budget))
    # Probes still running are abandoned: probe.py exits with os._exit.
    pool.shutdown(wait=False)
    codex_pool.shutdown(wait=False)
    if not entries:
        return _with_codex({"available": False}, codex.block())
    report = {"available": True, "probedAt": _time.now_ms(), "active": active,
              "duplicateActive": duplicates, "accounts": _claude_rows(entries, futures)}
    return _with_codex(report, codex.block())


def _claude_rows(entries: List[Dict[str, Any]], futures: List[Any]) -> List[Dict[str, Any]]:
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
                         "fiveHour": view["fiveHour"], "sevenDay": view["sevenDay"], "error": view["error"]})
    return accounts


def _with_codex(report: Dict[str, Any], block: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The report with its `codex` block, which is there only when the file has a Codex line."""
    if block is not None:
        report["codex"] = block
    return report


# ---------------------------------------------------------------- usage probe

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
    """The interactive login's usage: `{"ok": True, "email", "values"}` or `{"ok": False, "error", ...}`."""
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
    result = fetch_usage(token.strip(), environ, request_timeout_s(environ), subscription, tier)
    if result.get("ok") is not True:
        return result
    return {"ok": True, "email": email, "values": result["values"]}


def login(environ: Mapping[str, str]) -> Dict[str, Any]:
    """Who the interactive login is, without the network: `{"ok", "email"}`.

    The monitor asks before a usage poll, to know which host of the cluster polls
    this login (docs/posture.md); the profile file may hold a key, so only a child reads it.
    """
    paths = Paths(environ=environ)
    if not paths.login_credentials.exists():
        return {"ok": False, "error": error("config", MESSAGES["config"].no_credentials)}
    return {"ok": True, "email": _login_email(paths)}
