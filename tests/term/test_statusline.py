"""svc-monitor statusline (docs/monitor.md): the command as a real child, fed real-shaped
statusLine payloads, against a real monitor on loopback, a hung one, a broken
one and none at all.

Every run must print exactly one line, exit 0 and write nothing to stderr.
How fast it is (the 250 ms budget, a render against `python -c pass`) is
measured by scripts/bench_statusline.py, never asserted here. Runs that
must reach a monitor that is up get a generous SVC_STATUSLINE_BUDGET_MS
(SLOW), so a loaded machine cannot turn them into the fallback; runs that
must give up use the default budget against a monitor that never answers.

The real monitor here serves /api/trajectory, but its history is a few forced
probes seconds apart, too little for a forecast (a forecast wants 10 min of points),
so these tests cover the no-forecast path through the real route. The forecast
through a real monitor, with seeded history, is tests/term/test_line_forecast.py;
the scripted server here serves trajectory bodies a real monitor would not (hung,
404, junk, disabled).
"""
from __future__ import annotations

import json
import os
import pty
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Optional

import pytest

from tests.support.home import canary, clean_env, node_env
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.rawserver import HANG, RawServer, http_reply
from tests.support.waiting import wait_until
from svcposture.term import statusline

# How to start a monitor, said by the line that found none.
START_IT = " (start it: svc-monitor)"

TOK1 = canary("sl1")
TOK2 = canary("sl2")
ANSI = re.compile(rb"\x1b\[[0-9;]*m")


def run(env: Dict[str, str], *args: str, stdin: Optional[bytes] = b"", timeout: float = 20) -> str:
    """The command as a child: its one line, checked for the invariants every run keeps."""
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "statusline", *args], env=env,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, timeout=timeout)
    return checked(proc.returncode, proc.stdout, proc.stderr)


def checked(code: int, out: bytes, err: bytes) -> str:
    assert code == 0, (code, out, err)
    assert err == b"", err
    assert out.endswith(b"\n") and out.count(b"\n") == 1 and b"\r" not in out, out
    assert TOK1.encode() not in out and TOK2.encode() not in out
    plain = ANSI.sub(b"", out[:-1])
    assert not any(b < 32 or b == 127 for b in plain), out
    return out[:-1].decode("utf-8")


def plain(line: str) -> str:
    return ANSI.sub(b"", line.encode()).decode()


def agent_payload(five_pct: float = 61.4, seven_pct: float = 41.0, **extra: Any) -> bytes:
    """A statusLine payload as the agent sends it, with its own rate_limits."""
    now = time.time()
    body = {"hook_event_name": "Status", "session_id": "abc123", "transcript_path": "/tmp/t.jsonl",
            "cwd": "/work", "model": {"id": "claude-x", "display_name": "X"},
            "workspace": {"current_dir": "/work", "project_dir": "/work"}, "version": "2.0.0",
            "output_style": {"name": "default"},
            "cost": {"total_cost_usd": 0.01, "total_duration_ms": 1000},
            "rate_limits": {"five_hour": {"used_percentage": five_pct, "resets_at": int(now + 3 * 3600 + 300)},
                            "seven_day": {"used_percentage": seven_pct, "resets_at": int(now + 4 * 86400 + 300)}}}
    body.update(extra)
    return json.dumps(body).encode()


SLOW = {"SVC_STATUSLINE_BUDGET_MS": "5000"}
LOCAL = re.compile(r"^5h 61.4% 3h \dm \| 7d 41% 4d \(local\)$")


# ---------------------------------------------------------------- a real monitor

