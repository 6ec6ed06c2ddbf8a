"""The posture service (docs/posture.md): one per registered vendor, the same for every vendor.

Each service owns one vendor's accounts on this node: the cache of its
posture body, one probe at a time (single flight), the periodic probe, the
probe at each reset, and the subscribers of its stream. A probe asks the
node's probe batcher (probe.batcher, handed in when the service is built)
for this vendor's report: the vendors whose probes start within the same
few milliseconds share one token-scoped child, and each gets its own block
the moment the child has it, so no vendor's rows wait for another's
endpoint. The periodic probes of a node's services fall together because
each ticks on a fixed cadence from its start (the node starts them at once).
The child's block goes through the vendor's `clean_block` and `summarize`
(pure, in the vendor's package), then every account gets its health beside
the last good figures kept for it (posture.health, the same for every vendor);
the result feeds the latch, then the observers (the forecasts, the advice),
then the cache and the stream.

Importing this module starts nothing and loads no process or network module:
the probe (and subprocess) come with the first PostureService or read_posture.
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from .. import _time
from .._text import is_number
from ..broadcast import Broadcast
from ..events import EventLogError
from ..paths import Paths
from ..settings import Settings, probing_on
from ..summary import disabled_body, error_summary, is_node_error, reply
from ..vendor import optional_member
from .health import Kept, apply_health
from .resetschedule import ResetSchedule, reset_instants_ms
from .singleflight import SingleFlight

if TYPE_CHECKING:  # pragma: no cover - types only
    from ..probe.batcher import ProbeBatcher

log = logging.getLogger("svcposture.posture")

# Called as observer(summary, status_edge_or_None) with every fresh result, after the
# latch and before any waiter or subscriber sees it.
Observer = Callable[[Dict[str, Any], Optional[Dict[str, Any]]], None]
# The roster and the live hosts, for one poller per login across the fleet (None: a lone host).
Candidates = Callable[[], Optional[Tuple[Any, Any]]]
# How often those candidates are re-read for the child.
CANDIDATES_EVERY_S = 600.0
FileKey = Tuple[int, int, int, int]


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
    from ..settings import InvalidSetting, probe_interval_s
    from ..config import node_name
    from ..probe import runner
    from ..vendors import default_vendor

    if deadline_s is not None and (not is_number(deadline_s) or not 0 < deadline_s < math.inf):
        raise InvalidSetting("deadline_s must be a positive number of seconds, not %r" % (deadline_s,))
    paths = Paths.for_home(home, environ)
    node = node_name(paths)
    if not probing_on(paths.environ):
        return disabled_body(node)
    vendor = default_vendor()
    report = runner.run_headers(paths, paths.environ, deadline_s=deadline_s, vendors=[vendor.name])
    summary = summary_of(vendor, report, node, _time.now_ms(), {}, True)[0]
    summary = apply_health(summary, {}, probe_interval_s(paths.environ) * 1000.0,
                           optional_member(vendor, "error_health"))[0]
    return reply(summary, cached=False)


def summary_of(vendor: Any, report: Any, node: str, probed_at: int, memory: Mapping[str, Any],
               speaks_for_node: bool) -> Tuple[Dict[str, Any], Dict[str, Any], Optional[Dict[str, Any]]]:
    """(the posture summary, the vendor's memory after it, the block read) of one child report (pure).

    A node-level error (the env file unsafe, the child crashed) is this vendor's
    error body when it `speaks_for_node` (the default vendor, or one whose lines
    the node has shown); otherwise the vendor shows nothing (the disabled body).
    The accounts' health is added after, by apply_health (it needs the figures
    kept from earlier probes).
    """
    if not isinstance(report, Mapping):
        report = {"error": {"kind": "internal"}}
    if report.get("error") is not None:
        body = error_summary(node, probed_at, report.get("error")) if speaks_for_node else disabled_body(node)
        return body, dict(memory), None
    block = vendor.clean_block(report.get(vendor.name))
    summary, memory = vendor.summarize(block, node, probed_at, memory)
    return summary, memory, block


def _file_key(path: Any) -> Optional[FileKey]:
    try:
        st = os.stat(str(path))
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class PostureService:
    """One vendor's posture: cache, single-flight probes, the periodic and reset probes.

    - TTL ($SVC_POSTURE_TTL_S, 300) counts from the end of the probe.
    - One probe at a time: every caller that needs a fresh result while one
      runs waits for that one (single flight).
    - The refresh floor ($SVC_REFRESH_FLOOR_S, 30, at most the TTL) gates probe
      starts; an error result is only trusted for the floor, so an outage is
      re-probed soon but cannot become a probe storm.
    - A result is handed to the latch, then the observers, and published
      before any waiter wakes.
    - Besides the periodic probe, one probe at each reset of the active
      account's binding window and of every rejected account's, plus a margin.
    - While the accounts env file is unchanged since a probe found no line of
      this vendor, no child is asked for it.
    - Each probe's child comes from `batcher`, the node's one ProbeBatcher (None: a
      batcher of this service's own, with no other vendor to wait for).
    """

    def __init__(self, vendor: Any, paths: Paths, *, node: str, settings: Settings, latch: Any = None,
                 environ: Optional[Mapping[str, str]] = None, probe_enabled: bool = True,
                 observers: Sequence[Observer] = (), candidates: Optional[Candidates] = None,
                 speaks_for_node: bool = False, batcher: "Optional[ProbeBatcher]" = None) -> None:
        # The probe's modules (subprocess with the runner) load with the first
        # probe, not with this module: the summary functions stay pure.
        from ..probe.batcher import ProbeBatcher

        self.vendor = vendor
        self.provider: str = vendor.name
        self.paths = paths
        self.node = node
        self.latch = latch
        # The environment goes whole to the probe child (token-free); the knobs come from settings.
        self.environ: Mapping[str, str] = paths.environ if environ is None else environ
        self.probe_enabled = probe_enabled and settings.probe
        self.ttl_s = settings.posture_ttl_s
        self.floor_s = settings.refresh_floor_s
        self.interval_s = settings.probe_interval_s
        self.deadline_s = settings.probe_deadline_s
        self.broadcast = Broadcast()
        self.resets = ResetSchedule(settings.reset_margin_s)
        self._observers: Tuple[Observer, ...] = tuple(observers)
        self._speaks_for_node = speaks_for_node
        self._batcher = batcher if batcher is not None else ProbeBatcher(window_s=0.0)
        self._flight = SingleFlight(self._fly, "posture-%s" % self.provider)
        self._poll = vendor.poll_memory()
        self._candidates = _CandidateCache(candidates, self.provider)
        self._lock = threading.Lock()
        self._summary: Optional[Dict[str, Any]] = None
        self._result: Optional[Dict[str, Any]] = None
        self._memory: Dict[str, Any] = {}
        # Each account's last good reading, shown beside a failed one (posture.health).
        self._kept: Kept = {}
        self._error_health = optional_member(vendor, "error_health")
        # How often an account can be read at best: the probe interval, or the vendor's own floor
        # between two readings of one account when longer; health is judged against it.
        floor = optional_member(self._poll, "floor_s") if self._poll is not None else None
        self._read_every_ms = max(self.interval_s, float(floor) if is_number(floor) else 0.0) * 1000.0
        self._seen = speaks_for_node
        self._absent_in: Optional[FileKey] = None
        self._probed_mono = 0.0
        self._started_mono: Optional[float] = None
        # Where the periodic ticks count from: start(), so that the services a node starts
        # together keep ticking together (their probes then share a child).
        self._epoch_mono = 0.0
        self._together = False  # whether the probe in flight waits to share a child (_begin_locked)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._reprobe = threading.Event()
        self._loop: Optional[threading.Thread] = None
        self.probe_runs = 0
        self.probe_errors = 0
        self.reset_probes = 0
        self.last_success_ms: Optional[int] = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """The first probe (under way when this returns), then the schedule's thread."""
        if self._loop is not None:
            return
        if not self.probe_enabled:
            self.broadcast.publish(disabled_body(self.node))
            return
        self._epoch_mono = time.monotonic()
        with self._lock:
            self._begin_locked(together=True)
        self._loop = threading.Thread(target=self._run_loop, name="posture-%s-loop" % self.provider, daemon=True)
        self._loop.start()

    def stop(self) -> None:
        """Stop the schedule (a scheduled reset probe with it); a probe still running is killed."""
        self._stop.set()
        self._wake.set()
        if self._loop is not None:
            self._loop.join(self.deadline_s + 5)
        if self._flight.in_flight:
            self._flight.join().wait(self.deadline_s + 5)
        self.broadcast.close()

    def reprobe(self) -> None:
        """Probe again now, past the TTL and the refresh floor: the accounts env file
        changed, so the cached result may name an account that is no longer active."""
        self._reprobe.set()
        self._wake.set()

    def _run_loop(self) -> None:
        # A tick that finds a probe in flight (the first one, a slow one) joins it.
        next_periodic = self._epoch_mono + self.interval_s
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
                # Only the periodic tick waits for the other vendors' (they tick together); a reset is this
                # vendor's own.
                self._refresh(periodic=True, together=periodic)
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("periodic %s probe failed", self.provider)
            if periodic:
                next_periodic = self._next_tick(time.monotonic())

    def _next_tick(self, now: float) -> float:
        """The first periodic tick after `now`: ticks fall every interval from start(), whatever each
        probe took, and a tick a long probe overran is skipped, not run late."""
        return self._epoch_mono + (math.floor((now - self._epoch_mono) / self.interval_s) + 1) * self.interval_s

    def _probe_after_change(self) -> None:
        self._reprobe.clear()
        if self._flight.in_flight:
            # It may have sourced the file before the change: wait, then probe again.
            self._flight.join().wait(self.deadline_s + 10)
        with self._lock:
            done = self._begin_locked(together=True)  # every vendor's service saw the same change
        done.wait(self.deadline_s + 10)

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
            return summary if now - self._probed_mono < self._trusted_for(summary) else None

    def _trusted_for(self, summary: Mapping[str, Any]) -> float:
        return self.floor_s if is_node_error(summary) else self.ttl_s

    def _refresh(self, periodic: bool, forced: bool = False, together: bool = False) -> Dict[str, Any]:
        now = time.monotonic()
        with self._lock:
            summary = self._summary
            if summary is not None and not periodic and not forced \
                    and now - self._probed_mono < self._trusted_for(summary):
                return reply(summary, cached=True)
            if not self._flight.in_flight and summary is not None and (forced or periodic) \
                    and self._started_mono is not None and now - self._started_mono < self.floor_s:
                return reply(summary, cached=True)
            done = self._begin_locked(together)
        done.wait(self.deadline_s + 10)
        result = self._result
        if result is None:
            # The probe thread died without a result; say so instead of hanging.
            return reply(error_summary(self.node, _time.now_ms(), {"kind": "internal"}), cached=False)
        return reply(result, cached=False)

    def _begin_locked(self, together: bool = False) -> threading.Event:
        """Join the probe in flight, or start one (its start is what the refresh floor counts from).
        `together`: a probe the node's other services start at the same moment (start, the periodic
        tick, a change of the file), which waits the batcher's window to share their child; any other
        starts its child at once."""
        if not self._flight.in_flight:
            self._started_mono = time.monotonic()
            self._together = together
        return self._flight.join()

    # ------------------------------------------------------------ one probe

    def _fly(self) -> None:
        summary: Optional[Dict[str, Any]] = None
        try:
            summary = self._derive(self._run_child())
            edge = self._handle(summary)
            for observer in self._observers:
                try:
                    observer(summary, edge)
                except Exception:  # noqa: BLE001 - an observer never costs the result
                    log.exception("a %s posture observer failed", self.provider)
        finally:
            with self._lock:
                self._result = summary
                # A probe cut short by stop() answers its waiters but is neither
                # cached nor pushed: subscribers must not see a shutdown as an error.
                if summary is not None and not self._stop.is_set():
                    self._summary = summary
                    self._probed_mono = time.monotonic()
                    self.resets.replace(reset_instants_ms(summary), _time.now_ms())
                    self._wake.set()
                    # Published under the lock, so frames leave in probe order.
                    self.broadcast.publish(reply(summary, cached=False))

    def _run_child(self) -> Any:
        """This vendor's report from the token-scoped child, through the batcher (none asked while
        the file still has no line of it)."""
        key = _file_key(self.paths.accounts_env)
        with self._lock:
            if key is not None and key == self._absent_in:
                return {"available": False}
            alone = not self._together
        try:
            report = self._batcher.report(self.paths, self.provider, self._child_environ(),
                                          deadline_s=self.deadline_s, cancel=self._stop, alone=alone)
        except Exception:  # noqa: BLE001 - a probe failure is an error posture
            log.error("the %s probe raised; reporting an internal error", self.provider)
            return {"error": {"kind": "internal"}}
        absent = isinstance(report, Mapping) and report.get("error") is None and report.get(self.provider) is None
        with self._lock:
            self._absent_in = key if absent else None
        return report

    def _child_environ(self) -> Mapping[str, str]:
        """The service's environment plus what the vendor's memory tells its child (no token)."""
        if self._poll is None:
            return self.environ
        hosts, live = self._candidates.current()
        return self._poll.child_environ(self.environ, self.node, hosts, live)

    def _derive(self, report: Any) -> Dict[str, Any]:
        probed_at = _time.now_ms()
        with self._lock:
            memory, seen, kept = self._memory, self._seen, self._kept
        summary, memory, block = summary_of(self.vendor, report, self.node, probed_at, memory, seen)
        summary, kept = apply_health(summary, kept, self._read_every_ms, self._error_health)
        if block is not None and self._poll is not None:
            self._poll.absorb(block, probed_at)
            self._candidates.refresh()
        with self._lock:
            self._memory, self._kept = memory, kept
            if isinstance(report, Mapping) and report.get("error") is None:
                self._seen = self._speaks_for_node or block is not None
        return summary

    def _handle(self, summary: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """Count the probe and feed the latch with the active account; returns the status edge emitted."""
        self.probe_runs += 1
        if summary.get("available") is not True:
            return None
        if summary.get("status") == "error":
            # Node-level failure or the active account's own probe failed.
            self.probe_errors += 1
        else:
            self.last_success_ms = summary["probedAt"]
        active = summary.get("active")
        if self.latch is None or is_node_error(summary) or not isinstance(active, Mapping):
            return None
        try:
            return self.latch.observe(active["label"], active["email"], summary["status"], active["bindingWindow"],
                                      provider=self.provider)
        except EventLogError:
            log.error("could not append account.status.changed for %s; retried on the next probe", active["label"])
        except OSError:
            log.error("could not advance the account status latch; retried on the next probe")
        return None

    # ------------------------------------------------------------ views

    def summary(self) -> Optional[Dict[str, Any]]:
        """The newest result, None before the first."""
        with self._lock:
            return self._summary

    def shows(self) -> bool:
        """True while the node has this vendor's accounts to show (an available or error posture)."""
        summary = self.summary()
        return summary is not None and summary.get("available") is True

    def current(self) -> Optional[Dict[str, Any]]:
        """The newest result as a cached reply, without probing; None before the first result."""
        if not self.probe_enabled:
            return disabled_body(self.node)
        summary = self.summary()
        return reply(summary, cached=True) if summary is not None else None

    def account_status(self) -> str:
        summary = self.summary()
        if not self.probe_enabled or summary is None or summary.get("available") is not True:
            return "unavailable"
        return str(summary["status"])

    def metrics(self) -> Dict[str, Any]:
        return {"probeRuns": self.probe_runs, "probeErrors": self.probe_errors,
                "lastSuccessMs": self.last_success_ms, "last": self.current()}


class _CandidateCache:
    """The HRW candidates (roster, live hosts) for one poller per login, re-read in the background.

    They come from the roster and the liveness anchor (a tracker read), which
    must not delay a probe; a run uses what the last read found.
    """

    def __init__(self, source: Optional[Candidates], provider: str) -> None:
        self._source = source
        self._provider = provider
        self._lock = threading.Lock()
        self._found: Optional[Tuple[Any, Any]] = None
        self._read_mono: Optional[float] = None
        self._busy = False

    def current(self) -> Tuple[Any, Any]:
        with self._lock:
            found = self._found
        return found if found is not None else (None, None)

    def refresh(self) -> None:
        """Re-read in a thread of its own, at most every CANDIDATES_EVERY_S."""
        now = time.monotonic()
        with self._lock:
            if self._source is None or self._busy or (
                    self._read_mono is not None and now - self._read_mono < CANDIDATES_EVERY_S):
                return
            self._busy, self._read_mono = True, now
        threading.Thread(target=self._read, name="%s-candidates" % self._provider, daemon=True).start()

    def _read(self) -> None:
        assert self._source is not None
        try:
            found = self._source()
        except Exception as exc:  # noqa: BLE001 - a lone host is the safe answer
            log.warning("%s poll candidates could not be read (%s); polling as a lone host",
                        self._provider, type(exc).__name__)
            found = None
        with self._lock:
            self._found, self._busy = found, False
