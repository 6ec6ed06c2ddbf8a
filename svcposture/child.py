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
from .claude.accounts import ACCOUNT_TOKEN_PREFIX, ACTIVE_TOKEN_VAR, entries_from_env, placeholder_lines, resolve_active
from .codex.accounts import ACTIVE_HOME_VAR, CODEX_HOME_PREFIX, CODEX_LABEL_PREFIX
from .envlint import line_problems, opened_quote_line
from .claude.child import claude_rows, login, request_timeout_s, usage
from .claude.provider import probe_account
from .envfile import MAX_ENV_FILE_BYTES
from .errors import MESSAGES, error
# The sweep deadline is a knob of the monitor (which kills the child then) as of the child (which answers
# a little before it): its reader lives with the monitor's settings.
from .settings import sweep_deadline_s

# Header probes in flight at once (docs/posture.md).
MAX_IN_FLIGHT = 4
# A report names at most this many line problems; a file with more has one mistake made everywhere.
MAX_LINE_PROBLEMS = 50


def main(subcommand: str, environ: Mapping[str, str], env_fd: Optional[int] = None) -> Dict[str, Any]:
    """The child's report for `headers`, `usage`, `login`, `check` or `lines`; never raises."""
    try:
        if subcommand == "lines":
            return lines(env_fd)
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


def line_problems_of(text: str) -> List[Dict[str, Any]]:
    """The account and export lines of both vendors that the shell takes wrongly (envlint), at most 50."""
    vendors = [(ACCOUNT_TOKEN_PREFIX, ""), (CODEX_HOME_PREFIX, CODEX_LABEL_PREFIX)]
    return line_problems(text, vendors, (ACTIVE_TOKEN_VAR, ACTIVE_HOME_VAR))[:MAX_LINE_PROBLEMS]


def lines(env_fd: Optional[int]) -> Dict[str, Any]:
    """What the text of a file the shell stopped in says, read without sourcing it: the
    line problems, the first line that opens a quote it does not close, the number of lines."""
    try:
        text = _env_text(env_fd)
    except OSError:
        return {"error": error("config", MESSAGES["config"].unreadable)}
    return {"lineProblems": line_problems_of(text), "quoteLine": opened_quote_line(text),
            "lineCount": text.count("\n") + (0 if text.endswith("\n") or not text else 1)}


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
                                  "placeholders": placeholder_lines(text, environ),
                                  "lineProblems": line_problems_of(text)}
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
              "duplicateActive": duplicates, "accounts": claude_rows(entries, futures)}
    return _with_codex(report, codex.block())


def _with_codex(report: Dict[str, Any], block: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The report with its `codex` block, which is there only when the file has a Codex line."""
    if block is not None:
        report["codex"] = block
    return report