@pytest.fixture(scope="module")
def mon(tmp_path_factory):
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.614, "allowed"), seven_day=(0.41, "allowed"))
        provider.set_account(TOK2, five_hour=(0.05, "allowed"), seven_day=(0.10, "allowed"))
        home = tmp_path_factory.mktemp("statusline") / "home"
        home.mkdir()
        env = node_env(home, provider.url, [("ACCT1", TOK1, "ada@example.com"), ("ACCT2", TOK2, "grace@example.com")],
                       active="ACCT1", extra=dict(SLOW, SVC_PROBE_INTERVAL_S="300", SVC_POSTURE_TTL_S="300",
                                                  SVC_REFRESH_FLOOR_S="0"))
        m = start_monitor(env)
        m.env = env
        m.provider = provider
        m.home = home
        wait_until(lambda: m.get_json("/api/accounts")[1].get("status") == "ok", 30, message="first probe")
        yield m
        m.stop()


def set_state(mon: Any, status: str, five: Any, seven: Any = (0.41, "allowed")) -> None:
    """Make the provider answer so, and have the monitor probe it now."""
    now = time.time()
    mon.provider.set_account(TOK1, status=status, five_hour=five, seven_day=seven,
                             reset_5h=now + 3600 + 150, reset_7d=now + 3 * 86400 + 6 * 3600 + 150)
    code, body = mon.get_json("/api/accounts?refresh=true", {"X-Svc-Refresh": "1"})
    assert code == 200 and body["active"]["fiveHour"]["status"] == five[1], body


def test_ok_line_from_the_real_monitor(mon):
    set_state(mon, "allowed", (0.614, "allowed"))
    out = run(mon.env, "--url", mon.url, stdin=agent_payload(five_pct=3, seven_pct=3))
    assert re.match(r"^\x1b\[32macct1 5h 61.4% 1h [12]m \| 7d 41% 3d 6h\x1b\[0m$", out), out
    # The monitor wins over the agent's own numbers; its trajectory has no forecast yet, so none is shown.
    assert "(local)" not in out and "100%" not in out
    code, trajectory = mon.get_json("/api/trajectory")
    assert code == 200 and trajectory["accounts"][0]["fiveHour"]["forecast"] is None, trajectory


def test_degraded_names_what_the_advice_names(mon):
    # At 85 % with no forecast yet, the advice is to stay: no sibling is named.
    set_state(mon, "allowed_warning", (0.85, "allowed_warning"))
    assert mon.get_json("/api/advice")[1]["advice"] == "stay"
    out = run(mon.env, "--url", mon.url)
    assert re.match(r"^\x1b\[33macct1 5h 85% 1h [12]m \| 7d 41% 3d 6h\x1b\[0m$", out), out


def test_percents_round_to_the_nearest_as_on_every_surface(mon):
    # 85.66 % is 85.7 % on the status line as on the pages (_text.pct_text), never 85 %; the agent's own
    # figures (the local line) are written the same way.
    set_state(mon, "allowed_warning", (0.8566, "allowed_warning"), seven=(0.4149, "allowed"))
    out = plain(run(mon.env, "--url", mon.url, "--no-color"))
    assert out.startswith("acct1 5h 85.7% ") and " | 7d 41.5% " in out, out
    local = run(dict(mon.env, **SLOW), "--url", "http://127.0.0.1:9", "--no-color",
                stdin=agent_payload(five_pct=85.66, seven_pct=99.94))
    assert local.startswith("5h 85.7% ") and "| 7d 99.9% " in local and local.endswith("(local)"), local


def test_rejected_names_next(mon):
    set_state(mon, "rejected", (1.0, "rejected"))
    out = run(mon.env, "--url", mon.url, stdin=agent_payload())
    assert re.match(r"^\x1b\[1;31macct1 5h 100% 1h [12]m \| 7d 41% 3d 6h \| rejected \| next acct2\x1b\[0m$",
                    out), out


def test_the_url_comes_from_monitor_json(mon):
    set_state(mon, "allowed", (0.614, "allowed"))
    assert (mon.home / "svc" / "run" / "monitor.json").is_file()
    out = run(mon.env, "--no-color")  # no --url: ~/svc/run/monitor.json names the monitor
    assert re.match(r"^acct1 5h 61.4% 1h [12]m \| 7d 41% 3d 6h$", out), out


