"""Another vendor's posture beside Claude's (docs/vendors.md): the body for `?provider=<name>`.

One `VendorPosture` per registered vendor but the first. It follows the
Claude posture service's schedule (TTL, refresh floor, single flight): each
time that service starts a probe, this one starts its own token-scoped child
for its vendor's accounts only, so neither vendor's rows wait for the
other's endpoint. The child's block goes through the vendor's `clean_block`
and `summarize`; the result feeds the latch (with the vendor's name), the
stream and the observers (history), and is served in the posture body's
shape.

A node whose file has no line of the vendor shows nothing of it; while the
file is unchanged since a run found none, no child is started for it.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .. import _time
from ..broadcast import Broadcast
from ..events import EventLogError
from ..summary import disabled_body, error_summary, is_node_error, reply

log = logging.getLogger("svcposture.vendorposture")

# How often the HRW candidates (roster and live hosts) are re-read for the child.
CANDIDATES_EVERY_S = 600.0


def _file_key(path: Any) -> Optional[Tuple[int, int, int, int]]:
    try:
        st = os.stat(str(path))
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class VendorPosture:
    """One vendor's posture over the Claude posture service's schedule.

    Offers the reads the HTTP side needs: read(refresh), fresh_summary(),
    current(), account_status(), metrics() and a Broadcast of fresh bodies.
    """

    def __init__(self, vendor: Any, service: Any, *, node: str, latch: Any = None,
                 candidates: Optional[Callable[[], Optional[Tuple[Any, Any]]]] = None) -> None:
        self.vendor = vendor
        self.provider = vendor.name
        self.service = service
        self.node = node
        self.latch = latch
        self.broadcast = Broadcast()
        self.observers: List[Any] = []
        self.probe_runs = 0
        self.probe_errors = 0
        self.last_success_ms: Optional[int] = None
        self._poll = vendor.poll_memory()
        # The roster and live hosts for one poller per login (None: a lone host polls every login).
        self.candidates_source = candidates
        self._candidates: Optional[Tuple[Any, Any]] = None
        self._candidates_mono: Optional[float] = None
        self._candidates_busy = False
        self._lock = threading.Lock()
        self._summary: Optional[Dict[str, Any]] = None
        self._memory: Dict[str, Any] = {}
        self._seen = False
        self._idle = threading.Event()
        self._idle.set()
        # Set while a run's result is being handled (latch, events, stream): a read then waits for
        # it, so that no reply shows the older summary after the run's event is in the log.
        self._absorbing = False
        # The file as the running child found it, and whether it changed meanwhile (run again then:
        # the child may have sourced it before a switch).
        self._running_key: Optional[Tuple[int, int, int, int]] = None
        self._again = False
        # The file as it was when a run found no line of this vendor (None: look again).
        self._absent_in: Optional[Tuple[int, int, int, int]] = None
        # (key, bytes) of the newest cached read, kept by the HTTP side (one tuple assignment).
        self.reply_cache: Tuple[Any, bytes] = (None, b"")
        service.flight_listeners.append(self.begin)

    # ------------------------------------------------------------ the runs

    @property
    def probe_enabled(self) -> bool:
        return bool(self.service.probe_enabled)

    @property
    def interval_s(self) -> float:
        return float(self.service.interval_s)

    def begin(self) -> None:
        """Start this vendor's child unless one runs (then once more after it, when the file changed
        since it started), or the file still has no line of it."""
        key = _file_key(self.service.paths.accounts_env)
        with self._lock:
            if not self._idle.is_set():
                self._again = self._again or key != self._running_key
                return
            if self._absent_in is not None and key == self._absent_in:
                return
            self._idle.clear()
            self._running_key = key
        self._start(key)

    def _start(self, key: Any) -> None:
        threading.Thread(target=self._fly, args=(key,), name="posture-%s" % self.provider, daemon=True).start()

    def _fly(self, key: Any) -> None:
        try:
            report = self.service.run_child(self.child_environ(), self.provider)
        except Exception:  # noqa: BLE001 - a probe failure is an error posture
            log.error("the %s probe raised; reporting an internal error", self.provider)
            report = {"error": {"kind": "internal"}}
        try:
            if not self.service.stopping:
                absent = isinstance(report, Mapping) and report.get("error") is None \
                    and report.get(self.provider) is None
                with self._lock:
                    self._absent_in = key if absent and key is not None else None
                    self._absorbing = True
                self.absorb(report, _time.now_ms())
        except Exception:  # noqa: BLE001 - this vendor's trouble never costs another's posture
            log.exception("the %s part of the probe report could not be handled", self.provider)
        finally:
            again_key = _file_key(self.service.paths.accounts_env)
            with self._lock:
                self._absorbing = False
                again = self._again and not self.service.stopping
                self._again = False
                self._running_key = again_key if again else None
            if again:
                self._start(again_key)
            else:
                self._idle.set()

    def wait_idle(self, timeout: float) -> bool:
        return self._idle.wait(timeout)

    def child_environ(self) -> Mapping[str, str]:
        """The service's environment plus what the vendor's memory tells its child (no token)."""
        if self._poll is None:
            return self.service.environ
        with self._lock:
            candidates = self._candidates
        hosts, live = candidates if candidates is not None else (None, None)
        return self._poll.child_environ(self.service.environ, self.node, hosts, live)

    def absorb(self, report: Any, probed_at: int) -> None:
        """Handle one child run: summary, latch, stream, observers."""
        if isinstance(report, Mapping) and report.get("error") is not None:
            if not self._seen:
                return  # a node-level error on a node that never had this vendor's line says nothing of it
            summary = error_summary(self.node, probed_at, report.get("error"))
        else:
            block = self.vendor.clean_block(report.get(self.provider)) if isinstance(report, Mapping) else None
            if block is None and not self._seen:
                return
            self._seen = block is not None
            if block is not None and self._poll is not None:
                self._poll.absorb(block, probed_at)
                self._refresh_candidates()
            with self._lock:
                memory = self._memory
            summary, memory = self.vendor.summarize(block, self.node, probed_at, memory)
            with self._lock:
                self._memory = memory
        edge = self._handle(summary)
        # Observers first (the forecasts, then the advice, which names siblingWithHeadroom),
        # so that what is cached and pushed is the whole result, as for Claude's posture.
        for observer in list(self.observers):
            try:
                observer(summary, edge)
            except Exception:  # noqa: BLE001 - an observer never costs the result
                log.exception("a %s posture observer failed", self.provider)
        with self._lock:
            self._summary = summary
            self.broadcast.publish(reply(summary, cached=False))

    def _handle(self, summary: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
        """Count the run and feed the status latch with the vendor's active account."""
        if summary.get("available") is not True:
            return None
        self.probe_runs += 1
        if summary.get("status") == "error":
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

    def _refresh_candidates(self) -> None:
        """Re-read the HRW candidates in the background, at most every CANDIDATES_EVERY_S.

        They come from the roster and the liveness anchor (a tracker read), which
        must not delay a probe; the next run uses what this read found.
        """
        source = self.candidates_source
        now = time.monotonic()
        with self._lock:
            if source is None or self._candidates_busy or (
                    self._candidates_mono is not None and now - self._candidates_mono < CANDIDATES_EVERY_S):
                return
            self._candidates_busy = True
            self._candidates_mono = now

        def read() -> None:
            try:
                found = source()
            except Exception as exc:  # noqa: BLE001 - a lone host is the safe answer
                log.warning("%s poll candidates could not be read (%s); polling as a lone host",
                            self.provider, type(exc).__name__)
                found = None
            with self._lock:
                self._candidates = found
                self._candidates_busy = False

        threading.Thread(target=read, name="%s-candidates" % self.provider, daemon=True).start()

    # ------------------------------------------------------------ reads

    def shows(self) -> bool:
        """True while the node has this vendor's accounts to show (an available or error posture)."""
        with self._lock:
            summary = self._summary
        return summary is not None and summary.get("available") is True

    def summary(self) -> Optional[Dict[str, Any]]:
        with self._lock:
            return self._summary

    def read(self, refresh: bool = False) -> Dict[str, Any]:
        """The `?provider=<name>` body; `refresh=True` is a forced refresh the guard approved.

        The Claude service decides whether a probe runs (TTL, floor, single
        flight); the reply is fresh (`cached: false`) when that read produced
        a new summary of this vendor.
        """
        if not self.service.probe_enabled:
            return disabled_body(self.node)
        before = self.summary()
        self.service.read(refresh=refresh)
        self._idle.wait(self.service.deadline_s + 10)
        summary = self.summary()
        if summary is None:
            return disabled_body(self.node)
        return reply(summary, cached=summary is before)

    def fresh_summary(self) -> Optional[Dict[str, Any]]:
        """The summary a plain read would serve from cache right now, else None (see PostureService)."""
        if self.service.fresh_summary() is None:
            return None
        with self._lock:
            summary, absorbing = self._summary, self._absorbing
        if absorbing or (summary is None and not self._idle.is_set()):
            return None  # a result is being handled, or the first run is under way: read() waits for it
        return summary or disabled_body(self.node)

    def current(self) -> Optional[Dict[str, Any]]:
        """The newest result as a cached reply, without probing; None before the first result."""
        if not self.service.probe_enabled:
            return disabled_body(self.node)
        summary = self.summary()
        if summary is None:
            return None if self.service.current() is None or not self._idle.is_set() else disabled_body(self.node)
        return reply(summary, cached=True)

    def account_status(self) -> str:
        summary = self.summary()
        if not self.service.probe_enabled or summary is None or summary.get("available") is not True:
            return "unavailable"
        return str(summary["status"])

    def metrics(self) -> Dict[str, Any]:
        summary = self.summary()
        return {"probeRuns": self.probe_runs, "probeErrors": self.probe_errors,
                "lastSuccessMs": self.last_success_ms,
                "last": reply(summary, cached=True) if summary is not None else None}

    def stop(self) -> None:
        self.broadcast.close()
