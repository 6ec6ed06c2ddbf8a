"""svc-monitor hud: the one-line strip, against a real monitor."""
from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

from tests.support.home import canary, clean_env, node_env
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.rawserver import RawServer, http_reply
from svcposture.term import hud

TOK1 = canary("hud1")
TOK2 = canary("hud2")

NOW = 1_800_000_000_000
BODY = {
    "available": True, "node": "n1", "generatedAt": "x", "probedAt": NOW, "cached": True, "status": "rejected",
    "active": {"label": "acct1", "email": "a@x.io", "active": True, "overallStatus": "rejected",
               "representativeClaim": "five_hour", "bindingWindow": "five_hour", "bindingStatus": "rejected",
               "fiveHour": {"pct": 101.5, "resetsAt": "2027-01-15T10:30:00.000Z", "status": "rejected"},
               "sevenDay": {"pct": 40, "resetsAt": "2027-01-18T08:00:00.000Z", "status": "allowed"}, "error": None},
    "accounts": [], "siblingWithHeadroom": {"label": "acct2", "email": "b@x.io"},
}


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_format_line_rejected_names_the_sibling(utc):
    line = hud.format_line(BODY, colour=False, now=NOW)
    assert line == ("svc n1 | acct1 <a@x.io> | REJECTED | 5h 100%+ (2h 30m, 10:30) | 7d 40% (3d, Mon 08:00) | "
                    "EXHAUSTED -> switch to acct2 <b@x.io>")
    painted = hud.format_line(BODY, colour=True, now=NOW)
    assert painted.startswith("\x1b[1;31m") and painted.endswith("\x1b[0m")


def test_format_line_edge_cases():
    assert hud.format_line({"available": False, "node": "n"}).startswith(
        "svc n: posture unavailable: no usable account in the accounts env file")
    no_sib = dict(BODY, siblingWithHeadroom=None)
    assert hud.format_line(no_sib, now=NOW).endswith("EXHAUSTED, no sibling with headroom")
    err = dict(BODY, status="error", active=None, error={"kind": "transport", "message": "m"})
    assert hud.format_line(err, now=NOW) == "svc n1 | no active account | ERROR | error: transport"
    odd = dict(BODY, status="ok", active=dict(BODY["active"], fiveHour=None, sevenDay={"pct": "x", "resetsAt": "bad"}))
    assert hud.format_line(odd, now=NOW) == "svc n1 | acct1 <a@x.io> | OK | 5h -- | 7d --"
    for junk in (None, [], "x", 3):
        assert hud.format_line(junk) == "svc: no posture"


def test_iter_sse_follows_whatwg_rules():
    raw = [b"\xef\xbb\xbfretry: 5000\n", b"\n", b": comment\n", b"event: account\n", b"id: 7\n",
           b"data: {\"a\":\n", b"data:1}\n", b"\n", b"data: no-event\r\n", b"\r\n", b"id: bad\x00\n",
           b"event: x\n", b"\n", b"data\n", b"\n"]
    events = list(hud.iter_sse(iter(raw)))
    assert events[0] == ("account", '{"a":\n1}', "7", 5000)
    assert events[1] == ("message", "no-event", "7", 5000)
    assert events[2] == ("message", "", "7", 5000)  # `data` with no colon is an empty data line
    assert len(events) == 3
    # With comments: each comment comes out in place, as ("", text, ...), for the HUD's redraw clock.
    with_comments = list(hud.iter_sse(iter(raw), comments=True))
    assert with_comments[0] == ("", "comment", None, 5000)
    assert [e for e in with_comments if e[0]] == events


def test_use_colour_rules():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    assert hud.use_colour(Tty(), {}) is True
    assert hud.use_colour(Tty(), {"NO_COLOR": ""}) is False
    assert hud.use_colour(io.StringIO(), {}) is False


@pytest.fixture(scope="module")
def mon(tmp_path_factory):
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.5, "allowed"))
        provider.set_account(TOK2)
        home = tmp_path_factory.mktemp("hud") / "home"
        home.mkdir()
        env = node_env(home, provider.url, [("ACCT1", TOK1, "h@example.com"), ("ACCT2", TOK2, None)],
                       active="ACCT1", extra={"SVC_REFRESH_FLOOR_S": "0"})
        m = start_monitor(env)
        m.env = env
        m.provider = provider
        yield m
        m.stop()


def test_once_plain_when_not_a_tty(mon):
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", mon.url],
                          env=mon.env, capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert out.count("\n") == 1 and "\x1b" not in out
    assert out.startswith("svc ") and "acct1 <h@example.com> | OK | 5h 50% (" in out
    assert "CANARY" not in out
    # One probe of history makes no forecast (docs/trajectory.md): none shown, and no error for it.
    # The forecast through a real monitor is tests/term/test_line_forecast.py.
    assert "->" not in out.split("OK", 1)[1] and proc.stderr == b""


