"""The field samples (tests/fixtures/field/SOURCES.md) end to end: the stand-in endpoints reply with each
captured body, the Codex logins' session logs hold each captured log, a real monitor reads them, and
/api/accounts?provider=codex, /api/history, /api/trajectory and /api/login show the windows placed the
way the vendors meant them (docs/codex.md, docs/posture.md)."""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict

import pytest

from tests.support.codex import CodexServer, make_login, usage_reply, write_session
from tests.support.fieldsamples import earliest_epoch, iso, reply, shifted_lines, shifted_reply, stamp_s
from tests.support.firstlook import get_json, login_only_node, start_login_monitor
from tests.support.home import canary, monitor_env, set_host_name
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

SPARK = "GPT-5.3-Codex-Spark"
# label suffix -> (sample file, how it reaches the monitor)
API_SAMPLES = {
    "SPARK": "codex-usage-pro-spark-additional.json",
    "LIVE": "codex-usage-prolite-live-spark.json",
    "CREDIT": "codex-usage-enterprise-credit-plan.json",
    "TEAM": "codex-usage-team-spend-control.json",
    "RESETS": "codex-usage-prolite-reset-credits.json",
    "PLUSLIM": "codex-usage-plus-limited-reset-credits.json",
}
# Replies with their status and headers: {"status", "headers", "body"} (a headers-only capture gets a body
# with no window, built here, as the test that reads it says).
WHOLE_REPLIES = {
    "LIMIT": "codex-429-usage-limit-free.json",
    "LIMIT2": "codex-429-usage-limit-free-cliproxy.json",
    "XHDR": "codex-headers-usage-weekly.json",
}
SESSION_SAMPLES = {
    "S299": "codex-session-299-10079.jsonl",
    "PROLITE": "codex-session-prolite-spark-interleaved.jsonl",
    "PRO": "codex-session-pro-spark-weekly.jsonl",
    "SPLIT": "codex-session-model-file-newer.jsonl",
    "SCREDIT": "codex-session-credit-plan.jsonl",
    "SSTR": "codex-session-relative-string-299.jsonl",
}
TOKENS = {name: canary("field-" + name.lower())
          for name in list(API_SAMPLES) + list(WHOLE_REPLIES) + list(SESSION_SAMPLES)}


@functools.lru_cache(maxsize=None)
def now() -> float:
    """The run's "now", read once, when the first test asks: not at import, since the file may
    run long after the suite started."""
    return time.time()


@functools.lru_cache(maxsize=None)
def api_shift() -> Dict[str, int]:
    """Each reply's instants moved so that its earliest reset is an hour ahead."""
    return {name: int(now() + 3600 - earliest_epoch(reply(sample))) for name, sample in API_SAMPLES.items()}


# The header of a reply that holds an instant (epoch s), and the shift of a whole reply's instants.
HEADER_EPOCHS = ("x-codex-primary-reset-at", "x-codex-secondary-reset-at")


def _reply_epochs(sample: Dict) -> list:
    body_epochs = [earliest_epoch(sample["body"])] if sample.get("body") else []
    return body_epochs + [float(v) for k, v in sample["headers"].items() if k.lower() in HEADER_EPOCHS and v]


@functools.lru_cache(maxsize=None)
def whole_shift() -> Dict[str, int]:
    return {name: int(now() + 3600 - min(_reply_epochs(reply(sample)))) for name, sample in WHOLE_REPLIES.items()}


def whole_reply(name: str) -> tuple:
    """(status, headers, body) of a whole captured reply, its instants shifted as api_shift's are."""
    sample, by = reply(WHOLE_REPLIES[name]), whole_shift()[name]
    headers = {k: (str(int(v) + by) if k.lower() in HEADER_EPOCHS and v else v) for k, v in sample["headers"].items()}
    # The headers-only capture: a 200 whose body holds no window (built here), so that only the headers tell.
    body = shifted_reply(WHOLE_REPLIES[name], by)["body"] if "body" in sample else {"plan_type": None}
    return sample.get("status", 200), headers, body


