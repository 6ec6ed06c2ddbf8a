"""Headless Debian chromium through selenium, for the pages' tests, and axe-core to audit them.

Missing chromium, chromedriver, selenium or axe-core skips the test on a developer's
machine and fails it under CI (`CI` set): scripts/run_tests.sh installs them (axe-core,
the npm package, into tests/support/axe/ from its package.json).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# axe-core as npm installs it from tests/support/axe/package.json (scripts/run_tests.sh).
AXE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "axe", "node_modules", "axe-core", "axe.min.js")


def require_chromium() -> None:
    import pytest

    if os.environ.get("SVC_TEST_CORE"):
        pytest.skip("a core run on another interpreter: the browser tests run on the default one")
    missing = None
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        missing = "chromium/chromedriver"
    else:
        try:
            import selenium  # noqa: F401
        except ImportError:
            missing = "selenium"
    if missing is None:
        return
    if os.environ.get("CI"):
        pytest.fail("%s missing under CI (scripts/run_tests.sh installs it)" % missing)
    pytest.skip("%s not installed" % missing)


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A headless chromium WebDriver with a throw-away profile."""
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="svc-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 "--user-data-dir=" + profile, "--window-size=%d,%d" % (width, height)):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors, for get_log("browser")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def axe_script() -> str:
    """The source of axe-core's axe.min.js, to inject into a page; skipped (failed under CI) without it."""
    import pytest

    try:
        with open(AXE_SCRIPT, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        if os.environ.get("CI"):
            pytest.fail("axe-core missing under CI at %s (scripts/run_tests.sh installs it with npm)" % AXE_SCRIPT)
        pytest.skip("axe-core not installed: npm install --prefix tests/support/axe")
    raise AssertionError("unreachable")


_AXE_RUN = """
var done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then(function (result) {
  done({version: axe.version, violations: result.violations.map(function (v) {
    return {id: v.id, impact: v.impact, targets: v.nodes.slice(0, 3).map(function (n) { return n.target; })};
  })});
}, function (err) { done({version: axe.version, error: String(err)}); });
"""


def axe_run(driver: Any) -> Dict[str, Any]:
    """axe-core injected into the page and run on the whole document: {version, violations: [{id,
    impact, targets}]} (or {version, error})."""
    driver.execute_script(axe_script())
    return driver.execute_async_script(_AXE_RUN)


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll `predicate` (exceptions count as not yet) until it is truthy or the deadline passes."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # the element is not there yet
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.0f s waiting for %s (%r)" % (timeout, what, last))
        time.sleep(0.1)
