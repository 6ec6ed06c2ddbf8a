"""svc-monitor demo: a simulated provider, a throw-away node home with three
accounts, and the real monitor against them, all on loopback in one process.

The simulated provider is the package's only stand-in for the real provider.
It speaks the real wire format (docs/posture.md), so everything downstream (the
token-scoped probe child, the cache, the latch, the event log, SSE) runs for
real. The demo tokens are fixed, public demo values, not secrets.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from .._dirs import ensure_dir
from .._files import write_json_atomic, write_text_atomic
from ..paths import Paths
from ..settings import DEFAULT_PORT
from . import fleet
from .provider_wire import error_body, message_body, reply_status, unified_headers, usage_body, usage_window

CYCLE_S = 180.0  # ok -> degraded -> rejected -> ok once every three minutes
DEMO_ACCOUNTS = (
    # (suffix, token, email)
    ("ACCT1", "demo-token-acct1-not-a-secret", "ada@demo.invalid"),
    ("ACCT2", "demo-token-acct2-not-a-secret", "grace@demo.invalid"),
    ("ACCT3", "demo-token-acct3-not-a-secret", "linus@demo.invalid"),
)
DEMO_LOGIN_TOKEN = "demo-login-token-not-a-secret"
# One Codex login (docs/codex.md): its CODEX_HOME in the demo home, answered on the Codex usage route.
DEMO_CODEX = ("DEMO", "demo-codex-token-not-a-secret", "demo-codex-account", "hopper@demo.invalid")
CODEX_USAGE_PATH = "/backend-api/wham/usage"
DEMO_NODE = "demo-node"
DEMO_ENV = {
    # Short clocks so that a visitor sees every transition in a few minutes.
    "SVC_PROBE_INTERVAL_S": "10",
    "SVC_POSTURE_TTL_S": "10",
    "SVC_REFRESH_FLOOR_S": "3",
    "SVC_QUOTA_POLL_INTERVAL_S": "180",  # the floor: a lower value would only log a warning
    "SVC_PROBE_DEADLINE_S": "20",
}


def account_state(label: str, elapsed_s: float, started: float) -> Dict[str, Any]:
    """The simulated windows of one demo account `elapsed_s` into the demo."""
    cycle_start = started + (elapsed_s // CYCLE_S) * CYCLE_S
    t = elapsed_s % CYCLE_S
    seven_reset = started + 3 * 86400 + 7 * 3600
    if label == "acct1" and elapsed_s < 0:
        return _acct1_before(elapsed_s, started, seven_reset)
    if label == "acct1":
        reset_5h = cycle_start + 135.0 if t < 135.0 else cycle_start + CYCLE_S + 135.0
        if t < 45.0:
            five, status = 0.55 + 0.23 * t / 45.0, "allowed"
        elif t < 90.0:
            five, status = 0.82 + 0.15 * (t - 45.0) / 45.0, "allowed_warning"
        elif t < 135.0:
            five, status = 1.0 + 0.02 * (t - 90.0) / 45.0, "rejected"
        else:
            five, status = 0.05 + 0.3 * (t - 135.0) / 45.0, "allowed"
        seven = 0.41 + 0.004 * elapsed_s / 3600.0
        return {"status": status, "claim": "five_hour", "5h": (five, status, reset_5h),
                "7d": (seven, "allowed", seven_reset)}
    hours = elapsed_s / 3600.0
    if label == "codex-demo":
        # Codex's own pace: 5 h window climbing 12 %/h from 35 %, weekly at 62 %.
        five = min(1.2, 0.35 + 0.12 * hours)
        return {"status": None, "claim": None, "5h": (five, None, started + 4 * 3600),
                "7d": (0.62 + 0.001 * hours, None, seven_reset + 2 * 86400)}
    if label == "acct2":
        # Climbing 30 %/h, from 40 % at the start: the wall (in 2 h) beats the reset (in 3 h).
        return {"status": "allowed", "claim": "five_hour", "5h": (0.40 + 0.30 * hours, "allowed", started + 3 * 3600),
                "7d": (0.33 + 0.002 * hours, "allowed", seven_reset - 86400)}
    # Near its weekly limit and steady: about 91 % when the week resets.
    return {"status": "allowed_warning", "claim": "seven_day", "5h": (0.30, "allowed", started + 2 * 3600),
            "7d": (0.91, "allowed_warning", seven_reset + 86400)}


def _acct1_before(elapsed_s: float, started: float, seven_reset: float) -> Dict[str, Any]:
    """acct1 before the demo started, as a real account is used: each 5 h window climbs from
    5 % to 65 % and resets, the week climbs 0.4 % an hour (the live three-minute cycle would
    draw a day of history as a comb of ticks, and leave no forecast)."""
    window = 5 * 3600.0
    phase = (elapsed_s % window) / window
    five = 0.05 + 0.60 * phase
    return {"status": "allowed", "claim": "five_hour",
            "5h": (five, "allowed", started + elapsed_s + (1.0 - phase) * window),
            "7d": (0.41 + 0.004 * elapsed_s / 3600.0, "allowed", seven_reset)}


def seed_rows(started: float, hours: float = 25.0, step_s: float = 60.0) -> List[Dict[str, Any]]:
    """History rows of the simulated accounts for the `hours` before `started`.

    The demo begins as if its accounts had been probed for a day already, so
    that the forecasts (which need 10 min of a 5 h window, 2 h of a 7 d one)
    are there from the first probe instead of after an hour.
    """
    rows: List[Dict[str, Any]] = []
    elapsed = -hours * 3600.0
    while elapsed < 0:
        t_ms = int((started + elapsed) * 1000)
        for label in [suffix.lower() for suffix, _, _ in DEMO_ACCOUNTS] + ["codex-" + DEMO_CODEX[0].lower()]:
            state = account_state(label, elapsed, started)
            row: Dict[str, Any] = {"t": t_ms, "label": label}
            for field, short in (("fiveHour", "5h"), ("sevenDay", "7d")):
                fraction, _, reset = state[short]
                row[field] = {"pct": math.floor(max(0.0, fraction) * 1000 + 0.5) / 10.0, "resetsAt": int(reset) * 1000}
            rows.append(row)
        elapsed += step_s
    return rows


class _ProviderHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, provider: "SimulatedProvider") -> None:
        self.provider = provider
        super().__init__(("127.0.0.1", 0), _ProviderHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a probe child hanging up is routine


class _ProviderHandler(BaseHTTPRequestHandler):
    server: _ProviderHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _send(self, status: int, body: Any, headers: Optional[Mapping[str, str]] = None) -> None:
        data = json.dumps(body).encode("utf-8")
        head = ["HTTP/1.1 %d %s" % (status, {200: "OK", 401: "Unauthorized", 404: "Not Found",
                                             429: "Too Many Requests"}.get(status, "Error")),
                "Content-Type: application/json", "Content-Length: %d" % len(data)]
        head += ["%s: %s" % kv for kv in (headers or {}).items()]
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)

    def _token(self) -> str:
        auth = self.headers.get("authorization") or ""
        return auth[7:].strip() if auth.lower().startswith("bearer ") else ""

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        if 0 < length <= 65536:
            self.rfile.read(length)
        elif length:
            self.close_connection = True
        if self.path.split("?")[0] != "/v1/messages":
            return self._send(404, error_body("not_found_error", "not found"))
        label = self.server.provider.label_for(self._token())
        if label is None:
            return self._send(401, error_body("authentication_error", "invalid bearer token"))
        state = self.server.provider.state(label)
        headers = unified_headers(state, digits=4)
        if reply_status(state["status"]) == 429:
            return self._send(429, error_body("rate_limit_error", "rate limited"), headers)
        self._send(200, message_body("demo"), headers)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.split("?")[0] == CODEX_USAGE_PATH:
            return self._codex_usage()
        if self.path.split("?")[0] != "/api/oauth/usage":
            return self._send(404, {"error": "not found"})
        if self._token() != DEMO_LOGIN_TOKEN:
            return self._send(401, error_body("authentication_error", "invalid bearer token"))
        state = self.server.provider.state("acct1")
        self._send(200, usage_body(usage_window(state["5h"][0], state["5h"][2]),
                                   usage_window(state["7d"][0], state["7d"][2]),
                                   seven_day_opus={"utilization": 12.0, "resets_at": None}))


    def _codex_usage(self) -> None:
        """The Codex usage reply (its real shape: windows by length, reset instants in epoch s)."""
        if self._token() != DEMO_CODEX[1] or self.headers.get("chatgpt-account-id") != DEMO_CODEX[2]:
            return self._send(401, {"detail": "Could not validate your token."})
        state = self.server.provider.state("codex-" + DEMO_CODEX[0].lower())
        self._send(200, codex_usage_body(state))


def codex_usage_body(state: Mapping[str, Any]) -> Dict[str, Any]:
    """`GET /backend-api/wham/usage`'s reply for a simulated state."""
    def window(short: str, seconds: int) -> Dict[str, Any]:
        fraction, _, reset = state[short]
        return {"used_percent": round(fraction * 100.0, 1), "limit_window_seconds": seconds,
                "reset_after_seconds": max(0, int(reset - time.time())), "reset_at": int(reset)}
    return {"plan_type": "plus",
            "rate_limit": {"allowed": True, "limit_reached": False,
                           "primary_window": window("5h", 18000), "secondary_window": window("7d", 604800)},
            "credits": {"has_credits": False, "unlimited": False, "balance": "0"}}


