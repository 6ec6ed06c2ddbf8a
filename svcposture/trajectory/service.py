"""Where each account is heading (docs/trajectory.md): the service behind /api/trajectory.

After every probe whose result is fresh (periodic or forced, never a replay)
the posture service hands the summary here. This module then

1. appends the probe's history rows (one locked append per probe);
2. keeps the recent points of every window in memory (24 h: the longest
   lookback), loaded from the history files at start;
3. computes each window's forecast over its current cycle (forecast.py);
4. lets the alert latch emit threshold, forecast, wall and usable alerts (alerts.py) and
   queues them, with any account.status.changed edge, for the notify hook;
5. builds the /api/trajectory body once and publishes it to the stream.

Reads are served from that one body; nothing is recomputed per request.
"""
from __future__ import annotations

import collections
import logging
import threading
from typing import Any, Deque, Dict, List, Mapping, Optional, Tuple

from .. import _time
from .cycle import same_cycle
from .._names import CLAIM_OF_FIELD, WINDOW_FIELDS
from .._reserve import reserve_or_zero
from .._text import is_int, read_pct
from .alerts import ALERT_KIND_NAMES, AlertLatch, recent_alerts
from ..broadcast import Broadcast
from ..events import EventLog
from .forecast import LOOKBACK_MS, forecast
from .history import HistoryError, append_rows, day_key, prune, read_rows, rows_from_summary
from ..paths import Paths
from ..settings import Settings
from ..vendors import DEFAULT_PROVIDER, provider_names, provider_of_label
from ..windows import SEVEN_DAY_FIELD, field_of_length

log = logging.getLogger("svcposture.trajectory")

RECENT_ALERTS = 20
# The longest forecast lookback (the 7-day window's 24 h) bounds what is kept.
KEEP_MS = max(LOOKBACK_MS.values())

Point = Tuple[int, float, Optional[int]]  # (t ms, pct, resetsAt ms or None)


def extra_key(window: Mapping[str, Any]) -> Tuple[str, Optional[str], Optional[int]]:
    """The series key of an extra window: its name and its length (a model has a 5 h and a 7 d one)."""
    name, seconds = window.get("name"), window.get("seconds")
    return ("extra", name if isinstance(name, str) else None, seconds if is_int(seconds) else None)


def _resets_ms(window: Mapping[str, Any]) -> Optional[int]:
    value = window.get("resetsAt")
    if is_int(value):
        return value
    if isinstance(value, str):
        try:
            return _time.parse_iso_ms(value)
        except ValueError:
            return None
    return None


def window_view(window: Any, points: Any, now_ms: int, field: str) -> Optional[Dict[str, Any]]:
    """`{"pct", "resetsAt", "forecast"}` of one summary window, or None (pure)."""
    if not isinstance(window, Mapping):
        return None
    pct = read_pct(window.get("pct"))
    resets_iso = window.get("resetsAt") if isinstance(window.get("resetsAt"), str) else None
    result = None
    if pct is not None:
        resets = _resets_ms(window)
        cycle = [(t, p) for t, p, r in points if same_cycle(r, resets)]
        result = forecast(cycle, now_ms=now_ms, resets_at_ms=resets, window=field)
    return {"pct": pct, "resetsAt": resets_iso, "forecast": result}


