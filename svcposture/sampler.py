"""The quota sampler: polls the interactive login's usage into account.ratelimit.sampled.

DESIGN §3: once at start, then every $SVC_QUOTA_POLL_INTERVAL_S; off without a
credentials file or with SVC_QUOTA_SAMPLER=0. A failed poll emits nothing,
and a 429 backs off, honouring `retry-after`, capped at MAX_BACKOFF_S.
"""
from __future__ import annotations

import logging
import math
import threading
from typing import Any, Mapping, Optional

from ._env import env_number
from .events import EventLog, EventLogError, ratelimit_sampled
from .paths import Paths
from .errors import clean_error

# The sampler's lines keep the logger they always had, so log filters still match.
log = logging.getLogger("svcposture.posture")

DEFAULT_QUOTA_INTERVAL_S = 300.0
MIN_QUOTA_INTERVAL_S = 60.0
# Backoff on 429 never waits longer than this.
MAX_BACKOFF_S = 15 * 60


def backoff_delay(interval_s: float, retry_after_s: Optional[float], failures: int,
                  cap_s: float = MAX_BACKOFF_S) -> float:
    """Delay after a 429: retry-after when given, else doubling; capped, never below the interval."""
    if retry_after_s is not None and retry_after_s >= 0:
        wanted = retry_after_s
    else:
        wanted = interval_s * (2 ** max(1, min(failures, 10)))
    return max(interval_s, min(cap_s, wanted))


def _retry_after(result: Mapping[str, Any]) -> Optional[float]:
    retry = result.get("retryAfterS")
    if isinstance(retry, (int, float)) and not isinstance(retry, bool) and math.isfinite(retry):
        return float(retry)
    return None


class QuotaSampler:
    """Polls the interactive login's usage and appends account.ratelimit.sampled.

    Interval: $SVC_QUOTA_POLL_INTERVAL_S (300, never below 60). `poll_interval_s`
    is a test knob that bypasses the 60 s floor; it is not reachable from the
    environment, so a user cannot turn the sampler into a poll storm.
    """

    def __init__(self, paths: Paths, *, node: str, log: EventLog, environ: Optional[Mapping[str, str]] = None,
                 poll_interval_s: Optional[float] = None) -> None:
        # The probe module (and subprocess) load with the first sampler, not
        # with this module: the pure parts of the package stay light.
        from . import probe

        self.paths = paths
        self.node = node
        self.log = log
        self.environ: Mapping[str, str] = paths.environ if environ is None else environ
        if poll_interval_s is not None:
            self.interval_s = float(poll_interval_s)
        else:
            self.interval_s = max(MIN_QUOTA_INTERVAL_S, env_number(self.environ, "SVC_QUOTA_POLL_INTERVAL_S",
                                                                   DEFAULT_QUOTA_INTERVAL_S, low=0.0))
        self.enabled = self.environ.get("SVC_QUOTA_SAMPLER", "1").strip() != "0"
        self.deadline_s = probe.sweep_deadline_s(self.environ)
        self._run_usage = probe.run_usage
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
        result = self._run_usage(self.paths, self.environ, deadline_s=self.deadline_s, cancel=self._stop)
        if result.get("ok") is not True:
            return self._failed(result)
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

    def _failed(self, result: Mapping[str, Any]) -> float:
        err = clean_error(result.get("error")) or clean_error({"kind": "internal"})
        assert err is not None
        self._note(err["kind"], "quota poll failed: %s" % err["message"])
        if err.get("httpStatus") == 429:
            self._failures += 1
            return backoff_delay(self.interval_s, _retry_after(result), self._failures)
        self._failures = 0
        return self.interval_s

    def _note(self, problem: Optional[str], message: str) -> None:
        # One log line per change of state, not one per poll.
        if problem == self._last_problem:
            return
        if problem is not None or self._last_problem is not None:
            (log.warning if problem else log.info)(message)
        self._last_problem = problem
