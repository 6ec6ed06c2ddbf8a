"""Moving between the pages in a real browser: dashboard -> fleet -> dashboard, five times.

Chromium keeps a page the user has left in its back-forward cache; a cached page that
still holds its event streams keeps its connections, and the browser's six connections
to one host run out: the next page never finishes loading. Each page closes its streams
when it is hidden and opens them again when it is shown: every visit loads, and the
monitor's count of open streams (svc_sse_subscribers on /metrics) does not grow.
"""
from __future__ import annotations

import re
import urllib.request

import pytest

from tests.support.browser import chromium, require_chromium, wait_for
from tests.support.firstlook import Demo

ROUND_TRIPS = 5
# Both vendors' cards: the page follows a vendor's stream once it shows that vendor, so the
# streams one page holds are all open only then.
DASHBOARD_DRAWN = ("return document.querySelectorAll('#claude-cards article.card').length >= 3 && "
                   "document.querySelectorAll('#codex-cards article.card').length >= 1 && "
                   "document.getElementById('conn').textContent === 'live'")
FLEET_DRAWN = "return document.querySelectorAll('#rows .row').length >= 5"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    require_chromium()
    site = Demo(tmp_path_factory.mktemp("demo-home"), ["--port", "0"]).wait_ready()
    try:
        yield site.url
    finally:
        site.stop()


def open_streams(url: str) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    found = re.search(r"^svc_sse_subscribers (\d+)", text, re.M)
    assert found, "no svc_sse_subscribers on /metrics"
    return int(found.group(1))


def test_dashboard_fleet_round_trips_keep_loading(demo):
    from selenium.webdriver.common.by import By

    with chromium(1280, 900) as driver:
        driver.set_page_load_timeout(20)
        driver.get(demo + "/")
        wait_for(lambda: driver.execute_script(DASHBOARD_DRAWN), timeout=30, what="the dashboard drawn")
        one_page = wait_for(lambda: open_streams(demo), timeout=20, what="the dashboard's streams open")
        for trip in range(ROUND_TRIPS):
            driver.find_element(By.ID, "fleet-link").click()
            wait_for(lambda: driver.execute_script(FLEET_DRAWN), timeout=20, what="the fleet drawn, trip %d" % trip)
            assert driver.execute_script("return document.readyState") == "complete"
            driver.find_element(By.ID, "to-dashboard").click()
            wait_for(lambda: driver.execute_script(DASHBOARD_DRAWN), timeout=20,
                     what="the dashboard drawn again, trip %d" % trip)
        # Back through the history: pages restored from the cache open their streams again.
        driver.back()
        wait_for(lambda: driver.execute_script(FLEET_DRAWN), timeout=20, what="the fleet, back")
        driver.back()
        wait_for(lambda: driver.execute_script(DASHBOARD_DRAWN), timeout=20, what="the dashboard, back")
        # The hidden pages hold nothing: the open streams come back to one page's worth.
        wait_for(lambda: open_streams(demo) <= one_page, timeout=30,
                 what="open streams back to %d (now %d)" % (one_page, open_streams(demo)))
