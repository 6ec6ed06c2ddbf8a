"""The pages in a real browser (Debian chromium through selenium), as a new user sees them.

Every page (the demo's dashboard and fleet, and the dashboard of a machine with
only Claude Code's login) at 360, 768, 800, 900 and 1280 px in both colour
schemes: no sideways scrolling, WCAG AA contrast of every visible text from the
rendered styles, no console error, a heading on each account card, every bar a
labelled progressbar, and no motion under prefers-reduced-motion. One browser
session per scheme, resized between widths. Screenshots of every page, width
and scheme go to $SVC_SCREENSHOT_DIR (else a temporary folder), whose path is
printed. Under CI a missing browser fails; elsewhere the test is skipped.
"""
from __future__ import annotations

import os
import tempfile

import pytest

from tests.support import pages
from tests.support.browser import chromium, require_chromium, wait_for
from tests.support.firstlook import Demo, login_only_node, start_login_monitor
from tests.support.home import canary
from tests.support.provider import ProviderServer

WIDTHS = (360, 768, 800, 900, 1280)
SCHEMES = ("light", "dark")


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    require_chromium()
    demo = Demo(tmp_path_factory.mktemp("demo-home"), ["--port", "0"]).wait_ready()
    provider = ProviderServer().start()
    login = None
    try:
        login = start_login_monitor(login_only_node(tmp_path_factory.mktemp("login-home"), provider, canary("login")))
        yield {"demo": demo.url, "login": login.url}
    finally:
        if login is not None:
            login.stop()
        provider.stop()
        demo.stop()


@pytest.fixture(scope="module")
def shots():
    folder = os.environ.get("SVC_SCREENSHOT_DIR") or tempfile.mkdtemp(prefix="svc-screenshots-")
    os.makedirs(folder, exist_ok=True)
    print("\nscreenshots in %s" % folder)
    return folder


def _pages(sites):
    # (name, url, what shows the page has drawn its data)
    return (
        ("dashboard", sites["demo"] + "/",
         "return document.querySelectorAll('#claude-cards article.card').length >= 3"),
        ("fleet", sites["demo"] + "/fleet", "return document.querySelectorAll('#rows .row').length >= 5"),
        ("login", sites["login"] + "/", "return document.querySelectorAll('#login-cards article.card').length == 1"),
    )


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_page_at_every_width(sites, shots, scheme):
    problems = []
    with chromium(1280, 900) as driver:
        for name, url, drawn in _pages(sites):
            pages.emulate(driver, scheme, WIDTHS[0])
            driver.get(url)
            wait_for(lambda: driver.execute_script(drawn), timeout=30, what="%s drawn" % name)
            for width in WIDTHS:
                pages.emulate(driver, scheme, width)
                wait_for(lambda: driver.execute_script("return window.innerWidth") == width, what="resize")
                where = "%s %s %dpx" % (name, scheme, width)
                size = pages.overflow(driver)
                if size["scroll"] > size["inner"]:
                    problems.append("%s scrolls sideways: %s" % (where, size))
                for failure in pages.contrast_failures(driver):
                    problems.append("%s contrast: %s" % (where, failure))
                problems.extend("%s: %s" % (where, p) for p in pages.a11y_failures(driver))
                footer = pages.footer_problem(driver, width)
                if footer:
                    problems.append("%s: %s" % (where, footer))
                problems.extend("%s moves under reduced motion: %s" % (where, m) for m in pages.moving(driver)[:3])
                pages.full_screenshot(driver, os.path.join(shots, "%s-%d-%s.png" % (name, width, scheme)), width)
            errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
            problems.extend("%s %s console: %s" % (name, scheme, e.get("message", "")[:200]) for e in errors)
    assert not problems, "\n".join(problems[:40])


def test_the_checks_can_fail(sites):
    # A page made to break every rule is caught by each check.
    with chromium(1280, 900) as driver:
        pages.emulate(driver, "light", 360)
        driver.get(sites["demo"] + "/")
        wait_for(lambda: driver.execute_script(_pages(sites)[0][2]), timeout=30, what="dashboard drawn")
        driver.execute_script("""
            var wide = document.createElement('div'); wide.style.width = '900px'; wide.textContent = 'wide';
            wide.style.color = '#777'; wide.style.background = '#888'; document.body.appendChild(wide);
            // Outside the cards, which the page redraws on every frame.
            var card = document.createElement('article'); card.className = 'card';
            card.textContent = 'no heading';
            var bar = document.createElement('div'); bar.className = 'bar';
            var fill = document.createElement('div'); fill.className = 'fill';
            fill.style.setProperty('transition', 'width 2s', 'important');
            bar.appendChild(fill); card.appendChild(bar); document.querySelector('main').appendChild(card);
        """)
        assert pages.overflow(driver)["scroll"] > 360
        assert any(f["text"] == "wide" for f in pages.contrast_failures(driver))
        failures = pages.a11y_failures(driver)
        assert any("heading" in f for f in failures) and any("progressbar" in f for f in failures)
        assert pages.moving(driver)
        driver.execute_script("document.getElementById('footer').style.position = 'fixed';"
                              "document.getElementById('footer').style.bottom = '0';")
        assert pages.footer_problem(driver, 360)
