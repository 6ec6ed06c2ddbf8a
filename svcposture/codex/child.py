"""The child's Codex sweep: for each login, the session log first, then the usage request.

Runs inside the token-scoped child beside Claude's header probes (`..child`),
on the same deadline. Per account: auth.json is read (any problem is that
account's error and no request is sent); the newest session sample newer than
the monitor's last one is taken with no request; otherwise, unless another
host of the fleet polls this login (HRW over `usage:codex:<account_id>`) or the
monitor's usage floor says not yet, `GET /backend-api/wham/usage` is sent. The
row printed carries no token: strings that came from outside are scrubbed of
anything that appears in a token.
"""
from __future__ import annotations

import hashlib
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional

from .. import _time
from .._text import loads_bounded
from .._version import __version__
from .. import hrw
from .._http import Exchange
from ..probe.providerhttp import classify_transport, retry_after_s
from ..probe.scrub import scrub_row, shares_a_run
from ..settings import knob_value
from ..vendor import check_listing
from .accounts import codex_entries_from_env, has_codex_lines, resolve_codex_active
from .authfile import read_credentials
from .errors import CODEX_MESSAGES, codex_error, fix_text
from .knobs import CODEX_URL
from .session import newest_session_sample
from .state import read_state
from .usage import header_limits, has_window, parse_usage_reply, usage_limit_window

USAGE_PATH = "/backend-api/wham/usage"
MAX_REPLY_BYTES = 1024 * 1024
TICKET_PREFIX = "usage:codex:"
_SAMPLE_KEYS = ("fiveHour", "sevenDay", "extraWindows", "codeReview", "planType", "credits", "resetCredits")


def codex_url(environ: Mapping[str, str]) -> str:
    return knob_value(environ, CODEX_URL)


def account_key(account_id: Optional[str]) -> Optional[str]:
    """A short stable name of the login for logs, which does not give its id away."""
    if not account_id:
        return None
    return hashlib.sha256(("codex:" + account_id).encode("utf-8")).hexdigest()[:16]


def empty_row(entry: Mapping[str, Any]) -> Dict[str, Any]:
    return {"label": entry["label"], "email": entry["email"], "active": entry["active"], "provider": "codex",
            "source": None, "sampledAt": None, "polledAt": None, "skipped": None, "pollOwner": None,
            "accountKey": None, "fiveHour": None, "sevenDay": None, "extraWindows": [], "codeReview": None,
            "planType": None, "credits": None, "resetCredits": None, "retryAfterS": None, "error": None,
            "envLine": entry.get("line")}


def fetch_codex_usage(token: str, account_id: Optional[str], directory: str, environ: Mapping[str, str],
                      timeout_s: float) -> Dict[str, Any]:
    """One usage request: `{"sample": {...}[, "retryAfterS"]}` or `{"error": {...}, "retryAfterS"}`.
    No token is refreshed."""
    headers = {"Authorization": "Bearer " + token, "Accept": "application/json",
               "User-Agent": "svcposture/" + __version__}
    if account_id:
        headers["ChatGPT-Account-Id"] = account_id
    try:
        with Exchange(codex_url(environ) + USAGE_PATH, timeout_s, headers) as reply:
            status = reply.status
            replied = {k.lower(): v for k, v in reply.headers.items()}
            raw = reply.read(MAX_REPLY_BYTES + 1)
    except Exception as exc:  # noqa: BLE001 - mapped to the fixed vocabulary
        return {"error": codex_error(classify_transport(exc))}
    if status in (401, 403):
        return {"error": codex_error("unauthorized", http_status=status, fix=fix_text("login", directory))}
    if status == 429:
        return _limited(raw, replied)
    if not 200 <= status < 300:
        return {"error": codex_error("http", http_status=status)}
    now_s = time.time()
    try:
        sample = parse_usage_reply(loads_bounded(raw, MAX_REPLY_BYTES), now_s)
    except ValueError:
        return {"error": codex_error("parse", http_status=status)}
    if not has_window(sample):
        sample = _with_headers(sample, replied, now_s)
    if not has_window(sample):
        return {"error": codex_error("parse", CODEX_MESSAGES["parse"].no_windows, http_status=status)}
    return {"sample": sample}


def _with_headers(sample: Dict[str, Any], replied: Mapping[str, str], now_s: float) -> Dict[str, Any]:
    """A body without windows completed from the reply's `x-codex-*` headers, field by field."""
    from_headers = header_limits(replied, now_s)
    return {key: sample.get(key) if sample.get(key) else from_headers.get(key) for key in _SAMPLE_KEYS}


def _limited(raw: bytes, replied: Mapping[str, str]) -> Dict[str, Any]:
    """A 429: the login's usage limit reached (a sample: the `usage limit` window until the body's
    reset, beside what the headers say), else the endpoint rate limiting this login (an error).
    Either way `retryAfterS`: the `retry-after` header, else the time left until that reset."""
    now_s = time.time()
    retry_after = retry_after_s(replied.get("retry-after"))
    try:
        body = loads_bounded(raw, MAX_REPLY_BYTES)
    except ValueError:
        body = None
    limit = usage_limit_window(body, now_s)
    if limit is None:
        return {"error": codex_error("http", CODEX_MESSAGES["http"].rate_limited, http_status=429),
                "retryAfterS": retry_after}
    if retry_after is None and limit["resetsAt"] is not None:
        retry_after = max(0.0, _time.parse_iso_ms(limit["resetsAt"]) / 1000.0 - now_s)
    sample = header_limits(replied, now_s)
    sample["extraWindows"].append(limit)
    return {"sample": sample, "retryAfterS": retry_after}