def _write_logs(directory: Path, name: str) -> float:
    """The captured log replayed: its newest line five seconds ago; returns the shift applied."""
    texts, by = shifted_lines(name, now() - 5)
    if name == "codex-session-model-file-newer.jsonl":
        for i, text in enumerate(texts):  # one file per line, as captured
            at = stamp_s(json.loads(text)["timestamp"])
            write_session(directory, at, [text], name="f%d" % i, mtime=at)
    else:
        write_session(directory, now() - 5, texts, mtime=now() - 5)
    return by


@pytest.fixture(scope="module")
def codex_node(tmp_path_factory):
    root = tmp_path_factory.mktemp("field-codex")
    home = root / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "field-node")
    shifts = {}
    entries = []
    with CodexServer() as server:
        for name in TOKENS:
            login = root / ("login-" + name.lower())
            make_login(login, TOKENS[name], account_id="acct-" + name.lower())
            entries.append("CODEX_HOME_%s=%s  # %s@field.example" % (name, login, name.lower()))
            if name in API_SAMPLES:
                server.set_reply(TOKENS[name], shifted_reply(API_SAMPLES[name], api_shift()[name]))
            elif name in WHOLE_REPLIES:
                status, headers, body = whole_reply(name)
                server.set_reply(TOKENS[name], body, status=status, headers=headers)
            else:
                # A decoy: a login whose log is not read would show 1 % here.
                server.set_reply(TOKENS[name], usage_reply(1, 1))
                shifts[name] = _write_logs(login, SESSION_SAMPLES[name])
        env_path = home / ".config" / "svc" / "model-accounts.env"
        env_path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        env_path.write_text("\n".join(entries) + '\nexport CODEX_HOME="$CODEX_HOME_SPARK"\n')
        env_path.chmod(0o600)
        env = monitor_env(home, "http://127.0.0.1:9", SVC_CODEX_URL=server.url, SVC_PROBE_INTERVAL_S="5",
                          SVC_POSTURE_TTL_S="5")
        mon = start_monitor(env)
        try:
            def complete():
                body = mon.get_json("/api/accounts?provider=codex")[1]
                rows = body.get("accounts") or []
                done = [a for a in rows if a.get("source") or a.get("error")]
                return body if len(done) == len(TOKENS) else None
            body = wait_until(complete, 40, message="every Codex login sampled")
            yield {"mon": mon, "body": body, "shifts": shifts, "server": server}
        finally:
            mon.stop(check=False)
            assert "Traceback" not in mon.stderr_text()


def _account(node, name):
    label = "codex-" + name.lower()
    return next(a for a in node["body"]["accounts"] if a["label"] == label)


def win(pct, reset_s, status="allowed"):
    return {"pct": pct, "resetsAt": iso(reset_s), "status": status, "derived": True}


def extra(pct, reset_s, seconds, name, status="allowed"):
    return dict(win(pct, reset_s, status), seconds=seconds, name=name)


# ---------------------------------------------------------------- the usage endpoint's replies

def test_pro_reply_keeps_the_spark_limits_apart(codex_node):
    got, by = _account(codex_node, "SPARK"), api_shift()["SPARK"]
    assert got["error"] is None and got["source"] == "api"
    assert got["fiveHour"] == win(22.0, 1766948068 + by) and got["sevenDay"] == win(43.0, 1767407914 + by)
    assert got["extraWindows"] == [extra(30.0, 1766948068 + by, 18000, SPARK),
                                   extra(100.0, 1767407914 + by, 604800, SPARK, "rejected")]


def test_live_prolite_reply(codex_node):
    got, by = _account(codex_node, "LIVE"), api_shift()["LIVE"]
    assert got["error"] is None and got["planType"] == "prolite"
    assert got["fiveHour"] == win(12.0, 1776111121 + by) and got["sevenDay"] == win(2.0, 1776672455 + by)
    assert [(w["name"], w["seconds"], w["pct"]) for w in got["extraWindows"]] == [
        (SPARK, 18000, 0.0), (SPARK, 604800, 0.0)]


def test_enterprise_credit_plan_is_shown_not_a_parse_error(codex_node):
    got, by = _account(codex_node, "CREDIT"), api_shift()["CREDIT"]
    assert got["error"] is None and got["source"] == "api" and got["planType"] == "enterprise"
    assert got["fiveHour"] is None and got["sevenDay"] is None
    assert got["extraWindows"] == [extra(7.8, 1782864000 + by, None, "credits")]


