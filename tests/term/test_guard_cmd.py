"""svc-monitor guard (docs/steering.md): the gate automation asks before each run, as a real
child against a real monitor and the stand-in provider.

Every exit code (0 go, 1 hold, 69 unavailable, 0 with --fail-open, 2 bad usage),
the --json fields, the human reserve from the node's config and from the flag,
--wait returning on a pushed frame and timing out, and no provider call however
often it is asked. Runs that must reach the monitor get a generous
SVC_GUARD_BUDGET_MS, so a loaded machine cannot turn them into `unavailable`;
how fast a decision is belongs to scripts/bench_guard.py.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from tests.support.home import canary, monitor_env, set_host_name, write_json
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

TOK1 = canary("guard1")
TOK2 = canary("guard2")
FIELDS = {"decision", "account", "provider", "reason", "window", "pct", "reservePct", "resetsAt", "retryAfterS"}
CLOSED_URL = "http://127.0.0.1:9"  # discard port: nothing listens
# Probes every 5 s (a posture older than 10 s is stale); guard may take a minute to get its answer
# on a loaded machine (a reachable monitor answers at once, so this never slows a passing run).
CLOCKS = {"SVC_PROBE_INTERVAL_S": "5", "SVC_POSTURE_TTL_S": "5", "SVC_REFRESH_FLOOR_S": "0.05",
          "SVC_GUARD_BUDGET_MS": "60000"}


def guard(env: Dict[str, str], *args: str, timeout: float = 60, lines: int = 1) -> Tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "guard", *args], env=env,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    assert "Traceback" not in err, err
    for tok in (TOK1, TOK2):
        assert tok not in out + err, "a token leaked"
    # Exactly one reason line on stderr (--wait: one more when it starts to wait), whatever the outcome.
    assert err.endswith("\n") and err.count("\n") == lines, err
    return proc.returncode, out, err


def decision(env: Dict[str, str], *args: str) -> Tuple[int, Dict[str, Any], str]:
    code, out, err = guard(env, "--json", *args)
    body = json.loads(out)
    assert set(body) == FIELDS, body
    return code, body, err


@pytest.fixture()
def node(tmp_path: Path) -> Iterator[Dict[str, Any]]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "gate-node")
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.10, "allowed"), seven_day=(0.20, "allowed"))
        provider.set_account(TOK2, five_hour=(0.05, "allowed"), seven_day=(0.05, "allowed"))
        env = monitor_env(home, provider.url, accounts=[("ACCT1", TOK1, "one@example.com"),
                                                        ("ACCT2", TOK2, "two@example.com")],
                          active="ACCT1", **CLOCKS)
        mon = start_monitor(env)
        try:
            yield {"home": home, "provider": provider, "mon": mon,
                   "env": dict(env, SVC_MONITOR_PORT=str(mon.port))}
        finally:
            mon.stop()


def refresh(node: Dict[str, Any], **state: Any) -> Dict[str, Any]:
    """Script the active account's replies, then have the monitor probe them (a forced refresh)."""
    node["provider"].set_account(TOK1, **state)

    def probed() -> Any:
        status, body = node["mon"].get_json("/api/accounts?refresh=true", {"X-Svc-Refresh": "1"})
        return body if status == 200 and body.get("cached") is False else None
    return wait_until(probed, message="a fresh probe")


def set_reserve(home: Path, value: Any) -> None:
    write_json(home / ".config" / "svc" / "cluster-secrets.json", {"svc": {"posture": {"reservePct": value}}})


# ---------------------------------------------------------------- go and hold

def test_go_with_every_json_field(node: Dict[str, Any]) -> None:
    code, body, err = decision(node["env"])
    assert code == 0
    assert body["decision"] == "go" and body["account"] == "acct1" and body["provider"] == "claude"
    # The fuller window is reported: 7d at 20 %.
    assert body["window"] == "seven_day" and body["pct"] == 20.0 and body["reservePct"] == 0
    assert body["resetsAt"].endswith("Z") and body["retryAfterS"] is None
    assert err.startswith("svc-monitor guard: go: acct1")
    # Without --json, nothing on stdout.
    code, out, err = guard(node["env"])
    assert (code, out) == (0, "") and err.startswith("svc-monitor guard: go")


