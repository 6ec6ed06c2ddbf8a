"""The dashboard's trajectory view in a real headless Chromium against a real monitor:
account cards, sparklines, the forecast sentence, a live alert, staleness, the
unavailable explanation, and no horizontal scroll from 360 to 1440 px."""
from __future__ import annotations

import re
import time

from tests.support.history import HOUR_MS, climb_rows, write_rows
from tests.support.home import canary, clean_env, node_env
from tests.support.provider import ProviderServer
from tests.support.browser import wait_for

TOK1 = canary("dtraj1")
TOK2 = canary("dtraj2")


def _no_horizontal_scroll(driver) -> bool:
    return driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")



def fresh(read):
    """`read()` of elements the page may re-render under it (every probe redraws the cards):
    a read that meets a replaced element is read again from the new one, not a failure."""
    from selenium.common.exceptions import StaleElementReferenceException
    for _ in range(50):
        try:
            return read()
        except StaleElementReferenceException:
            time.sleep(0.05)
    return read()


def test_cards_sparklines_forecast_sentence_and_a_live_alert(browser, tmp_path, monitors):  # noqa: F811
    now = int(time.time() * 1000)
    reset_5h = (now + HOUR_MS) // 1000 * 1000
    write_rows(tmp_path, climb_rows("acct1", now - 30 * 60_000, now - 60_000, step_ms=60_000, pct0=40.0, rate=60.0,
                                    resets_ms=reset_5h))
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.72, "allowed"), seven_day=(0.30, "allowed"), reset_5h=reset_5h / 1000)
        provider.set_account(TOK2, five_hour=(0.05, "allowed"), seven_day=(0.10, "allowed"))
        env = node_env(tmp_path, provider.url, [("ACCT1", TOK1, "ada@example.com"), ("ACCT2", TOK2, "bob@example.com")],
                       active="ACCT1", extra={"SVC_PROBE_INTERVAL_S": "0.5", "SVC_POSTURE_TTL_S": "0.5",
                                              "SVC_REFRESH_FLOOR_S": "0.05"})
        mon = monitors.start(env)
        try:
            browser.set_window_size(360, 900)
            browser.get(mon.url + "/")
            css = lambda sel: browser.find_elements("css selector", sel)  # noqa: E731
            wait_for(lambda: len(css(".card[data-label]")) == 2, what="a card per account")
            assert fresh(lambda: [c.get_attribute("data-label") for c in css(".card[data-label]")]) == ["acct1", "acct2"]
            assert "active" in fresh(lambda: css('.card[data-label="acct1"]')[0].get_attribute("class"))
            five = '.card[data-label="acct1"] .win[data-window="fiveHour"] '
            wait_for(lambda: "Forecast: 100% in" in css(five + ".sentence")[0].text, what="forecast sentence")
            text, classes = fresh(lambda: (css(five + ".sentence")[0].text,
                                           css(five + ".sentence")[0].get_attribute("class")))
            assert "before it resets" in text and "alarm" in classes
            wait_for(lambda: len(re.findall(r"[ML]", css(five + ".spark-line")[0].get_attribute("d"))) >= 10,
                  what="a sparkline path with the seeded points")
            assert fresh(lambda: css(five + ".spark-forecast")[0].get_attribute("d")).startswith("M")
            assert css(five + ".spark-reset")
            # The local clock time sits beside each countdown.
            assert re.search(r"resets in .+ \(\d", browser.find_element("id", "bar-5h-text").text)
            assert _no_horizontal_scroll(browser)
            # acct1 is active and its wall is within the hour: the forecast alert is listed.
            wait_for(lambda: any("forecast to reach 100%" in li.text for li in css("#alerts li.kind-forecast")),
                  what="the forecast alert")
            assert not fresh(lambda: any("reached 80%" in li.text for li in css("#alerts li")))

            provider.set_account(TOK1, five_hour=(0.85, "allowed_warning"), seven_day=(0.30, "allowed"),
                                 reset_5h=reset_5h / 1000)
            wait_for(lambda: any("acct1 5h reached 80%" in li.text for li in css("#alerts li")),
                  what="the threshold alert, live")
            assert not browser.find_element("id", "alerts-empty").is_displayed()
            for width in (360, 768, 1280, 1440):
                browser.set_window_size(width, 900)
                wait_for(lambda: browser.execute_script("return window.innerWidth") <= width, what="resize")
                assert _no_horizontal_scroll(browser), width
            assert "CANARY" not in browser.page_source
        finally:
            mon.stop()


def test_a_value_older_than_two_probe_intervals_is_greyed_with_its_age(browser, tmp_path, monitors):  # noqa: F811
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.30, "allowed"))
        env = node_env(tmp_path, provider.url, [("ACCT1", TOK1, "ada@example.com")], active="ACCT1",
                       extra={"SVC_PROBE_INTERVAL_S": "1", "SVC_POSTURE_TTL_S": "1", "SVC_REFRESH_FLOOR_S": "0.05",
                              "SVC_PROBE_DEADLINE_S": "120", "SVC_PROBE_TIMEOUT_S": "120"})
        mon = monitors.start(env)
        try:
            browser.set_window_size(1280, 900)
            browser.get(mon.url + "/")
            card = lambda: browser.find_element("css selector", '.card[data-label="acct1"]')  # noqa: E731
            wait_for(lambda: card().is_displayed(), what="the card")
            assert "stale" not in card().get_attribute("class")
            # The provider stops answering: the probe hangs, the value the page has ages.
            provider.set_account(TOK1, five_hour=(0.30, "allowed"), mode="slow", delay=120)
            wait_for(lambda: "stale" in card().get_attribute("class"), timeout=30, what="greyed card")
            # Each second's tick redraws the card: the note is found and read in one look, looked at again if stale.
            wait_for(lambda: (lambda note: note.is_displayed() and re.search(
                r"No new reading for \d+s \(readings every \d+s\)", note.text))(
                    card().find_element("css selector", ".stale-note")), what="the stale note")
            assert "stale" in browser.find_element("id", "footer").get_attribute("class")
            assert browser.find_element("id", "claude-meta").text.startswith("No new reading for ")
        finally:
            mon.stop()


def test_unavailable_says_why_and_how_to_fix_it(browser, tmp_path, monitors):  # noqa: F811
    mon = monitors.start(clean_env(tmp_path), ["--no-probe"])
    browser.get(mon.url + "/")
    box = lambda: browser.find_element("id", "unavailable")  # noqa: E731
    wait_for(lambda: box().is_displayed(), what="the explanation")
    # The file to fill in is named by its path, not left to a log line.
    from svcposture.paths import Paths
    expected = str(Paths(tmp_path, environ=clean_env(tmp_path)).accounts_env)
    assert expected in box().text and "svc-monitor init" in box().text
    assert browser.find_element("id", "fleet-link").get_attribute("href").endswith("/fleet")
    assert not browser.find_elements("css selector", ".card")
