"""Headless Debian chromium through selenium, for the pages' tests.

Missing chromium, chromedriver or selenium skips the test on a developer's
machine and fails it under CI (`CI` set): scripts/run_tests.sh installs them.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


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
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


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
