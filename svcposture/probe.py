"""The token-scoped probe child and the two provider probes.

Two halves live here:

- The parent side (run by the monitor): it only `stat`s the accounts env file,
  never reads it, and starts a child through `/bin/sh`, which sources the file
  and `exec`s `python -m <this module> headers|usage|check --json`. The child
  inherits no token variable, so only the file decides; it is killed at the
  sweep deadline. What comes back is token-free JSON.
- The child side (`--child`, set by the parent): it reads tokens from its own
  environment only, probes the provider and prints token-free JSON. Every error
  it reports is one of a fixed vocabulary of kinds and sentences; raw stderr,
  exception text and response bodies never reach the output, since any of
  them could carry a token.

Run by hand, `python -m svcposture.probe headers --json` does the parent half
(so the result is exactly what the monitor would see).
"""
from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import _time
from ._spawn import PACKAGE, without_tokens
from ._spawn import child_env as spawn_env
from ._version import __version__
from .errors import ERROR_KINDS, KNOWN_MESSAGES, MESSAGES, error
from .paths import Paths

DEFAULT_PROVIDER_URL = "https://api.anthropic.com"
DEFAULT_PROBE_MODEL = "claude-haiku-4-5-20251001"
DEFAULT_DEADLINE_S = 30.0
DEFAULT_REQUEST_TIMEOUT_S = 10.0
MAX_IN_FLIGHT = 4
PLACEHOLDER = "PASTE_TOKEN_HERE"
TOKEN_PREFIX = "MODEL_TOKEN_"
ACTIVE_VAR = "MODEL_CODE_OAUTH_TOKEN"
UNIFIED = "anthropic-ratelimit-unified-"
# An env file is sourced as shell; a file this large is not an accounts file.
MAX_ENV_FILE_BYTES = 1024 * 1024
# What the parent keeps of the child's stdout; a runaway file cannot fill memory.
MAX_CHILD_OUTPUT = 4 * 1024 * 1024
MAX_USAGE_BODY = 1024 * 1024
# Backoff on 429 never waits longer than this.
MAX_BACKOFF_S = 15 * 60


_ENTRY_RE = re.compile(r"^\s*(?:export\s+)?MODEL_TOKEN_([A-Za-z0-9_]+)=(.*)$")
_EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_WORD_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class ProbeConfigError(OSError):
    """The accounts env file must not be sourced (unreadable, unsafe, not a file)."""


def env_float(environ: Mapping[str, str], name: str, default: float, minimum: float = 0.0) -> float:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        return default
    if value != value or value in (float("inf"), float("-inf")) or value < minimum:
        return default
    return value


# ---------------------------------------------------------------- parent side

def strip_token_env(environ: Mapping[str, str]) -> Dict[str, str]:
    """A copy of `environ` without the active-token variable and every MODEL_TOKEN_*."""
    return without_tokens(environ)


def env_file_state(path: "os.PathLike[str] | str") -> Tuple[str, Optional[Dict[str, Any]]]:
    """('missing'|'empty'|'ready'|'error', error) from `stat` alone; the file is never opened.

    The permission check comes first: an empty file that others may write is
    still refused, since it is about to be sourced as shell.
    """
    try:
        st = os.stat(str(path))
    except FileNotFoundError:
        return "missing", None
    except NotADirectoryError:
        return "missing", None
    except OSError:
        return "error", error("config", MESSAGES["config"][1])
    if not stat.S_ISREG(st.st_mode):
        return "error", error("config", MESSAGES["config"][2])
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "error", error("config", MESSAGES["config"][0])
    # Whoever owns the file can run code as this user through it.
    if st.st_uid not in (os.geteuid(), 0):
        return "error", error("config", MESSAGES["config"][7])
    if not os.access(str(path), os.R_OK):
        return "error", error("config", MESSAGES["config"][1])
    if st.st_size == 0:
        return "empty", None
    if st.st_size > MAX_ENV_FILE_BYTES:
        return "error", error("config", MESSAGES["config"][3])
    return "ready", None


