"""A stand-in for Codex's usage endpoint, a login's files, and the replies seen in the field.

    with CodexServer() as server:
        server.set_reply(TOKEN, usage_reply(12.5, 40))
        env["SVC_CODEX_URL"] = server.url

`GET /backend-api/wham/usage` answers by `Authorization: Bearer <token>`; a
token it was not given gets 401, as does a request without the account header
when the reply was set with `account_id`. Every request is recorded in
`requests` as a dict (path, authorization, account, accept), and counted per
token in `calls`.

A reply is a dict (sent as JSON) or bytes (sent verbatim: broken JSON, HTML),
with a status, headers, a content type and a delay. `CORPUS` holds the
replies seen from the real endpoint and the ways they go wrong, each with what
the probe must make of it.

Login files: `make_login(dir, token, account_id)` writes auth.json as `codex
login` does; `write_session(dir, lines)` writes a rollout log; `token_count_line`
builds the line the `codex` CLI logs after each reply.
"""
from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from tests.support.httpserver import StandInServer, send_raw

USAGE_PATH = "/backend-api/wham/usage"
FIVE_HOUR_S = 18000
SEVEN_DAY_S = 604800


# ---------------------------------------------------------------- reply bodies

def window(pct: Any, seconds: Any, reset_at: Any = None, reset_after: Any = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {"used_percent": pct, "limit_window_seconds": seconds}
    if reset_at is not None:
        out["reset_at"] = reset_at
    if reset_after is not None:
        out["reset_after_seconds"] = reset_after
    return out


def usage_reply(five_pct: Any = 10, seven_pct: Any = 20, reset_5h: Any = 1767225600, reset_7d: Any = 1767830400,
                plan: Any = "plus", credits: Any = None, review: Any = None, additional: Any = None) -> Dict[str, Any]:
    """The reply's real shape: the 5-hour window as primary and the weekly one as secondary."""
    body: Dict[str, Any] = {
        "plan_type": plan,
        "rate_limit": {"allowed": True, "limit_reached": False,
                       "primary_window": window(five_pct, FIVE_HOUR_S, reset_at=reset_5h),
                       "secondary_window": window(seven_pct, SEVEN_DAY_S, reset_at=reset_7d)},
        "credits": credits if credits is not None else {"has_credits": False, "unlimited": False, "balance": "0"},
    }
    if review is not None:
        body["code_review_rate_limit"] = review
    if additional is not None:
        body["additional_rate_limits"] = additional
    return body


def _corpus() -> List[Tuple[str, Any, int, Dict[str, Any]]]:
    """(name, body, status, expected): expected holds `fiveHour`/`sevenDay` as (pct, resetsAt) or None,
    `extra` as [(seconds, pct)], or `error` as the error kind."""
    W5, W7 = FIVE_HOUR_S, SEVEN_DAY_S
    r5, r7 = "2026-01-01T00:00:00.000Z", "2026-01-08T00:00:00.000Z"
    ok = {"fiveHour": (10.0, r5), "sevenDay": (20.0, r7)}

    def rl(primary: Any, secondary: Any = None, **more: Any) -> Dict[str, Any]:
        body: Dict[str, Any] = {"plan_type": "plus", "rate_limit": {"primary_window": primary,
                                                                  "secondary_window": secondary}}
        body.update(more)
        return body

    return [
        ("real", usage_reply(), 200, dict(ok, planType="plus")),
        ("swapped", rl(window(20, W7, 1767830400), window(10, W5, 1767225600)), 200, ok),
        ("only-primary", rl(window(10, W5, 1767225600)), 200, {"fiveHour": (10.0, r5), "sevenDay": None}),
        ("only-secondary", rl(None, window(20, W7, 1767830400)), 200, {"fiveHour": None, "sevenDay": (20.0, r7)}),
        ("no-secondary-key", {"rate_limit": {"primary_window": window(10, W5, 1767225600)}}, 200,
         {"fiveHour": (10.0, r5), "sevenDay": None}),
        ("string-numbers", rl(window("10", "18000", "1767225600"), window("20.0", "604800", "1767830400")), 200, ok),
        ("reset-after", rl(window(10, W5, reset_after=3600), window(20, W7, reset_after="86400")), 200,
         {"fiveHour": (10.0, "soon"), "sevenDay": (20.0, "soon")}),
        ("reset-null", rl(window(10, W5, None), window(20, W7)), 200,
         {"fiveHour": (10.0, None), "sevenDay": (20.0, None)}),
        ("reset-negative", rl(window(10, W5, -5), window(20, W7, reset_after=-30)), 200,
         {"fiveHour": (10.0, None), "sevenDay": (20.0, None)}),
        ("reset-huge", rl(window(10, W5, 1e300), window(20, W7, reset_after=1e300)), 200,
         {"fiveHour": (10.0, None), "sevenDay": (20.0, None)}),
        ("reset-iso", rl(window(10, W5, "2026-01-01T00:00:00+00:00"), window(20, W7, 1767830400)), 200, ok),
        ("pct-null", rl({"used_percent": None, "limit_window_seconds": W5}, window(20, W7, 1767830400)), 200,
         {"fiveHour": None, "sevenDay": (20.0, r7)}),
        ("pct-negative", rl(window(-1, W5, 1767225600), window(20, W7, 1767830400)), 200,
         {"fiveHour": None, "sevenDay": (20.0, r7)}),
        ("pct-huge", rl(window(1e300, W5, 1767225600), window(20, W7, 1767830400)), 200,
         {"fiveHour": None, "sevenDay": (20.0, r7)}),
        ("pct-over-100", rl(window(104.44, W5, 1767225600), window(95, W7, 1767830400)), 200,
         {"fiveHour": (104.4, r5), "sevenDay": (95.0, r7), "status5": "rejected", "status7": "allowed_warning"}),
        ("pct-string-junk", rl(window("ten", W5, 1767225600), window(20, W7, 1767830400)), 200,
         {"fiveHour": None, "sevenDay": (20.0, r7)}),
        ("pct-bool", rl(window(True, W5, 1767225600), window(20, W7, 1767830400)), 200,
         {"fiveHour": None, "sevenDay": (20.0, r7)}),
        ("pct-nan-string", rl(window("NaN", W5, 1767225600), window("Infinity", W7, 1767830400)), 200,
         {"fiveHour": None, "sevenDay": None, "error": "parse"}),
        ("length-missing", rl({"used_percent": 10, "reset_at": 1767225600}, window(20, W7, 1767830400)), 200,
         {"fiveHour": None, "sevenDay": (20.0, r7)}),
        ("length-zero", rl(window(10, 0, 1767225600), window(20, W7, 1767830400)), 200,
         {"fiveHour": None, "sevenDay": (20.0, r7)}),
        ("other-length", rl(window(10, 3600, 1767225600), window(20, W7, 1767830400)), 200,
         {"fiveHour": None, "sevenDay": (20.0, r7), "extra": [(3600, 10.0)]}),
        ("two-weekly", rl(window(10, W7, 1767225600), window(20, W7, 1767830400)), 200,
         {"fiveHour": None, "sevenDay": (10.0, r5), "extra": [(W7, 20.0)]}),
        ("window-not-object", rl("10%", [1, 2]), 200, {"fiveHour": None, "sevenDay": None, "error": "parse"}),
        ("rate-limit-null", {"plan_type": "plus", "rate_limit": None}, 200, {"error": "parse"}),
        ("empty-object", {}, 200, {"error": "parse"}),
        ("array", [1, 2, 3], 200, {"error": "parse"}),
        ("not-json", b"this is not json", 200, {"error": "parse"}),
        ("html-200", b"<!DOCTYPE html><html><body>Just a moment...</body></html>", 200, {"error": "parse"}),
        ("html-502", b"<html><body><h1>502 Bad Gateway</h1></body></html>", 502, {"error": "http"}),
        ("truncated", b'{"rate_limit": {"primary_window": {"used_percent": 1', 200, {"error": "parse"}),
        ("unauthorized-401", {"detail": "Unauthorized"}, 401, {"error": "unauthorized"}),
        ("forbidden-403", b"<html>Forbidden</html>", 403, {"error": "unauthorized"}),
        ("rate-limited-429", {"detail": "Too many requests"}, 429, {"error": "http"}),
        ("server-500", {"detail": "oops"}, 500, {"error": "http"}),
        ("additional", usage_reply(additional=[{"limit_name": "GPT-5-Codex-Mini", "metered_feature": "codex_mini",
                                                "rate_limit": {"primary_window": window(7, W5, 1767225600)}},
                                               "junk", {"limit_name": None, "rate_limit": None}]), 200,
         dict(ok, extra=[(W5, 7.0)])),
        ("code-review", usage_reply(review={"primary_window": window(3, W7, 1767830400), "secondary_window": None}),
         200, dict(ok, review=[(W7, 3.0)])),
        ("credits-odd", usage_reply(credits={"has_credits": "yes", "unlimited": True, "balance": "12.5"}), 200,
         dict(ok, credits={"hasCredits": None, "unlimited": True, "balance": 12.5})),
        ("plan-hostile", usage_reply(plan="\x1b[2Jplus"), 200, dict(ok, planType=None)),
        ("unknown-keys", dict(usage_reply(), promo={"x": 1}, rate_limit_reached_type=None), 200, ok),
        ("deep-nesting", b"[" * 100000 + b"]" * 100000, 200, {"error": "parse"}),
        ("huge-body", b'{"pad": "' + b"x" * (2 * 1024 * 1024) + b'"}', 200, {"error": "parse"}),
    ]


CORPUS = _corpus()


# ---------------------------------------------------------------- the server

class _Reply:
    def __init__(self, body: Any, status: int = 200, headers: Optional[Dict[str, str]] = None,
                 content_type: Optional[str] = None, delay: float = 0.0, account_id: Optional[str] = None) -> None:
        self.raw = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        self.status = status
        self.headers = dict(headers or {})
        self.content_type = content_type or ("text/html" if self.raw.lstrip().startswith(b"<") else "application/json")
        self.delay = delay
        self.account_id = account_id


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        server: "CodexServer" = self.server.owner  # type: ignore[attr-defined]
        auth = self.headers.get("Authorization") or ""
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        account = self.headers.get("ChatGPT-Account-Id")
        with server.lock:
            server.requests.append({"path": self.path, "authorization": auth, "account": account,
                                    "accept": self.headers.get("Accept")})
            if token is not None:
                server.calls[token] = server.calls.get(token, 0) + 1
            reply = server.replies.get(token) if token is not None else None
        if self.path != USAGE_PATH:
            send_raw(self, 404, b'{"detail":"Not Found"}')
            return
        if reply is None or (reply.account_id is not None and account != reply.account_id):
            send_raw(self, 401, b'{"detail":"Unauthorized"}')
            return
        if reply.delay:
            time.sleep(reply.delay)
        send_raw(self, reply.status, reply.raw, reply.content_type, reply.headers)


class CodexServer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.replies: Dict[str, _Reply] = {}
        self.requests: List[Dict[str, Any]] = []
        self.calls: Dict[str, int] = {}
        self._server = StandInServer(("127.0.0.1", 0), self, _Handler)
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "CodexServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def set_reply(self, token: str, body: Any, status: int = 200, **kwargs: Any) -> None:
        with self.lock:
            self.replies[token] = _Reply(body, status, **kwargs)

    def total_calls(self) -> int:
        with self.lock:
            return sum(self.calls.values())


# ---------------------------------------------------------------- a login's files

def make_login(directory: Path, token: Optional[str], account_id: Optional[str] = "acct-0001",
               refresh: Optional[str] = None, api_key: Optional[str] = None, mode: int = 0o600,
               id_token: Optional[str] = None) -> Path:
    """auth.json as `codex login` writes it (a ChatGPT login, or an API key with `token` None)."""
    directory.mkdir(parents=True, exist_ok=True)
    tokens = None
    if token is not None:
        tokens = {"id_token": id_token or "eyJhbGciOiJub25lIn0.e30.", "access_token": token,
                  "refresh_token": refresh or "rt-unused", "account_id": account_id}
    body = {"OPENAI_API_KEY": api_key, "tokens": tokens, "last_refresh": "2026-11-20T10:00:00Z"}
    path = directory / "auth.json"
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        json.dump(body, fh)
    os.chmod(str(path), mode)
    return path


def token_count_line(at: float, primary: Any = None, secondary: Any = None, *, spelling: str = "resets_at",
                     rate_limits: Any = "build") -> str:
    """The line the `codex` CLI logs after a reply, stamped `at` (epoch s); windows are
    (used_percent, window_minutes, reset) with the reset spelled `resets_at` (epoch s) or
    `resets_in_seconds` (seconds from `at`)."""
    def limit(w: Any) -> Any:
        if w is None or not isinstance(w, tuple):
            return w
        pct, minutes, reset = w
        return {"used_percent": pct, "window_minutes": minutes, spelling: reset}

    if rate_limits == "build":
        rate_limits = {"primary": limit(primary), "secondary": limit(secondary)}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + ".%03dZ" % int((at % 1) * 1000)
    return json.dumps({"timestamp": stamp, "type": "event_msg",
                       "payload": {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 10}},
                                   "rate_limits": rate_limits}})


