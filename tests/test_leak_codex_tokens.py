"""Codex canaries: access, refresh and id tokens in each login's auth.json, then a monitor run
with Claude and Codex lines side by side, every kind of Codex reply, session logs, the probe CLI,
the doctor and the HUD. None of the canary bytes may appear in a response, a log, the event log,
any file the node wrote, /proc/<monitor pid>/environ or the monitor's memory."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from tests.support.codex import CodexServer, make_login, token_count_line, usage_reply, write_session
from tests.support.home import accounts_path, monitor_env, set_host_name, write_accounts
from tests.support.monitor import Monitor, http_get
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

CORE = "CANARYCX" + os.urandom(8).hex().upper()


def canary(kind: str, label: str) -> str:
    return "%s-%s-%s" % (kind, CORE, label)


def forms(token: str) -> List[bytes]:
    raw = token.encode()
    return [raw, CORE.encode(), CORE.lower().encode(), base64.b64encode(raw), base64.urlsafe_b64encode(raw)]


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


def _run(args: List[str], env: Dict[str, str]) -> bytes:
    proc = subprocess.run([sys.executable, "-m"] + args, env=env, capture_output=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    return proc.stdout + proc.stderr


def test_codex_tokens_appear_nowhere(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "leak-node")
    claude = canary("sk-ant-oat01", "claude")
    tokens = [claude]
    dirs: Dict[str, Path] = {}
    captured: Dict[str, bytes] = {}
    with CodexServer() as codex, ProviderServer() as provider:
        provider.set_account(claude)
        for name, body, status, kwargs in LOGINS:
            access, refresh = canary("eyJhbGciOi", name.lower()), canary("rt", name.lower())
            id_token = canary("eyJpZCI6", name.lower())
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
                captured["probe " + sub] = _run(["svcposture.probe", sub, "--json"], env)
                captured["probe human " + sub] = _run(["svcposture.probe", sub], env)
            captured["hud"] = _run(["svcposture", "monitor", "hud", "--url", monitor.url, "--once"], env)
            captured["doctor"] = _run(["svcposture", "cluster", "doctor", "--json"], env)
            captured["/proc/environ"] = Path("/proc/%d/environ" % monitor.pid).read_bytes()
            captured["memory"] = _memory(monitor.pid)
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
    leaks = ["%s holds %r" % (name, form[:40]) for name, data in captured.items() for token in tokens
             for form in forms(token) if form in data]
    assert not leaks, "\n".join(sorted(set(leaks)))


def _memory(pid: int) -> bytes:
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


def _split_reply(token: str) -> Dict[str, object]:
    """A hostile reply that carries the whole token in pieces: each window name holds 10 of its
    characters wrapped in one extra character each side, so no name is a part of the token and
    none holds it, and the plan holds the first piece the same way."""
    pieces = [token[i:i + 10] for i in range(0, len(token), 10)]
    body = usage_reply(12.5, 40, plan="x%sx" % pieces[0])
    body["additional_rate_limits"] = [{"limit_name": "w%sw" % piece, "rate_limit": {
        "primary_window": {"used_percent": 1 + i, "limit_window_seconds": 3600}}} for i, piece in enumerate(pieces)]
    return body


def _shared_runs(token: str, text: str, run: int = 8) -> List[str]:
    return sorted({token[i:i + run] for i in range(len(token) - run + 1) if token[i:i + run] in text})


def test_a_token_split_across_window_names_never_reaches_the_api(tmp_path: Path) -> None:
    """Any string of a usage reply that shares 8 or more consecutive characters with a token is
    dropped, so a reply cannot carry a token out in pieces (docs/codex.md: any part of a token)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "split-node")
    claude = canary("sk-ant-oat01", "claude")
    access = canary("eyJhbGciOi", "split")
    login = home / "codex-split"
    with CodexServer() as codex, ProviderServer() as provider:
        provider.set_account(claude)
        make_login(login, access, "acct-split", refresh=canary("rt", "split"), id_token=canary("eyJpZCI6", "split"))
        codex.set_reply(access, _split_reply(access), 200)
        write_accounts(accounts_path(home), [("ACCT1", claude, "a@example.com")], active="ACCT1",
                       extra='CODEX_HOME_SPLIT="%s"  # split@example.com\nexport CODEX_HOME="$CODEX_HOME_SPLIT"\n'
                       % login)
        env = monitor_env(home, provider.url, SVC_CODEX_URL=codex.url, SVC_PROBE_INTERVAL_S="0.5",
                          SVC_REFRESH_FLOOR_S="0.05")
        monitor = Monitor(env).start(tmp_path / "monitor.log")
        try:
            def polled() -> object:
                status, _, raw = http_get(monitor.url, "/api/accounts?provider=codex")
                body = json.loads(raw)
                rows = [a for a in body.get("accounts") or [] if a.get("label") == "codex-split"]
                return raw.decode() if rows and (rows[0].get("extraWindows") or []) else None
            text = wait_until(polled, 30, message="the split login's windows on /api/accounts")
        finally:
            monitor.stop()
    body = json.loads(text)
    row = next(a for a in body["accounts"] if a["label"] == "codex-split")
    # The windows themselves stay (their numbers are the vendor's); only the names go.
    assert sorted(w["pct"] for w in row["extraWindows"]) == [1 + i for i in range(len(row["extraWindows"]))]
    assert len(row["extraWindows"]) == len(range(0, len(access), 10))
    assert _shared_runs(access, text) == [], "pieces of the token on /api/accounts"