def test_no_color_and_flag(mon):
    set_state(mon, "allowed", (0.614, "allowed"))
    for env, args in ((dict(mon.env, NO_COLOR="1"), ()), (dict(mon.env, NO_COLOR=""), ()), (mon.env, ("--no-color",))):
        out = run(env, "--url", mon.url, *args)
        assert "\x1b" not in out and out.startswith("acct1 5h 61.4% "), out
    # Colour does not depend on a terminal: the agent renders it from a pipe.
    assert run(mon.env, "--url", mon.url).startswith("\x1b[32m")


def test_hundred_renders_cost_the_provider_nothing(mon):
    set_state(mon, "allowed", (0.614, "allowed"))
    before = (mon.provider.message_calls(), mon.provider.usage_calls())
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda _: run(mon.env, "--url", mon.url, stdin=agent_payload()), range(100)))
    assert all(o.startswith("\x1b[32macct1 5h 61.4% ") for o in outs), set(outs)
    assert (mon.provider.message_calls(), mon.provider.usage_calls()) == before


def test_stdin_left_open_or_a_terminal_does_not_hold_the_line(mon):
    set_state(mon, "allowed", (0.614, "allowed"))
    cmd = [sys.executable, "-m", "svcposture", "monitor", "statusline", "--url", mon.url]
    env = dict(mon.env, SVC_STATUSLINE_BUDGET_MS="5000")

    def never_closed(url: str) -> str:
        """A pipe the agent never closes: the command answers anyway."""
        proc = subprocess.Popen(cmd[:-1] + [url], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            proc.stdin.write(b'{"rate_limits": ')
            proc.stdin.flush()
            out, err = proc.stdout.read(), proc.stderr.read()
            proc.wait(20)
        finally:
            proc.stdin.close()
        return checked(proc.returncode, out, err)

    assert never_closed(mon.url).startswith("\x1b[32macct1 5h 61.4% ")   # stdin is not even read
    dead = dead_url()
    # Read until the deadline, half a payload:
    assert never_closed(dead) == "svc: monitor not running at " + dead + START_IT
    # A terminal on stdin (the command run by hand): not read at all.
    master, slave = pty.openpty()
    try:
        done = subprocess.run(cmd, env=env, stdin=slave, capture_output=True, timeout=20)
    finally:
        os.close(slave)
        os.close(master)
    assert checked(done.returncode, done.stdout, done.stderr).startswith("\x1b[32macct1 5h 61.4% ")


@pytest.mark.parametrize("stdin", [
    b"", b"\x00\xff\xfe binary \x80" * 100, b"not json", b'{"rate_limits": {"five_hour": ', b"[" * 100_000,
    b"1" * 50_000, agent_payload() + b" " * 70_000, json.dumps({"pad": "x" * 10_000_000}).encode(),
    b"\x1b]0;pwned\x07", None,
], ids=["empty", "binary", "not-json", "truncated", "deep", "huge-int", "over-64k", "10mb", "escape", "devnull"])
def test_any_payload_with_a_live_monitor_gives_the_monitor_line(mon, stdin):
    set_state(mon, "allowed", (0.614, "allowed"))
    out = run(mon.env, "--url", mon.url, "--no-color", stdin=stdin)
    assert re.match(r"^acct1 5h 61.4% 1h [12]m \| 7d 41% 3d 6h$", out), out


def test_disabled_monitor_says_so_or_shows_the_agents_numbers(tmp_path, monitors):
    home = tmp_path / "home"
    home.mkdir()
    env = dict(clean_env(home), **SLOW)
    m = monitors.start(env, args=("--no-probe",))
    assert run(env, "--url", m.url, "--no-color") == "svc: no usable account (svc-monitor init)"
    assert LOCAL.match(run(env, "--url", m.url, "--no-color", stdin=agent_payload()))


# ---------------------------------------------------------------- no monitor, a hung one, a broken one

def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "http://127.0.0.1:%d" % s.getsockname()[1]


def test_no_monitor_falls_back_to_the_agents_numbers(tmp_path):
    env = clean_env(tmp_path)
    url = dead_url()
    assert LOCAL.match(run(env, "--url", url, "--no-color", stdin=agent_payload()))
    local = run(env, "--url", url, stdin=agent_payload())
    assert local.startswith("\x1b[32m5h 61.4% ") and local.endswith("(local)\x1b[0m")
    assert run(env, "--url", url, stdin=agent_payload(five_pct=100)).startswith("\x1b[1;31m5h 100% ")
    assert run(env, "--url", url) == "svc: monitor not running at " + url + START_IT
    assert run(env, "--url", url, stdin=None) == "svc: monitor not running at " + url + START_IT


@pytest.mark.parametrize("stdin", [
    b"\x00\xff binary", b"not json", b'{"rate_limits": {"five_hour": {"used_percentage": 5', b"[" * 100_000,
    b'{"rate_limits": {"five_hour": {"used_percentage": ' + b"9" * 5000 + b"}}}",
    agent_payload() + b" " * 70_000,
    b'{"rate_limits": {"five_hour": {"used_percentage": "61", "resets_at": "\x1b[2J"}, "seven_day": null}}',
    b'{"rate_limits": [1, 2]}', b'{"rate_limits": {"five_hour": {"used_percentage": NaN}}}',
], ids=["binary", "not-json", "truncated", "deep", "huge-int", "over-64k", "hostile", "wrong-shape", "nan"])
def test_unreadable_payload_without_a_monitor(tmp_path, stdin):
    url = dead_url()
    assert run(clean_env(tmp_path), "--url", url, stdin=stdin) == "svc: monitor not running at " + url + START_IT


def test_a_payload_just_under_the_limit_is_read(tmp_path):
    payload = agent_payload()
    padded = payload[:-1] + b', "pad": "' + b"x" * (statusline.MAX_PAYLOAD - len(payload) - 12) + b'"}'
    assert len(padded) <= statusline.MAX_PAYLOAD
    assert LOCAL.match(run(clean_env(tmp_path), "--url", dead_url(), "--no-color", stdin=padded))


def _late(sock: socket.socket) -> None:
    time.sleep(0.4)
    sock.sendall(http_reply(200, _posture()))


def test_the_budget_is_the_default_or_the_setting(tmp_path):
    env = clean_env(tmp_path)
    with RawServer({"/api/accounts": _late}) as server:
        # 400 ms after the request is past any default deadline (250 ms from the start,
        # at most 100 ms after the imports), and well inside a 30 s one, however loaded the machine.
        assert LOCAL.match(run(env, "--url", server.url, "--no-color", stdin=agent_payload()))
        late = run(dict(env, SVC_STATUSLINE_BUDGET_MS="30000"), "--url", server.url, "--no-color",
                   stdin=agent_payload())
        assert late.startswith("acct1 5h 85% "), late
    assert statusline.budget_ms({}) == 250
    assert statusline.budget_ms({"SVC_STATUSLINE_BUDGET_MS": "1000"}) == 1000
    for junk in ("", "x", "-5", "5", "1e3", "99999999", "\u0661\u0660\u0660"):
        assert statusline.budget_ms({"SVC_STATUSLINE_BUDGET_MS": junk}) == 250, junk


def test_a_hung_monitor_gives_the_fallback(tmp_path):
    env = clean_env(tmp_path)
    # Accepts and reads the request, never answers.
    with RawServer({"/api/accounts": HANG}) as server:
        assert LOCAL.match(run(env, "--url", server.url, "--no-color", stdin=agent_payload(), timeout=10))
        assert run(env, "--url", server.url, timeout=10) == "svc: monitor not running at " + server.url + START_IT
    # Listens and never even accepts: the kernel completes the handshake, nothing more.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = "http://127.0.0.1:%d" % silent.getsockname()[1]
        assert LOCAL.match(run(env, "--url", url, "--no-color", stdin=agent_payload(), timeout=10))


def _trickle(sock: socket.socket) -> None:
    reply = http_reply(200, {"available": True, "node": "n"})
    for i in range(len(reply)):
        sock.sendall(reply[i:i + 1])
        time.sleep(0.05)


def _posture(**over: Any) -> Dict[str, Any]:
    now = int(time.time() * 1000)
    iso = lambda ms: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".000Z"  # noqa: E731
    active = {"label": "acct1", "email": "a@x.io", "active": True, "overallStatus": "allowed",
              "representativeClaim": "five_hour", "bindingWindow": "five_hour", "bindingStatus": "allowed",
              "fiveHour": {"pct": 85.0, "resetsAt": iso(now + 2 * 3600_000 + 150_000), "status": "allowed_warning"},
              "sevenDay": {"pct": 41.0, "resetsAt": iso(now + 3 * 86400_000 + 150_000), "status": "allowed"},
              "error": None}
    body = {"available": True, "node": "n", "generatedAt": iso(now), "probedAt": now, "cached": True,
            "status": "degraded", "active": active, "accounts": [active],
            "siblingWithHeadroom": {"label": "acct2", "email": "b@x.io"}}
    body.update(over)
    return body


GARBAGE = {
    "not-http": b"garbage\r\n\r\n{}",
    "not-json": http_reply(200, b"<html>hello</html>"),
    "not-a-posture": http_reply(200, {"error": "nope"}),
    "a-list": http_reply(200, [1, 2, 3]),
    "available-is-1": http_reply(200, {"available": 1, "node": "n", "status": "ok"}),
    "http-500": http_reply(500, _posture()),
    "http-404": http_reply(404, {"error": "not_found"}),
    "closed": b"",
    "cut-short": http_reply(200, _posture())[:-20],
    "huge-body": http_reply(200, b'{"available": true, "x": "' + b"x" * 3_000_000 + b'"}'),
    "huge-head": b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"p" * 40_000 + b"\r\n\r\n{}",
    "bad-length": b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n{}",
    "bad-chunks": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    "deep": http_reply(200, b"[" * 200_000),
    "trickle": _trickle,
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_a_monitor_answering_garbage_is_no_monitor(tmp_path, name):
    env = clean_env(tmp_path)
    with RawServer({"/api/accounts": GARBAGE[name]}) as server:
        assert LOCAL.match(run(env, "--url", server.url, "--no-color", stdin=agent_payload(), timeout=10))


def test_a_chunked_reply_is_read(tmp_path):
    raw = json.dumps(_posture()).encode()
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
               + b"%x\r\n" % 10 + raw[:10] + b"\r\n" + b"%x;ext=1\r\n" % (len(raw) - 10) + raw[10:] + b"\r\n0\r\n\r\n")
    with RawServer({"/api/accounts": chunked}) as server:
        out = run(dict(clean_env(tmp_path), **SLOW), "--url", server.url, "--no-color")
    assert re.match(r"^acct1 5h 85% 2h [23]m \| 7d 41% 3d \| next acct2$", out), out


def test_a_hostile_monitor_cannot_reach_the_terminal(tmp_path):
    body = _posture(siblingWithHeadroom={"label": "\x1b]0;pwned\x07" + "\u009b31m" + "x" * 5000})
    body["active"]["label"] = "acct\x1b[2J\n1"
    with RawServer({"/api/accounts": http_reply(200, body)}) as server:
        out = run(dict(clean_env(tmp_path), **SLOW), "--url", server.url)  # checked(): no control character, one line
    assert "\x1b[2J" not in out and "\x1b]0" not in out and "pwned" in out
    assert len(plain(out)) <= 160


def _trajectory(wall_in_ms: int, label: str = "acct1") -> Dict[str, Any]:
    now = int(time.time() * 1000)
    iso = lambda ms: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".000Z"  # noqa: E731
    return {"node": "n", "generatedAt": iso(now), "probedAt": now, "alerts": [], "accounts": [
        {"label": label, "email": "a@x.io", "active": True, "sevenDay": None,
         "fiveHour": {"pct": 85.0, "resetsAt": iso(now + 2 * 3600_000),
                      "forecast": {"ratePctPerHour": 18.7, "wallAt": iso(now + wall_in_ms), "beforeReset": True,
                                   "pctAtReset": 122.4, "samples": 12}}}]}


def test_forecast_from_a_trajectory_body(tmp_path):
    """The trajectory body as the trajectory route serves it, from a scripted server (the real route:
    tests/term/test_line_forecast.py)."""
    env = dict(clean_env(tmp_path), **SLOW)
    with RawServer({"/api/accounts": http_reply(200, _posture()),
                    "/api/trajectory": http_reply(200, _trajectory(48 * 60_000 + 40_000))}) as server:
        out = run(env, "--url", server.url, "--no-color")
        # A monitor without /api/advice (404): the sibling it names instead.
        assert server.requests == ["/api/accounts", "/api/trajectory", "/api/advice"]
    assert re.match(r"^acct1 5h 85% 2h [23]m \| 7d 41% 3d \| 100% in 48m( \d+s)?! \| next acct2$", out), out


@pytest.mark.parametrize("reply", [HANG, http_reply(404, {"error": "not_found"}), b"junk",
                                   http_reply(200, {"available": False, "node": "n"})],
                         ids=["hung", "404", "junk", "disabled"])
def test_no_usable_trajectory_means_no_forecast(tmp_path, reply):
    with RawServer({"/api/accounts": http_reply(200, _posture()), "/api/trajectory": reply}) as server:
        # A hung trajectory spends the rest of the budget: 5 s here (room for a loaded machine).
        out = run(dict(clean_env(tmp_path), SVC_STATUSLINE_BUDGET_MS="5000"), "--url", server.url, "--no-color",
                  timeout=30)
    assert re.match(r"^acct1 5h 85% 2h [23]m \| 7d 41% 3d \| next acct2$", out), out


def test_a_url_prefix_is_kept(tmp_path):
    with RawServer({"/svc/api/accounts": http_reply(200, _posture())}) as server:
        out = run(dict(clean_env(tmp_path), **SLOW), "--url", server.url + "/svc/", "--no-color")
    assert out.startswith("acct1 5h 85% ")


# ---------------------------------------------------------------- the command line

def test_help_and_bad_arguments(tmp_path):
    env = clean_env(tmp_path)
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "statusline", "--help"], env=env,
                          capture_output=True, timeout=20)
    assert done.returncode == 0 and done.stderr == b""
    assert done.stdout.startswith(b"usage: svc-monitor statusline [--url URL] "
                                  b"[--provider claude|codex|copilot|zai|kimi] [--no-color]")
    assert b'"statusLine": {"type": "command", "command": "svc-monitor statusline"}' in done.stdout
    assert run(env, "--bogus") == "svc: statusline: bad argument '--bogus' (see svc-monitor statusline --help)"
    for bad in ("ftp://x", "http://", "http://h:99999", "http://user@h:1", "http://h:1/?q", "x" * 5000,
                "http://h\x1b[2J:1", "http://bücher.example"):
        assert run(env, "--url", bad).startswith("svc: statusline: --url must be"), bad
    assert run(env, "--url").startswith("svc: statusline: bad argument '--url'")
    top = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--help"], env=env, capture_output=True,
                         timeout=20)
    assert top.returncode == 0 and b"svc-monitor statusline [--url URL] [--no-color]" in top.stdout