def test_team_spend_cap_is_a_rejected_credits_window(codex_node):
    got, by = _account(codex_node, "TEAM"), api_shift()["TEAM"]
    assert got["error"] is None and got["fiveHour"] is None and got["sevenDay"] == win(18.0, 1785299212 + by)
    assert got["extraWindows"] == [extra(100.0, 1785542400 + by, None, "credits", "rejected")]


# ---------------------------------------------------------------- the session logs

def test_banked_resets_are_shown(codex_node):
    assert _account(codex_node, "RESETS")["resetCredits"] == {"available": 1, "applicable": 0}
    limited = _account(codex_node, "PLUSLIM")
    assert limited["resetCredits"] == {"available": 2, "applicable": 0}
    assert limited["sevenDay"] == win(100.0, 1789457449 + api_shift()["PLUSLIM"], "rejected")
    assert _account(codex_node, "SPARK")["resetCredits"] is None


@pytest.mark.parametrize("name", ["LIMIT", "LIMIT2"])
def test_a_429_saying_the_limit_is_reached_gives_its_reset(codex_node, name):
    row = _account(codex_node, name)
    reset_s = reply(WHOLE_REPLIES[name])["body"]["error"]["resets_at"] + whole_shift()[name]
    assert row["error"] is None and row["source"] == "api"
    assert row["extraWindows"] == [extra(100.0, reset_s, None, "usage limit", "rejected")]
    # The guard holds it until that reset, as for any rejected window.
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "guard", "--json", "--provider", "codex",
                           "--account", "codex-" + name.lower(), "--url", codex_node["mon"].url],
                          env=env, capture_output=True, timeout=60)
    decision = json.loads(done.stdout)
    assert done.returncode == 1 and decision["decision"] == "hold" and decision["resetsAt"] == iso(reset_s), decision


def test_the_x_codex_headers_stand_in_for_a_body_without_windows(codex_node):
    row = _account(codex_node, "XHDR")
    assert row["error"] is None and row["source"] == "api" and row["fiveHour"] is None
    assert row["sevenDay"] == win(4.0, 1786501305 + whole_shift()["XHDR"])


def test_session_299_and_10079_minutes_are_the_5h_and_7d(codex_node):
    got = _account(codex_node, "S299")
    at = stamp_s("2025-10-29T00:59:38.856Z") + codex_node["shifts"]["S299"]  # its token_count line, replayed
    assert got["source"] == "session" and got["extraWindows"] == []
    assert got["fiveHour"]["pct"] == 0.0 and got["sevenDay"]["pct"] == 7.0
    assert abs(stamp_s(got["fiveHour"]["resetsAt"]) - (at + 17388)) < 1
    assert abs(stamp_s(got["sevenDay"]["resetsAt"]) - (at + 491245)) < 1


def test_session_prolite_week_is_the_accounts_not_the_sparks(codex_node):
    got, by = _account(codex_node, "PROLITE"), codex_node["shifts"]["PROLITE"]
    assert got["source"] == "session" and got["fiveHour"] is None
    assert got["sevenDay"] == win(98.0, 1783391609 + by, "allowed_warning")
    assert got["extraWindows"] == [extra(0.0, 1783119899 + by, 18000, SPARK),
                                   extra(0.0, 1783565235 + by, 604800, SPARK)]


def test_session_pro_week_is_the_accounts_not_the_sparks(codex_node):
    got, by = _account(codex_node, "PRO"), codex_node["shifts"]["PRO"]
    assert got["sevenDay"] == win(21.0, 1784452160 + by)
    assert got["extraWindows"] == [extra(4.0, 1784504577 + by, 604800, SPARK)]


def test_session_model_line_in_a_newer_file_does_not_hide_the_account(codex_node):
    got, by = _account(codex_node, "SPLIT"), codex_node["shifts"]["SPLIT"]
    assert got["source"] == "session" and got["sevenDay"] == win(80.0, 1781139747 + by)
    assert [(w["name"], w["seconds"]) for w in got["extraWindows"]] == [
        ("codex_bengalfox", 18000), ("codex_bengalfox", 604800)]