class SimulatedProvider:
    """The demo provider on 127.0.0.1 and a free port; `.url`, `.start()`, `.stop()`."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.started = clock()
        self.tokens = {token: suffix.lower() for suffix, token, _ in DEMO_ACCOUNTS}
        self._server: Optional[_ProviderHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self.url = ""

    def label_for(self, token: str) -> Optional[str]:
        return self.tokens.get(token)

    def state(self, label: str) -> Dict[str, Any]:
        return account_state(label, self.clock() - self.started, self.started)

    def start(self) -> "SimulatedProvider":
        self._server = _ProviderHTTPServer(self)
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.25},
                                        name="demo-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class DemoNode:
    """A temporary node home with three accounts, pointed at a simulated provider."""

    def __init__(self, provider_url: str, base_environ: Optional[Mapping[str, str]] = None,
                 started: Optional[float] = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="svc-demo-"))
        self.home = self.root / "home"
        ensure_dir(self.home)
        source = os.environ if base_environ is None else base_environ
        environ = {k: v for k, v in source.items()
                   if not k.startswith(("SVC_", "MODEL_", "EXECUTION_CORE_"))}
        environ.update(DEMO_ENV)
        environ["HOME"] = str(self.home)
        environ["SVC_PROVIDER_URL"] = provider_url
        environ["SVC_CODEX_URL"] = provider_url
        self.environ: Dict[str, str] = environ
        self.paths = Paths(self.home, environ=environ)
        self._write_files()
        if started is not None:
            from ..trajectory.history import append_rows
            append_rows(self.paths, seed_rows(started), fsync=False)

    def _write_files(self) -> None:
        write_json_atomic(self.paths.node_json, {"svc": {"host": {"name": DEMO_NODE}}})
        lines = ["# svc-monitor demo accounts: fixed demo tokens for the simulated provider"]
        for suffix, token, email in DEMO_ACCOUNTS:
            lines.append("export MODEL_TOKEN_%s='%s'  # %s" % (suffix, token, email))
        lines.append('export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"')
        lines.extend(self._codex_home())
        write_text_atomic(self.paths.accounts_env, "\n".join(lines) + "\n")
        write_json_atomic(self.paths.login_credentials, {"claudeAiOauth": {
            "accessToken": DEMO_LOGIN_TOKEN, "subscriptionType": "max", "rateLimitTier": "default_demo"}})
        write_json_atomic(self.paths.login_profile, {"oauthAccount": {"emailAddress": DEMO_ACCOUNTS[0][2]}})

    def _codex_home(self) -> List[str]:
        """The demo Codex login's CODEX_HOME (an auth.json as `codex login` writes it) and its lines."""
        name, token, account_id, email = DEMO_CODEX
        codex_home = self.root / "codex-home"
        ensure_dir(codex_home)
        write_json_atomic(codex_home / "auth.json", {"OPENAI_API_KEY": None, "tokens": {
            "access_token": token, "account_id": account_id}})
        return ["export CODEX_HOME_%s='%s'  # %s" % (name, codex_home, email),
                'export CODEX_HOME="$CODEX_HOME_%s"' % name]

    def remove(self, timeout_s: float = 5.0) -> None:
        """Remove the temporary home. A thread of the stopping monitor may still write a file
        into it (an event, a history row) while it goes, so it is removed until it stays gone."""
        deadline = time.monotonic() + timeout_s
        while True:
            shutil.rmtree(str(self.root), ignore_errors=True)
            if not self.root.exists() or time.monotonic() > deadline:
                return
            time.sleep(0.05)