def test_once_finds_the_url_in_monitor_json(mon):
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once"], env=mon.env,
                          capture_output=True, timeout=30)
    assert proc.returncode == 0 and b"acct1" in proc.stdout


def test_once_unreachable_is_a_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url",
                           "http://127.0.0.1:9"], env=clean_env(tmp_path), capture_output=True, timeout=30)
    assert proc.returncode == 1
    assert proc.stderr.startswith(b"svc-monitor hud: cannot reach the monitor") and b"Traceback" not in proc.stderr
    # How to start a monitor, said where it is missed.
    assert b"start one with `svc-monitor`" in proc.stderr
    bad = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--url", "ftp://x"],
                         env=clean_env(tmp_path), capture_output=True, timeout=30)
    assert bad.returncode == 2


def _read_until(fd, needle, timeout):
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    return buf


def test_live_strip_updates_in_place_on_a_tty(mon):
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "hud", "--url", mon.url],
                            env=mon.env, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    try:
        first = _read_until(master, b"OK", 15)
        assert b"\r\x1b[2K" in first and b"\x1b[32m" in first and b"acct1" in first
        mon.provider.set_account(TOK1, status="rejected", five_hour=(1.0, "rejected"))
        mon.get("/api/accounts?refresh=true", {"X-Svc-Refresh": "1"})
        later = _read_until(master, b"EXHAUSTED -> switch to acct2", 15)
        assert b"EXHAUSTED -> switch to acct2" in later and b"\r\x1b[2K" in later
        assert b"\n" not in first + later  # one line, rewritten in place
    finally:
        mon.provider.set_account(TOK1, five_hour=(0.5, "allowed"))
        proc.terminate()
        proc.wait(10)
        os.close(master)


ANSI = re.compile(rb"\x1b\[[0-9;]*m")


def _drawn(raw: bytes) -> list:
    """Each line the strip drew on a terminal, without its colour codes."""
    return [ANSI.sub(b"", part).decode() for part in raw.split(b"\r\x1b[2K") if part]


def test_the_strip_fits_the_terminal_and_its_countdowns_tick(mon):
    # An 80-column pane (tmux): the strip never wraps; the email goes first, then the clock times.
    # Its 5h window resets in about 95 s: the countdown moves every second without a new frame
    # (the monitor probes every 300 s and keeps the stream alive every 15 s).
    mon.provider.set_account(TOK1, five_hour=(0.5, "allowed"), reset_5h=time.time() + 95)
    mon.get("/api/accounts?refresh=true", {"X-Svc-Refresh": "1"})
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "hud", "--url", mon.url],
                            env=dict(mon.env, COLUMNS="80"), stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.PIPE)
    os.close(slave)
    try:
        first = _read_until(master, b"acct1", 15)
        later = _read_until(master, b"never comes", 3.5)
    finally:
        mon.provider.set_account(TOK1, five_hour=(0.5, "allowed"))
        proc.terminate()
        proc.wait(10)
        os.close(master)
    drawn = _drawn(first + later)
    assert drawn and all(len(text) < 80 for text in drawn), drawn
    assert all("acct1 |" in text and "h@example.com" not in text for text in drawn), drawn
    countdowns = {re.search(r"5h 50% \((1m \d+s|\d+s)[,)]", text).group(1) for text in drawn}
    assert len(countdowns) >= 2, drawn  # ticking between readings
    assert b"\n" not in first + later
    # With room, the whole line: the email and the clock times are back.
    wide = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", mon.url],
                          env=dict(mon.env, COLUMNS="200"), capture_output=True, timeout=30).stdout.decode()
    assert "acct1 <h@example.com> | OK | 5h 50% (" in wide and re.search(r"\(\d+[hm][^)]*, \d\d:\d\d\)", wide)
    narrow = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", mon.url],
                            env=dict(mon.env, COLUMNS="60"), capture_output=True, timeout=30).stdout.decode()
    assert len(narrow.rstrip("\n")) <= 60 and "h@example.com" not in narrow
    assert not re.search(r"\d\d:\d\d", narrow), narrow


def test_live_strip_no_color_and_piped(mon):
    env = dict(mon.env, NO_COLOR="1")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "hud", "--url", mon.url],
                            env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    try:
        out = _read_until(master, b"acct1", 15)
        assert b"acct1" in out and b"\x1b[3" not in out and b"\x1b[1;" not in out
    finally:
        proc.terminate()
        proc.wait(10)
        os.close(master)
    piped = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "hud", "--url", mon.url],
                             env=mon.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = piped.stdout.readline()
        assert line.startswith(b"svc ") and b"\x1b" not in line and b"\r" not in line
    finally:
        piped.terminate()
        piped.wait(10)