def test_hold_at_the_reserve_from_the_flag(node: Dict[str, Any]) -> None:
    refresh(node, five_hour=(0.85, "allowed_warning"), seven_day=(0.20, "allowed"), reset_5h=time.time() + 3600)
    code, body, err = decision(node["env"], "--reserve", "20")
    assert code == 1 and body["decision"] == "hold"
    assert body["window"] == "five_hour" and body["pct"] == 85.0 and body["reservePct"] == 20
    assert 3000 < body["retryAfterS"] <= 3601, body
    assert "80%" in body["reason"] and err.startswith("svc-monitor guard: hold: ")
    # 85 % is below 100 - 10: go.
    code, body, _ = decision(node["env"], "--reserve", "10")
    assert code == 0 and body["decision"] == "go" and body["reservePct"] == 10
    # Exactly at the limit holds.
    code, body, _ = decision(node["env"], "--reserve", "15")
    assert code == 1 and body["pct"] == 85.0


def test_the_reserve_from_the_node_config_and_the_flag_overriding_it(node: Dict[str, Any]) -> None:
    refresh(node, five_hour=(0.75, "allowed"), seven_day=(0.20, "allowed"))
    assert decision(node["env"])[1]["decision"] == "go"
    set_reserve(node["home"], 30)
    code, body, _ = decision(node["env"])
    assert (code, body["decision"], body["reservePct"]) == (1, "hold", 30)
    code, body, _ = decision(node["env"], "--reserve", "0")
    assert (code, body["decision"], body["reservePct"]) == (0, "go", 0)
    # config.json is the fallback, as for every SHARED Layer-2 key.
    (node["home"] / ".config" / "svc" / "cluster-secrets.json").unlink()
    write_json(node["home"] / ".config" / "svc" / "config.json", {"svc": {"posture": {"reservePct": 25}}})
    assert decision(node["env"])[1]["reservePct"] == 25
    # A reserve the node's config cannot hold is bad usage, named with its file.
    for bad in (51, -1, "10", True, 12.5):
        set_reserve(node["home"], bad)
        code, out, err = guard(node["env"])
        assert code == 2 and out == "" and "cluster-secrets.json" in err and "reservePct" in err, (bad, err)


# "resets in 1m 40s (14:32)": the duration the pages write, then the local clock time.
RESETS_IN = r"; resets in (\d+[hm] )?\d+[ms]( \d+s)? \(\d\d:\d\d\)"


def test_the_hold_line_says_when_it_resets_and_what_the_advice_names_under_the_reserve(
        node: Dict[str, Any]) -> None:
    # acct1 at 68.7 % resets in 100 s, acct2 is at 43 %: under a 50 % reserve acct1 holds; the reset
    # is near enough to wait for, and acct2 is the alternative. The monitor's own advice (no reserve)
    # would say stay: the hold line's advice is taken under the reserve the run holds on.
    node["provider"].set_account(TOK2, five_hour=(0.43, "allowed"), seven_day=(0.05, "allowed"))
    refresh(node, five_hour=(0.687, "allowed"), seven_day=(0.20, "allowed"), reset_5h=time.time() + 100)
    code, out, err = guard(node["env"], "--reserve", "50")
    assert code == 1, err
    assert re.search(r"^svc-monitor guard: hold: acct1 5h at 68\.7%, at or above 50% \(reserve 50%\)" + RESETS_IN
                     + r"; advice: wait 1m \d+s for the reset, or switch to acct2, at 43%$", err.strip()), err
    # The reset an hour away is past the wait: the advice is the switch, with how full acct2 is.
    refresh(node, status="rejected", five_hour=(1.007, "rejected"), seven_day=(0.20, "allowed"),
            reset_5h=time.time() + 3600)
    code, body, err = decision(node["env"])
    assert code == 1 and 3000 < body["retryAfterS"] <= 3601
    assert re.search(r"acct1 5h at 100%\+, at or above 100% \(reserve 0%\)" + RESETS_IN
                     + r"; advice: switch to acct2, at 43%$", body["reason"]), body["reason"]
    # No account below the reserve: none, until the active account's reset.
    node["provider"].set_account(TOK2, five_hour=(0.96, "allowed_warning"), seven_day=(0.05, "allowed"))
    refresh(node, status="rejected", five_hour=(1.007, "rejected"), seven_day=(0.20, "allowed"),
            reset_5h=time.time() + 3600)
    code, body, err = decision(node["env"], "--reserve", "5")
    assert code == 1 and re.search(r"; advice: none, no other account has headroom below the 5% reserve "
                                   r"until \d\d:\d\d$", body["reason"]), body["reason"]