class TrajectoryService:
    """History writer, forecasts, alerts and the /api/trajectory body of one node."""

    def __init__(self, paths: Paths, *, node: str, event_log: EventLog,
                 environ: Optional[Mapping[str, str]] = None, notifier: Any = None,
                 settings: Optional[Settings] = None) -> None:
        if settings is None:
            settings = Settings.from_environ(paths.environ if environ is None else environ)
        self.paths = paths
        self.node = node
        self.event_log = event_log
        self.days = settings.history_days
        for problem in settings.notes_on("SVC_ALERT_THRESHOLDS"):
            log.warning("%s", problem)
        thresholds = settings.alert_thresholds
        self.thresholds = thresholds
        self.alerts = AlertLatch(paths.alert_latch, event_log, node, thresholds)
        self.notifier = notifier
        self.broadcast = Broadcast()
        self._lock = threading.Lock()
        self._series: Dict[Tuple[str, Any], Deque[Point]] = {}
        self._recent: Deque[Dict[str, Any]] = collections.deque(maxlen=RECENT_ALERTS)
        self._pruned_day = ""
        self._body: Dict[str, Any] = {}
        # Per vendor: its newest probe's (probedAt, account rows), or None while
        # that vendor's posture is disabled. A vendor never seen shows nothing.
        self._vendors: Dict[str, Optional[Tuple[Optional[int], List[Dict[str, Any]]]]] = {}
        self._sampled: Dict[str, int] = {}  # label -> sampledAt of its newest history row (Codex)
        self.alert_counts = {kind: 0 for kind in ALERT_KIND_NAMES}

    # ------------------------------------------------------------ start

    def load(self) -> None:
        """Prune, load the last 24 h of history and the recent alerts; reconcile the latch."""
        now = _time.now_ms()
        self._prune(now)
        try:
            self.alerts.load()
        except OSError as exc:
            log.warning("alert latch could not be loaded: %s", exc)
        rows = list(read_rows(self.paths, start_ms=now - KEEP_MS, end_ms=now))
        rows.reverse()  # oldest first
        for row in rows:
            self._remember(row)
            if provider_of_label(row["label"]) != DEFAULT_PROVIDER:
                self._sampled[row["label"]] = max(self._sampled.get(row["label"], -1), row["t"])
        for event in reversed(recent_alerts(self.event_log, RECENT_ALERTS)):
            self._recent.appendleft(event)
        with self._lock:
            self._body = self._build()

    def _prune(self, now: int) -> None:
        day = day_key(now)
        if day == self._pruned_day:
            return
        self._pruned_day = day
        try:
            removed = prune(self.paths, self.days, now)
        except OSError as exc:
            log.warning("history prune failed: %s", exc.strerror or exc)
            return
        if removed:
            log.info("history: removed %d day file(s) older than %d days", len(removed), self.days)

    # ------------------------------------------------------------ per probe

    def observe(self, summary: Mapping[str, Any], edge: Optional[Mapping[str, Any]] = None,
                provider: str = DEFAULT_PROVIDER) -> None:
        """Handle one fresh probe result of one vendor (and the status edge it emitted, if any)."""
        if edge is not None and self.notifier is not None:
            self.notifier.submit(edge)
        if summary.get("available") is not True:
            with self._lock:
                self._vendors[provider] = None
                self._body = self._build()
                body = self._body
            self.broadcast.publish(body)
            return
        probed_at = summary.get("probedAt")
        now = probed_at if is_int(probed_at) else _time.now_ms()
        self._prune(_time.now_ms())
        rows = rows_from_summary(summary)
        if provider != DEFAULT_PROVIDER:
            rows = self._fresh_samples(summary, rows)
        if rows:
            try:
                # History is a chart, not a ledger: no fsync per probe (docs/trajectory.md sets
                # no durability); a crash may lose the newest rows, never tear one.
                append_rows(self.paths, rows, fsync=False)
            except (HistoryError, ValueError) as exc:
                log.warning("history append failed: %s", exc)
        for row in rows:
            self._remember(row)
        accounts = self._accounts(summary, now, provider)
        fired = self.alerts.observe(accounts, now)
        for event in fired:
            kind = event["attributes"]["event.name"].rsplit(".", 1)[-1]
            self.alert_counts[kind] = self.alert_counts.get(kind, 0) + 1
            self._recent.appendleft(event)
            if self.notifier is not None:
                self.notifier.submit(event)
        with self._lock:
            self._vendors[provider] = (now, accounts)
            self._body = self._build()
            body = self._body
        self.broadcast.publish(body)

    def observer(self, provider: str) -> Any:
        """The posture observer of one vendor's service: observe() with its provider."""
        def observe(summary: Mapping[str, Any], edge: Optional[Mapping[str, Any]] = None) -> None:
            self.observe(summary, edge, provider=provider)
        return observe

    def _fresh_samples(self, summary: Mapping[str, Any], rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """The rows of accounts whose sample is new, each at its sample's time.

        A Codex account is not measured on every probe (the usage floor, another
        host polls it): the summary repeats its last sample, which is one point
        of history, not one per probe.
        """
        sampled = {a.get("label"): a.get("sampledAt") for a in summary.get("accounts") or []
                   if isinstance(a, Mapping)}
        fresh = []
        for row in rows:
            at = sampled.get(row["label"])
            if not isinstance(at, int) or isinstance(at, bool) or at <= self._sampled.get(row["label"], -1):
                continue
            self._sampled[row["label"]] = at
            fresh.append(dict(row, t=at))
        return fresh

    def _remember(self, row: Mapping[str, Any]) -> None:
        t = row["t"]
        keyed = [(field, row.get(field)) for field in WINDOW_FIELDS]
        keyed += [(extra_key(extra), extra) for extra in row.get("extra") or ()]
        for key, window in keyed:
            if not isinstance(window, Mapping):
                continue
            series = self._series.setdefault((row["label"], key), collections.deque())
            series.append((t, float(window["pct"]), _resets_ms(window)))
            newest = max(series[-1][0], series[0][0])
            while series and series[0][0] < newest - KEEP_MS:
                series.popleft()

    def _accounts(self, summary: Mapping[str, Any], now: int, provider: str) -> List[Dict[str, Any]]:
        out = []
        for account in summary.get("accounts") or []:
            label = account.get("label")
            view: Dict[str, Any] = {"label": label, "provider": provider, "email": account.get("email"),
                                    "active": account.get("active") is True}
            for field in WINDOW_FIELDS:
                points = self._series.get((label, field), ())
                view[field] = window_view(account.get(field), points, now, field)
            extras = [self._extra_view(label, w, now) for w in account.get("extraWindows") or ()
                      if isinstance(w, Mapping)]
            if extras:
                view["extraWindows"] = extras
            out.append(view)
        return out

    def _extra_view(self, label: str, window: Mapping[str, Any], now: int) -> Dict[str, Any]:
        """An extra window's view: its name and length, and its forecast over its own series (the
        5-hour lookback for a window of about 5 hours, the weekly one for any other)."""
        key = extra_key(window)
        seconds = window.get("seconds")
        field = field_of_length(seconds) if is_int(seconds) else None
        view = window_view(window, self._series.get((label, key), ()), now, field or SEVEN_DAY_FIELD) or {}
        return dict({"name": key[1], "seconds": key[2]}, **view)

    def _build(self) -> Dict[str, Any]:
        """The body from every vendor's newest rows: Claude's first, then Codex's.

        Disabled (`{"available": false, "node"}`) only when every vendor seen is;
        `probedAt` is the newest probe of any vendor shown.
        """
        seen = self._vendors
        if seen and all(entry is None for entry in seen.values()):
            return {"available": False, "node": self.node}
        probed: Optional[int] = None
        accounts: List[Dict[str, Any]] = []
        for provider in provider_names():
            entry = seen.get(provider)
            if entry is None:
                continue
            if entry[0] is not None and (probed is None or entry[0] > probed):
                probed = entry[0]
            accounts.extend(entry[1])
        return {"node": self.node, "generatedAt": _time.iso_now(), "probedAt": probed,
                "accounts": accounts, "alerts": list(self._recent),
                "reservePct": reserve_or_zero(str(self.paths.home))}

    # ------------------------------------------------------------ reads

    def body(self) -> Dict[str, Any]:
        with self._lock:
            return self._body

    def metrics(self) -> Dict[str, Any]:
        """Per account and window (label, window, forecast, provider); alert counts."""
        body = self.body()
        windows = []
        for account in body.get("accounts") or []:
            for field in WINDOW_FIELDS:
                view = account.get(field)
                fc = view.get("forecast") if isinstance(view, Mapping) else None
                if isinstance(fc, Mapping):
                    windows.append((account["label"], CLAIM_OF_FIELD[field], fc, account.get("provider", DEFAULT_PROVIDER)))
        return {"windows": windows, "alerts": dict(self.alert_counts)}

    def stop(self) -> None:
        self.broadcast.close()
        if self.notifier is not None:
            self.notifier.stop()
