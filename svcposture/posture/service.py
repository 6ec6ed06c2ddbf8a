"""The posture service (docs/posture.md): cache, single-flight probes, periodic refresh.

The summary itself is derived from the probe child's report by the pure
functions of summary.py, which copy whitelisted fields only, at every depth.

Importing this module starts nothing and loads no process or network module:
the probe (and subprocess) come with the first PostureService or read_posture.
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Any, Dict, List, Mapping, Optional

from .. import _time
from .._text import is_number
from ..broadcast import Broadcast
from ..events import EventLog, EventLogError
from .latch import Latch
from ..paths import Paths
from .resetschedule import ResetSchedule, reset_instants_ms
from ..settings import Settings, probing_on
from ..summary import derive_summary, disabled_body, error_summary, is_node_error, reply
from ..vendors import DEFAULT_PROVIDER

log = logging.getLogger("svcposture.posture")

def read_posture(home: "Optional[os.PathLike[str] | str]" = None, *,
                 environ: Optional[Mapping[str, str]] = None,
                 deadline_s: Optional[float] = None) -> Dict[str, Any]:
    """One sweep through the token-scoped child: the /api/accounts body (docs/posture.md).

    `home` is the node's home directory (its `svc/` and `.config/svc/`; None:
    $HOME of `environ`, which defaults to os.environ). `deadline_s` bounds the
    sweep (None: $SVC_PROBE_DEADLINE_S, 30). The body is the one a forced
    refresh of the monitor would serve, with `cached: false`; it is the
    disabled body `{"available": false, "node"}` when the node has no usable
    account or SVC_ACCOUNTS_PROBE=0. Provider trouble is reported in the body
    (status `error`), never raised. It touches no latch, event log or history
    and needs no running monitor. Raises ConfigError for a corrupt node.json,
    InvalidSetting for a deadline that is not a positive number.
    """
    from ..probe import runner as probe
    from ..settings import InvalidSetting
    from ..config import node_name

    if deadline_s is not None and (not is_number(deadline_s)
                                   or not 0 < deadline_s < math.inf):
        raise InvalidSetting("deadline_s must be a positive number of seconds, not %r" % (deadline_s,))
    paths = Paths.for_home(home, environ)
    node = node_name(paths)
    if not probing_on(paths.environ):
        return disabled_body(node)
    report = probe.run_headers(paths, paths.environ, deadline_s=deadline_s)
    return reply(derive_summary(report, node, _time.now_ms()), cached=False)


# ---------------------------------------------------------------- service

class _Flight:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.summary: Optional[Dict[str, Any]] = None


class PostureService:
    """Owns the probe schedule and the cached summary of one node.

    - TTL ($SVC_POSTURE_TTL_S, 300) counts from the end of the probe.
    - One probe at a time: every caller that needs a fresh result while one
      runs waits for that one (single flight).
    - The refresh floor ($SVC_REFRESH_FLOOR_S, 30, at most the TTL) gates probe
      starts; an error result is only trusted for the floor, so an outage is
      re-probed soon but cannot become a probe storm.
    - A result is handed to the latch and published before any waiter wakes.
    - Besides the periodic probe, one probe at each reset of the active account's
      binding window and of every rejected account's, plus a margin (resetprobe).
    """

    derive = staticmethod(derive_summary)

    def __init__(self, paths: Paths, *, node: str, log: EventLog, latch: Latch,
                 environ: Optional[Mapping[str, str]] = None, probe_enabled: bool = True,
                 reset_margin_s: Optional[float] = None, settings: Optional[Settings] = None) -> None:
        # The probe module (and subprocess with it) loads with the first
        # service, not with this module: the summary functions stay pure.
        from ..probe import runner as probe

        self.paths = paths
        self.node = node
        self.log = log
        self.latch = latch
        # The environment goes whole to the probe child (token-free); the knobs come from settings.
        self.environ: Mapping[str, str] = paths.environ if environ is None else environ
        settings = Settings.from_environ(self.environ) if settings is None else settings
        self.probe_enabled = probe_enabled and settings.probe
        self.ttl_s = settings.posture_ttl_s
        self.floor_s = settings.refresh_floor_s
        self.interval_s = settings.probe_interval_s
        self.deadline_s = settings.probe_deadline_s
        self._run_headers = probe.run_headers
        # Called with no argument as each probe starts: every other vendor's posture
        # (vendorposture.VendorPosture) starts its own child then, beside this one.
        self.flight_listeners: List[Any] = []
        self.resets = ResetSchedule(settings.reset_margin_s if reset_margin_s is None else reset_margin_s)
        self._wake = threading.Event()
        self._reprobe = threading.Event()
        self.reset_probes = 0
        self.broadcast = Broadcast()
        self._lock = threading.Lock()
        self._summary: Optional[Dict[str, Any]] = None
        self._probed_mono = 0.0
        self._started_mono: Optional[float] = None
        self._flight: Optional[_Flight] = None
        self._flight_thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._loop: Optional[threading.Thread] = None
        self.probe_runs = 0
        self.probe_errors = 0
        self.last_success_ms: Optional[int] = None
        # Called as observer(summary, status_edge_or_None) with every fresh result,
        # after the latch and before any waiter or subscriber sees it.
        self.observers: List[Any] = []

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._loop is not None:
            return
        if not self.probe_enabled:
            self.broadcast.publish(disabled_body(self.node))
            return
        with self._lock:
            if self._flight is None:
                self._begin_locked()
        self._loop = threading.Thread(target=self._run_loop, name="posture-probe-loop", daemon=True)
        self._loop.start()

    def stop(self) -> None:
        """Stop the loop (a scheduled reset probe with it); a probe still running is killed."""
        self._stop.set()
        self._wake.set()
        if self._loop is not None:
            self._loop.join(self.deadline_s + 5)
        thread = self._flight_thread
        if thread is not None:
            thread.join(self.deadline_s + 5)
        self.broadcast.close()

    def _run_loop(self) -> None:
        # A tick that finds a probe in flight (the first one, a slow one) joins it.
        next_periodic = time.monotonic() + self.interval_s
        while not self._stop.is_set():
            self._wake.clear()  # before reading the schedule: a new result wakes the wait below
            if self._reprobe.is_set():
                self._probe_after_change()
                continue
            reset_due = self._reset_due_mono()
            due = next_periodic if reset_due is None else min(next_periodic, reset_due)
            if self._wake.wait(max(0.0, due - time.monotonic())) or self._stop.is_set():
                continue  # the schedule changed, or stop
            periodic = time.monotonic() >= next_periodic
            if not periodic:
                self.resets.pop_due(_time.now_ms())
                self.reset_probes += 1
            try:
                self._refresh(periodic=True)
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("periodic probe failed")
            if periodic:
                next_periodic = time.monotonic() + self.interval_s

    def reprobe(self) -> None:
        """Probe again now, past the TTL and the refresh floor: the accounts env file
        changed, so the cached result may name an account that is no longer active."""
        self._reprobe.set()
        self._wake.set()

    def _probe_after_change(self) -> None:
        self._reprobe.clear()
        with self._lock:
            running = self._flight
        if running is not None:
            # It may have sourced the file before the change: wait, then probe again.
            running.done.wait(self.deadline_s + 10)
        with self._lock:
            flight = self._flight or self._begin_locked()
        flight.done.wait(self.deadline_s + 10)

    def _reset_due_mono(self) -> Optional[float]:
        """The monotonic time of the next reset probe, no earlier than the refresh floor allows."""
        due_ms = self.resets.next_ms()
        if due_ms is None:
            return None
        now = time.monotonic()
        due = now + (due_ms - _time.now_ms()) / 1000.0
        with self._lock:
            started = self._started_mono
        # A hair past the floor, so that the probe is not replayed from cache instead.
        return due if started is None else max(due, started + self.floor_s + 0.01)

    # ------------------------------------------------------------ reads

    def read(self, refresh: bool = False) -> Dict[str, Any]:
        """The posture body; `refresh=True` is a forced refresh the guard approved."""
        if not self.probe_enabled:
            return disabled_body(self.node)
        return self._refresh(periodic=False, forced=refresh)

    def fresh_summary(self) -> Optional[Dict[str, Any]]:
        """The summary a plain read would serve from cache right now, else None.

        Never probes and builds nothing, so the server can answer the hot path
        from bytes it already has; on None it falls back to read().
        """
        if not self.probe_enabled:
            return None
        now = time.monotonic()
        with self._lock:
            summary = self._summary
            if summary is None:
                return None
            limit = self.floor_s if is_node_error(summary) else self.ttl_s
            return summary if now - self._probed_mono < limit else None

    def _refresh(self, periodic: bool, forced: bool = False) -> Dict[str, Any]:
        now = time.monotonic()
        with self._lock:
            summary = self._summary
            flight = self._flight
            if flight is None:
                if summary is not None and not periodic and not forced:
                    limit = self.floor_s if is_node_error(summary) else self.ttl_s
                    if now - self._probed_mono < limit:
                        return reply(summary, cached=True)
                if summary is not None and (forced or periodic) and self._started_mono is not None \
                        and now - self._started_mono < self.floor_s:
                    return reply(summary, cached=True)
                flight = self._begin_locked()
            elif summary is not None and not periodic and not forced:
                limit = self.floor_s if is_node_error(summary) else self.ttl_s
                if now - self._probed_mono < limit:
                    return reply(summary, cached=True)
        flight.done.wait(self.deadline_s + 10)
        result = flight.summary
        if result is None:
            # The probe thread died without a result; say so instead of hanging.
            return reply(error_summary(self.node, _time.now_ms(), {"kind": "internal"}), cached=False)
        return reply(result, cached=False)

    def _begin_locked(self) -> _Flight:
        flight = _Flight()
        self._flight = flight
        self._started_mono = time.monotonic()
        thread = threading.Thread(target=self._fly, args=(flight,), name="posture-probe", daemon=True)
        self._flight_thread = thread
        thread.start()
        for listener in list(self.flight_listeners):
            try:
                listener()
            except Exception:  # noqa: BLE001 - another vendor's trouble never costs this probe
                log.exception("a probe listener failed")
        return flight

    def run_child(self, environ: Mapping[str, str], vendor: str) -> Dict[str, Any]:
        """One run of the token-scoped child for `vendor`'s accounts only, on this service's deadline."""
        return self._run_headers(self.paths, environ, deadline_s=self.deadline_s, cancel=self._stop, vendor=vendor)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _fly(self, flight: _Flight) -> None:
        summary: Optional[Dict[str, Any]] = None
        try:
            try:
                report = self.run_child(self.environ, DEFAULT_PROVIDER)
            except Exception:  # noqa: BLE001 - a probe failure is an error posture
                log.error("probe raised; reporting an internal error posture")
                report = {"error": {"kind": "internal"}}
            summary = self.derive(report, self.node, _time.now_ms())
            edge = None
            try:
                edge = self._handle(summary)
            except Exception:  # noqa: BLE001 - the result is still served and published
                log.exception("handling the probe result failed")
            for observer in list(self.observers):
                try:
                    observer(summary, edge)
                except Exception:  # noqa: BLE001 - an observer never costs the result
                    log.exception("a probe-result observer failed")
        finally:
            with self._lock:
                # A probe cut short by stop() answers its waiters but is neither
                # cached nor pushed: subscribers must not see a shutdown as an error.
                if summary is not None and not self._stop.is_set():
                    self._summary = summary
                    self._probed_mono = time.monotonic()
                    self.resets.replace(reset_instants_ms(summary), _time.now_ms())
                    self._wake.set()
                    # Published under the lock, so frames leave in probe order.
                    self.broadcast.publish(reply(summary, cached=False))
                self._flight = None
            flight.summary = summary
            flight.done.set()

    def _handle(self, summary: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """Count the probe and feed the latch; returns the status edge emitted, if any."""
        self.probe_runs += 1
        if summary.get("available") is not True:
            return None
        if summary.get("status") == "error":
            # Node-level failure or the active account's own probe failed.
            self.probe_errors += 1
        else:
            self.last_success_ms = summary["probedAt"]
        if is_node_error(summary):
            return None
        active = summary.get("active")
        if active is None:
            return None
        try:
            return self.latch.observe(active["label"], active["email"], summary["status"], active["bindingWindow"])
        except EventLogError:
            log.error("could not append account.status.changed; the edge is retried on the next probe")
        except OSError:
            log.error("could not advance the account status latch; retried on the next probe")
        return None

    # ------------------------------------------------------------ views

    def current(self) -> Optional[Dict[str, Any]]:
        """The newest result as a cached reply, without probing; None before the first result."""
        if not self.probe_enabled:
            return disabled_body(self.node)
        with self._lock:
            summary = self._summary
        return reply(summary, cached=True) if summary is not None else None

    def account_status(self) -> str:
        if not self.probe_enabled:
            return "unavailable"
        with self._lock:
            summary = self._summary
        if summary is None or summary.get("available") is not True:
            return "unavailable"
        return str(summary["status"])

    def metrics(self) -> Dict[str, Any]:
        with self._lock:
            summary = self._summary
        last: Optional[Dict[str, Any]]
        if not self.probe_enabled:
            last = disabled_body(self.node)
        else:
            last = reply(summary, cached=True) if summary is not None else None
        return {"probeRuns": self.probe_runs, "probeErrors": self.probe_errors,
                "lastSuccessMs": self.last_success_ms, "last": last}