def test_a_node_with_only_the_login_is_gated_on_it_as_the_status_line_shows_it(tmp_path: Path) -> None:
    # No accounts file: the statusline shows this machine's Claude Code login, and guard judges the same numbers.
    from tests.support.firstlook import get_json, login_only_node, login_usage, start_login_monitor

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    token = canary("guardlogin")
    with ProviderServer() as provider:
        env = login_only_node(home, provider, token)
        mon = start_login_monitor(env)
        try:
            env = dict(env, SVC_MONITOR_PORT=str(mon.port), SVC_GUARD_BUDGET_MS="60000",
                       SVC_STATUSLINE_BUDGET_MS="60000")
            code, body, err = decision(env)
            assert (code, body["decision"], body["account"]) == (0, "go", "login"), err
            assert body["reason"].startswith("this machine's Claude Code login (no accounts file): 5h 37.5%, 7d 62%")
            assert body["pct"] == 62.0 and body["window"] == "seven_day"
            provider.set_usage(token, login_usage(five=100.7))
            wait_until(lambda: (get_json(mon.url + "/api/login").get("fiveHour") or {}).get("pct") == 100.7,
                       timeout=30, message="the login's next sample")
            code, body, err = decision(env)
            assert (code, body["decision"], body["window"]) == (1, "hold", "five_hour"), err
            assert re.search(r"login \(no accounts file\): 5h at 100%\+, at or above 100% \(reserve 0%\)"
                             + RESETS_IN + "$", body["reason"]), body["reason"]
            assert 7000 < body["retryAfterS"] <= 7801
            status = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "statusline", "--no-color"],
                                    env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
            assert "5h 100%+" in status.stdout.decode(), status.stdout
            # --account names a posture's account, and the login is none: still the posture's answer.
            assert decision(env, "--account", "acct1")[0] == 69
        finally:
            mon.stop()


def test_rejected_holds_whatever_the_pct(node: Dict[str, Any]) -> None:
    refresh(node, status="rejected", five_hour=(0.50, "rejected"), seven_day=(0.20, "allowed"),
            representative_claim="five_hour", reset_5h=time.time() + 600)
    code, body, err = decision(node["env"])
    assert code == 1 and body["decision"] == "hold" and "rejected" in body["reason"]
    assert body["window"] == "five_hour" and 0 < body["retryAfterS"] <= 601
    assert decision(node["env"], "--account", "acct2")[0] == 0


def test_another_account_and_an_unknown_one(node: Dict[str, Any]) -> None:
    code, body, _ = decision(node["env"], "--account", "acct2")
    assert code == 0 and body["account"] == "acct2" and body["pct"] == 5.0
    # A label the posture does not have is bad usage (exit 2), the known ones listed, no JSON.
    code, out, err = guard(node["env"], "--json", "--account", "acct9")
    assert (code, out) == (2, "") and "acct9" in err and "acct1, acct2" in err


# ---------------------------------------------------------------- unavailable

def test_no_monitor_is_unavailable_and_fail_open_goes(tmp_path: Path) -> None:
    env = monitor_env(tmp_path, "http://127.0.0.1:9")
    code, body, err = decision(env, "--url", CLOSED_URL)
    assert code == 69 and body["decision"] == "unavailable" and "did not answer" in body["reason"]
    # Which URL it tried, and how to start a monitor there.
    assert "the monitor at %s did not answer; start one with `svc-monitor`" % CLOSED_URL in err, err
    code, out, err = guard(env, "--url", CLOSED_URL, "--fail-open")
    assert code == 0 and out == "" and "--fail-open" in err and err.startswith("svc-monitor guard: unavailable")