def main(argv: Optional[Sequence[str]], *, run_monitor: Callable[..., int], configure_logging: Callable[[], None],
         install_stop_signals: Callable[[threading.Event], None]) -> int:
    parser = argparse.ArgumentParser(
        prog="svc-monitor demo",
        description=("Run the monitor against a simulated provider with three demo accounts in a "
                     "temporary home (and one Codex login), all on 127.0.0.1. The active account goes ok -> degraded -> "
                     "rejected -> ok every three minutes, so the dashboard, the exhausted banner, "
                     "the SSE stream and the account.status.changed events all happen for real; "
                     "acct2 climbs towards a wall before its reset (the forecast) and threshold "
                     "alerts fire within the first minute. "
                     "Ctrl-C, SIGTERM or SIGHUP stops it and removes the temporary home."))
    parser.add_argument("--port", default=None,
                        help="dashboard port on 127.0.0.1 (0 picks a free one; a port given here that is taken "
                             "is an error; without --port, %d, or a free port when %d is taken)"
                             % (DEFAULT_PORT, DEFAULT_PORT))
    parser.add_argument("--keep-home", action="store_true", help="keep the temporary home on exit (to inspect events)")
    args = parser.parse_args(argv)
    port = _port_arg(args.port)
    if port is None:
        print("svc-monitor demo: --port must be a number in 0..65535", file=sys.stderr)
        return 2
    if args.port is not None and port != 0 and not _port_free(port):
        # A port asked for by name is a promise to whoever reads the command line: no silent fallback.
        print("svc-monitor demo: port %d on 127.0.0.1 is taken; stop what uses it, or leave out --port "
              "to let the demo pick a free one" % port, file=sys.stderr)
        return 1
    configure_logging()
    stop_event = threading.Event()
    install_stop_signals(stop_event)
    # The demo's home is temporary: a closed terminal (SIGHUP) stops it and removes it too,
    # as SIGTERM (timeout, systemd, container runtimes) and Ctrl-C do.
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, lambda signum, frame: stop_event.set())
    provider = SimulatedProvider().start()
    node = DemoNode(provider.url, started=provider.started)
    try:
        if args.port is None and not _port_free(port):
            print("svc-monitor demo: port %d is busy; using a free port instead" % port, file=sys.stderr)
            port = 0
        command = invoked_as()

        def ready(server: Any) -> None:
            print("svc-monitor demo: dashboard at %s/  (Ctrl-C to stop)" % server.url, flush=True)
            print("svc-monitor demo: simulated fleet at %s/fleet" % server.url, flush=True)
            # The demo's monitor.json is in its temporary home, where `hud` without --url never looks.
            print("svc-monitor demo: terminal HUD: %s hud --url %s" % (command, server.url), flush=True)
            print("svc-monitor demo: status line: %s statusline --url %s" % (command, server.url), flush=True)
            print("svc-monitor demo: fleet in a terminal: %s status --url %s" % (cluster_command(command), server.url),
                  flush=True)
            print("svc-monitor demo: demo home %s; events in %s" % (node.home, node.paths.events_dir), flush=True)

        return run_monitor(node.paths, node.environ, bind="127.0.0.1", port=port, probe_enabled=True,
                           stop_event=stop_event, on_ready=ready, liveness=False,
                           fleet_source=fleet.fleet_source(provider.started, provider.clock))
    finally:
        provider.stop()
        if args.keep_home:
            print("svc-monitor demo: kept %s" % node.root, file=sys.stderr)
        else:
            node.remove()


