"""The posture summary: derivation, cache, single-flight probes, periodic refresh, fan-out.

The summary is derived from the probe child's report by a pure function that
copies whitelisted fields only, at every depth, so nothing the child (or a
hostile env file) printed can ride along into a response.
"""
from __future__ import annotations

import logging
import math
import re
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import _time
from .events import EventLog, EventLogError, ratelimit_sampled
from .latch import Latch
from .paths import Paths
from .probe import (ERROR_KINDS, KNOWN_MESSAGES, MAX_BACKOFF_S, MESSAGES, env_float, run_headers,
                    run_usage)

log = logging.getLogger("svcposture.posture")

DEFAULT_TTL_S = 300.0
DEFAULT_FLOOR_S = 30.0
DEFAULT_INTERVAL_S = 300.0
DEFAULT_QUOTA_INTERVAL_S = 300.0
MIN_QUOTA_INTERVAL_S = 60.0

WINDOWS = ("fiveHour", "sevenDay")
WINDOW_NAMES = {"five_hour": "fiveHour", "seven_day": "sevenDay"}
_STATUS_RANK = {"rejected": 3, "allowed_warning": 2, "allowed": 1}
_NODE_STATUS = {"allowed": "ok", "allowed_warning": "degraded", "rejected": "rejected"}
_LABEL_RE = re.compile(r"^[a-z0-9_]{1,64}$")
_WORD_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_EMAIL_RE = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
_ISO_Z_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


# ---------------------------------------------------------------- pure derivation

def disabled_body(node: str) -> Dict[str, Any]:
    return {"available": False, "node": node}


