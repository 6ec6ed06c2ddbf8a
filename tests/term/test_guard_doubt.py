"""No go on doubt (docs/steering.md): the guard, as a real child, holds on any window at the limit
(extra windows included) and answers unavailable on a reply it cannot trust.

- Codex windows one minute off the exact lengths at 100 %, and a model's own limit at 100 %, from
  the Codex stand-in through a real monitor: hold, never "no window reported".
- A pct that is NaN, a string, 1e999 or a bool, a probe time ten years ahead, an account without a
  readable window, and anything else answering on the monitor's port: unavailable (69).
- An --account the posture does not have: exit 2 with the known labels, and --wait does not wait.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

from tests.support.codex import CodexServer, make_login, usage_reply, window
from tests.support.home import REPO, canary, monitor_env, set_host_name
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.rawserver import RawServer, http_reply
from tests.support.waiting import wait_until

WORK, HOME = canary("doubtwork"), canary("doubthome")
TOK1, TOK2 = canary("doubt1"), canary("doubt2")


def guard(env: Dict[str, str], *args: str, timeout: float = 60) -> Tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "guard", *args], env=env,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert "Traceback" not in err and err.count("\n") == 1, err
    for tok in (WORK, HOME, TOK1, TOK2):
        assert tok not in out + err
    return done.returncode, out, err


# ---------------------------------------------------------------- every window counts

def _codex_node(tmp_path: Path, codex: CodexServer) -> Tuple[Dict[str, str], Any]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "doubt-node")
    make_login(tmp_path / "work", WORK, account_id="acct-work")
    make_login(tmp_path / "home-login", HOME, account_id="acct-home")
    env_path = home / ".config" / "svc" / "model-accounts.env"
    env_path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    env_path.write_text("CODEX_HOME_WORK=%s  # work@example.com\nCODEX_HOME_HOME=%s  # home@example.com\n"
                        'export CODEX_HOME="$CODEX_HOME_WORK"\n' % (tmp_path / "work", tmp_path / "home-login"))
    env_path.chmod(0o600)
    env = monitor_env(home, "http://127.0.0.1:9", SVC_CODEX_URL=codex.url, SVC_PROBE_INTERVAL_S="5",
                      SVC_POSTURE_TTL_S="5", SVC_REFRESH_FLOOR_S="0.05", SVC_GUARD_BUDGET_MS="5000")
    mon = start_monitor(env)
    env["SVC_MONITOR_PORT"] = str(mon.port)
    return env, mon


def _codex_refresh(mon: Any, pct_of_work: float) -> None:
    def probed() -> bool:
        status, body = mon.get_json("/api/accounts?provider=codex&refresh=true", {"X-Svc-Refresh": "1"})
        active = body.get("active") if status == 200 else None
        shown = [w.get("pct") for w in [(active or {}).get("fiveHour")] + list((active or {}).get("extraWindows")
                                                                               or []) if w]
        return pct_of_work in shown
    wait_until(probed, 30, message="the Codex posture showing %s" % pct_of_work)


def test_codex_windows_a_minute_off_at_100_pct_hold(tmp_path: Path) -> None:
    now = int(time.time())
    off = usage_reply(10, 10)
    off["rate_limit"]["primary_window"] = window(100, 17940, reset_at=now + 3600)
    off["rate_limit"]["secondary_window"] = window(100, 604740, reset_at=now + 86400)
    with CodexServer() as codex:
        codex.set_reply(WORK, off)
        codex.set_reply(HOME, usage_reply(10, 20))
        env, mon = _codex_node(tmp_path, codex)
        try:
            _codex_refresh(mon, 100.0)
            code, out, err = guard(env, "--provider", "codex", "--json")
            body = json.loads(out)
            assert code == 1 and body["decision"] == "hold" and body["account"] == "codex-work", err
            assert body["pct"] == 100.0 and 0 < body["retryAfterS"] <= 86401
            assert "no window" not in err
        finally:
            mon.stop()


def test_a_model_limit_at_100_pct_holds_the_account(tmp_path: Path) -> None:
    now = int(time.time())
    model = [{"limit_name": "GPT-5.3-Codex-Spark", "metered_feature": "codex_bengalfox",
              "rate_limit": {"primary_window": window(100, 18000, reset_at=now + 1800),
                             "secondary_window": None}}]
    with CodexServer() as codex:
        codex.set_reply(WORK, usage_reply(12, 20, reset_5h=now + 9000, reset_7d=now + 86400, additional=model))
        codex.set_reply(HOME, usage_reply(10, 20))
        env, mon = _codex_node(tmp_path, codex)
        try:
            _codex_refresh(mon, 100.0)
            code, out, err = guard(env, "--provider", "codex", "--json")
            body = json.loads(out)
            assert code == 1 and body["pct"] == 100.0 and "GPT-5.3-Codex-Spark" in err, err
        finally:
            mon.stop()


def test_a_credit_plan_is_gated_on_its_credits(tmp_path: Path) -> None:
    # The field's enterprise reply: both windows null, the credit plan's individual limit only.
    sample = json.loads((REPO / "tests" / "fixtures" / "field" /
                         "codex-usage-enterprise-credit-plan.json").read_text())
    spent = json.loads(json.dumps(sample))
    spent["rate_limit"]["individual_limit"].update(used="100000", remaining_percent=0)
    with CodexServer() as codex:
        codex.set_reply(WORK, spent)
        codex.set_reply(HOME, sample)
        env, mon = _codex_node(tmp_path, codex)
        try:
            _codex_refresh(mon, 100.0)
            wait_until(lambda: all(any(w.get("name") == "credits" for w in a.get("extraWindows") or [])
                                   for a in mon.get_json("/api/accounts?provider=codex")[1]["accounts"]), 30,
                       message="both credits windows")
            code, out, err = guard(env, "--provider", "codex", "--json")
            assert code == 1 and json.loads(out)["window"] == "credits" and "credits at 100%" in err, err
            code, out, err = guard(env, "--provider", "codex", "--account", "codex-home", "--json")
            assert code == 0 and json.loads(out)["window"] == "credits", err
            assert guard(env, "--provider", "codex", "--account", "codex-home", "--reserve", "10")[0] == 0
        finally:
            mon.stop()


# ---------------------------------------------------------------- replies it cannot trust

def _window(pct: Any) -> Dict[str, Any]:
    return {"pct": pct, "resetsAt": "2030-01-01T00:00:00.000Z", "status": "allowed"}


def _body(**over: Any) -> Dict[str, Any]:
    active = {"label": "acct1", "email": None, "active": True, "overallStatus": "allowed",
              "representativeClaim": None, "bindingWindow": "five_hour", "bindingStatus": "allowed",
              "fiveHour": _window(10.0), "sevenDay": _window(20.0), "error": None}
    active.update(over.pop("windows", {}))
    body = {"available": True, "node": "n", "generatedAt": "2030-01-01T00:00:00.000Z",
            "probedAt": int(time.time() * 1000), "cached": True, "status": "ok", "active": active,
            "accounts": [active], "siblingWithHeadroom": None}
    body.update(over)
    return body


def _raw(body: Dict[str, Any], token: str, literal: str) -> bytes:
    """The body's JSON with the string `token` replaced by a literal JSON cannot carry (NaN, 1e999)."""
    return json.dumps(body).replace('"%s"' % token, literal).encode("ascii")


