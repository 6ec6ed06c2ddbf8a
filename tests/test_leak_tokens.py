"""Canary tokens of every vendor, then a full run per vendor; the canary bytes must appear nowhere.

- claude: canaries in the accounts env file and the login credentials, then
  probes, forced refreshes, SSE, events, doctor, /metrics, the HUD, the probe
  CLI, and an error of every kind;
- codex: access, refresh and id tokens in each login's auth.json, Claude and
  Codex lines side by side, every kind of Codex reply, session logs, the probe
  CLI, the doctor and the HUD.

Not in a response, a frame, a log, the event log, the latch, any file the node
wrote, /proc/<monitor pid>/environ, or the monitor's memory.
"""
from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from tests.support.codex import CodexServer, make_login, token_count_line, usage_reply, write_session
from tests.support.home import accounts_path, monitor_env, set_host_name, status_events, write_accounts
from tests.support.monitor import Monitor, http_get
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

CORE = "CANARY" + os.urandom(8).hex().upper()


def canary(label: str) -> str:
    return "sk-ant-oat01-%s-%s" % (CORE, label)


def forms(token: str) -> List[bytes]:
    raw = token.encode()
    return [raw, CORE.encode(), CORE.lower().encode(), base64.b64encode(raw), base64.urlsafe_b64encode(raw)]


# label suffix, email, provider settings
ACCOUNTS: List[Tuple[str, str, Dict[str, object]]] = [
    ("OK", "ok@example.com", {}),
    ("REJ", "rej@example.com", {}),
    ("AUTH", "auth@example.com", {"mode": "auth"}),
    ("NOHDR", "nohdr@example.com", {"mode": "no_headers"}),
    ("GARB", "garb@example.com", {"mode": "garbage"}),
    ("SLOW", "slow@example.com", {"mode": "slow", "delay": 2.0}),
    ("DROP", "drop@example.com", {"mode": "drop"}),
    ("HTTP", "http@example.com", {"mode": "no_headers", "http_status": 500}),
]


