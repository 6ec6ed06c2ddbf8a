"""Shared fixtures: a throw-away HOME and a clean environment for child processes.

The helpers themselves live in tests/support/ (see its __init__ for how they are imported).

Tests marked `serial` measure what other tests' processes on the same cores would change (a monitor's
CPU share, its descriptors under a burst, a soak's figures): scripts/run_tests.sh runs them alone, after
the parallel part (docs/testing.md)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping

import pytest

from tests.support.home import clean_env


# Whole files whose tests are `serial`.
# The env-file swap race is one of them: its check that the swaps landed on both sides of some probes
# needs the swapping thread scheduled as often as the monitor, which a loaded machine does not give it.
# So is the real Prometheus and VictoriaMetrics scraping 1,000 stand-in monitors: whether a scrape lands
# within its interval is what the other tests' processes on the same cores change.
SERIAL_FILES = ("tests/monitor/test_hostile_clients.py", "tests/test_soak_quick.py", "tests/probe/test_hostile_envswap.py",
                "tests/cluster/test_fleet_engines.py")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "serial: measures load or timing; run alone, not beside other tests")


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if item.nodeid.split("::", 1)[0] in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir(mode=0o700)
    return h


@pytest.fixture
def env(home: Path) -> Dict[str, str]:
    return clean_env(home)


@pytest.fixture
def paths(home: Path):
    from svcposture.paths import Paths
    return Paths(home, environ={"HOME": str(home)})


@pytest.fixture
def browser():
    """A headless chromium WebDriver (1200x800) for the dashboard's tests."""
    from tests.support.browser import chromium

    with chromium(1200, 800) as driver:
        yield driver


@pytest.fixture
def provider():
    """The provider test server (tests/support/provider.py) for one test, with no account yet."""
    from tests.support.provider import ProviderServer

    with ProviderServer() as server:
        yield server


@pytest.fixture
def anchor_tracker():
    """The tracker test server (tests/support/tracker.py) holding the liveness anchor OPS-1, which accepts
    the bot token of tests.support.home.make_node (BEARER)."""
    from tests.support.home import BEARER
    from tests.support.tracker import TrackerServer

    with TrackerServer(tokens=[BEARER]) as server:
        server.add_issue("OPS-1")
        yield server


class Monitors:
    """Starts real monitors for one test (tests.support.monitor.start_monitor) and stops every one of
    them when the test ends, however it ends."""

    def __init__(self) -> None:
        self.started: List[Any] = []

    def start(self, env: Mapping[str, str], args: Iterable[str] = (), **options: Any):
        from tests.support.monitor import start_monitor

        monitor = start_monitor(env, args, **options)
        self.started.append(monitor)
        return monitor

    def stop_all(self) -> None:
        """Newest first; a monitor that fails its stop check does not keep the others running."""
        failure = None
        while self.started:
            try:
                self.started.pop().stop()
            except AssertionError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure


@pytest.fixture
def monitors() -> Iterator[Monitors]:
    """`monitors.start(env, args, ...)`: a monitor that is stopped (SIGTERM, checked) after the test."""
    pool = Monitors()
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture(scope="module")
def module_monitors() -> Iterator[Monitors]:
    """The same for a module-scoped fixture: its monitors are stopped after the module's last test
    (before the fixtures it was set up after, such as the module's provider)."""
    pool = Monitors()
    try:
        yield pool
    finally:
        pool.stop_all()
