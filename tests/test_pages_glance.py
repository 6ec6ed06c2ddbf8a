"""The answer at a glance, in a real browser against the real demo (and a login-only node).

The dashboard opens with the advice in one sentence for each vendor present; every
word on screen is a plain one (no "fresh", "cached", "STALE", "quota sampler",
"source ... anchor ..."); each chart has a visible key and a text alternative that
carries its numbers; durations are written one way; staleness names its threshold;
"Notify me" says when the browser refuses; the login view has one heading and names
the accounts file. The demo's active account draws as a real account's would and has
a forecast.
"""
from __future__ import annotations

import re

import pytest

from tests.support import pages
from tests.support.browser import chromium, require_chromium, wait_for
from tests.support.firstlook import Demo, get_json, login_only_node, start_login_monitor
from tests.support.home import canary
from tests.support.provider import ProviderServer
from svcposture.vendors import registered

CARDS_DRAWN = "return document.querySelectorAll('#claude-cards article.card').length >= 3"
ADVICE_SHOWN = "return !document.getElementById('advice').hidden && document.getElementById('advice-claude').textContent"
# The one way: "2d 6h", "1h 58m", "7m 5s", "30s"; never "1h02m", "2d22h", "38 min".
OTHER_DURATIONS = re.compile(r"\b\d+h\d+m\b|\b\d+d\d+h\b|\b\d+ min\b|\b\d+h\d\dm\b")
INTERNAL_WORDS = re.compile(r"\b(fresh|cached|STALE|quota sampler|usage API|probed|source demo|anchor|"
                            r"start-up log line)\b")


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    require_chromium()
    demo = Demo(tmp_path_factory.mktemp("demo-home"), ["--port", "0"]).wait_ready()
    provider = ProviderServer().start()
    login = None
    home = tmp_path_factory.mktemp("login-home")
    try:
        login = start_login_monitor(login_only_node(home, provider, canary("login")))
        yield {"demo": demo.url, "login": login.url}
    finally:
        if login is not None:
            login.stop()
        provider.stop()
        demo.stop()


@pytest.fixture(scope="module")
def driver():
    with chromium(1280, 900) as d:
        pages.emulate(d, "light", 1280)
        yield d


def _visible_text(driver) -> str:
    return driver.execute_script("return document.body.innerText")


def test_the_dashboard_opens_with_the_advice_for_each_vendor(sites, driver):
    driver.get(sites["demo"] + "/")
    wait_for(lambda: driver.execute_script(CARDS_DRAWN), timeout=30, what="cards")
    claude = wait_for(lambda: driver.execute_script(ADVICE_SHOWN), timeout=30, what="the advice")
    codex = wait_for(lambda: driver.execute_script("return document.getElementById('advice-codex').textContent"),
                     timeout=30, what="Codex's advice")
    sentence = re.compile(r"^(Claude|Codex): (Stay on \S+|Wait \d|Switch to \S+|No account has headroom)")
    assert sentence.match(claude), claude
    assert sentence.match(codex) and "codex-demo" in codex, codex
    # It is the first thing in the page's main part, above every card.
    first = driver.execute_script("return document.querySelector('main > :not([hidden])').id")
    assert first == "advice"
    # It is what the monitor advises.
    advice = get_json(sites["demo"] + "/api/advice")
    named = (advice.get("to") or advice.get("active") or {}).get("label")
    assert named and named in claude, (advice, claude)


def test_no_internal_words_and_one_duration_format(sites, driver):
    for path, drawn in (("/", CARDS_DRAWN), ("/fleet", "return document.querySelectorAll('#rows .row').length >= 5")):
        driver.get(sites["demo"] + path)
        wait_for(lambda: driver.execute_script(drawn), timeout=30, what=path)
        text = wait_for(lambda: (lambda t: t if "ago" in t or path == "/fleet" else None)(_visible_text(driver)),
                        what="ages drawn")
        # The fleet's heartbeat states (live, stale, missing) are its own words, counted at the top.
        found = [w for w in INTERNAL_WORDS.findall(text) if not (path == "/fleet" and w == "STALE")]
        assert not found, (path, found, text)
        assert not OTHER_DURATIONS.findall(text), (path, OTHER_DURATIONS.findall(text))
        if path == "/":
            # A dash stands for no value nowhere (the advice's sentences use one as punctuation).
            names = "|".join(re.escape(v.display_name) for v in registered())
            lines = [line for line in text.splitlines() if not re.match(r"(%s): " % names, line)]
            assert not [line for line in lines if "—" in line], lines
            assert re.search(r"resets in (\d+[dhm]\s?)+", text.replace("\u00a0", " "))


