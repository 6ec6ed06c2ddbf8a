"""The quota sampler: polls the interactive login's usage into account.ratelimit.sampled.

docs/posture.md: once at start, then every $SVC_QUOTA_POLL_INTERVAL_S (300,
never below 180: the usage endpoint allows about 30 requests an hour per
account, shared by every machine that polls it); off without a credentials
file or with SVC_QUOTA_SAMPLER=0. A failed poll, or a reply with no readable
window, emits nothing. A 429 backs off by `retry-after` plus 10 %, at least
60 s, capped at MAX_BACKOFF_S.

In a cluster only one host polls a login: `usage_owner(login_email)` (given by
the monitor, which knows the roster and liveness) names the host that polls it,
or None when this host runs alone; another host's name means skip this poll.
It calls `login_email()` (a token-free child) only when the host is in a cluster.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, Mapping, Optional

from ..events import EventLog, EventLogError, ratelimit_sampled
from ..paths import Paths
from .._text import finite_number, printable
from .errors import clean_error
from ..probe.backoff import backoff_delay
from .loginview import LoginSample, login_body
from .usage import clean_usage_extras, has_window
from .._time import now_ms
from ..settings import Settings

# The sampler's lines keep the logger they always had, so log filters still match.
log = logging.getLogger("svcposture.posture")

# usage_owner(login_email) -> the host that polls the login, or None (this host polls).
LoginEmail = Callable[[], Optional[str]]
UsageOwnerFn = Callable[[LoginEmail], Optional[str]]


def _retry_after(result: Mapping[str, Any]) -> Optional[float]:
    retry = result.get("retryAfterS")
    if finite_number(retry) is not None:
        return float(retry)
    return None


def poll_interval_s_of(settings: Settings) -> float:
    """$SVC_QUOTA_POLL_INTERVAL_S as parsed (300, raised to the 180 s floor), logging the raise."""
    for note in settings.notes_on("SVC_QUOTA_POLL_INTERVAL_S"):
        log.warning("%s", note)
    return settings.quota_poll_interval_s


class QuotaSampler:
    """Polls the interactive login's usage and appends account.ratelimit.sampled.

    Interval: $SVC_QUOTA_POLL_INTERVAL_S (300, never below 180). `poll_interval_s`
    is a test knob that bypasses the floor. `usage_owner` decides, once per
    poll, which host of the cluster polls this login (None: every poll is ours).
    """

    def __init__(self, paths: Paths, *, node: str, log: EventLog, environ: Optional[Mapping[str, str]] = None,
                 poll_interval_s: Optional[float] = None,
                 usage_owner: Optional[UsageOwnerFn] = None, settings: Optional[Settings] = None) -> None:
        # The probe module (and subprocess) load with the first sampler, not
        # with this module: the pure parts of the package stay light.
        from ..probe import runner as probe

        self.paths = paths
        self.node = node
        self.log = log
        # The environment goes whole to the probe child (token-free); the knobs come from settings.
        self.environ: Mapping[str, str] = paths.environ if environ is None else environ
        settings = Settings.from_environ(self.environ) if settings is None else settings
        if poll_interval_s is not None:
            self.interval_s = float(poll_interval_s)
        else:
            self.interval_s = poll_interval_s_of(settings)
        self.enabled = settings.quota_sampler
        self.deadline_s = settings.probe_deadline_s
        self._run_usage = probe.run_usage
        self._run_login = probe.run_login
        self._usage_owner = usage_owner
        # False while another host of the cluster polls this login: its heartbeat quota is then null.
        self.polls_here = True
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._failures = 0
        self._last_problem: Optional[str] = None
        self.polls = 0
        self.last_delay_s: Optional[float] = None
        # The newest sample (GET /api/login shows it), and why there is none when there is none.
        self.latest: Optional[LoginSample] = None
        self.reason = ("the quota sampler is off (SVC_QUOTA_SAMPLER=0)" if not self.enabled else
                       "no sample yet: the quota sampler's first poll of the login in %s is under way"
                       % self.paths.login_credentials)

    def login_body(self) -> Dict[str, Any]:
        """The GET /api/login body from the newest sample (loginview.login_body)."""
        return login_body(self.node, self.latest, self.reason)

    def login_key(self) -> Any:
        """What login_body() depends on: it changes when the body does."""
        return (self.latest, self.reason)

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
            self.latest = None  # logged out: the old numbers are no one's any more
            self.reason = "no login credentials file at %s" % self.paths.login_credentials
            self._note("no-credentials", "quota sampler idle: no login credentials file at %s"
                       % self.paths.login_credentials)
            return self.interval_s
        if not self._ours():
            self.reason = "another host of the cluster polls this login's usage"
            return self.interval_s
        self.polls += 1
        result = self._run_usage(self.paths, self.environ, deadline_s=self.deadline_s, cancel=self._stop)
        if result.get("ok") is not True:
            return self._failed(result)
        self._failures = 0
        values = result.get("values")
        email = result.get("email")
        if not isinstance(values, Mapping) or not has_window(values):
            self.reason = "the login's usage reply had no window in it"
            self._note("no-windows", "usage: no windows in the reply")
            return self.interval_s
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
        self.latest = LoginSample(event["attributes"], now_ms(), clean_usage_extras(result))
        self._note(None, "quota sampler recovered")
        return self.interval_s

    def _ours(self) -> bool:
        """Whether this host polls the login now; a skip is logged once per change of owner."""
        if self._usage_owner is None:
            return True
        try:
            owner = self._usage_owner(self._login_email)
        except Exception:  # noqa: BLE001 - not knowing the owner must not stop the sampler
            log.warning("usage: cannot tell which host polls this login; polling here")
            owner = None
        self.polls_here = owner is None or owner == self.node
        if not self.polls_here:
            self._note("skip:%s" % owner, "usage: host %s polls this login's usage; this host skips"
                       % printable(owner)[:100])
        elif (self._last_problem or "").startswith("skip:"):
            log.info("usage: this host polls this login's usage now")
            self._last_problem = None
        return self.polls_here

    def _login_email(self) -> Optional[str]:
        """The login's email from a token-free child (the profile file may hold a key)."""
        who = self._run_login(self.paths, self.environ, deadline_s=self.deadline_s, cancel=self._stop)
        email = who.get("email") if who.get("ok") is True else None
        return email if isinstance(email, str) else None

    def _failed(self, result: Mapping[str, Any]) -> float:
        if self._stop.is_set():
            return self.interval_s  # the poll was stopped with the monitor: nothing failed
        err = clean_error(result.get("error")) or clean_error({"kind": "internal"})
        assert err is not None
        self._note(err["kind"], "quota poll failed: %s" % err["message"])
        self.reason = "the last poll of the login's usage failed (%s)" % err["kind"]
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