def test_a_disabled_posture_a_failed_probe_and_a_stale_one_are_unavailable(node: Dict[str, Any], tmp_path: Path) -> None:
    refresh(node, mode="auth")
    code, body, _ = decision(node["env"])
    assert code == 69 and "acct1's token was refused by the provider (HTTP 401)" in body["reason"]
    assert "claude setup-token" in body["reason"] and "advice: switch to acct2" in body["reason"]
    refresh(node, five_hour=(0.10, "allowed"), seven_day=(0.20, "allowed"))
    # Older than twice the probe interval (as the guard reads it): unavailable.
    probed = node["mon"].get_json("/api/accounts")[1]["probedAt"]
    wait_until(lambda: time.time() * 1000 - probed > 200, message="the posture to age")
    code, body, _ = decision(dict(node["env"], SVC_PROBE_INTERVAL_S="0.05"))
    assert code == 69 and "old" in body["reason"]
    assert decision(dict(node["env"], SVC_PROBE_INTERVAL_S="0.05"), "--fail-open")[0] == 0
    (tmp_path / "off").mkdir()
    off = start_monitor(monitor_env(tmp_path / "off", "http://127.0.0.1:9", **CLOCKS), args=("--no-probe",))
    try:
        code, body, _ = decision(dict(node["env"], SVC_MONITOR_PORT=str(off.port)))
        assert code == 69 and "unavailable" in body["reason"]
    finally:
        off.stop()


# ---------------------------------------------------------------- usage

@pytest.mark.parametrize("args", [
    ("--reserve", "51"), ("--reserve", "-1"), ("--reserve", "ten"), ("--reserve", "1.5"), ("--reserve",),
    ("--wait", "-1"), ("--wait", "soon"), ("--wait", "nan"), ("--bogus",), ("--provider", "gemini"),
    ("--url", "ftp://x"), ("extra",), ("--account", ""),
])
def test_bad_usage_exits_2_with_one_line(tmp_path: Path, args: Tuple[str, ...]) -> None:
    code, out, err = guard(monitor_env(tmp_path, "http://127.0.0.1:9"), *args)
    assert code == 2 and out == "" and err.startswith("svc-monitor guard: "), (args, err)


def test_help_explains_itself(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "guard", "--help"],
                          env=monitor_env(tmp_path, "http://127.0.0.1:9"), capture_output=True, timeout=30)
    text = proc.stdout.decode()
    assert proc.returncode == 0 and "69" in text and "--reserve" in text and "guard && run-agent" in text
    top = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--help"],
                         env=monitor_env(tmp_path, "http://127.0.0.1:9"), capture_output=True, timeout=30)
    assert "svc-monitor guard" in top.stdout.decode() and "svc-monitor switch" in top.stdout.decode()


# ---------------------------------------------------------------- --wait

def _subscribers(node: Dict[str, Any]) -> int:
    text = node["mon"].get("/metrics")[2].decode()
    line = next(l for l in text.splitlines() if l.startswith("svc_sse_subscribers "))
    return int(float(line.split()[1]))


