"""Health is not headroom (docs/posture.md, "Health"): a node whose two tokens the provider refused.

One real monitor against the stand-in provider, which answers 401 to both tokens, as on an
operator's first day with two pasted tokens that were refused. Every surface must name the
cause (the token was refused) and the fix (the vendor's credential command and the env file's
line), and none may call an account that was not read "full" or say it lacks "headroom": the
posture and the advice, /metrics, guard, the status line and the HUD, the MCP tools, the doctor
and the dashboard (in Chromium, light and dark, 360 and 1280 px).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any, Dict, Iterator, List

import pytest

from tests.support.cli import cli, run_cluster
from tests.support.home import REPO, canary, clean_env, monitor_env, write_accounts, accounts_path
from tests.support.monitor import Monitor, start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until
from svcposture.accountkey import account_key

TOK1 = canary("health1")
TOK2 = canary("health2")
FIX = ("run `claude setup-token` signed in as ada@example.com and paste it into "
       "~/.config/svc/model-accounts.env line 2")
REFUSAL = "acct1's token was refused by the provider (HTTP 401): " + FIX
REASON = REFUSAL + "; no other account can take over (acct2: token refused)"
# Words that describe the figures of an account that was read; none was.
READ_WORDS = re.compile(r"headroom|\bfull\b|exhausted", re.I)


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[Dict[str, Any]]:
    home = tmp_path_factory.mktemp("refused")
    provider = ProviderServer().start()
    provider.set_account(TOK1, mode="auth")
    provider.set_account(TOK2, mode="auth")
    write_accounts(accounts_path(home), [("ACCT1", TOK1, "ada@example.com"), ("ACCT2", TOK2, "bob@example.com")],
                   active="ACCT1")
    # The guard's 250 ms budget is for an idle machine; a busy test run gets more.
    env = monitor_env(home, provider.url, SVC_GUARD_BUDGET_MS="5000", SVC_STATUSLINE_BUDGET_MS="5000",
                      # One reading is what these tests judge: a loaded machine must not make it look stale.
                      SVC_PROBE_INTERVAL_S="60", SVC_POSTURE_TTL_S="60")
    mon = start_monitor(env)
    try:
        wait_until(lambda: _refused(mon.get_json("/api/accounts")[1]), timeout=30,
                   message="both accounts refused")
        yield {"home": home, "env": dict(env, SVC_MONITOR_PORT=str(mon.port)), "mon": mon, "provider": provider}
    finally:
        mon.stop()
        provider.stop()
    assert "Traceback" not in mon.stderr_text()


def _refused(body: Any) -> bool:
    accounts = body.get("accounts") if isinstance(body, dict) else None
    return bool(accounts) and all(a.get("health") == "refused" for a in accounts)


def test_every_account_view_says_refused(node: Dict[str, Any]) -> None:
    status, body = node["mon"].get_json("/api/accounts")
    assert status == 200 and body["status"] == "error" and body["siblingWithHeadroom"] is None
    assert [(a["label"], a["health"], a["readAt"], a["envLine"]) for a in body["accounts"]] == [
        ("acct1", "refused", None, 2), ("acct2", "refused", None, 3)]
    assert body["active"]["health"] == "refused" and body["active"]["error"]["httpStatus"] == 401
    assert TOK1 not in json.dumps(body)


def test_the_advice_names_the_refusal_and_the_fix(node: Dict[str, Any]) -> None:
    status, advice = node["mon"].get_json("/api/advice")
    assert status == 200 and advice["advice"] == "none" and advice["to"] is None and advice["waitS"] is None
    assert advice["reason"] == REASON
    assert advice["active"] == {"label": "acct1", "email": "ada@example.com", "health": "refused",
                                "note": REFUSAL, "fix": FIX}
    # Every other account, with its health; nothing is said of the headroom of an account not read.
    [acct2] = advice["ranked"]
    assert (acct2["label"], acct2["health"], acct2["candidate"], acct2["headroomPct"]) == \
        ("acct2", "refused", False, None)
    assert acct2["note"].startswith("acct2's token was refused by the provider (HTTP 401): run `claude "
                                    "setup-token` signed in as bob@example.com") and acct2["note"].endswith("line 3")
    assert not READ_WORDS.search(advice["reason"])


def test_metrics_carry_one_health_series_per_state(node: Dict[str, Any]) -> None:
    status, _headers, raw = node["mon"].get("/metrics")
    text = raw.decode()
    assert status == 200
    for label, email in (("acct1", "ada@example.com"), ("acct2", "bob@example.com")):
        key = account_key("claude", email)
        series = {m.group(1): m.group(2) for m in re.finditer(
            r'^svc_account_health\{account="%s",provider="claude",account_key="%s",health="(\w+)"\} (\d)$'
            % (label, key), text, re.M)}
        assert series == {"ok": "0", "refused": "1", "limited": "0", "unreachable": "0", "stale": "0",
                          "unread": "0"}, text
    # Nothing was read: no figures, and no time they were read at.
    assert "svc_account_utilization_percent{" not in text and "svc_account_probed_at_seconds{" not in text


def test_guard_is_unavailable_with_the_refusal_as_its_reason(node: Dict[str, Any]) -> None:
    done = cli(node["env"], "monitor", "guard")
    assert done.returncode == 69, done.stderr
    assert done.stderr == "svc-monitor guard: unavailable: %s; advice: none (no other account can take over: " \
                          "acct2: token refused)\n" % REFUSAL
    judged = json.loads(cli(node["env"], "monitor", "guard", "--json", "--account", "acct2").stdout)
    assert judged["decision"] == "unavailable" and judged["reason"].startswith("acct2's token was refused")


def test_status_line_and_hud_name_the_refusal(node: Dict[str, Any]) -> None:
    line = cli(node["env"], "monitor", "statusline", "--no-color").stdout
    assert line == "acct1 token refused (HTTP 401) | fix: %s\n" % FIX
    hud = cli(dict(node["env"], NO_COLOR="1"), "monitor", "hud", "--once").stdout
    assert "| acct1 <ada@example.com> | TOKEN REFUSED (HTTP 401) |" in hud, hud
    assert REFUSAL in hud and "advice: no other account can take over (acct2: token refused)" in hud, hud
    for said in (line, hud):
        assert not READ_WORDS.search(said), said


def _mcp(env: Dict[str, str], url: str, *calls: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The replies of `svc-monitor mcp` to initialize and each tools/call, over its pipes."""
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": 2 + i, "method": "tools/call", "params": call} for i, call in enumerate(calls)]
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "mcp", "--url", url], env=env,
                          cwd=str(REPO), input="".join(json.dumps(m) + "\n" for m in lines).encode(),
                          capture_output=True, timeout=60)
    replies = [json.loads(raw) for raw in done.stdout.splitlines()]
    return sorted((r for r in replies if r.get("id") != 1), key=lambda r: r["id"])