def test_session_credit_plan_and_string_percent(codex_node):
    credit, by = _account(codex_node, "SCREDIT"), codex_node["shifts"]["SCREDIT"]
    assert credit["source"] == "session" and credit["error"] is None
    assert credit["extraWindows"] == [extra(8.0, 1782864000 + by, None, "credits")]
    text = _account(codex_node, "SSTR")
    assert text["source"] == "session" and text["fiveHour"]["pct"] == 3.0 and text["sevenDay"] is None


def test_no_session_login_was_asked_of_the_endpoint(codex_node):
    server = codex_node["server"]
    assert all(server.calls.get(TOKENS[name], 0) == 0 for name in SESSION_SAMPLES)


# ---------------------------------------------------------------- history and trajectory

def test_history_and_trajectory_carry_the_right_5h_and_7d(codex_node):
    mon = codex_node["mon"]
    history = wait_until(lambda: (lambda h: h if "codex-s299" in h else None)(
        mon.get_json("/api/history?hours=1")[1].get("accounts") or {}), 20, message="the history rows")
    assert history["codex-s299"]["fiveHour"][-1][1] == 0.0 and history["codex-s299"]["sevenDay"][-1][1] == 7.0
    assert history["codex-prolite"]["sevenDay"][-1][1] == 98.0
    assert history["codex-pro"]["sevenDay"][-1][1] == 21.0
    assert history["codex-split"]["sevenDay"][-1][1] == 80.0
    traj = {a["label"]: a for a in mon.get_json("/api/trajectory")[1]["accounts"]}
    assert traj["codex-s299"]["fiveHour"]["pct"] == 0.0 and traj["codex-s299"]["sevenDay"]["pct"] == 7.0
    assert traj["codex-prolite"]["sevenDay"]["pct"] == 98.0 and traj["codex-pro"]["sevenDay"]["pct"] == 21.0


def _last_points(extras):
    return [(e["name"], e["seconds"], e["points"][-1][1]) for e in extras]


def test_history_and_trajectory_carry_the_named_extra_windows(codex_node):
    mon = codex_node["mon"]
    history = wait_until(lambda: (lambda h: h if "codex-credit" in h and "codex-spark" in h else None)(
        mon.get_json("/api/history?hours=1")[1].get("accounts") or {}), 20, message="the extra windows' history")
    # A credit-plan account has no 5h/7d: its history is its credits window.
    assert history["codex-credit"]["fiveHour"] == [] and history["codex-credit"]["sevenDay"] == []
    assert _last_points(history["codex-credit"]["extraWindows"]) == [("credits", None, 7.8)]
    assert _last_points(history["codex-spark"]["extraWindows"]) == [(SPARK, 18000, 30.0), (SPARK, 604800, 100.0)]
    assert _last_points(history["codex-prolite"]["extraWindows"]) == [(SPARK, 18000, 0.0), (SPARK, 604800, 0.0)]
    assert "extraWindows" not in history["codex-s299"]
    traj = {a["label"]: a for a in mon.get_json("/api/trajectory")[1]["accounts"]}
    credit = traj["codex-credit"]["extraWindows"]
    assert [(w["name"], w["seconds"], w["pct"]) for w in credit] == [("credits", None, 7.8)]
    assert set(credit[0]) == {"name", "seconds", "pct", "resetsAt", "forecast"}
    assert [(w["name"], w["pct"]) for w in traj["codex-spark"]["extraWindows"]] == [(SPARK, 30.0), (SPARK, 100.0)]
    assert "extraWindows" not in traj["codex-s299"]


# ---------------------------------------------------------------- Claude's login

CLAUDE_TOKEN = canary("field-login")


@pytest.fixture(scope="module")
def login_node(tmp_path_factory):
    home = tmp_path_factory.mktemp("field-login")
    with ProviderServer() as provider:
        env = login_only_node(home, provider, CLAUDE_TOKEN)
        mon = start_login_monitor(env)
        try:
            yield mon, provider, home
        finally:
            mon.stop()


def _login_with(login_node, sample):
    mon, provider, _ = login_node
    provider.set_usage(CLAUDE_TOKEN, reply(sample))
    want = reply(sample)["five_hour"]["utilization"]
    return wait_until(lambda: (lambda b: b if (b.get("fiveHour") or {}).get("pct") == want else None)(
        get_json(mon.url + "/api/login")), 20, message="the login sampled from %s" % sample)


