"""The demo's Codex login and the dashboard's Codex section, against real monitors
(and, for the page, a real headless Chromium)."""
from __future__ import annotations

import json
import urllib.request

from tests.support.browser import wait_for
from tests.support.home import REPO, canary, clean_env, node_env
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until
from svcposture.codex import demo as codex_demo
from svcposture.demo import main as demo

TOK1 = canary("cxpage1")


def _codex_usage(url: str, token: str, account_id: str):
    req = urllib.request.Request(url + codex_demo.USAGE_PATH, headers={
        "authorization": "Bearer " + token, "chatgpt-account-id": account_id, "accept": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None


def test_the_simulated_provider_answers_the_codex_usage_route():
    clock = [1_800_000_000.0]
    provider = demo.SimulatedProvider(clock=lambda: clock[0]).start()
    try:
        _, token, account_id, _ = codex_demo.LOGIN
        status, body = _codex_usage(provider.url, token, account_id)
        assert status == 200 and body["plan_type"] == "plus"
        primary, secondary = body["rate_limit"]["primary_window"], body["rate_limit"]["secondary_window"]
        assert primary["limit_window_seconds"] == 18000 and secondary["limit_window_seconds"] == 604800
        assert primary["used_percent"] == 35.0
        clock[0] += 3600
        assert _codex_usage(provider.url, token, account_id)[1]["rate_limit"]["primary_window"]["used_percent"] == 47.0
        assert _codex_usage(provider.url, "not-the-token", account_id)[0] == 401
        assert _codex_usage(provider.url, token, "another-account")[0] == 401
    finally:
        provider.stop()


def test_the_demo_node_shows_its_codex_login_on_the_dashboard(browser):
    provider = demo.SimulatedProvider().start()
    node = demo.DemoNode(provider.url, base_environ=clean_env(REPO), started=provider.started)
    text = node.paths.accounts_env.read_text()
    assert "CODEX_HOME_DEMO=" in text and 'export CODEX_HOME="$CODEX_HOME_DEMO"' in text
    mon = start_monitor(dict(node.environ, SVC_QUOTA_SAMPLER="0"))
    try:
        body = wait_until(lambda: (lambda b: b if b.get("available") else None)(
            mon.get_json("/api/accounts?provider=codex")[1]), timeout=20, message="the demo's Codex posture")
        assert [a["label"] for a in body["accounts"]] == ["codex-demo"]
        account = body["active"]
        assert account["label"] == "codex-demo" and account["planType"] == "plus" and account["source"] == "api"
        assert 35.0 <= account["fiveHour"]["pct"] < 40.0 and account["fiveHour"]["derived"] is True
        assert [a["label"] for a in mon.get_json("/api/accounts")[1]["accounts"]] == ["acct1", "acct2", "acct3"]
        # The seeded day of history gives the Codex account a forecast from the first probe.
        traj = wait_until(lambda: (lambda t: t if any(a["label"] == "codex-demo" for a in t.get("accounts", []))
                                   else None)(mon.get_json("/api/trajectory")[1]), timeout=20, message="trajectory")
        codex_row = [a for a in traj["accounts"] if a["label"] == "codex-demo"][0]
        assert codex_row["provider"] == "codex" and codex_row["fiveHour"]["forecast"]["ratePctPerHour"] > 0

        browser.set_window_size(360, 900)
        browser.get(mon.url + "/")
        css = lambda sel: browser.find_elements("css selector", sel)  # noqa: E731
        wait_for(lambda: css("#codex-cards .card[data-label]"), what="the Codex section's card")
        assert browser.find_element("id", "vendor-codex").is_displayed()
        # Each vendor's posture arrives on its own: Claude's heading shows once its cards have come too.
        wait_for(lambda: css("#claude-cards .card[data-label]"), what="the Claude section's cards")
        assert browser.find_element("id", "claude-title").is_displayed()
        # Read in one script: a new frame re-draws the cards, so elements found earlier may go stale.
        cards = browser.execute_script(
            "return Array.from(document.querySelectorAll('.card[data-label]')).map("
            "function (c) { return [c.parentNode.id, c.getAttribute('data-label'), c.textContent]; });")
        # The demo shows every built-in vendor: Claude's three accounts first, then one of each other's.
        assert [(box, label) for box, label, _ in cards][:4] == [
            ("claude-cards", "acct1"), ("claude-cards", "acct2"), ("claude-cards", "acct3"), ("codex-cards", "codex-demo")]
        assert "plan plus" in cards[3][2] and "read from the Codex usage service" in cards[3][2] and "5h" in cards[3][2]
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        mon.stop()
        provider.stop()
        node.remove()


def test_a_claude_only_dashboard_has_no_codex_section(browser, tmp_path):
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.30, "allowed"))
        env = node_env(tmp_path, provider.url, [("ACCT1", TOK1, "ada@example.com")], active="ACCT1")
        mon = start_monitor(env)
        try:
            browser.set_window_size(1280, 900)
            browser.get(mon.url + "/")
            wait_for(lambda: browser.find_elements("css selector", "#claude-cards .card[data-label]"), what="a card")
            assert not browser.find_element("id", "vendor-codex").is_displayed()
            assert not browser.find_element("id", "claude-title").is_displayed()
            assert "codex" not in browser.find_element("tag name", "body").text.lower()
        finally:
            mon.stop()