def test_wait_returns_go_on_a_pushed_frame(node: Dict[str, Any]) -> None:
    refresh(node, status="rejected", five_hour=(1.02, "rejected"), seven_day=(0.20, "allowed"),
            reset_5h=time.time() + 3600)
    before = _subscribers(node)
    proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "guard", "--wait", "60", "--json"],
                            env=node["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # It follows the stream, holding, before the account recovers, and says so at once: what
        # holds and until when, so a dispatcher's log never looks hung.
        wait_until(lambda: _subscribers(node) > before, 30, message="guard on the stream")
        first = proc.stderr.readline().decode()
        assert proc.poll() is None
        assert re.search(r"^svc-monitor guard: hold, waiting up to 1m for go: acct1 5h at 100%\+, at or above 100% "
                         r"\(reserve 0%\)" + RESETS_IN + "; advice: switch to acct2, at 5%$", first.strip()), first
        refresh(node, five_hour=(0.30, "allowed"), seven_day=(0.20, "allowed"))
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert json.loads(out)["decision"] == "go" and json.loads(out)["pct"] == 30.0
    # One more line when it lets go, and nothing else.
    assert err.decode().count("\n") == 1 and err.decode().startswith("svc-monitor guard: go: acct1")
    assert re.search(r"\(after waiting \d+s\)$", err.decode().strip()), err


def test_wait_times_out_with_hold(node: Dict[str, Any]) -> None:
    refresh(node, status="rejected", five_hour=(1.02, "rejected"), seven_day=(0.20, "allowed"))
    started = time.monotonic()
    code, out, err = guard(node["env"], "--json", "--wait", "1.5", lines=2)
    body = json.loads(out)
    assert time.monotonic() - started >= 1.5
    assert code == 1 and body["decision"] == "hold" and body["reason"].endswith("(waited 1s)")
    assert err.startswith("svc-monitor guard: hold, waiting up to 1s for go: acct1 5h at 100%+")


def test_wait_without_a_monitor_is_unavailable_at_the_end(tmp_path: Path) -> None:
    env = monitor_env(tmp_path, "http://127.0.0.1:9")
    code, out, err = guard(env, "--json", "--url", CLOSED_URL, "--wait", "1", lines=2)
    assert code == 69 and json.loads(out)["decision"] == "unavailable"
    assert err.startswith("svc-monitor guard: unavailable, waiting up to 1s for go: the monitor at %s did not "
                          "answer; start one with" % CLOSED_URL), err
    assert guard(env, "--url", CLOSED_URL, "--wait", "1", "--fail-open", lines=2)[0] == 0


# ---------------------------------------------------------------- the provider's budget

def test_many_guards_spend_no_provider_call(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    slow = dict(CLOCKS, SVC_PROBE_INTERVAL_S="120", SVC_POSTURE_TTL_S="120")
    with ProviderServer() as provider:
        provider.set_account(TOK1)
        env = monitor_env(home, provider.url, accounts=[("ACCT1", TOK1, None)], active="ACCT1", **slow)
        mon = start_monitor(env)
        try:
            env["SVC_MONITOR_PORT"] = str(mon.port)
            wait_until(lambda: mon.get_json("/api/accounts")[1].get("probedAt"), message="the first probe")
            calls = provider.message_calls(), provider.usage_calls()
            codes: List[int] = [guard(env)[0] for _ in range(40)]
            assert codes == [0] * 40
            assert (provider.message_calls(), provider.usage_calls()) == calls
        finally:
            mon.stop()


def test_a_node_without_codex_accounts_has_no_codex_go(node: Dict[str, Any]) -> None:
    # No Codex line on this node: whether the monitor answers ?provider=codex with the disabled
    # body (docs/codex.md) or, predating Codex, with Claude's, it is no Codex posture to go on.
    code, body, _ = decision(node["env"], "--provider", "codex")
    assert code == 69 and body["provider"] == "codex" and body["decision"] == "unavailable"


# ---------------------------------------------------------------- hostile monitors

def _body(**over: Any) -> Dict[str, Any]:
    window = {"pct": 10.0, "resetsAt": "2030-01-01T00:00:00.000Z", "status": "allowed"}
    active = {"label": "acct1", "email": None, "active": True, "overallStatus": "allowed",
              "representativeClaim": "five_hour", "bindingWindow": "five_hour", "bindingStatus": "allowed",
              "fiveHour": window, "sevenDay": window, "error": None}
    body = {"available": True, "node": "n", "generatedAt": "2030-01-01T00:00:00.000Z",
            "probedAt": int(time.time() * 1000), "cached": True, "status": "ok", "active": active,
            "accounts": [active], "siblingWithHeadroom": None}
    body.update(over)
    return body


def test_hostile_and_broken_replies_are_unavailable_never_a_traceback(tmp_path: Path) -> None:
    from tests.support.rawserver import HANG, RawServer, http_reply

    replies = [
        http_reply(200, b"not json"), http_reply(200, b"{" * 100000), http_reply(200, [1, 2]),
        http_reply(200, b"x" * (2 * 1024 * 1024)), http_reply(500, {"error": "x"}), b"garbage\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"available\"", HANG,
        http_reply(200, _body(probedAt="yesterday")), http_reply(200, _body(probedAt=True)),
        http_reply(200, _body(active={"label": "acct1", "error": {"kind": "auth"}})),
        http_reply(200, _body(error={"kind": "transport"})),
        http_reply(200, {"available": False, "node": "n"}),
    ]
    # A posture counts as fresh for 20 min here (twice a 600 s probe interval): the replies below
    # are built once, and a loaded machine may take seconds to start each guard.
    env = dict(monitor_env(tmp_path, "http://127.0.0.1:9"), SVC_GUARD_BUDGET_MS="400", SVC_PROBE_INTERVAL_S="600")
    for reply in replies:
        with RawServer({"/api/accounts": reply}) as server:
            code, body, err = decision(env, "--url", server.url)
            assert code == 69 and body["decision"] == "unavailable", (reply if reply is HANG else reply[:80], body)
    # Odd but well-formed: a window past 100 % holds; a pct that is not a number, or past any
    # reading (_text.MAX_PCT), is a doubt (69).
    for over, expected in ((dict(active=dict(_body()["active"], fiveHour={"pct": 150.5, "resetsAt": None,
                                                                         "status": "allowed"})), 1),
                           (dict(active=dict(_body()["active"], fiveHour={"pct": 1e308, "resetsAt": None,
                                                                         "status": "allowed"})), 69),
                           (dict(active=dict(_body()["active"], fiveHour={"pct": "99", "resetsAt": 7,
                                                                         "status": "allowed"})), 69),
                           (dict(active=None), 1)):
        with RawServer({"/api/accounts": http_reply(200, _body(**over))}) as server:
            # A probe interval of 300 s: the body just built is never stale on a loaded machine.
            assert decision(dict(env, SVC_GUARD_BUDGET_MS="60000", SVC_PROBE_INTERVAL_S="300"), "--url",
                            server.url)[0] == expected, over


def _endless_frame(sent: List[int], limit: int) -> Any:
    """An SSE stream whose one frame never ends: `data:` lines and no blank line, up to `limit` bytes;
    `sent` gets the bytes the peer took before it hung up."""
    line = b"data: " + b"x" * 4090 + b"\n"

    def reply(conn: Any) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: account\n")
        total = 0
        conn.settimeout(30)
        try:
            while total < limit:
                conn.sendall(line)
                total += len(line)
        except OSError:
            pass
        sent.append(total)
    return reply


def test_wait_on_a_frame_that_never_ends_stops_reading_it(tmp_path: Path) -> None:
    """A stream that sends `data:` lines forever must not grow the guard's memory: the frame is
    capped, that read fails, and the guard hangs up (and reconnects) long before the bytes run out."""
    from tests.support.rawserver import RawServer

    limit = 256 * 1024 * 1024
    sent: List[int] = []
    env = monitor_env(tmp_path, "http://127.0.0.1:9")
    with RawServer({"/api/accounts/stream": _endless_frame(sent, limit)}) as server:
        proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "guard", "--wait", "600",
                                 "--url", server.url], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # The guard hung up on the first stream, so the server stopped sending to it.
            wait_until(lambda: sent, 120, message="the guard hanging up on the endless frame")
            assert proc.poll() is None, "the guard keeps waiting for a usable frame"
            peak_kib = int(next(l for l in Path("/proc/%d/status" % proc.pid).read_text().splitlines()
                                if l.startswith("VmHWM:")).split()[1])
        finally:
            proc.kill()
            proc.wait()
    # Kernel buffers take a few MiB beyond what the guard read; the whole stream is 256 MiB.
    assert sent[0] < 32 * 1024 * 1024, sent
    assert peak_kib < 128 * 1024, peak_kib
