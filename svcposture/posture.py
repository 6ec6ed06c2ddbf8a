"""The posture summary (DESIGN §4): derivation, cache, single-flight probes, periodic refresh.

The summary is derived from the probe child's report by a pure function that
copies whitelisted fields only, at every depth, so nothing the child (or a
hostile env file) printed can ride along into a response.

Importing this module starts nothing and loads no process or network module:
the probe (and subprocess) come with the first PostureService or read_posture.
"""
from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import _time
from ._names import (ALLOWED, CLAIM_OF_FIELD, ERROR, FIELD_OF_CLAIM, NODE_STATUS_OF, STATUS_RANK, UNKNOWN,
                     WINDOW_FIELDS)
from ._text import EMAIL, account_label, finite_number, is_number, word
from .broadcast import Broadcast
from .errors import MESSAGES, clean_error
from .events import EventLog, EventLogError
from .latch import Latch
from .paths import Paths
from .resetprobe import ResetSchedule, reset_instants_ms
from .settings import Settings, probing_on

log = logging.getLogger("svcposture.posture")

# Anchored with `^...$` and used with match(), as it always was: the address
# must be the whole field (`$` also lets one trailing newline through).
_EMAIL_RE = re.compile("^%s$" % EMAIL)
_ISO_Z_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


# ---------------------------------------------------------------- pure derivation

def disabled_body(node: str) -> Dict[str, Any]:
    return {"available": False, "node": node}


def _pct(value: Any) -> Optional[float]:
    number = finite_number(value)
    return float(number) if number is not None and number >= 0 else None