class StreamRecorder(threading.Thread):
    """Holds an SSE connection open and keeps every byte it receives."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=1)
        self.sock.sendall(b"GET /api/accounts/stream HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n")
        self.data = bytearray()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                block = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not block:
                return
            self.data += block

    def close(self) -> bytes:
        self.stopped.set()
        try:
            self.sock.close()
        except OSError:
            pass
        self.join(5)
        return bytes(self.data)


def memory_of(pid: int) -> bytes:
    """Every readable private mapping of a process (root or the same uid)."""
    out = bytearray()
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in maps:
            parts = line.split()
            if "r" not in parts[1] or (len(parts) > 5 and parts[5] in ("[vvar]", "[vsyscall]", "[vdso]")):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            if end - start > 512 * 1024 * 1024:
                continue
            try:
                mem.seek(start)
                out += mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
    return bytes(out)


def refresh(url: str) -> Dict[str, object]:
    port = url.rsplit(":", 1)[1]
    status, _, body = http_get(url, "/api/accounts?refresh=true",
                               {"X-Svc-Refresh": "1", "Host": "localhost:%s" % port})
    assert status == 200, body
    return json.loads(body)


def run_cli(args: List[str], env: Dict[str, str]) -> bytes:
    proc = subprocess.run([sys.executable, "-m"] + args, env=env, capture_output=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    return proc.stdout + proc.stderr


def _claude_run(tmp_path: Path) -> Tuple[Dict[str, bytes], List[str]]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "leak-node")
    captured: Dict[str, bytes] = {}
    kinds_seen = set()
    env_file = home / ".config" / "svc" / "model-accounts.env"
    creds = home / ".claude" / ".credentials.json"
    creds.parent.mkdir(mode=0o700)
    creds.write_text(json.dumps({"claudeAiOauth": {"accessToken": canary("login"), "subscriptionType": "max",
                                                   "rateLimitTier": "default_tier"}}))
    os.chmod(str(creds), 0o600)
    (home / ".claude.json").write_text(json.dumps({"oauthAccount": {"emailAddress": "login@example.com"}}))

    def write_env(active: str, extra: str = "") -> None:
        write_accounts(accounts_path(home), [(s, canary(s.lower()), e) for s, e, _ in ACCOUNTS], active=active)
        if extra:
            with open(str(env_file), "a") as fh:
                fh.write(extra)

    def note_kinds(body: Dict[str, object]) -> None:
        err = body.get("error")
        if isinstance(err, dict):
            kinds_seen.add(err.get("kind"))
        for account in body.get("accounts") or []:
            if isinstance(account, dict) and isinstance(account.get("error"), dict):
                kinds_seen.add(account["error"].get("kind"))

    with ProviderServer() as provider:
        for suffix, _, settings in ACCOUNTS:
            provider.set_account(canary(suffix.lower()), **settings)  # type: ignore[arg-type]
        usage = {"five_hour": {"utilization": 12.5, "resets_at": "2030-01-01T00:00:00.123456+00:00"},
                 "seven_day": {"utilization": 40.0, "resets_at": "2030-01-05T00:00:00Z"},
                 "seven_day_opus": {"utilization": 3.0}, "seven_day_sonnet": None}
        provider.set_usage(canary("login"), usage)
        write_env("OK")
        env = monitor_env(home, provider.url, SVC_PROBE_TIMEOUT_S="0.5", SVC_QUOTA_SAMPLER="1",
                          SVC_SSE_KEEPALIVE_S="0.3", SVC_POSTURE_TTL_S="0.2", SVC_REFRESH_FLOOR_S="0.05",
                          SVC_PROBE_INTERVAL_S="0.5")
        monitor = Monitor(env).start(tmp_path / "monitor.log")
        url = monitor.url
        assert url
        stream = StreamRecorder(url)
        stream.start()
        try:
            body = wait_until(lambda: (lambda b: b if b.get("available") and b.get("accounts") else None)(
                json.loads(http_get(url, "/api/accounts")[2])), 30, message="a probed posture")
            note_kinds(body)
            for _ in range(2):
                note_kinds(refresh(url))
            # An ok -> rejected -> ok episode on the active account: two events.
            write_env("REJ")
            provider.set_account(canary("rej"), status="rejected", five_hour=(1.05, "rejected"))
            wait_until(lambda: refresh(url).get("status") == "rejected", 20, 0.1, "rejected posture")
            provider.set_account(canary("rej"), status="allowed")
            wait_until(lambda: refresh(url).get("status") == "ok", 20, 0.1, "ok posture")
            wait_until(lambda: len(status_events(home)) >= 2, 10, message="two status events")
            # Node-level errors: an unsafe env file (config), a child that dies (internal).
            os.chmod(str(env_file), 0o666)
            note_kinds(wait_until(lambda: (lambda b: b if b.get("status") == "error" else None)(refresh(url)),
                                  10, 0.1, "config error"))
            os.chmod(str(env_file), 0o600)
            write_env("OK", "exit 3\n")
            note_kinds(wait_until(lambda: (lambda b: b if (b.get("error") or {}).get("kind") == "internal"
                                           else None)(refresh(url)), 10, 0.1, "internal error"))
            write_env("OK")
            note_kinds(wait_until(lambda: (lambda b: b if b.get("status") == "ok" else None)(refresh(url)),
                                  10, 0.1, "recovered"))
            wait_until(lambda: any(e["attributes"]["event.name"] == "account.ratelimit.sampled"
                                   for e in _all_events(home)), 20, message="a quota sample")
            for path in ("/", "/api/accounts", "/metrics", "/api/openapi.json", "/healthz", "/nowhere",
                         "/api/accounts?refresh=true"):
                status, headers, raw = http_get(url, path)
                captured["GET " + path] = json.dumps(headers).encode() + raw
            captured["hud"] = run_cli(["svcposture", "monitor", "hud", "--url", url, "--once"], env)
            captured["doctor"] = run_cli(["svcposture", "cluster", "doctor", "--json"], env)
            for sub in ("check", "headers", "usage"):
                captured["probe " + sub] = run_cli(["svcposture.probe", sub, "--json"], env)
                captured["probe human " + sub] = run_cli(["svcposture.probe", sub], env)
            pid = monitor.pid
            captured["/proc/environ"] = Path("/proc/%d/environ" % pid).read_bytes()
            captured["/proc/cmdline"] = Path("/proc/%d/cmdline" % pid).read_bytes()
            captured["memory"] = memory_of(pid)
        finally:
            captured["sse"] = stream.close()
            code = monitor.stop()
        captured["monitor stderr"] = monitor.stderr_text().encode()
        assert code == 0
        # A second run where the usage probe is rate limited: its log lines too.
        provider.set_usage(canary("login"), {"error": "slow down"}, http_status=429, retry_after=1)
        monitor = Monitor(env).start(tmp_path / "monitor2.log")
        try:
            wait_until(lambda: provider.usage_calls() >= 2, 20, message="second usage poll")
            captured["GET /api/accounts 2"] = http_get(monitor.url or "", "/api/accounts")[2]
        finally:
            monitor.stop()
        captured["monitor2 stderr"] = monitor.stderr_text().encode()

    for path in home.rglob("*"):
        if path.is_file() and path not in (env_file, creds):
            captured["file " + str(path.relative_to(home))] = path.read_bytes()

    # The run exercised what it claims to.
    assert {"auth", "no_headers", "parse", "timeout", "transport", "http", "config", "internal"} <= kinds_seen, \
        kinds_seen
    assert [e["attributes"]["account.status"] for e in status_events(home)][-2:] == ["rejected", "ok"]
    assert b"event: account" in captured["sse"] and captured["sse"].count(b"event: account") >= 3
    assert any(k.startswith("file svc/events/") for k in captured)
    assert any(k.startswith("file svc/account-status-latch") for k in captured)

    return captured, [canary(s.lower()) for s, _, _ in ACCOUNTS] + [canary("login")]


# ---------------------------------------------------------------- codex

def cx_canary(kind: str, label: str) -> str:
    """A Codex token canary: `kind` is how such a token starts (a JWT's `eyJ...`, a refresh `rt`)."""
    return "%s-%s-%s" % (kind, CORE, label)


# name, reply, status, extra kwargs
LOGINS = [
    ("OK", usage_reply(12.5, 40), 200, {}),
    ("EXPIRED", {"detail": "token expired"}, 401, {}),
    ("LIMITED", {"detail": "slow down"}, 429, {"headers": {"retry-after": "30"}}),
    ("HTML", b"<html><body>Just a moment...</body></html>", 200, {}),
    ("SLOW", usage_reply(), 200, {"delay": 3.0}),
    ("ECHO", None, 200, {}),  # a hostile endpoint that echoes the token in every string field
]


def _echo_reply(token: str) -> Dict[str, object]:
    body = usage_reply(plan=token[:30])
    body["additional_rate_limits"] = [{"limit_name": token[-40:], "rate_limit": {
        "primary_window": {"used_percent": 1, "limit_window_seconds": 3600}}}]
    body["detail"] = token
    return body


def _write_env(home: Path, dirs: Dict[str, Path], claude: str) -> None:
    extra = "".join('CODEX_HOME_%s="%s"  # %s@example.com\n' % (n, d, n.lower()) for n, d in dirs.items())
    extra += 'export CODEX_HOME="$CODEX_HOME_OK"\n'
    write_accounts(accounts_path(home), [("ACCT1", claude, "a@example.com")], active="ACCT1", extra=extra)


def _codex_run(tmp_path: Path) -> Tuple[Dict[str, bytes], List[str]]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "leak-node")
    claude = canary("claude")
    tokens = [claude]
    dirs: Dict[str, Path] = {}
    captured: Dict[str, bytes] = {}
    with CodexServer() as codex, ProviderServer() as provider:
        provider.set_account(claude)
        for name, body, status, kwargs in LOGINS:
            access, refresh = cx_canary("eyJhbGciOi", name.lower()), cx_canary("rt", name.lower())
            id_token = cx_canary("eyJpZCI6", name.lower())
            tokens += [access, refresh, id_token]
            dirs[name] = home / ("codex-" + name.lower())
            make_login(dirs[name], access, "acct-" + name.lower(), refresh=refresh, id_token=id_token)
            codex.set_reply(access, _echo_reply(access) if body is None else body, status, **kwargs)
        now = time.time()
        write_session(dirs["OK"], now - 5, [token_count_line(now - 5, (30.0, 300, 100), (50.0, 10080, 999),
                                                             spelling="resets_in_seconds")])
        _write_env(home, dirs, claude)
        env = monitor_env(home, provider.url, SVC_CODEX_URL=codex.url, SVC_PROBE_TIMEOUT_S="1",
                          SVC_PROBE_INTERVAL_S="0.5", SVC_REFRESH_FLOOR_S="0.05")
        monitor = Monitor(env).start(tmp_path / "monitor.log")
        try:
            wait_until(lambda: len({r["authorization"] for r in codex.requests}) >= 5, 30,
                       message="every Codex login asked by the monitor's child")
            for path in ("/", "/api/accounts", "/api/accounts?provider=codex", "/metrics", "/healthz",
                         "/api/history", "/api/trajectory", "/fleet", "/api/fleet"):
                status, headers, raw = http_get(monitor.url, path)
                captured["GET " + path] = json.dumps(headers).encode() + raw
            for sub in ("check", "headers"):
                captured["probe " + sub] = run_cli(["svcposture.probe", sub, "--json"], env)
                captured["probe human " + sub] = run_cli(["svcposture.probe", sub], env)
            captured["hud"] = run_cli(["svcposture", "monitor", "hud", "--url", monitor.url, "--once"], env)
            captured["doctor"] = run_cli(["svcposture", "cluster", "doctor", "--json"], env)
            captured["/proc/environ"] = Path("/proc/%d/environ" % monitor.pid).read_bytes()
            captured["memory"] = memory_of(monitor.pid)
        finally:
            code = monitor.stop()
        captured["monitor stderr"] = monitor.stderr_text().encode()
        assert code == 0
    report = json.loads(captured["probe headers"].decode().strip().splitlines()[-1])
    rows = {r["label"]: r for r in report["codex"]["accounts"]}
    # The run exercised what it claims to: a session sample, each error, the hostile echo scrubbed.
    assert rows["codex-ok"]["source"] == "session" and rows["codex-ok"]["fiveHour"]["pct"] == 30.0
    assert rows["codex-expired"]["error"]["kind"] == "unauthorized"
    assert rows["codex-limited"]["error"]["httpStatus"] == 429 and rows["codex-limited"]["retryAfterS"] == 30.0
    assert rows["codex-html"]["error"]["kind"] == "parse"
    assert rows["codex-slow"]["error"]["kind"] == "timeout"
    assert rows["codex-echo"]["planType"] is None and rows["codex-echo"]["extraWindows"][0]["name"] is None
    for path in home.rglob("*"):
        if path.is_file() and path.name != "auth.json" and path != accounts_path(home):
            captured["file " + str(path.relative_to(home))] = path.read_bytes()
    return captured, tokens


