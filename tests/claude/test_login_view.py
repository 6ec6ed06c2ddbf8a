"""GET /api/login and this machine's Claude Code login in the HUD and the status line
(docs/first-look.md), through the real monitor and the stand-in provider's /api/oauth/usage."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from svcposture.claude.loginview import LoginSample, login_body
from tests.support.firstlook import get_json, login_only_node, login_usage, start_login_monitor
from tests.support.home import canary, clean_env
from tests.support.hooks import hooked
from tests.support.monitor import get_request, raw_http, start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

TOKEN = canary("login-view")


@pytest.fixture(scope="module")
def login_node(tmp_path_factory):
    home = tmp_path_factory.mktemp("login-home")
    with ProviderServer() as provider:
        env = login_only_node(home, provider, TOKEN)
        mon = start_login_monitor(env)
        try:
            yield mon, provider, env
        finally:
            mon.stop()


def test_login_body_from_the_newest_sample(login_node):
    mon, _, _ = login_node
    status, headers, raw = mon.get("/api/login")
    body = json.loads(raw)
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert body["available"] is True and body["source"] == "login" and body["plan"] == "max"
    assert body["fiveHour"]["pct"] == 37.5 and body["sevenDay"]["pct"] == 62.0
    assert body["fiveHour"]["resetsAt"].endswith("Z") and body["sampledAt"].endswith("Z")
    assert set(body) == {"available", "node", "vendor", "loginName", "plan", "fiveHour", "sevenDay", "extraWindows",
                         "extraUsage", "sampledAt", "source"}
    # Whose login it is, so that the pages name it without naming a vendor themselves.
    assert (body["vendor"], body["loginName"]) == ("claude", "Claude Code")
    assert body["extraWindows"] == [] and body["extraUsage"] is None
    assert TOKEN.encode() not in raw
    # /api/accounts keeps the contract's unavailable body
    assert get_json(mon.url + "/api/accounts") == {"available": False, "node": body["node"]}
    # HEAD: the head only, with the GET's length
    status, head, rest = raw_http(mon.port, get_request("/api/login", "127.0.0.1:%d" % mon.port, method="HEAD"))
    assert status == 200 and rest == b"" and int(head["content-length"]) == len(raw)


def test_login_follows_the_provider(login_node):
    mon, provider, _ = login_node
    provider.set_usage(TOKEN, login_usage(five=104.0, seven=63.0))
    try:
        wait_until(lambda: get_json(mon.url + "/api/login")["fiveHour"]["pct"] == 104.0, timeout=20,
                   message="the new sample on /api/login")
    finally:
        provider.set_usage(TOKEN, login_usage())
    wait_until(lambda: get_json(mon.url + "/api/login")["fiveHour"]["pct"] == 37.5, timeout=20,
               message="the sample back")


def test_hud_and_statusline_show_the_login(login_node):
    mon, _, env = login_node
    hud = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", mon.url],
                         env=env, capture_output=True, text=True, timeout=30)
    assert hud.returncode == 0, hud.stderr
    assert "this machine's Claude Code login (max)" in hud.stdout and "5h 37.5%" in hud.stdout
    assert "7d 62%" in hud.stdout and "sampled" in hud.stdout and TOKEN not in hud.stdout
    line = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "statusline", "--url", mon.url,
                           "--no-color"], env=dict(env, SVC_STATUSLINE_BUDGET_MS="5000"), input=b"",
                          capture_output=True, timeout=30)
    assert line.returncode == 0, line.stderr
    text = line.stdout.decode()
    assert text.startswith("this machine's Claude Code login (max): 5h 37.5% ") and "| 7d 62% " in text
    assert TOKEN not in text


def test_without_credentials_the_reason_names_the_file(tmp_path):
    env = clean_env(tmp_path)
    env["SVC_PROVIDER_URL"] = "http://127.0.0.1:9"
    env = hooked(env, quota_poll_s=1)
    mon = start_monitor(env)
    try:
        expected = str(tmp_path / ".claude" / ".credentials.json")
        body = wait_until(lambda: (lambda b: b if expected in b.get("reason", "") else None)(
            get_json(mon.url + "/api/login")), timeout=20, message="the reason naming the credentials file")
        assert body == {"available": False, "node": body["node"], "reason": "no login credentials file at " + expected}
        wait_until(lambda: "quota sampler idle: no login credentials file at " + expected in mon.stderr_text(),
                   timeout=20, message="the startup line naming the path")
        # the HUD and the status line keep their unavailable words
        hud = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", mon.url],
                             env=env, capture_output=True, text=True, timeout=30)
        assert "posture unavailable" in hud.stdout
    finally:
        mon.stop()


def test_sampler_off_and_library_reasons(tmp_path):
    env = dict(clean_env(tmp_path), SVC_QUOTA_SAMPLER="0", SVC_PROVIDER_URL="http://127.0.0.1:9")
    mon = start_monitor(env)
    try:
        body = get_json(mon.url + "/api/login")
        assert body["available"] is False and "SVC_QUOTA_SAMPLER=0" in body["reason"]
    finally:
        mon.stop()
    from svcposture import start_server
    server, _ = start_server(tmp_path, port=0, environ=dict(env, SVC_ACCOUNTS_PROBE="0"))
    try:
        body = get_json(server.url + "/api/login")
        assert body["available"] is False and "samples no interactive login" in body["reason"]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("values", [
    {}, {"ratelimit.five_hour_pct": "12"}, {"ratelimit.five_hour_pct": True, "subscription.type": 7},
    {"ratelimit.seven_day_pct": 1e308, "ratelimit.seven_day_resets_at": 5, "subscription.type": ""},
])
def test_login_body_of_odd_samples(values):
    body = login_body("n", LoginSample(values, 0), "unused")
    assert body["available"] is True and body["sampledAt"] == "1970-01-01T00:00:00.000Z"
    assert body["plan"] is None or isinstance(body["plan"], str)
    for field in ("fiveHour", "sevenDay"):
        window = body[field]
        assert window is None or (isinstance(window["pct"], (int, float)) and not isinstance(window["pct"], bool)
                                  and (window["resetsAt"] is None or isinstance(window["resetsAt"], str)))
    json.dumps(body, allow_nan=False)