def _port_arg(text: Optional[str]) -> Optional[int]:
    """--port as a number (DEFAULT_PORT when not given), or None when it is not one in 0..65535."""
    if text is None:
        return DEFAULT_PORT
    try:
        port = int(text)
    except ValueError:
        return None
    return port if 0 <= port <= 65535 else None


def invoked_as(argv0: Optional[str] = None, executable: Optional[str] = None) -> str:
    """How this process was started, as a command prefix the printed commands can use:
    `python3 -m svcposture monitor` under `-m`, `svc monitor` under the `svc` command,
    else the script's own name (`svc-monitor`)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    base = os.path.basename(argv0)
    if base in ("__main__.py", "-m", "-c", ""):
        python = executable
        found = shutil.which("python3")
        if found and os.path.realpath(found) == os.path.realpath(executable):
            python = "python3"
        package = (__package__ or "svcposture.monitor").rsplit(".", 1)[0]
        return "%s -m %s monitor" % (python, package)
    return "svc monitor" if base == "svc" else base


def cluster_command(monitor_command: str) -> str:
    """The `svc-cluster` command beside a monitor command invoked_as() gave."""
    if monitor_command.endswith(" monitor"):
        return monitor_command[:-len(" monitor")] + " cluster"
    if monitor_command.endswith("svc-monitor"):
        return monitor_command[:-len("svc-monitor")] + "svc-cluster"
    return "svc-cluster"


def _port_free(port: int) -> bool:
    import socket
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        probe.close()