def _window(value: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(value, Mapping):
        return None
    resets = value.get("resetsAt")
    return {
        "pct": _pct(value.get("pct")),
        "resetsAt": resets if isinstance(resets, str) and _ISO_Z_RE.match(resets) else None,
        "status": word(value.get("status")),
    }


def binding_window(view: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """(bindingWindow, bindingStatus) of one account view (DESIGN §4, §14).

    A claim that names something other than a window (`overage`) takes the
    worst window as bindingWindow and overallStatus as bindingStatus: an
    account that may continue on overage is not shown as rejected.
    """
    claim = view.get("representativeClaim")
    if claim in FIELD_OF_CLAIM:
        window = view.get(FIELD_OF_CLAIM[claim])
        status = window.get("status") if isinstance(window, Mapping) else None
        return claim, status if status is not None else view.get("overallStatus")
    worst, status = _worst_window(view)
    if claim is not None:
        return worst, view.get("overallStatus")
    return worst, status


def _worst_window(view: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """(the worst window, its status, else overallStatus); (None, overallStatus) without a window."""
    best: Optional[Tuple[int, float, int]] = None
    chosen: Optional[str] = None
    # Worst status first, then the higher pct, then five_hour (the first field).
    for order, field in enumerate(WINDOW_FIELDS):
        window = view.get(field)
        if not isinstance(window, Mapping):
            continue
        pct = window.get("pct")
        key = (STATUS_RANK.get(window.get("status") or "", 0),
               pct if isinstance(pct, float) else -1.0, -order)
        if best is None or key > best:
            best, chosen = key, field
    if chosen is None:
        return None, view.get("overallStatus")
    status = view[chosen].get("status")
    return CLAIM_OF_FIELD[chosen], status if status is not None else view.get("overallStatus")


def account_view(raw: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(raw, Mapping):
        return None
    label = account_label(raw.get("label"))
    if label is None:
        return None
    email = raw.get("email")
    view: Dict[str, Any] = {
        "label": label,
        "email": email if isinstance(email, str) and len(email) <= 254 and _EMAIL_RE.match(email) else None,
        "active": raw.get("active") is True,
        "overallStatus": word(raw.get("overallStatus")),
        "representativeClaim": word(raw.get("representativeClaim")),
        "bindingWindow": None,
        "bindingStatus": None,
        "fiveHour": _window(raw.get("fiveHour")),
        "sevenDay": _window(raw.get("sevenDay")),
        "error": clean_error(raw.get("error")),
    }
    view["bindingWindow"], view["bindingStatus"] = binding_window(view)
    return view


def node_status(active: Optional[Mapping[str, Any]]) -> str:
    """The node status of DESIGN §4 from the active account's view (None: no active account)."""
    if active is None:
        return UNKNOWN
    if active.get("error"):
        return ERROR
    return NODE_STATUS_OF.get(active.get("bindingStatus") or "", UNKNOWN)


def sibling_with_headroom(accounts: List[Dict[str, Any]], reserve_pct: int = 0) -> Optional[Dict[str, Any]]:
    """The contract's rule; with a human reserve, siblings below it come first
    (with none, the first key is False for all and the rule is unchanged)."""
    best: Optional[Tuple[bool, float, int]] = None
    chosen: Optional[Dict[str, Any]] = None
    for order, acct in enumerate(accounts):
        if acct["active"] or acct["error"] or acct["bindingStatus"] != ALLOWED:
            continue
        used = max((acct[f]["pct"] if acct[f] and acct[f]["pct"] is not None else 100.0) for f in WINDOW_FIELDS)
        key = (bool(reserve_pct) and used >= 100 - reserve_pct, used, order)
        if best is None or key < best:
            best, chosen = key, acct
    return {"label": chosen["label"], "email": chosen["email"]} if chosen else None


def error_summary(node: str, probed_at: int, err: Any) -> Dict[str, Any]:
    """The node-level error body (without the per-reply generatedAt/cached)."""
    return {"available": True, "node": node, "probedAt": probed_at, "status": ERROR, "active": None,
            "accounts": [], "siblingWithHeadroom": None, "error": clean_error(err, with_status=False)}


def derive_summary(report: Any, node: str, probed_at: int, reserve_pct: int = 0) -> Dict[str, Any]:
    """The posture summary from a probe report; pure and whitelist-only.

    Returns the disabled body, a node-level error body, or the full summary.
    The per-reply fields generatedAt and cached are added by `reply`.
    """
    if not isinstance(report, Mapping):
        return error_summary(node, probed_at, {"kind": "internal"})
    if report.get("error") is not None:
        return error_summary(node, probed_at, report.get("error"))
    if report.get("available") is not True:
        return disabled_body(node)
    raw_accounts = report.get("accounts")
    if not isinstance(raw_accounts, list):
        return error_summary(node, probed_at, {"kind": "internal", "message": MESSAGES["internal"].bad_result})
    accounts: List[Dict[str, Any]] = []
    labels = set()
    active: Optional[Dict[str, Any]] = None
    for raw in raw_accounts:
        view = account_view(raw)
        if view is None or view["label"] in labels:
            continue
        labels.add(view["label"])
        if view["active"]:
            if active is None:
                active = view
            else:
                view["active"] = False
        accounts.append(view)
    return {
        "available": True,
        "node": node,
        "probedAt": probed_at,
        "status": node_status(active),
        "active": dict(active) if active is not None else None,
        "accounts": accounts,
        "siblingWithHeadroom": sibling_with_headroom(accounts, reserve_pct),
    }


def reply(summary: Mapping[str, Any], cached: bool, generated_ms: Optional[int] = None) -> Dict[str, Any]:
    """The endpoint body for one reply: summary fields in contract order plus generatedAt/cached."""
    if summary.get("available") is not True:
        return disabled_body(str(summary.get("node")))
    body: Dict[str, Any] = {
        "available": True,
        "node": summary["node"],
        "generatedAt": _time.iso_from_ms(_time.now_ms() if generated_ms is None else generated_ms),
        "probedAt": summary["probedAt"],
        "cached": cached,
        "status": summary["status"],
        "active": summary["active"],
        "accounts": summary["accounts"],
        "siblingWithHeadroom": summary["siblingWithHeadroom"],
    }
    if "error" in summary:
        body["error"] = summary["error"]
    return body


def is_node_error(summary: Optional[Mapping[str, Any]]) -> bool:
    return bool(summary) and "error" in summary  # type: ignore[operator]


def read_posture(home: "Optional[os.PathLike[str] | str]" = None, *,
                 environ: Optional[Mapping[str, str]] = None,
                 deadline_s: Optional[float] = None) -> Dict[str, Any]:
    """One sweep through the token-scoped child: the /api/accounts body (DESIGN §4).

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
    from . import probe
    from ._env import InvalidSetting
    from .config import node_name

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

    derive = staticmethod(derive_summary)  # the Codex posture hooks in here (codexposture)

    def __init__(self, paths: Paths, *, node: str, log: EventLog, latch: Latch,
                 environ: Optional[Mapping[str, str]] = None, probe_enabled: bool = True,
                 reset_margin_s: Optional[float] = None, settings: Optional[Settings] = None) -> None:
        # The probe module (and subprocess with it) loads with the first
        # service, not with this module: the summary functions stay pure.
        from . import probe

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
        self.probe_environ: Any = lambda: self.environ  # per probe; the Codex posture adds its poll state
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
        return flight

    def _fly(self, flight: _Flight) -> None:
        summary: Optional[Dict[str, Any]] = None
        try:
            try:
                environ = self.probe_environ()
                report = self._run_headers(self.paths, environ, deadline_s=self.deadline_s, cancel=self._stop)
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