def other_line(at: float) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at))
    return json.dumps({"timestamp": stamp, "type": "response_item",
                       "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                                                        "text": "done"}]}})


def session_path(codex_home: Path, at: float, name: str = "a") -> Path:
    day = time.strftime("%Y/%m/%d", time.gmtime(at))
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime(at))
    return codex_home / "sessions" / day / ("rollout-%s-%s.jsonl" % (stamp, name))


def write_session(codex_home: Path, at: float, lines: List[str], name: str = "a", tail: str = "\n",
                  mtime: Optional[float] = None) -> Path:
    path = session_path(codex_home, at, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + tail)
    if mtime is not None:
        os.utime(str(path), (mtime, mtime))
    return path


def write_codex_accounts(path: Path, entries: List[Tuple[str, str, Optional[str]]], active: Optional[str] = None,
                         extra: str = "", mode: int = 0o600) -> Path:
    """`CODEX_HOME_<NAME>=<dir>  # <email>` per entry, then the export of the active one, then `extra`."""
    lines = ["# codex logins"]
    for name, directory, email in entries:
        lines.append('CODEX_HOME_%s="%s"%s' % (name, directory, "  # %s" % email if email else ""))
    if active:
        lines.append('export CODEX_HOME="$CODEX_HOME_%s"' % active)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n" + extra)
    os.chmod(str(tmp), mode)
    os.replace(str(tmp), str(path))
    return path