def poll_owner(account_id: Optional[str], state: Mapping[str, Any]) -> Optional[str]:
    """The host that polls this login when it is not this one; None when this host polls."""
    hosts, node = state.get("hosts"), state.get("node")
    if not account_id or not hosts or len(set(hosts)) <= 1 or node not in hosts:
        return None
    owner = hrw.owner(TICKET_PREFIX + account_id, hosts, state.get("live"))
    return owner if owner is not None and owner != node else None


def _scrub(row: Dict[str, Any], secrets: Iterable[str]) -> Dict[str, Any]:
    """Strings from outside (the reply's names, the file's directory in a fix) that share
    a run of a secret (probe.scrub) go: a reply cannot carry a
    token out whole, nor in pieces spread over several names, each padded so that it is no
    part of the token and holds none."""
    runs = scrub_row(row, secrets, ("extraWindows", "codeReview"))
    if row.get("error") and shares_a_run(row["error"].get("fix"), runs):
        row["error"]["fix"] = None
    return row


def probe_codex_account(entry: Mapping[str, Any], state: Mapping[str, Any], environ: Mapping[str, str],
                        timeout_s: float, secrets: List[str], sent: Dict[str, int]) -> Dict[str, Any]:
    """One login's row for this sweep; `sent[label]` is set before a request goes out."""
    row = empty_row(entry)
    creds = read_credentials(entry["dir"])
    if isinstance(creds, dict):
        row["error"] = creds
        return _scrub(row, secrets)
    token, account_id = creds
    secrets = secrets + [token]
    row["accountKey"] = account_key(account_id)
    memory = state["accounts"].get(entry["label"]) or {}
    now_ms = _time.now_ms()
    sample = newest_session_sample(entry["dir"], memory.get("lastSampleMs"), now_ms)
    if sample is not None:
        row.update({k: sample[k] for k in _SAMPLE_KEYS}, source="session", sampledAt=sample["sampledAt"])
        return _scrub(row, secrets)
    owner = poll_owner(account_id, state)
    not_before = memory.get("notBeforeMs")
    if owner is not None:
        row.update(skipped="owner", pollOwner=owner)
    elif not_before is not None and now_ms < not_before:
        row["skipped"] = "floor"
    else:
        row["polledAt"] = sent[entry["label"]] = now_ms
        result = fetch_codex_usage(token, account_id, entry["dir"], environ, timeout_s)
        if "sample" in result:
            row.update({k: result["sample"][k] for k in _SAMPLE_KEYS}, source="api", sampledAt=_time.now_ms())
        else:
            row["error"] = result["error"]
        row["retryAfterS"] = result.get("retryAfterS")
    return _scrub(row, secrets)


class CodexSweep:
    """The Codex half of a `headers` sweep, run on the child's pool beside Claude's probes."""

    def __init__(self, text: str, environ: Mapping[str, str]) -> None:
        self.present = has_codex_lines(text, environ)
        self.entries, self.unusable = codex_entries_from_env(text, environ) if self.present else ([], [])
        self.active, self.duplicates = resolve_codex_active(self.entries)
        self.environ = environ
        # A login's token is read from its auth.json only when its exchange runs (and scrubbed there).
        self.secrets: List[str] = []
        self.futures: List[Any] = []
        # Requests sent, by label: an account cut off by the deadline still tells the monitor it polled.
        self.sent: Dict[str, int] = {}

    def check(self) -> Optional[Dict[str, Any]]:
        """What `probe check` shows of the Codex lines (no network, no auth.json read)."""
        if not self.present:
            return None
        return check_listing(self.entries, self.unusable, self.active, self.duplicates)

    def submit(self, pool: Any, timeout_s: float, secrets: List[str]) -> List[Any]:
        """One exchange per login on `pool`; `secrets` (every vendor's tokens) are scrubbed from its row."""
        state = read_state(self.environ)
        self.futures = [pool.submit(probe_codex_account, e, state, self.environ, timeout_s, list(secrets),
                                    self.sent) for e in self.entries]
        return self.futures

    def block(self, cut: str = "sweep") -> Optional[Dict[str, Any]]:
        """The `codex` block once the futures are done or abandoned; None with no Codex line.

        `cut` says what ended the wait for an exchange still running: the
        vendor's own deadline (`exchange`) or the sweep's."""
        if not self.present:
            return None
        late = CODEX_MESSAGES["timeout"].no_answer if cut == "exchange" else CODEX_MESSAGES["timeout"].sweep_deadline
        rows = []
        for entry, future in zip(self.entries, self.futures):
            if future.done() and future.exception() is None:
                rows.append(future.result())
                continue
            row = empty_row(entry)
            row["polledAt"] = self.sent.get(entry["label"])
            row["error"] = codex_error("internal") if future.done() else codex_error("timeout", late)
            rows.append(row)
        return {"available": bool(self.entries), "probedAt": _time.now_ms(), "active": self.active,
                "duplicateActive": self.duplicates, "unusable": self.unusable, "accounts": rows}