def doubts() -> Dict[str, Any]:
    """Each reply the guard cannot trust, built at the moment of the test (its probe time is now)."""
    return {
        "NaN": _raw(_body(windows={"fiveHour": _window("@")}), "@", "NaN"),
        "1e999": _raw(_body(windows={"sevenDay": _window("@")}), "@", "1e999"),
        "-Infinity": _raw(_body(windows={"sevenDay": _window("@")}), "@", "-Infinity"),
        "a string": _body(windows={"fiveHour": _window("12")}),
        "a bool": _body(windows={"fiveHour": _window(True)}),
        "negative": _body(windows={"fiveHour": _window(-3)}),
        "an extra window's NaN": _raw(_body(windows={"extraWindows": [dict(_window("@"), seconds=3600, name="x")]}),
                                      "@", "NaN"),
        "no readable window": _body(windows={"fiveHour": None, "sevenDay": None}),
        "a probe ten years ahead": _body(probedAt=int(time.time() * 1000) + 10 * 365 * 86400 * 1000),
        "another service's JSON": {"ok": True, "status": "running"},
        "a posture without its fields": {"available": True, "probedAt": int(time.time() * 1000),
                                         "active": {"label": "acct1", "fiveHour": _window(1.0)}},
        "accounts that are not a list": _body(accounts={"acct1": 1}),
    }


