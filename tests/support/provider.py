"""The fake model provider on 127.0.0.1, speaking the real wire format (docs/posture.md).

The headers and bodies come from svcposture.claude.replies, the code Claude's
part of the demo's simulated provider speaks with, so the two stand-ins cannot
drift apart.

In-process:

    with ProviderServer() as provider:
        provider.set_account("tok-a", status="rejected", seven_day=(1.02, "rejected"),
                             representative_claim="seven_day")
        env["SVC_PROVIDER_URL"] = provider.url

As a subprocess (a provider in another process):

    python -m tests.support.provider --port 0 --script script.json

prints `provider listening on http://127.0.0.1:PORT` once it serves. The script
is JSON `{"accounts": {TOKEN: {set_account kwargs}}, "usage": {TOKEN: {"body":
{...}, "http_status": 200, "retry_after": null}}}`, re-read whenever it changes,
so a test can flip an account by rewriting it.

Account modes (set_account(mode=...)):
- "normal": the windows as set; 429 when the status is rejected;
- "auth" (401/403); "no_headers" (no rate-limit headers); "garbage" (unparseable
  values); "slow" (sleeps `delay` first; `delay` applies in every mode); "drop"
  (closes the connection without an answer); "redirect" (307 back to
  /v1/messages, which a careful client never follows);
- "raw": exactly `raw_headers` and `http_status`, body `{}` (for fuzzing);
- `error_body` (bytes): what an "auth" account's 401/403 carries instead of the provider's
  JSON error (a garbage body);
- `fail_every=N`: every Nth header probe of the token is closed without an answer (a
  transport failure), the others answered as set;
- "flip": ok and rejected in turn every `flip_period` s of wall clock (the
  opposite phase when `inverted`); freeze(status) pins every flip account.
- `rolls_over=True` (any normal account): a window whose `reset_5h`/`reset_7d`
  has passed answers 0 % allowed with the next reset, as the provider does.

A usage body given as bytes is sent verbatim (exact sizes, broken JSON).

Every answered header probe of a known account is recorded in `served` as
(time.monotonic(), time.time(), token, status), decided and recorded under one
lock: status is "ok"/"rejected" for a flip account, the overall status else.
Calls are counted per token (message_calls, usage_calls), with the most
requests answered at once (max_concurrent) and every request (requests).

Routes: POST /v1/messages (by `authorization: Bearer <token>`; unknown tokens
401) and GET /api/oauth/usage (the body set by set_usage; ANY answers every
token; unknown tokens 401).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, Dict, List, Optional, Tuple

from tests.support.httpserver import StandInServer, send_raw

from svcposture.claude.replies import UNIFIED, error_body, message_body, reply_status, unified_headers

MODES = ("normal", "auth", "no_headers", "garbage", "slow", "drop", "redirect", "raw", "flip")
ANY = "*"  # set_usage(ANY, ...) answers the usage probe of every token
FLIP_CYCLE = 4  # flips per 5-hour window cycle of a flip account
PREFIX = UNIFIED


class _Account:
    def __init__(self, *, status: str = "allowed",
                 five_hour: Optional[Tuple[Any, Any]] = (0.10, "allowed"),
                 seven_day: Optional[Tuple[Any, Any]] = (0.20, "allowed"),
                 representative_claim: Optional[str] = "five_hour", http_status: int = 200,
                 mode: str = "normal", delay: float = 0.0,
                 reset_5h: Optional[float] = None, reset_7d: Optional[float] = None,
                 raw_headers: Optional[Dict[str, str]] = None, inverted: bool = False,
                 rolls_over: bool = False, error_body: Optional[bytes] = None, fail_every: int = 0) -> None:
        if raw_headers is not None and mode == "normal":
            mode = "raw"
        if mode not in MODES:
            raise ValueError("mode must be one of %s" % (MODES,))
        self.status = status
        self.five_hour = tuple(five_hour) if five_hour is not None else None
        self.seven_day = tuple(seven_day) if seven_day is not None else None
        self.representative_claim = representative_claim
        self.http_status = int(http_status)
        self.mode = mode
        self.delay = float(delay)
        self.reset_5h = reset_5h
        self.reset_7d = reset_7d
        self.raw_headers = dict(raw_headers or {})
        self.inverted = inverted
        self.rolls_over = rolls_over
        self.error_body = error_body
        self.fail_every = int(fail_every)

    def state(self, now: float) -> Dict[str, Any]:
        """The wire state (claude.replies) of a normal account; resets default to 3 h and 4 d ahead.

        With `rolls_over`, a window whose reset has passed answers as the provider
        does after it: 0 % allowed, the next reset one period on, and the overall
        status the worst of the windows."""
        state: Dict[str, Any] = {"status": self.status, "claim": self.representative_claim}
        rolled = False
        for short, window, reset, default_in, period in (
                ("5h", self.five_hour, self.reset_5h, 3 * 3600, 5 * 3600),
                ("7d", self.seven_day, self.reset_7d, 4 * 86400, 7 * 86400)):
            if window is None:
                continue
            # At the reset as sent on the wire: whole epoch seconds.
            if self.rolls_over and reset is not None and now >= int(reset):
                state[short] = (0.0, "allowed", reset + period)
                rolled = True
            else:
                state[short] = (window[0], window[1], reset if reset is not None else now + default_in)
        if rolled:
            statuses = [state[s][1] for s in ("5h", "7d") if s in state]
            state["status"] = next((w for w in ("rejected", "allowed_warning") if w in statuses), "allowed")
        return state

    def garbage_headers(self) -> Dict[str, str]:
        return {
            PREFIX + "status": self.status,
            PREFIX + "representative-claim": self.representative_claim or "five_hour",
            PREFIX + "5h-utilization": "zero point one",
            PREFIX + "5h-reset": "tomorrow-ish",
            PREFIX + "5h-status": self.five_hour[1] if self.five_hour else "allowed",
            PREFIX + "7d-utilization": "NaN%",
            PREFIX + "7d-reset": "-",
            PREFIX + "7d-status": self.seven_day[1] if self.seven_day else "allowed",
        }


def flip_state(status: str, now: float, reset_5h: Optional[float] = None) -> Dict[str, Any]:
    """The wire state of a flip account answering `status` ("ok" or "rejected").

    `reset_5h` (default an hour from now) is the 5-hour window's reset: the
    provider gives flip accounts one that stays put for a whole flip cycle."""
    window = "rejected" if status == "rejected" else "allowed"
    return {"status": window, "claim": "five_hour",
            "5h": ("1.02" if status == "rejected" else "0.40", window, now + 3600 if reset_5h is None else reset_5h),
            "7d": ("0.30", "allowed", now + 86400)}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _token(self) -> Optional[str]:
        value = self.headers.get("authorization") or ""
        if value[:7].lower() == "bearer ":
            return value[7:].strip()
        return None

    def _send(self, status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> None:
        # bytes go out verbatim: a test may need a reply of an exact size or a broken one.
        raw = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        # A request stops counting as in flight before its reply leaves: once the client has the
        # reply it may send the next one, which must not find this one still counted.
        self._leave_once()
        send_raw(self, status, raw, headers=headers)

    def _leave_once(self) -> None:
        if getattr(self, "_counted", False):
            self._counted = False
            self.server.owner._leave()

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        owner._maybe_reload()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if self.path.split("?")[0] != "/v1/messages":
            self._send(404, error_body("not_found_error", "not found"))
            return
        token = self._token()
        answer = owner._record_message(token, dict(self.headers.items()), raw)
        if answer is None:
            self._send(401, error_body("authentication_error", "invalid bearer token"))
            return
        owner._enter()
        self._counted = True
        try:
            self._answer_message(*answer)
        finally:
            self._leave_once()

    def _answer_message(self, account: _Account, flipped: Optional[str], dropped: bool = False) -> None:
        if account.delay > 0:
            time.sleep(account.delay)
        if account.mode == "drop" or dropped:
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.close_connection = True
            return
        if account.mode == "redirect":
            # 307 keeps method and body: a client that follows it re-sends the token.
            self._send(307, {"type": "redirect"},
                       {"location": self.server.owner.url + "/v1/messages?redirected=1"})
            return
        if account.mode == "auth":
            self._send(account.http_status if account.http_status in (401, 403) else 401,
                       account.error_body if account.error_body is not None
                       else error_body("authentication_error", "OAuth token has expired"))
            return
        if account.mode == "raw":
            self._send(account.http_status, {}, account.raw_headers)
            return
        now = time.time()
        if flipped is not None:
            state = flip_state(flipped, now, self.server.owner.flip_reset())
        else:
            state = account.state(now)
        status = reply_status(state["status"], account.http_status)
        headers: Dict[str, str] = {}
        if account.mode == "garbage":
            headers = account.garbage_headers()
        elif account.mode != "no_headers":
            headers = unified_headers(state)
        if status == 200:
            body: Any = message_body("test")
        else:
            body = error_body("rate_limit_error" if status == 429 else "api_error", "error")
        self._send(status, body, headers)

    def do_GET(self) -> None:  # noqa: N802
        owner = self.server.owner
        owner._maybe_reload()
        if self.path.split("?")[0] != "/api/oauth/usage":
            self._send(404, {"error": "not found"})
            return
        token = self._token()
        entry = owner._record_usage(token, dict(self.headers.items()))
        if entry is None:
            self._send(401, error_body("authentication_error", "invalid bearer token"))
            return
        body, status, retry_after = entry
        headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
        self._send(status, body, headers)


class ProviderServer:
    """The provider on 127.0.0.1 and a random port, served from daemon threads."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, script: Optional[str] = None,
                 flip_period: float = 1.0) -> None:
        self._lock = threading.Lock()
        self._accounts: Dict[str, _Account] = {}
        self._usage: Dict[str, Tuple[Any, int, Optional[float]]] = {}
        self._message_calls: Dict[Optional[str], int] = {}
        self._usage_calls: Dict[Optional[str], int] = {}
        self._in_flight = 0
        self._max_in_flight = 0
        self.requests: List[Dict[str, Any]] = []
        self.served: List[Tuple[float, float, str, str]] = []
        self.flip_period = flip_period
        self.flip_started = time.monotonic()
        self.flip_reset_base = float(int(time.time()) + 3600)
        self.frozen: Optional[str] = None
        self._script = script
        self._script_mtime: Optional[Tuple[int, int, int]] = None
        self._httpd = StandInServer((host, port), self, _Handler)
        self.port = self._httpd.server_address[1]
        self.url = "http://%s:%d" % (host, self.port)
        self._thread: Optional[threading.Thread] = None
        if script:
            self._maybe_reload()

    # ------------------------------------------------------------ lifecycle

    def start(self) -> "ProviderServer":
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever,
                                            kwargs={"poll_interval": 0.05},
                                            name="provider-server", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> "ProviderServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------ scripting

    def set_account(self, token: str, **state: Any) -> None:
        """Script the replies to `token`; `state` takes _Account's keyword arguments."""
        account = _Account(**state)
        with self._lock:
            self._accounts[token] = account

    def remove_account(self, token: str) -> None:
        with self._lock:
            self._accounts.pop(token, None)

    def set_usage(self, token: str, body: Any, *, http_status: int = 200,
                  retry_after: Optional[float] = None) -> None:
        """The usage reply for `token` (ANY: for every token, tokenless requests included)."""
        with self._lock:
            self._usage[token] = (body, int(http_status), retry_after)

    def freeze(self, status: Optional[str]) -> None:
        """Pin every flip account at "ok" or "rejected" (an inverted one at the opposite); None resumes."""
        with self._lock:
            self.frozen = status

    # ------------------------------------------------------------ counting

    def message_calls(self, token: Optional[str] = None) -> int:
        with self._lock:
            if token is None:
                return sum(self._message_calls.values())
            return self._message_calls.get(token, 0)

    def usage_calls(self, token: Optional[str] = None) -> int:
        with self._lock:
            if token is None:
                return sum(self._usage_calls.values())
            return self._usage_calls.get(token, 0)

    def max_concurrent(self) -> int:
        """The most /v1/messages requests that were being answered at the same time."""
        with self._lock:
            return self._max_in_flight

    def served_snapshot(self) -> List[Tuple[float, float, str, str]]:
        with self._lock:
            return list(self.served)

    def reset_counts(self) -> None:
        with self._lock:
            self._max_in_flight = 0
            self._message_calls.clear()
            self._usage_calls.clear()
            del self.requests[:]

    # ------------------------------------------------------------ internals

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def flip_reset(self) -> float:
        """The 5-hour reset (epoch s) flip accounts answer now: it moves on, by far
        more than the 120 s that tell two cycles apart, every FLIP_CYCLE flips, so
        each cycle holds two rejected phases (the second must alert nothing)."""
        cycle = int((time.monotonic() - self.flip_started) / (self.flip_period * FLIP_CYCLE))
        return self.flip_reset_base + cycle * 1000.0

    def _flip_status(self, account: _Account) -> str:
        if self.frozen is not None:
            status = self.frozen
        else:
            phase = int((time.monotonic() - self.flip_started) / self.flip_period)
            status = "rejected" if phase % 2 else "ok"
        if account.inverted:
            status = "ok" if status == "rejected" else "rejected"
        return status

    def _record_message(self, token: Optional[str], headers: Dict[str, str],
                        body: bytes) -> Optional[Tuple[_Account, Optional[str], bool]]:
        with self._lock:
            calls = self._message_calls[token] = self._message_calls.get(token, 0) + 1
            self.requests.append({"method": "POST", "path": "/v1/messages", "token": token,
                                  "headers": {k.lower(): v for k, v in headers.items()},
                                  "body": body, "at": time.monotonic()})
            account = self._accounts.get(token) if token is not None else None
            if account is None:
                return None
            flipped = self._flip_status(account) if account.mode == "flip" else None
            dropped = account.fail_every > 0 and calls % account.fail_every == 0
            self.served.append((time.monotonic(), time.time(), token or "", "dropped" if dropped
                                else flipped or account.status))
            return account, flipped, dropped

    def _record_usage(self, token: Optional[str],
                      headers: Dict[str, str]) -> Optional[Tuple[Any, int, Optional[float]]]:
        with self._lock:
            self._usage_calls[token] = self._usage_calls.get(token, 0) + 1
            self.requests.append({"method": "GET", "path": "/api/oauth/usage", "token": token,
                                  "headers": {k.lower(): v for k, v in headers.items()},
                                  "body": b"", "at": time.monotonic()})
            entry = self._usage.get(token) if token is not None else None
            return entry if entry is not None else self._usage.get(ANY)

    def _maybe_reload(self) -> None:
        if not self._script:
            return
        try:
            st = os.stat(self._script)
        except OSError:
            return
        mtime = (st.st_mtime_ns, st.st_size, st.st_ino)
        with self._lock:
            if mtime == self._script_mtime:
                return
            self._script_mtime = mtime
        try:
            with open(self._script, "r", encoding="utf-8") as fh:
                script = json.load(fh)
        except (OSError, ValueError):
            return
        accounts = {}
        for token, kwargs in (script.get("accounts") or {}).items():
            kwargs = dict(kwargs)
            for key in ("five_hour", "seven_day"):
                if isinstance(kwargs.get(key), list):
                    kwargs[key] = tuple(kwargs[key])
            accounts[token] = _Account(**kwargs)
        usage = {}
        for token, entry in (script.get("usage") or {}).items():
            usage[token] = (entry.get("body"), int(entry.get("http_status", 200)), entry.get("retry_after"))
        with self._lock:
            self._accounts = accounts
            self._usage = usage


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Model-provider test server on 127.0.0.1 (tests only).")
    parser.add_argument("--port", type=int, default=0, help="port to bind (0 = random)")
    parser.add_argument("--script", help="JSON script of accounts/usage; re-read when it changes")
    args = parser.parse_args(argv)
    server = ProviderServer(port=args.port, script=args.script)
    server.start()
    print("provider listening on %s" % server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    import signal

    def _on_term(*_: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _on_term)
    sys.exit(main())