def claude_extra(pct, resets_at, name):
    return {"pct": pct, "resetsAt": resets_at, "status": "allowed", "derived": True, "seconds": 604800,
            "name": name}


def test_login_shows_model_scoped_limits_and_extra_usage(login_node):
    body = _login_with(login_node, "claude-usage-live-limits-extra-disabled.json")
    assert body["fiveHour"] == {"pct": 53.0, "resetsAt": "2026-07-08T00:49:59.940Z"}
    assert body["sevenDay"] == {"pct": 8.0, "resetsAt": "2026-07-13T06:00:00.000Z"}
    assert body["extraWindows"] == [claude_extra(6.0, "2026-07-13T06:00:00.000Z", "Fable")]
    assert body["extraUsage"] == {"enabled": False, "monthlyLimit": None, "usedCredits": None, "utilization": None,
                                  "currency": None}


def test_hud_shows_the_logins_extra_windows(login_node):
    mon = login_node[0]
    _login_with(login_node, "claude-usage-limits-fable.json")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    env.pop("COLUMNS", None)  # the whole strip: pytest-xdist's workers set a terminal width of their own
    hud = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", mon.url],
                         env=env, capture_output=True, text=True, timeout=30)
    assert hud.returncode == 0, hud.stderr
    assert "5h 11%" in hud.stdout and "| Fable 5%" in hud.stdout and CLAUDE_TOKEN not in hud.stdout


def test_login_shows_newer_seven_day_buckets_and_scoped_limits(login_node):
    body = _login_with(login_node, "claude-usage-scoped-opus-fable.json")
    assert body["extraWindows"] == [claude_extra(12.0, "2026-07-08T09:00:00.441Z", "Opus"),
                                    claude_extra(29.0, "2026-07-08T09:00:00.441Z", "Fable"),
                                    claude_extra(11.0, "2026-07-08T09:00:00.440Z", "seven_day_cowork")]
    assert body["extraUsage"] is None
    body = _login_with(login_node, "claude-usage-sonnet-extra-enabled.json")
    assert body["extraWindows"] == []
    assert body["extraUsage"] == {"enabled": True, "monthlyLimit": 5000, "usedCredits": 3462.0,
                                  "utilization": 69.24, "currency": "USD"}


def test_login_and_hud_show_the_codename_buckets(login_node):
    body = _login_with(login_node, "claude-usage-codename-credits.json")
    assert [(w["name"], w["pct"], w["seconds"], w["resetsAt"]) for w in body["extraWindows"]] == [
        ("iguana_necktie", 35.5, None, "2026-11-05T07:59:00.000Z"), ("nimbus_quill", 0.0, None, None)]
    # Wide enough for the whole strip: the HUD drops what does not fit the terminal.
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent), COLUMNS="400")
    hud = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", login_node[0].url],
                         env=env, capture_output=True, text=True, timeout=30)
    assert hud.returncode == 0 and "iguana_necktie 35.5%" in hud.stdout, hud.stdout + hud.stderr


def test_the_sampled_events_keep_the_contracts_keys_only(login_node):
    _login_with(login_node, "claude-usage-limits-fable.json")
    _, _, home = login_node
    events = []
    for path in sorted((home / "svc" / "events").glob("*.jsonl")):
        events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    sampled = [e for e in events if e.get("attributes", {}).get("event.name") == "account.ratelimit.sampled"]
    assert sampled
    allowed = {"event.name", "event.entity", "event.action", "event.label", "account.email",
               "ratelimit.five_hour_pct", "ratelimit.five_hour_resets_at", "ratelimit.seven_day_pct",
               "ratelimit.seven_day_resets_at", "ratelimit.seven_day_large_pct", "ratelimit.seven_day_medium_pct",
               "subscription.type", "rate_limit.tier"}
    for event in sampled:
        assert set(event["attributes"]) - allowed == set(), event["attributes"]
    fable = [e for e in sampled if e["attributes"].get("ratelimit.five_hour_pct") == 11.0]
    assert fable and fable[-1]["attributes"]["ratelimit.seven_day_pct"] == 9.0
    assert "Fable" not in json.dumps(fable[-1])
