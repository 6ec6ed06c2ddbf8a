"""GET /api/fleet: the cluster status report of every roster host, cached and single-flight.

The body is `svc-cluster status --json`'s report (`{source, anchor, hosts[],
unlisted?, warning?, error?}`) plus `generatedAt` (docs/fleet.md). It is read
from the tracker (or Loki) at most once per `$SVC_FLEET_TTL_S` (60) seconds
whatever the number of readers: concurrent readers of an expired cache share
one read (a SingleFlight), and everyone else gets the bytes of the last one. It only reads:
nothing here writes to the tracker.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

from .._time import iso_now
from ..paths import Paths
from ..settings import Settings
from .memo import Memo
from .response import dumps
from ..posture.singleflight import SingleFlight

log = logging.getLogger("svcposture.monitor")

T = TypeVar("T")

# How long a reader waits for a fleet read in flight before it takes the last good body, marked stale.
DEFAULT_WAIT_S = 3.0


def collect_report(paths: Paths, settings: Settings) -> Dict[str, Any]:
    """The status report; a roster or config file that cannot be read is the report's `error`."""
    from ..cluster import liveness
    from ..config import ConfigError

    try:
        report = liveness.collect_status(paths, settings)
    except ConfigError as exc:
        report = {"source": settings.liveness_read_source, "anchor": None, "hosts": [],
                  "error": "cannot read the cluster config: %s" % exc}
    report["generatedAt"] = iso_now()
    return report


class FleetCache:
    """The /api/fleet body as bytes, refreshed at most once per TTL by one read at a time.

    The read runs in a thread of its own, and no reader waits for it longer
    than `wait_s`: a tracker that trickles its reply (bounded by the client's
    own total deadline, but seconds long) must not hold every reader's thread.
    A reader that gives up gets the last good body marked `"stale": true` with
    `staleAgeS`, or, before any good read, an error body; the read goes on and
    the next reader gets its result.
    """

    def __init__(self, collect: Callable[[], Dict[str, Any]], ttl_s: float, wait_s: float = DEFAULT_WAIT_S) -> None:
        self._collect = collect
        self.ttl_s = ttl_s
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._report: Optional[Dict[str, Any]] = None  # the newest read's report
        # Each body is encoded when first asked for: a reader of one view never pays for the others.
        self._body = Memo()  # type: Memo[bytes]
        self._views: Dict[Any, Memo[bytes]] = {}
        self._derived: Dict[Any, Memo[Any]] = {}
        self._at = 0.0
        self._good: Optional[Dict[str, Any]] = None  # the last report without an error, and when it was read
        self._good_at = 0.0
        self._flight = SingleFlight(self._read, "svc-fleet-read")
        self.reads = 0

    def body(self) -> bytes:
        report = self._current()
        return self._body.get((report,), dumps, report)

    def view(self, build: Callable[[Dict[str, Any]], Dict[str, Any]]) -> bytes:
        """The bytes of `build(report)` over the same report body() serves: one read for both,
        and `build` runs once per report, not once per reader (derived() shares it)."""
        report, built = self.derived(build)
        with self._lock:
            views = self._views.setdefault(build, Memo())
        return views.get((report,), dumps, built)

    def derived(self, build: Callable[[Dict[str, Any]], T]) -> Tuple[Dict[str, Any], T]:
        """(the report body() serves, build(report)): `build` runs once per report, not once per
        reader, for answers that are computed from it per request (a ticket's owner)."""
        report = self._current()
        with self._lock:
            memo = self._derived.setdefault(build, Memo())
        return report, memo.get((report,), build, report)

    def _current(self) -> Dict[str, Any]:
        with self._lock:
            if self._report is not None and time.monotonic() - self._at < self.ttl_s:
                return self._report
        if self._flight.join().wait(self.wait_s):
            with self._lock:
                if self._report is not None:
                    return self._report
        return self._while_reading()

    def _while_reading(self) -> Dict[str, Any]:
        with self._lock:
            good, age = self._good, time.monotonic() - self._good_at
        if good is not None:
            return dict(good, stale=True, staleAgeS=round(age, 1))
        return {"source": "tracker", "anchor": None, "hosts": [], "generatedAt": iso_now(),
                "error": "the fleet is still being read (the tracker or Loki is slow to answer); "
                         "try again in a few seconds"}

    def _read(self) -> None:
        try:
            report: Dict[str, Any] = self._collect()
        except Exception as exc:  # a bug in the read must not take the route down
            log.warning("fleet read failed: %s: %s", type(exc).__name__, exc)
            report = {"source": "tracker", "anchor": None, "hosts": [], "generatedAt": iso_now(),
                      "error": "the fleet could not be read (see the monitor log)"}
        with self._lock:
            self._report = report
            self._at = time.monotonic()
            if not report.get("error"):
                self._good, self._good_at = report, self._at
            self.reads += 1