def child_env(environ: Mapping[str, str], accounts_env: Optional[Path]) -> Dict[str, str]:
    env = spawn_env(environ)
    env["PYTHON"] = sys.executable or "python3"
    if accounts_env is not None:
        env["SVC_ACCOUNTS_ENV"] = str(accounts_env)
    return env


def child_command(subcommand: str, sourced: bool) -> List[str]:
    module = PACKAGE + ".probe"
    if sourced:
        script = ('set -a; . "$SVC_ACCOUNTS_ENV"; set +a; exec "$PYTHON" -m %s %s --json --child'
                  % (module, subcommand))
        return ["/bin/sh", "-c", script]
    return [sys.executable or "python3", "-m", module, subcommand, "--json", "--child"]


def _wait_exit(proc: "subprocess.Popen[bytes]", deadline: float, cancel: Optional[threading.Event]) -> str:
    """'exited', 'timeout' or 'cancelled'. The child is not reaped, so its process
    group id stays valid (and cannot be reused) until the group has been killed."""
    waitid = getattr(os, "waitid", None)
    delay = 0.001
    while True:
        if waitid is not None:
            try:
                if waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return "exited"
            except ChildProcessError:
                return "exited"
        elif proc.poll() is not None:
            return "exited"
        if cancel is not None and cancel.is_set():
            return "cancelled"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.02)


def run_child(subcommand: str, environ: Mapping[str, str], *, accounts_env: Optional[Path] = None,
              deadline_s: Optional[float] = None, cancel: Optional[threading.Event] = None) -> Dict[str, Any]:
    """Run one probe child and return its JSON object.

    With `accounts_env`, the child is started through /bin/sh sourcing that file.
    Always returns a dict: a child that crashes, times out or prints no JSON
    gives `{"error": {...}}` in the fixed vocabulary. Nothing the child wrote to
    stderr is read, and stdout is used only through its last JSON line. Setting
    `cancel` kills the child early (the monitor is stopping).
    """
    import json

    if deadline_s is None:
        deadline_s = env_float(environ, "SVC_PROBE_DEADLINE_S", DEFAULT_DEADLINE_S, minimum=0.1)
    env = child_env(environ, accounts_env)
    env["SVC_PROBE_DEADLINE_S"] = repr(float(deadline_s))
    # Wall-clock instant of the kill, so that the child's budget includes its own start-up.
    env["SVC_PROBE_DEADLINE_AT"] = repr(time.time() + float(deadline_s))
    try:
        proc = subprocess.Popen(child_command(subcommand, accounts_env is not None), env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, cwd="/", close_fds=True,
                                start_new_session=True)
    except OSError:
        return {"error": error("internal", MESSAGES["internal"][2])}
    tail = bytearray()

    def drain() -> None:
        # Keep only the last MAX_CHILD_OUTPUT bytes: the result is the last line,
        # and whatever the sourced file printed before it cannot fill memory.
        assert proc.stdout is not None
        while True:
            block = proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else proc.stdout.read(65536)
            if not block:
                return
            tail.extend(block)
            if len(tail) > MAX_CHILD_OUTPUT:
                del tail[:len(tail) - MAX_CHILD_OUTPUT]

    reader = threading.Thread(target=drain, name="probe-child-reader", daemon=True)
    reader.start()
    outcome = _wait_exit(proc, time.monotonic() + float(deadline_s), cancel)
    # The env file may have started background jobs; the whole session goes.
    _kill_group(proc.pid)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    reader.join(2)
    try:
        assert proc.stdout is not None
        proc.stdout.close()
    except (OSError, ValueError):
        pass
    if outcome == "timeout":
        return {"error": error("timeout", MESSAGES["timeout"][1])}
    if outcome == "cancelled":
        return {"error": error("internal", MESSAGES["internal"][3])}
    out = bytes(tail)
    for line in reversed(out.splitlines()):
        line = line.strip()
        if not line.startswith(b"{"):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            return obj
    if proc.returncode != 0:
        return {"error": error("internal", MESSAGES["internal"][0])}
    return {"error": error("internal", MESSAGES["internal"][1])}


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def run_headers(paths: Paths, environ: Optional[Mapping[str, str]] = None,
                deadline_s: Optional[float] = None, cancel: Optional[threading.Event] = None) -> Dict[str, Any]:
    """The header sweep as the monitor runs it.

    Returns `{"available": False}` (disabled), `{"error": {...}}` (node-level
    error) or the child's report `{"available": True, "accounts": [...], ...}`.
    """
    environ = paths.environ if environ is None else environ
    path = paths.accounts_env
    state, problem = env_file_state(path)
    if state in ("missing", "empty"):
        return {"available": False}
    if problem is not None:
        return {"error": problem}
    return run_child("headers", environ, accounts_env=Path(os.path.abspath(str(path))), deadline_s=deadline_s,
                     cancel=cancel)


