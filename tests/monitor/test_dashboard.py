"""The dashboard at /: static checks, then a real headless Chromium."""
from __future__ import annotations

import re


from tests.support.browser import wait_for
from tests.support.home import canary, node_env
from tests.support.provider import ProviderServer
from svcposture.monitor import assets as server_mod

TOK1 = canary("dash1")
TOK2 = canary("dash2")


def test_assets_ship_inside_the_package():
    for name in ("index.html", "dashboard.css", "dashboard.js"):
        text = (server_mod.STATIC_DIR / name).read_text(encoding="utf-8")
        # no CDN, no build step: nothing is fetched from anywhere but this monitor
        assert not re.search(r"(src|href)=\"(https?:)?//", text), name
        # The SVG namespace is a name, never fetched.
        bare = text.lower().replace('"http://www.w3.org/2000/svg"', '""')
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", bare), name
    html = (server_mod.STATIC_DIR / "index.html").read_text()
    for ident in ("footer", "footer-label", "footer-email", "footer-status", "bar-5h", "bar-7d", "banner", "refresh"):
        assert 'id="%s"' % ident in html
    js = (server_mod.STATIC_DIR / "dashboard.js").read_text()
    assert "EventSource" in js and "X-Svc-Refresh" in js and "innerHTML" not in js


def test_page_headers(tmp_path, monitors):
    from tests.support.home import clean_env
    m = monitors.start(clean_env(tmp_path), ["--no-probe"])
    status, headers, body = m.get("/")
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
    assert b'src="/static/dashboard.js"' in body


def test_footer_changes_after_a_forced_refresh_without_reload(browser, tmp_path, monitors):
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.42, "allowed"), seven_day=(0.10, "allowed"))
        provider.set_account(TOK2, five_hour=(0.05, "allowed"))
        env = node_env(tmp_path, provider.url, [("ACCT1", TOK1, "ada@example.com"), ("ACCT2", TOK2, "bob@example.com")],
                       active="ACCT1", extra={"SVC_REFRESH_FLOOR_S": "0"})
        mon = monitors.start(env)
        try:
            by_id = lambda ident: browser.find_element("id", ident)  # noqa: E731
            browser.get(mon.url + "/")
            wait_for(lambda: by_id("footer-label").text == "acct1", what="active account")
            assert by_id("footer-email").text == "ada@example.com"
            assert by_id("footer-status").text.lower() == "ok"
            assert "pill-ok" in by_id("footer-status").get_attribute("class")
            wait_for(lambda: by_id("conn").text == "live", what="stream live")
            assert by_id("bar-5h-fill").get_attribute("style").replace(" ", "") == "width:42%;"
            assert by_id("bar-5h-text").text.startswith("42% · resets in ")
            assert by_id("bar-7d-text").text.startswith("10% · resets in ")
            assert not by_id("banner").is_displayed()
            browser.execute_script("window.__sameDocument = 'yes';")

            provider.set_account(TOK1, status="rejected", five_hour=(1.0, "rejected"))
            by_id("refresh").click()
            wait_for(lambda: by_id("footer-status").text.lower() == "rejected", what="rejected pill")
            wait_for(lambda: by_id("banner").is_displayed(), what="exhausted banner")
            banner = by_id("banner").text
            assert "acct1 is exhausted" in banner and "acct2" in banner and "bob@example.com" in banner
            assert by_id("bar-5h-fill").get_attribute("style").replace(" ", "") == "width:100%;"
            assert browser.execute_script("return window.__sameDocument;") == "yes"  # no reload

            # A refresh made elsewhere reaches the page through the stream alone.
            provider.set_account(TOK1, five_hour=(0.07, "allowed"))
            status, _, _ = mon.get("/api/accounts?refresh=true", {"X-Svc-Refresh": "1"})
            assert status == 200
            wait_for(lambda: by_id("footer-status").text.lower() == "ok", what="pushed ok")
            wait_for(lambda: not by_id("banner").is_displayed(), what="banner gone")
            assert browser.execute_script("return window.__sameDocument;") == "yes"
            page = browser.page_source
            assert "CANARY" not in page
        finally:
            mon.stop()


def test_unavailable_clears_the_display(browser, tmp_path, monitors):
    from tests.support.home import clean_env
    mon = monitors.start(clean_env(tmp_path), ["--no-probe"])
    browser.get(mon.url + "/")
    by_id = lambda ident: browser.find_element("id", ident)  # noqa: E731
    wait_for(lambda: by_id("unavailable").is_displayed(), what="unavailable note")
    assert by_id("footer-status").text.lower() == "unavailable"
    assert by_id("footer-label").text == "no account" and by_id("footer-email").text == ""
    assert not by_id("banner").is_displayed()