# ---------------------------------------------------------------- the scan, per vendor

RUNS = {"claude": _claude_run, "codex": _codex_run}


@pytest.mark.parametrize("vendor", sorted(RUNS))
def test_canary_tokens_appear_nowhere(tmp_path: Path, vendor: str) -> None:
    captured, tokens = RUNS[vendor](tmp_path)
    leaks = ["%s holds %r" % (name, form[:40]) for name, data in captured.items() for token in tokens
             for form in forms(token) if form in data]
    assert not leaks, "\n".join(sorted(set(leaks)))


def _all_events(home: Path) -> List[Dict[str, object]]:
    out = []
    for path in sorted((home / "svc" / "events").glob("*.jsonl")):
        for raw in path.read_bytes().splitlines():
            try:
                out.append(json.loads(raw))
            except ValueError:
                pass
    return out


@pytest.mark.parametrize("launcher", ["svc-monitor", "svc-stack start"])
def test_a_token_in_the_callers_environment_never_reaches_the_monitor(tmp_path: Path, launcher: str) -> None:
    """An operator's shell may export the active token; the monitor must not keep it."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "leak-node")
    env = monitor_env(home, "http://127.0.0.1:9", SVC_ACCOUNTS_PROBE="0")
    env["MODEL_CODE_OAUTH_TOKEN"] = canary("shell")
    env["MODEL_TOKEN_SHELL"] = canary("shell")
    if launcher == "svc-monitor":
        monitor = Monitor(env, args=["--no-probe"]).start(tmp_path / "monitor.log")
        pid = monitor.pid
        try:
            environ = Path("/proc/%d/environ" % pid).read_bytes()
            memory = memory_of(pid)
        finally:
            monitor.stop()
    else:
        env["SVC_MONITOR_PORT"] = "0"
        proc = subprocess.run([sys.executable, "-m", "svcposture", "stack", "start"], env=env,
                              capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        pid = int((home / "svc" / "run" / "monitor.pid").read_text().strip())
        try:
            environ = Path("/proc/%d/environ" % pid).read_bytes()
            memory = memory_of(pid)
        finally:
            subprocess.run([sys.executable, "-m", "svcposture", "stack", "stop"], env=env,
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    for form in forms(canary("shell")):
        assert form not in environ, "/proc/%d/environ holds the caller's token" % pid
        assert form not in memory, "the monitor's memory holds the caller's token"