def test_an_unset_home_falls_back_to_the_account_home(tmp_path):
    env = clean_env(tmp_path)
    env.pop("HOME")
    assert LOCAL.match(run(env, "--url", dead_url(), "--no-color", stdin=agent_payload()))


@pytest.mark.parametrize("home", ["", "relative/home"])
def test_a_home_that_names_no_node_is_refused_like_every_command(tmp_path, home):
    # a refused HOME wins over the statusline's "always exits 0" here: a HOME that would put
    # node paths outside any home is refused by every command, with one line.
    env = clean_env(tmp_path)
    env["HOME"] = home
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "statusline", "--url", dead_url()],
                          env=env, input=agent_payload(), capture_output=True, timeout=20, cwd=str(tmp_path))
    assert proc.returncode == 2 and proc.stdout == b"", proc
    assert proc.stderr.count(b"\n") == 1 and b"HOME" in proc.stderr and b"Traceback" not in proc.stderr
    assert not (tmp_path / "relative").exists()


def test_monitor_url_and_parse_url():
    from svcposture import _http
    assert statusline.monitor_url({}) == statusline.DEFAULT_URL
    t = _http.parse_url("http://[::1]:7401/x/")
    assert (t.scheme, t.host, t.port, t.netloc, t.prefix) == ("http", "::1", 7401, "[::1]:7401", "/x")
    t = _http.parse_url("HTTPS://node-a")
    assert (t.scheme, t.host, t.port, t.prefix) == ("https", "node-a", 443, "")
    for bad in (None, 5, "", "http://[::1", "http://[]:1", "http://h:0", "http://h:1:2",
                "http://h:+1", "http://h#x", "javascript:alert(1)", "http://h\n:1"):
        assert _http.parse_url(bad) is None, bad