def _word(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and _WORD_RE.match(value) else None


def _pct(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _window(value: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(value, Mapping):
        return None
    resets = value.get("resetsAt")
    return {
        "pct": _pct(value.get("pct")),
        "resetsAt": resets if isinstance(resets, str) and _ISO_Z_RE.match(resets) else None,
        "status": _word(value.get("status")),
    }


def clean_error(value: Any, with_status: bool = True) -> Optional[Dict[str, Any]]:
    """An error in the fixed vocabulary, or None; foreign text is replaced, never copied."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return {"kind": "internal", "message": MESSAGES["internal"][0], "httpStatus": None} if with_status \
            else {"kind": "internal", "message": MESSAGES["internal"][0]}
    kind = value.get("kind")
    if kind not in ERROR_KINDS:
        kind = "internal"
    message = value.get("message")
    if message not in KNOWN_MESSAGES or message not in MESSAGES[kind]:
        message = MESSAGES[kind][0]
    out: Dict[str, Any] = {"kind": kind, "message": message}
    if with_status:
        status = value.get("httpStatus")
        out["httpStatus"] = status if isinstance(status, int) and not isinstance(status, bool) \
            and 100 <= status <= 599 else None
    return out


def binding_window(view: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """(bindingWindow, bindingStatus) of one account view (DESIGN §4)."""
    claim = view.get("representativeClaim")
    if claim in WINDOW_NAMES:
        window = view.get(WINDOW_NAMES[claim])
        status = window.get("status") if isinstance(window, Mapping) else None
        return claim, status if status is not None else view.get("overallStatus")
    best: Optional[Tuple[int, float, int]] = None
    chosen: Optional[str] = None
    for order, (name, field) in enumerate((("five_hour", "fiveHour"), ("seven_day", "sevenDay"))):
        window = view.get(field)
        if not isinstance(window, Mapping):
            continue
        pct = window.get("pct")
        key = (_STATUS_RANK.get(window.get("status") or "", 0),
               pct if isinstance(pct, float) else -1.0, -order)
        if best is None or key > best:
            best, chosen = key, name
    if chosen is None:
        return None, view.get("overallStatus")
    status = view[WINDOW_NAMES[chosen]].get("status")
    return chosen, status if status is not None else view.get("overallStatus")


def account_view(raw: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(raw, Mapping):
        return None
    label = raw.get("label")
    if not isinstance(label, str) or not _LABEL_RE.match(label):
        return None
    email = raw.get("email")
    view: Dict[str, Any] = {
        "label": label,
        "email": email if isinstance(email, str) and len(email) <= 254 and _EMAIL_RE.match(email) else None,
        "active": raw.get("active") is True,
        "overallStatus": _word(raw.get("overallStatus")),
        "representativeClaim": _word(raw.get("representativeClaim")),
        "bindingWindow": None,
        "bindingStatus": None,
        "fiveHour": _window(raw.get("fiveHour")),
        "sevenDay": _window(raw.get("sevenDay")),
        "error": clean_error(raw.get("error")),
    }
    view["bindingWindow"], view["bindingStatus"] = binding_window(view)
    return view


def node_status(active: Optional[Mapping[str, Any]]) -> str:
    if active is None:
        return "unknown"
    if active.get("error"):
        return "error"
    return _NODE_STATUS.get(active.get("bindingStatus") or "", "unknown")


def sibling_with_headroom(accounts: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    best: Optional[Tuple[float, int]] = None
    chosen: Optional[Dict[str, Any]] = None
    for order, acct in enumerate(accounts):
        if acct["active"] or acct["error"] or acct["bindingStatus"] != "allowed":
            continue
        used = max((acct[f]["pct"] if acct[f] and acct[f]["pct"] is not None else 100.0) for f in WINDOWS)
        if best is None or (used, order) < best:
            best, chosen = (used, order), acct
    return {"label": chosen["label"], "email": chosen["email"]} if chosen else None


def error_summary(node: str, probed_at: int, err: Any) -> Dict[str, Any]:
    """The node-level error body (without the per-reply generatedAt/cached)."""
    return {"available": True, "node": node, "probedAt": probed_at, "status": "error", "active": None,
            "accounts": [], "siblingWithHeadroom": None, "error": clean_error(err, with_status=False)}


def derive_summary(report: Any, node: str, probed_at: int) -> Dict[str, Any]:
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
        return error_summary(node, probed_at, {"kind": "internal", "message": MESSAGES["internal"][1]})
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
        "siblingWithHeadroom": sibling_with_headroom(accounts),
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


# ---------------------------------------------------------------- fan-out

class Broadcast:
    """Latest-value fan-out: one Condition, a monotonic sequence number.

    A waiter gets the newest body with a higher sequence; a slow reader skips
    frames instead of holding anybody up.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._seq = 0
        self._body: Optional[Dict[str, Any]] = None
        self.closed = False

    def publish(self, body: Dict[str, Any]) -> int:
        with self._cond:
            self._seq += 1
            self._body = body
            self._cond.notify_all()
            return self._seq

    def latest(self) -> Tuple[int, Optional[Dict[str, Any]]]:
        with self._cond:
            return self._seq, self._body

    def wait(self, after_seq: int, timeout: float) -> Optional[Tuple[int, Dict[str, Any]]]:
        with self._cond:
            self._cond.wait_for(lambda: self.closed or (self._seq > after_seq and self._body is not None),
                                timeout=timeout)
            if self.closed or self._seq <= after_seq or self._body is None:
                return None
            return self._seq, self._body

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()


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
    """

    def __init__(self, paths: Paths, *, node: str, log: EventLog, latch: Latch,
                 environ: Optional[Mapping[str, str]] = None, probe_enabled: bool = True) -> None:
        self.paths = paths
        self.node = node
        self.log = log
        self.latch = latch
        self.environ: Mapping[str, str] = paths.environ if environ is None else environ
        self.probe_enabled = probe_enabled and self.environ.get("SVC_ACCOUNTS_PROBE", "1").strip() != "0"
        self.ttl_s = env_float(self.environ, "SVC_POSTURE_TTL_S", DEFAULT_TTL_S)
        self.floor_s = min(env_float(self.environ, "SVC_REFRESH_FLOOR_S", DEFAULT_FLOOR_S), self.ttl_s)
        self.interval_s = env_float(self.environ, "SVC_PROBE_INTERVAL_S", DEFAULT_INTERVAL_S, minimum=0.01)
        self.deadline_s = env_float(self.environ, "SVC_PROBE_DEADLINE_S", 30.0, minimum=0.1)
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
        """Stop the loop; a probe still running is killed rather than waited for."""
        self._stop.set()
        if self._loop is not None:
            self._loop.join(self.deadline_s + 5)
        thread = self._flight_thread
        if thread is not None:
            thread.join(self.deadline_s + 5)
        self.broadcast.close()

    def _run_loop(self) -> None:
        # A tick that finds a probe in flight (the first one, a slow one) joins it.
        while not self._stop.wait(self.interval_s):
            try:
                self._refresh(periodic=True)
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("periodic probe failed")

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
                report = run_headers(self.paths, self.environ, deadline_s=self.deadline_s, cancel=self._stop)
            except Exception:  # noqa: BLE001 - a probe failure is an error posture
                log.error("probe raised; reporting an internal error posture")
                report = {"error": {"kind": "internal"}}
            summary = derive_summary(report, self.node, _time.now_ms())
            try:
                self._handle(summary)
            except Exception:  # noqa: BLE001 - the result is still served and published
                log.exception("handling the probe result failed")
        finally:
            with self._lock:
                # A probe cut short by stop() answers its waiters but is neither
                # cached nor pushed: subscribers must not see a shutdown as an error.
                if summary is not None and not self._stop.is_set():
                    self._summary = summary
                    self._probed_mono = time.monotonic()
                    # Published under the lock, so frames leave in probe order.
                    self.broadcast.publish(reply(summary, cached=False))
                self._flight = None
            flight.summary = summary
            flight.done.set()

    def _handle(self, summary: Dict[str, Any]) -> None:
        self.probe_runs += 1
        if summary.get("available") is not True:
            return
        if summary.get("status") == "error":
            # Node-level failure or the active account's own probe failed.
            self.probe_errors += 1
        else:
            self.last_success_ms = summary["probedAt"]
        if is_node_error(summary):
            return
        active = summary.get("active")
        if active is None:
            return
        try:
            self.latch.observe(active["label"], active["email"], summary["status"], active["bindingWindow"])
        except EventLogError:
            log.error("could not append account.status.changed; the edge is retried on the next probe")
        except OSError:
            log.error("could not advance the account status latch; retried on the next probe")

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


# ---------------------------------------------------------------- quota sampler

def backoff_delay(interval_s: float, retry_after_s: Optional[float], failures: int,
                  cap_s: float = MAX_BACKOFF_S) -> float:
    """Delay after a 429: retry-after when given, else doubling; capped, never below the interval."""
    if retry_after_s is not None and retry_after_s >= 0:
        wanted = retry_after_s
    else:
        wanted = interval_s * (2 ** max(1, min(failures, 10)))
    return max(interval_s, min(cap_s, wanted))


class QuotaSampler:
    """Polls the interactive login's usage and appends account.ratelimit.sampled.

    Interval: $SVC_QUOTA_POLL_INTERVAL_S (300, never below 60). `poll_interval_s`
    is a test knob that bypasses the 60 s floor; it is not reachable from the
    environment, so a user cannot turn the sampler into a poll storm.
    """

    def __init__(self, paths: Paths, *, node: str, log: EventLog, environ: Optional[Mapping[str, str]] = None,
                 poll_interval_s: Optional[float] = None) -> None:
        self.paths = paths
        self.node = node
        self.log = log
        self.environ: Mapping[str, str] = paths.environ if environ is None else environ
        if poll_interval_s is not None:
            self.interval_s = float(poll_interval_s)
        else:
            self.interval_s = max(MIN_QUOTA_INTERVAL_S, env_float(self.environ, "SVC_QUOTA_POLL_INTERVAL_S",
                                                                  DEFAULT_QUOTA_INTERVAL_S))
        self.enabled = self.environ.get("SVC_QUOTA_SAMPLER", "1").strip() != "0"
        self.deadline_s = env_float(self.environ, "SVC_PROBE_DEADLINE_S", 30.0, minimum=0.1)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._failures = 0
        self._last_problem: Optional[str] = None
        self.polls = 0
        self.samples = 0
        self.last_delay_s: Optional[float] = None

    def start(self) -> None:
        if not self.enabled:
            log.info("quota sampler off (SVC_QUOTA_SAMPLER=0)")
            return
        self._thread = threading.Thread(target=self._run, name="quota-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.deadline_s + 5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                delay = self.poll_once()
            except Exception:  # noqa: BLE001 - the sampler must survive anything
                log.exception("quota poll failed")
                delay = self.interval_s
            self.last_delay_s = delay
            if self._stop.wait(delay):
                return

    def poll_once(self) -> float:
        """One poll; returns the delay before the next one. A failed poll emits nothing."""
        if not self.paths.login_credentials.exists():
            self._note("no-credentials", "quota sampler idle: no login credentials file")
            return self.interval_s
        self.polls += 1
        result = run_usage(self.paths, self.environ, deadline_s=self.deadline_s, cancel=self._stop)
        if result.get("ok") is not True:
            err = clean_error(result.get("error")) or clean_error({"kind": "internal"})
            assert err is not None
            self._note(err["kind"], "quota poll failed: %s" % err["message"])
            if err.get("httpStatus") == 429:
                self._failures += 1
                retry = result.get("retryAfterS")
                retry_s = float(retry) if isinstance(retry, (int, float)) and not isinstance(retry, bool) \
                    and math.isfinite(retry) else None
                return backoff_delay(self.interval_s, retry_s, self._failures)
            self._failures = 0
            return self.interval_s
        self._failures = 0
        values = result.get("values")
        email = result.get("email")
        try:
            event = ratelimit_sampled(self.node, email if isinstance(email, str) else None,
                                      values if isinstance(values, Mapping) else {})
            self.log.append(event)
        except EventLogError:
            self._note("log", "quota sample could not be appended to the event log")
            return self.interval_s
        except ValueError:
            self._note("parse", "quota sample had values outside the contract")
            return self.interval_s
        self.samples += 1
        self._note(None, "quota sampler recovered")
        return self.interval_s

    def _note(self, problem: Optional[str], message: str) -> None:
        # One log line per change of state, not one per poll.
        if problem == self._last_problem:
            return
        if problem is not None or self._last_problem is not None:
            (log.warning if problem else log.info)(message)
        self._last_problem = problem
