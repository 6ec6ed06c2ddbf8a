"""axe-core, the current 4.x from npm, on every page, as a new user sees it.

The demo's dashboard and fleet, and the dashboard of a machine with only Claude
Code's login, at 360 and 1280 px in both colour schemes: 0 violations. axe-core
is the engine browsers' own audits use; scripts/run_tests.sh installs it with npm
(tests/support/axe/package.json), not the 2018 copy axe-selenium-python bundles. The
checks in tests/support/pages.py stay beside it for what axe does not measure
(sideways scroll, motion).
"""
from __future__ import annotations

import pytest

from tests.support import pages
from tests.support.browser import axe_run, axe_script, chromium, require_chromium, wait_for
from tests.support.firstlook import Demo, login_only_node, start_login_monitor
from tests.support.home import canary
from tests.support.provider import ProviderServer

WIDTHS = (360, 1280)
SCHEMES = ("light", "dark")


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    require_chromium()
    axe_script()
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


def _pages(sites):
    return (
        ("dashboard", sites["demo"] + "/",
         "return document.querySelectorAll('#claude-cards article.card').length >= 3 && "
         "!document.getElementById('advice').hidden"),
        ("fleet", sites["demo"] + "/fleet", "return document.querySelectorAll('#rows .row').length >= 5"),
        ("login", sites["login"] + "/", "return document.querySelectorAll('#login-cards article.card').length == 1"),
    )


def violations(driver):
    result = axe_run(driver)
    assert "error" not in result, result
    # The engine is the current 4.x, not the 2018 copy (3.x) axe-selenium-python bundles.
    assert result["version"].split(".")[0] == "4", result["version"]
    return [(v["id"], v["impact"], v["targets"]) for v in result["violations"]]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_page_has_no_axe_violation(sites, scheme):
    found = []
    runs = 0
    with chromium(1280, 900) as driver:
        driver.set_script_timeout(60)
        for name, url, drawn in _pages(sites):
            for width in WIDTHS:
                pages.emulate(driver, scheme, width)
                driver.get(url)
                wait_for(lambda: driver.execute_script(drawn), timeout=30, what="%s drawn" % name)
                runs += 1
                found.extend("%s %s %dpx: %s" % (name, scheme, width, v) for v in violations(driver))
    assert runs == len(WIDTHS) * 3
    assert not found, "\n".join(found)


def test_axe_finds_what_it_should(sites):
    # The engine is really running: a control without a name and low-contrast text are reported.
    with chromium(1280, 900) as driver:
        driver.set_script_timeout(60)
        pages.emulate(driver, "light", 1280)
        driver.get(sites["demo"] + "/fleet")
        wait_for(lambda: driver.execute_script(_pages(sites)[1][2]), timeout=30, what="fleet drawn")
        driver.execute_script("""
            var b = document.createElement('button'); document.querySelector('main').appendChild(b);
            var p = document.createElement('p'); p.textContent = 'faint'; p.style.color = '#eee';
            p.style.background = '#fff'; document.querySelector('main').appendChild(p);
        """)
        ids = {v[0] for v in violations(driver)}
        assert {"button-name", "color-contrast"} <= ids, ids