def run_check(paths: Paths, environ: Optional[Mapping[str, str]] = None,
              deadline_s: Optional[float] = None) -> Dict[str, Any]:
    """The doctor's view, no network: usable entries, active label, duplicate active tokens."""
    environ = paths.environ if environ is None else environ
    path = paths.accounts_env
    state, problem = env_file_state(path)
    if state in ("missing", "empty"):
        return {"available": False, "file": state, "usable": [], "unusable": [], "active": None,
                "duplicateActive": []}
    if problem is not None:
        return {"error": problem}
    return run_child("check", environ, accounts_env=Path(os.path.abspath(str(path))), deadline_s=deadline_s)


def run_usage(paths: Paths, environ: Optional[Mapping[str, str]] = None,
              deadline_s: Optional[float] = None, cancel: Optional[threading.Event] = None) -> Dict[str, Any]:
    """The interactive-login usage probe, in a token-free child."""
    environ = paths.environ if environ is None else environ
    return run_child("usage", environ, deadline_s=deadline_s, cancel=cancel)


# ---------------------------------------------------------------- env file text

def comment_of(rest: str) -> Optional[str]:
    """The inline comment of an assignment's right-hand side (quote-aware), or None."""
    quote = ""
    prev = " "
    i = 0
    while i < len(rest):
        ch = rest[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                prev = "x"
                continue
            if ch == quote:
                quote = ""
        elif ch == "\\":
            i += 2
            prev = "x"
            continue
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "#" and prev in (" ", "\t"):
            return rest[i + 1:]
        prev = ch
        i += 1
    return None


def parse_entries(text: str) -> List[Tuple[str, Optional[str]]]:
    """[(SUFFIX, email)] in file order from the env file text; values are not looked at.

    A suffix defined twice keeps its first position and the last line's email,
    as the shell keeps the last value.
    """
    order: List[str] = []
    emails: Dict[str, Optional[str]] = {}
    for line in text.splitlines():
        m = _ENTRY_RE.match(line)
        if not m:
            continue
        suffix = m.group(1)
        email: Optional[str] = None
        comment = comment_of(m.group(2))
        if comment is not None:
            found = _EMAIL_RE.search(comment)
            if found and len(found.group(0)) <= 254:
                email = found.group(0)
        if suffix not in emails:
            order.append(suffix)
        emails[suffix] = email
    return [(s, emails[s]) for s in order]


def usable(value: Optional[str]) -> bool:
    if value is None:
        return False
    value = value.strip()
    return bool(value) and value != PLACEHOLDER


def entries_from_env(text: str, environ: Mapping[str, str]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Usable entries (label, email, token, active) in file order, plus unusable labels.

    Tokens come from `environ` (the child's own, after sourcing) only.
    """
    seen = parse_entries(text)
    known = {s for s, _ in seen}
    # Anything the file defined in a way the line parser does not see still counts.
    for name in sorted(environ):
        if name.startswith(TOKEN_PREFIX) and re.match(r"^[A-Za-z0-9_]+$", name[len(TOKEN_PREFIX):]):
            suffix = name[len(TOKEN_PREFIX):]
            if suffix not in known:
                seen.append((suffix, None))
                known.add(suffix)
    active_token = environ.get(ACTIVE_VAR) or ""
    entries: List[Dict[str, Any]] = []
    unusable: List[str] = []
    labels = set()
    for suffix, email in seen:
        label = suffix.lower()
        if label in labels:
            continue
        labels.add(label)
        value = environ.get(TOKEN_PREFIX + suffix)
        if not usable(value):
            unusable.append(label)
            continue
        token = value.strip() if value is not None else ""
        entries.append({"label": label, "email": email, "token": token,
                        "active": bool(active_token.strip()) and token == active_token.strip()})
    return entries, unusable


def _resolve_active(entries: List[Dict[str, Any]]) -> Tuple[Optional[str], List[str]]:
    matching = [e["label"] for e in entries if e["active"]]
    first = matching[0] if matching else None
    for e in entries:
        e["active"] = e["label"] == first
    return first, (matching if len(matching) > 1 else [])


# ---------------------------------------------------------------- header parsing

def pct_from_fraction(raw: str) -> float:
    """'0.123' -> 12.3 (fraction x 100, half-up to one decimal). ValueError on junk."""
    try:
        value = Decimal(raw.strip())
    except (InvalidOperation, AttributeError):
        raise ValueError("not a number") from None
    # A fraction beyond 10^6 (10^8 %) is not a utilization; it also keeps the
    # decimal arithmetic below from overflowing.
    if not value.is_finite() or value < 0 or value > 1000000:
        raise ValueError("not a usable fraction")
    try:
        return float((value * 100).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))
    except ArithmeticError:
        raise ValueError("not a usable fraction") from None


def iso_from_reset(raw: str) -> str:
    try:
        value = Decimal(raw.strip())
    except (InvalidOperation, AttributeError):
        raise ValueError("not a number") from None
    if not value.is_finite() or value < 0 or value > Decimal(10) ** 11:
        raise ValueError("not a usable epoch")
    try:
        return _time.iso_from_epoch(float(value))
    except (ArithmeticError, OverflowError):
        raise ValueError("not a usable epoch") from None


def _word(raw: Optional[str]) -> Optional[str]:
    if raw is None:
        return None
    value = raw.strip()
    if not _WORD_RE.match(value):
        raise ValueError("not a status word")
    return value


def parse_unified_headers(headers: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    """The `anthropic-ratelimit-unified-*` headers (lower-case keys) to a token-free view.

    None when there is no such header at all. ValueError when a value does not
    parse. A window is present when any of its three headers is.
    """
    unified = {k[len(UNIFIED):]: v for k, v in headers.items() if k.startswith(UNIFIED)}
    if not unified:
        return None
    view: Dict[str, Any] = {
        "overallStatus": _word(unified.get("status")),
        "representativeClaim": _word(unified.get("representative-claim")),
    }
    for short, field in (("5h", "fiveHour"), ("7d", "sevenDay")):
        util = unified.get(short + "-utilization")
        reset = unified.get(short + "-reset")
        status = unified.get(short + "-status")
        if util is None and reset is None and status is None:
            view[field] = None
            continue
        view[field] = {
            "pct": pct_from_fraction(util) if util is not None else None,
            "resetsAt": iso_from_reset(reset) if reset is not None else None,
            "status": _word(status),
        }
    return view


# ---------------------------------------------------------------- child side

def _provider_url(environ: Mapping[str, str]) -> str:
    return (environ.get("SVC_PROVIDER_URL") or DEFAULT_PROVIDER_URL).rstrip("/")


def _classify_transport(exc: BaseException) -> str:
    import socket

    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, (socket.timeout, TimeoutError)):
            return "timeout"
        reason = getattr(exc, "reason", None)
        exc = reason if isinstance(reason, BaseException) else exc.__cause__ or exc.__context__
        seen += 1
    return "transport"


def _open_any_status(request: Any, timeout_s: float) -> Any:
    """The response whatever its status: the rate-limit headers ride on 429s too."""
    import urllib.error
    try:
        return _opener(request.full_url).open(request, timeout=timeout_s)
    except urllib.error.HTTPError as exc:
        return exc


def _opener(url: str) -> Any:
    """A URL opener that never follows redirects; loopback never goes through a proxy."""
    import urllib.parse
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        # A redirect would carry the bearer token to wherever it points.
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host in ("localhost", "::1") or host.startswith("127."):
        return urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect())
    return urllib.request.build_opener(NoRedirect())


def probe_account(token: str, environ: Mapping[str, str], timeout_s: float) -> Dict[str, Any]:
    """One header probe; returns {overallStatus, representativeClaim, fiveHour, sevenDay, error}."""
    import json
    import urllib.error
    import urllib.request

    empty = {"overallStatus": None, "representativeClaim": None, "fiveHour": None, "sevenDay": None}
    body = json.dumps({
        "model": environ.get("SVC_PROBE_MODEL") or DEFAULT_PROBE_MODEL,
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "hi"}],
    }).encode("utf-8")
    request = urllib.request.Request(_provider_url(environ) + "/v1/messages", data=body, method="POST", headers={
        "authorization": "Bearer " + token,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "oauth-2025-04-20",
        "content-type": "application/json",
        "user-agent": "svcposture/" + __version__,
    })
    status: Optional[int] = None
    try:
        with _open_any_status(request, timeout_s) as response:
            status = int(response.getcode() or 0)
            headers = {k.lower(): v for k, v in response.headers.items()}
            try:
                response.read(65536)
            except Exception:  # noqa: BLE001 - the body is never used
                pass
    except Exception as exc:  # noqa: BLE001 - mapped to the fixed vocabulary
        return dict(empty, error=error(_classify_transport(exc)))
    if status in (401, 403):
        return dict(empty, error=error("auth", http_status=status))
    try:
        view = parse_unified_headers(headers)
    except ValueError:
        return dict(empty, error=error("parse", http_status=status))
    if view is None:
        kind = "no_headers" if (200 <= status < 300 or status == 429) else "http"
        return dict(empty, error=error(kind, http_status=status))
    view["error"] = None
    return view


def _child_headers(environ: Mapping[str, str], check_only: bool) -> Dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor, wait

    started = time.monotonic()
    path = environ.get("SVC_ACCOUNTS_ENV") or ""
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_ENV_FILE_BYTES + 1).decode("utf-8", "replace")
    except OSError:
        return {"error": error("config", MESSAGES["config"][1])}
    entries, unusable = entries_from_env(text, environ)
    active, duplicates = _resolve_active(entries)
    if check_only:
        return {"available": bool(entries), "usable": [e["label"] for e in entries], "unusable": unusable,
                "active": active, "duplicateActive": duplicates}
    if not entries:
        return {"available": False}
    timeout_s = env_float(environ, "SVC_PROBE_TIMEOUT_S", DEFAULT_REQUEST_TIMEOUT_S, minimum=0.01)
    deadline_s = env_float(environ, "SVC_PROBE_DEADLINE_S", DEFAULT_DEADLINE_S, minimum=0.1)
    # Answer a little before the parent's kill so that the accounts that did
    # finish are not lost with the ones that did not.
    margin = min(2.0, deadline_s * 0.2)
    deadline_at = env_float(environ, "SVC_PROBE_DEADLINE_AT", 0.0)
    if deadline_at > 0:
        budget = deadline_at - margin - time.time()
    else:
        budget = deadline_s - margin - (time.monotonic() - started)
    pool = ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT)
    futures = [pool.submit(probe_account, e["token"], environ, timeout_s) for e in entries]
    wait(futures, timeout=max(0.0, budget))
    accounts = []
    for entry, future in zip(entries, futures):
        if future.done() and future.exception() is None:
            view = future.result()
        else:
            view = {"overallStatus": None, "representativeClaim": None, "fiveHour": None, "sevenDay": None,
                    "error": error("internal") if future.done() else error("timeout", MESSAGES["timeout"][1])}
        accounts.append({"label": entry["label"], "email": entry["email"], "active": entry["active"],
                         "overallStatus": view["overallStatus"],
                         "representativeClaim": view["representativeClaim"],
                         "fiveHour": view["fiveHour"], "sevenDay": view["sevenDay"], "error": view["error"]})
    pool.shutdown(wait=False)
    return {"available": True, "probedAt": _time.now_ms(), "active": active,
            "duplicateActive": duplicates, "accounts": accounts}


def _json_file(path: Path) -> Any:
    import json

    with open(str(path), "rb") as fh:
        raw = fh.read(MAX_USAGE_BODY + 1)
    if len(raw) > MAX_USAGE_BODY:
        raise ValueError("too large")
    return json.loads(raw.decode("utf-8"))


def _optional_str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value.strip() and len(value) <= 200 else None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
        and value not in (float("inf"), float("-inf"))


def usage_values(body: Any, subscription: Optional[str], tier: Optional[str]) -> Dict[str, Any]:
    """The usage reply to {contract key: value}; ValueError when a present window is malformed.

    Null or missing windows and values are left out (absent means unknown).
    """
    if not isinstance(body, dict):
        raise ValueError("usage reply is not an object")
    values: Dict[str, Any] = {}
    for source, pct_key, reset_key in (
            ("five_hour", "ratelimit.five_hour_pct", "ratelimit.five_hour_resets_at"),
            ("seven_day", "ratelimit.seven_day_pct", "ratelimit.seven_day_resets_at"),
            ("seven_day_opus", "ratelimit.seven_day_large_pct", None),
            ("seven_day_sonnet", "ratelimit.seven_day_medium_pct", None)):
        window = body.get(source)
        if window is None:
            continue
        if not isinstance(window, dict):
            raise ValueError("window is not an object")
        util = window.get("utilization")
        if util is not None:
            if not _number(util) or util < 0:
                raise ValueError("utilization is not a number")
            values[pct_key] = util
        resets = window.get("resets_at")
        if reset_key is not None and resets is not None:
            values[reset_key] = _time.normalize_iso(resets)
    if subscription is not None:
        values["subscription.type"] = subscription
    if tier is not None:
        values["rate_limit.tier"] = tier
    return values


def _retry_after_s(raw: Optional[str]) -> Optional[float]:
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        if value == value and 0 <= value < float("inf"):
            return value
        return None
    except ValueError:
        pass
    try:
        import email.utils

        stamp = email.utils.parsedate_to_datetime(raw)
        if stamp is None:
            return None
        return max(0.0, stamp.timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _child_usage(environ: Mapping[str, str]) -> Dict[str, Any]:
    import json
    import urllib.error
    import urllib.request

    paths = Paths(environ=environ)
    creds_path = paths.login_credentials
    if not creds_path.exists():
        return {"ok": False, "error": error("config", MESSAGES["config"][6])}
    try:
        creds = _json_file(creds_path)
    except OSError:
        return {"ok": False, "error": error("config", MESSAGES["config"][5])}
    except (ValueError, RecursionError):
        return {"ok": False, "error": error("config", MESSAGES["config"][4])}
    oauth = creds.get("claudeAiOauth") if isinstance(creds, dict) else None
    if not isinstance(oauth, dict):
        return {"ok": False, "error": error("config", MESSAGES["config"][4])}
    token = oauth.get("accessToken")
    if not isinstance(token, str) or not usable(token):
        return {"ok": False, "error": error("auth", MESSAGES["auth"][1])}
    subscription = _optional_str(oauth.get("subscriptionType"))
    tier = _optional_str(oauth.get("rateLimitTier"))
    email: Optional[str] = None
    try:
        profile = _json_file(paths.login_profile)
        account = profile.get("oauthAccount") if isinstance(profile, dict) else None
        address = account.get("emailAddress") if isinstance(account, dict) else None
        if isinstance(address, str) and _EMAIL_RE.fullmatch(address.strip()):
            email = address.strip()
    except (OSError, ValueError, RecursionError):
        email = None
    timeout_s = env_float(environ, "SVC_PROBE_TIMEOUT_S", DEFAULT_REQUEST_TIMEOUT_S, minimum=0.01)
    request = urllib.request.Request(_provider_url(environ) + "/api/oauth/usage", method="GET", headers={
        "authorization": "Bearer " + token.strip(),
        "anthropic-beta": "oauth-2025-04-20",
        "user-agent": "svcposture/" + __version__,
    })
    try:
        with _open_any_status(request, timeout_s) as response:
            status = int(response.getcode() or 0)
            retry_after = _retry_after_s(response.headers.get("retry-after"))
            raw = response.read(MAX_USAGE_BODY + 1)
    except Exception as exc:  # noqa: BLE001 - mapped to the fixed vocabulary
        return {"ok": False, "error": error(_classify_transport(exc))}
    if status in (401, 403):
        return {"ok": False, "error": error("auth", http_status=status)}
    if status == 429:
        return {"ok": False, "error": error("http", MESSAGES["http"][1], http_status=status),
                "retryAfterS": retry_after}
    if not 200 <= status < 300:
        return {"ok": False, "error": error("http", http_status=status)}
    try:
        if len(raw) > MAX_USAGE_BODY:
            raise ValueError("too large")
        values = usage_values(json.loads(raw.decode("utf-8")), subscription, tier)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return {"ok": False, "error": error("parse", MESSAGES["parse"][1], http_status=status)}
    return {"ok": True, "email": email, "values": values}


def child_main(subcommand: str, environ: Mapping[str, str]) -> Dict[str, Any]:
    try:
        if subcommand == "usage":
            return _child_usage(environ)
        return _child_headers(environ, check_only=(subcommand == "check"))
    except Exception:  # noqa: BLE001 - never a traceback, it could quote a token
        return {"error": error("internal")}


# ---------------------------------------------------------------- command line

def _human(subcommand: str, result: Dict[str, Any]) -> str:
    if result.get("error"):
        return "error (%s): %s" % (result["error"].get("kind"), result["error"].get("message"))
    if subcommand == "usage":
        if not result.get("ok"):
            return "usage probe failed"
        lines = ["email: %s" % (result.get("email") or "-")]
        lines += ["%s: %s" % (k, v) for k, v in sorted(result.get("values", {}).items())]
        return "\n".join(lines)
    if subcommand == "check":
        return "\n".join([
            "usable: %s" % (", ".join(result.get("usable") or []) or "-"),
            "unusable: %s" % (", ".join(result.get("unusable") or []) or "-"),
            "active: %s" % (result.get("active") or "-"),
            "duplicate active: %s" % (", ".join(result.get("duplicateActive") or []) or "-"),
        ])
    if not result.get("available"):
        return "no usable account (probe disabled)"
    lines = []
    for acct in result.get("accounts", []):
        err = acct.get("error")
        if err:
            lines.append("%s%s %s: error %s" % ("*" if acct.get("active") else " ", acct.get("label"),
                                                acct.get("email") or "-", err.get("kind")))
            continue
        parts = []
        for field, name in (("fiveHour", "5h"), ("sevenDay", "7d")):
            window = acct.get(field)
            if window:
                parts.append("%s %s%% %s" % (name, window.get("pct"), window.get("status")))
        lines.append("%s%s %s: %s %s" % ("*" if acct.get("active") else " ", acct.get("label"),
                                         acct.get("email") or "-", acct.get("overallStatus"), " ".join(parts)))
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(
        prog="python -m svcposture.probe",
        description="Probe the model-provider accounts of this node without exposing a token. "
                    "'headers' probes every usable account of the accounts env file "
                    "($SVC_ACCOUNTS_ENV, default ~/.config/svc/model-accounts.env) for its rate-limit "
                    "headers; 'usage' reads the interactive login's usage; 'check' lists usable "
                    "entries, the active one and duplicate active tokens (no network). "
                    "The file is sourced in a child shell; the output is token-free.")
    parser.add_argument("subcommand", choices=("headers", "usage", "check"))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    # Set by the parent on the child's command line, where the sourced file cannot
    # change it: the child probes with the tokens of its own environment.
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    environ = os.environ
    if args.child:
        result = child_main(args.subcommand, environ)
    else:
        paths = Paths(environ=environ)
        if args.subcommand == "headers":
            result = run_headers(paths, environ)
        elif args.subcommand == "check":
            result = run_check(paths, environ)
        else:
            result = run_usage(paths, environ)
    if args.json:
        sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    else:
        sys.stdout.write(_human(args.subcommand, result) + "\n")
    sys.stdout.flush()
    failed = bool(result.get("error")) or (args.subcommand == "usage" and not result.get("ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    code = main()
    # Worker threads still waiting on a slow provider must not hold the exit.
    sys.stdout.flush()
    os._exit(code)