def test_each_chart_has_a_key_and_says_its_numbers(sites, driver):
    driver.get(sites["demo"] + "/")
    wait_for(lambda: driver.execute_script(CARDS_DRAWN), timeout=30, what="cards")
    # The forecasts come with the trajectory, a moment after the cards.
    wait_for(lambda: driver.execute_script(
        "return Array.prototype.some.call(document.querySelectorAll('#claude-cards svg.spark'),"
        " function (s) { return s.getAttribute('aria-label').indexOf('forecast') >= 0; })"), what="a forecast")
    charts = driver.execute_script("""
        return Array.prototype.map.call(document.querySelectorAll('#claude-cards svg.spark'), function (svg) {
          var key = svg.nextElementSibling;
          return {label: svg.getAttribute('aria-label'), title: (svg.querySelector('title') || {}).textContent,
                  key: key && key.classList.contains('spark-legend') && key.getBoundingClientRect().height > 0
                       ? key.textContent : null};
        });""")
    assert len(charts) == 6
    for chart in charts:
        assert chart["key"] and all(w in chart["key"] for w in ("limit", "now", "reset", "forecast")), chart
        assert re.search(r"(5-hour|7-day) window: \d+(\.\d)?% now", chart["label"]), chart
        assert "resets " in chart["label"] and chart["title"] == chart["label"], chart
    assert any("forecast" in c["label"] for c in charts)


def test_a_reading_too_old_names_the_threshold(sites, driver):
    driver.get(sites["demo"] + "/")
    wait_for(lambda: driver.execute_script(CARDS_DRAWN), timeout=30, what="cards")
    assert "a new one every 10s" in driver.find_element("id", "claude-meta").text
    # An hour later by the page's clock, with no new reading.
    driver.execute_script("var real = Date.now; Date.now = function () { return real() + 3600e3; };")
    meta = wait_for(lambda: (lambda t: t if t.startswith("No new reading") else None)(
        driver.find_element("id", "claude-meta").text), what="the stale words")
    assert re.match(r"No new reading for 1h( \d+[ms])*( \d+s)? \(readings every 10s\)$", meta), meta


def test_notify_me_says_when_the_browser_refuses(sites, driver):
    driver.get(sites["demo"] + "/")
    wait_for(lambda: driver.execute_script(CARDS_DRAWN), timeout=30, what="cards")
    driver.execute_cdp_cmd("Browser.setPermission", {"permission": {"name": "notifications"}, "setting": "denied",
                                                     "origin": sites["demo"]})
    driver.find_element("id", "notify").click()
    note = wait_for(lambda: driver.find_element("id", "notify-note").text, what="the refusal")
    assert "blocks" in note or "refused" in note, note
    # A browser without notifications at all (plain HTTP from another machine).
    driver.get(sites["demo"] + "/")
    wait_for(lambda: driver.execute_script(CARDS_DRAWN), timeout=30, what="cards")
    driver.execute_script("delete window.Notification; window.Notification = undefined;")
    driver.find_element("id", "notify").click()
    note = wait_for(lambda: driver.find_element("id", "notify-note").text, what="no notifications")
    assert "no notifications" in note, note


def test_the_login_view_has_one_heading_and_names_the_file(sites, driver):
    driver.get(sites["login"] + "/")
    wait_for(lambda: driver.execute_script("return document.querySelectorAll('#login-cards article.card').length"),
             timeout=30, what="the login card")
    headings = driver.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('h1,h2,h3'), function (h) {"
        " return h.offsetParent === null ? null : h.textContent.trim().toLowerCase(); }).filter(Boolean)")
    assert len(headings) == len(set(headings)), headings
    text = _visible_text(driver)
    assert re.search(r"/\S*model-accounts\.env", text), text
    assert not INTERNAL_WORDS.findall(text), (INTERNAL_WORDS.findall(text), text)


def test_the_demo_active_account_draws_as_a_real_one_and_has_a_forecast(sites):
    history = get_json(sites["demo"] + "/api/history?hours=24")["accounts"]["acct1"]["fiveHour"]
    drops = sum(1 for a, b in zip(history, history[1:]) if b[1] < a[1] - 5)
    # A real 5 h window resets at most five times a day (the live demo cycle adds its few at the end).
    assert len(history) > 100 and drops <= 12, drops
    trajectory = get_json(sites["demo"] + "/api/trajectory")
    acct1 = [a for a in trajectory["accounts"] if a["label"] == "acct1"][0]
    assert any((acct1.get(f) or {}).get("forecast") for f in ("fiveHour", "sevenDay")), acct1