def test_monitor_url_reads_only_a_sane_record(tmp_path):
    run_dir = tmp_path / "svc" / "run"
    run_dir.mkdir(parents=True)
    record = run_dir / "monitor.json"
    environ = {"HOME": str(tmp_path)}
    for text in (b"{corrupt", b"", b"null", b"[]", b'{"url": 5}', b'{"url": "javascript:alert(1)"}',
                 b'{"url": "http://x:1\\u001b[2J"}', b"x" * 3_000_000, b"\xff\xfe"):
        record.write_bytes(text)
        assert statusline.monitor_url(environ) == statusline.DEFAULT_URL, text[:40]
    record.write_bytes(b'{"pid": 1, "url": "http://127.0.0.1:7777", "startedAt": "x"}')
    assert statusline.monitor_url(environ) == "http://127.0.0.1:7777"
    assert statusline.monitor_url({"HOME": "relative"}) == statusline.DEFAULT_URL


def test_an_account_with_only_extra_windows_is_shown_by_them():
    """A Copilot plan's monthly quotas (no 5-hour or weekly window) are what its status line and HUD
    strip show; an account with a 5-hour or weekly window keeps showing those."""
    from svcposture.term.line import hud_line, status_line

    now = 1_790_000_000_000
    extras = [{"pct": 95.6, "resetsAt": None, "status": "allowed_warning", "derived": True, "seconds": 2592000,
               "name": "premium_interactions"}, {"pct": 9.0, "resetsAt": None, "status": "allowed",
                                                 "derived": True, "seconds": 2592000, "name": "chat"}]
    active = {"label": "copilot-pro", "email": None, "active": True, "fiveHour": None, "sevenDay": None,
              "extraWindows": extras, "bindingStatus": "allowed_warning", "error": None}
    body = {"available": True, "node": "n", "generatedAt": "2026-09-21T00:00:00.000Z", "probedAt": now,
            "cached": False, "status": "degraded", "active": active, "accounts": [active],
            "siblingWithHeadroom": None}
    assert status_line(body, now=now, stale_ms=10 ** 9).startswith("copilot-pro premium_interactions 95.6% | chat 9%")
    assert "| DEGRADED | premium_interactions 95.6% | chat 9%" in hud_line(body, now=now, stale_ms=10 ** 9)
    five = {"pct": 10.0, "resetsAt": None, "status": "allowed", "derived": True}
    both = dict(body, active=dict(active, fiveHour=five))
    assert status_line(both, now=now, stale_ms=10 ** 9).startswith("copilot-pro 5h 10% | 7d --")