def test_mcp_tools_say_refused(node: Dict[str, Any]) -> None:
    advice, posture = _mcp(node["env"], node["mon"].url, {"name": "advice", "arguments": {}},
                           {"name": "posture", "arguments": {}})
    said = advice["result"]["structuredContent"]
    assert advice["result"]["isError"] is False and said["reason"] == REASON and said["active"]["fix"] == FIX
    body = posture["result"]["structuredContent"]
    assert [(a["label"], a["health"]) for a in body["accounts"]] == [("acct1", "refused"), ("acct2", "refused")]


def test_the_doctor_fails_a_refused_active_credential(node: Dict[str, Any]) -> None:
    done = run_cluster(node["env"], "doctor", "--json")
    report = json.loads(done.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert done.returncode == 1 and report["ok"] is False
    assert checks["account-health"] == {
        "name": "account-health", "status": "FAIL",
        "detail": "active: %s; sibling: %s" % (REFUSAL, checks["account-health"]["detail"].split("sibling: ")[1])}
    assert "acct2's token was refused" in checks["account-health"]["detail"]
    # Not in a cluster: no roster, no anchor; the cluster checks say so and fail nothing.
    for name in ("liveness-anchor", "host-name", "roster", "tracker-budget"):
        assert checks[name]["status"] == "INFO" and "not in a cluster" in checks[name]["detail"], checks[name]
    assert [c["name"] for c in report["checks"] if c["status"] == "FAIL"] == ["account-health"]


def test_a_lone_host_without_a_monitor_passes_the_doctor(tmp_path) -> None:
    home = tmp_path / "lone"
    home.mkdir()
    done = run_cluster(clean_env(home), "doctor", "--json")
    report = json.loads(done.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert done.returncode == 0 and report["ok"] is True, done.stdout
    assert checks["liveness-anchor"]["status"] == "INFO" and "not in a cluster" in checks["liveness-anchor"]["detail"]
    assert checks["account-health"]["status"] == "INFO" and "no monitor runs here" in checks["account-health"]["detail"]


def test_a_refused_sibling_is_a_warning(tmp_path) -> None:
    home = tmp_path / "sibling"
    with ProviderServer() as provider:
        provider.set_account(TOK1)
        provider.set_account(TOK2, mode="auth", http_status=403)
        write_accounts(accounts_path(home), [("ACCT1", TOK1, "ada@example.com"), ("ACCT2", TOK2, None)],
                       active="ACCT1")
        env = monitor_env(home, provider.url)
        mon = start_monitor(env)
        try:
            wait_until(lambda: [a.get("health") for a in mon.get_json("/api/accounts")[1].get("accounts") or []]
                       == ["ok", "refused"], timeout=30, message="acct1 ok, acct2 refused")
            done = run_cluster(env, "doctor", "--json")
        finally:
            mon.stop()
    check = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "account-health")
    # acct2 has no email: the fix names the account by its label; a 403 is a refusal too.
    assert check["status"] == "WARN" and done.returncode == 0, check
    assert check["detail"] == ("sibling: acct2's token was refused by the provider (HTTP 403): run `claude "
                               "setup-token` signed in as the account behind acct2 and paste it into "
                               "~/.config/svc/model-accounts.env line 3")


# ---------------------------------------------------------------- the dashboard, in Chromium

SHOTS = os.environ.get("SVC_TEST_SHOTS")  # a directory to keep the screenshots in, for a person to look at


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_dashboard_names_the_refusal_and_the_fix(node: Dict[str, Any], scheme: str, tmp_path) -> None:
    from tests.support import pages
    from tests.support.browser import chromium, wait_for

    with chromium(1280, 900) as driver:
        for width in (360, 1280):
            pages.emulate(driver, scheme, width)
            driver.get(node["mon"].url + "/")
            advice = wait_for(lambda: driver.execute_script(
                "var n = document.getElementById('advice-claude'); return !n.hidden && n.textContent"),
                timeout=30, what="the advice")
            assert advice == REASON + ".", advice
            cards = wait_for(lambda: driver.execute_script(
                "var c = document.querySelectorAll('#claude-cards .card-health');"
                "return c.length === 2 && Array.prototype.map.call(c, function (n) { return n.textContent; })"),
                timeout=30, what="both cards' notes")
            assert cards[0] == REFUSAL + "." and cards[1].startswith("acct2's token was refused"), cards
            pills = driver.execute_script("return Array.prototype.map.call(document.querySelectorAll("
                                          "'#claude-cards .card-head .pill'), function (n) { return n.textContent; })")
            assert pills == ["refused", "refused"]
            text = driver.execute_script("return document.body.innerText")
            assert not READ_WORDS.search(text), text
            over = pages.overflow(driver)
            assert over["scroll"] <= over["inner"], over
            assert pages.contrast_failures(driver) == []
            shot = os.path.join(SHOTS or str(tmp_path), "refused-%s-%d.png" % (scheme, width))
            pages.full_screenshot(driver, shot, width)
