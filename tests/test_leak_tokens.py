"""Canary tokens in the accounts env file and the login credentials, then a full
run: probes, forced refreshes, SSE, events, doctor, /metrics, the HUD, the probe
CLI, and an error of every kind. The canary bytes must appear nowhere: not in a
response, a frame, a log, the event log, the latch, any file the node wrote,
/proc/<monitor pid>/environ, or the monitor's memory.
"""
from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

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


def test_canary_tokens_appear_nowhere(tmp_path: Path) -> None:
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

    tokens = [canary(s.lower()) for s, _, _ in ACCOUNTS] + [canary("login")]
    leaks = []
    for name, data in captured.items():
        for token in tokens:
            for form in forms(token):
                if form in data:
                    leaks.append("%s holds %r" % (name, form[:40]))
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