def test_default_url_from_monitor_json(tmp_path):
    from svcposture.paths import Paths
    paths = Paths(tmp_path, environ={"HOME": str(tmp_path)})
    assert hud.default_url(paths) == hud.DEFAULT_URL
    paths.run_dir.mkdir(parents=True)
    for text in ("{corrupt", "", "null", "[]", '{"url": 5}', '{"url": "javascript:alert(1)"}', "x" * 3_000_000):
        paths.monitor_json.write_text(text)
        assert hud.default_url(paths) == hud.DEFAULT_URL, text[:40]
    paths.monitor_json.write_text('{"pid": 1, "url": "http://127.0.0.1:7777", "startedAt": "x"}')
    assert hud.default_url(paths) == "http://127.0.0.1:7777"


def test_once_against_something_that_is_not_a_monitor(tmp_path):
    from svcposture.demo import main as demo
    other = demo.SimulatedProvider().start()  # answers 404 JSON on /api/accounts
    try:
        proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", other.url],
                              env=clean_env(tmp_path), capture_output=True, timeout=30)
    finally:
        other.stop()
    assert proc.returncode == 1 and b"answered HTTP 404" in proc.stderr and b"Traceback" not in proc.stderr


def _iso(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".000Z"


def test_once_shows_the_forecast_from_the_trajectory(tmp_path):
    now = int(time.time() * 1000)
    five = {"pct": 85.0, "resetsAt": _iso(now + 3 * 3600_000), "status": "allowed_warning"}
    posture = dict(BODY, probedAt=now, status="degraded",
                   active=dict(BODY["active"], fiveHour=five, sevenDay=None))
    trajectory = {"node": "n1", "generatedAt": _iso(now), "probedAt": now, "alerts": [], "accounts": [
        {"label": "acct1", "email": "a@x.io", "active": True, "sevenDay": None,
         "fiveHour": {"pct": 85.0, "resetsAt": five["resetsAt"],
                      "forecast": {"ratePctPerHour": 12.0, "wallAt": _iso(now + 72 * 60_000 + 30_000),
                                   "beforeReset": True, "pctAtReset": 121.0, "samples": 9}}}]}
    with RawServer({"/api/accounts": http_reply(200, posture),
                    "/api/trajectory": http_reply(200, trajectory)}) as server:
        proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", server.url],
                              env=clean_env(tmp_path), capture_output=True, timeout=30)
        assert server.requests == ["/api/accounts", "/api/trajectory", "/api/advice"]
    assert proc.returncode == 0, proc.stderr
    assert "| DEGRADED | 5h 85% (2h 59m, " in proc.stdout.decode()
    assert ") -> 100% in 1h 12m | 7d --" in proc.stdout.decode()


def test_once_when_the_trajectory_is_garbage_shows_no_forecast(tmp_path):
    posture = dict(BODY, probedAt=int(time.time() * 1000))
    for reply in (b"garbage", http_reply(200, b"{not json"), http_reply(200, [1, 2]), http_reply(500, {})):
        with RawServer({"/api/accounts": http_reply(200, posture), "/api/trajectory": reply}) as server:
            proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url",
                                   server.url], env=clean_env(tmp_path), capture_output=True, timeout=30)
        assert proc.returncode == 0 and b"REJECTED" in proc.stdout and b"-> 100%" not in proc.stdout, reply
        assert b"Traceback" not in proc.stderr


def test_once_unavailable_says_why(tmp_path, monitors):
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home)
    m = monitors.start(env, args=("--no-probe",))
    try:
        proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", m.url],
                              env=env, capture_output=True, timeout=30)
    finally:
        m.stop()
    assert proc.returncode == 0
    out = proc.stdout.decode()
    assert "posture unavailable: no usable account in the accounts env file" in out
    assert "svc-monitor init" in out


def test_live_strip_redraws_at_keepalives_and_turns_stale(tmp_path, monitors):
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.5, "allowed"))
        home = tmp_path / "home"
        home.mkdir()
        env = node_env(home, provider.url, [("ACCT1", TOK1, "h@example.com")], active="ACCT1",
                       extra={"SVC_SSE_KEEPALIVE_S": "1", "SVC_PROBE_INTERVAL_S": "300"})
        m = monitors.start(env)
        # The HUD reads its staleness limit from its own environment: twice 1 s here.
        hud_env = dict(env, SVC_PROBE_INTERVAL_S="1")
        master, slave = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "hud", "--url", m.url],
                                env=hud_env, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE)
        os.close(slave)
        try:
            out = _read_until(master, b"no new reading for", 30)
            assert b"acct1 <h@example.com> | OK" in out and b"no new reading for" in out
            assert b"\x1b[90m" in out  # greyed
            assert out.count(b"\r\x1b[2K") >= 2 and b"\n" not in out  # redrawn in place, no new frame needed
        finally:
            proc.terminate()
            proc.wait(10)
            os.close(master)
            m.stop()