# A posture is stale after twice the probe interval: these replies are fresh.
TRUSTING = {"SVC_GUARD_BUDGET_MS": "5000", "SVC_PROBE_INTERVAL_S": "300"}


@pytest.mark.parametrize("name", sorted(doubts()))
def test_a_reply_in_doubt_is_unavailable(tmp_path: Path, name: str) -> None:
    env = monitor_env(tmp_path, "http://127.0.0.1:9", **TRUSTING)
    reply = http_reply(200, doubts()[name])
    with RawServer({"/api/accounts": reply}) as server:
        code, out, err = guard(env, "--url", server.url, "--json")
    body = json.loads(out)
    assert code == 69 and body["decision"] == "unavailable", (name, err)
    # And --fail-open is the only way such a reply lets the work go.
    with RawServer({"/api/accounts": reply}) as server:
        assert guard(env, "--url", server.url, "--fail-open")[0] == 0
    # The same body with its windows readable is a go: only the doubt made it unavailable.
    if "window" in name or name in ("NaN", "1e999", "-Infinity", "a string", "a bool", "negative"):
        with RawServer({"/api/accounts": http_reply(200, _body())}) as server:
            assert guard(env, "--url", server.url)[0] == 0


def test_a_probe_time_within_a_minute_ahead_is_still_trusted(tmp_path: Path) -> None:
    env = monitor_env(tmp_path, "http://127.0.0.1:9", **TRUSTING)
    body = _body(probedAt=int(time.time() * 1000) + 20_000)
    with RawServer({"/api/accounts": http_reply(200, body)}) as server:
        assert guard(env, "--url", server.url)[0] == 0


# ---------------------------------------------------------------- a typo is not a busy account

def test_an_unknown_account_is_bad_usage_even_with_wait(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "typo-node")
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.10, "allowed"), seven_day=(0.20, "allowed"))
        provider.set_account(TOK2, five_hour=(0.05, "allowed"), seven_day=(0.05, "allowed"))
        env = monitor_env(home, provider.url, accounts=[("ACCT1", TOK1, "one@example.com"),
                                                        ("ACCT2", TOK2, "two@example.com")],
                          active="ACCT1", SVC_GUARD_BUDGET_MS="5000")
        mon = start_monitor(env)
        try:
            env["SVC_MONITOR_PORT"] = str(mon.port)
            wait_until(lambda: mon.get_json("/api/accounts")[1].get("probedAt"), message="the first probe")
            code, out, err = guard(env, "--account", "acct9", "--json")
            assert (code, out) == (2, "") and "acct9" in err and "known: acct1, acct2" in err
            # --wait 600 would outlive this child's 60 s timeout if it waited the typo out.
            code, out, err = guard(env, "--account", "acct9", "--wait", "600")
            assert code == 2 and "acct9" in err
            assert guard(env, "--account", "acct2")[0] == 0
        finally:
            mon.stop()
