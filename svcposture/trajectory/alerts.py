"""Threshold, forecast, wall and usable alerts (docs/trajectory.md), exactly once across kill -9.

Four event kinds, appended to the node's event log:

- `account.quota.threshold`: an account's window reached a threshold of
  $SVC_ALERT_THRESHOLDS (default 80,90) for the first time in its cycle. A
  jump past several fires only the highest and marks the lower ones fired;
  a dip and a new rise in the same cycle fire nothing; a new cycle re-arms.
- `account.quota.forecast`: the active account's window is forecast to hit
  100 % before it resets, within the next 60 minutes; once per cycle.
- `account.quota.wall`: an account's window reached 100 %: the account is held
  until then, and the alert says when it is usable again (`ratelimit.usable_at`, the
  latest reset of its windows at the wall); once per cycle.
- `account.quota.usable`: an account held at the wall has none of its windows there
  any more (a window reset): one alert names it, once per time it was held. Whether an
  account is held is the newest of its wall and usable alerts, as the status latch's
  edges are (docs/events.md).

A window's cycle is identified by its `resetsAt`: two instants within
_cycle.CYCLE_TOLERANCE_MS are the same cycle. The state lives in ~/svc/alert-latch.json keyed by label
and window, a few recent cycles each (so a resetsAt that jumps back and forth
cannot re-fire a cycle it already fired). Order is emit (append + fsync),
then advance (atomic write); at start, and whenever the file is missing or
corrupt, the fired facts of the log's alert events are merged back in, so a
crash between the two never fires twice, and an alert never emitted is still
fired by the next probe of that cycle.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .cycle import same_cycle
from .._files import CorruptFileError, move_aside, read_json, write_json_atomic
from .._names import CLAIM_OF_FIELD, WINDOW_CLAIMS
from .._text import is_int, read_pct
from .._time import iso_from_ms, now_ms, parse_iso_ms
from ..events import EventLog, envelope, event_name, provider_attrs
from ..settings import DEFAULT_THRESHOLDS

log = logging.getLogger("svcposture.alerts")

THRESHOLD = "account.quota.threshold"
FORECAST = "account.quota.forecast"
WALL = "account.quota.wall"
USABLE = "account.quota.usable"
ALERT_KINDS = (THRESHOLD, FORECAST, WALL, USABLE)
# Their short names: svc_alerts_total's `kind` label.
ALERT_KIND_NAMES = tuple(name.rsplit(".", 1)[-1] for name in ALERT_KINDS)
# A window at or past this is at the wall: the account can do nothing on it until it resets.
WALL_PCT = 100.0
FORECAST_HORIZON_MS = 60 * 60_000
# Cycles remembered per label and window: the current one and a few before it.
KEEP_CYCLES = 6
# How far back the log is read to rebuild the latch: one 7-day cycle and a margin.
RECONCILE_MS = 8 * 86_400_000
LATCH_VERSION = 1
_NEEDLE = b'"account.quota.'


# ---------------------------------------------------------------- events

def threshold_event(node: str, handle: str, email: Optional[str], window: str, threshold: int,
                    pct: float, resets_at_ms: Optional[int], ts_ms: Optional[int] = None,
                    provider: Optional[str] = None) -> Dict[str, Any]:
    attrs: Dict[str, Any] = {"event.label": email or handle, "account.handle": handle}
    if email is not None:
        attrs["account.email"] = email
    provider_attrs(attrs, provider)
    attrs.update({"node.name": node, "ratelimit.window": window, "ratelimit.threshold": threshold,
                  "ratelimit.pct": pct})
    if resets_at_ms is not None:
        attrs["ratelimit.resets_at"] = iso_from_ms(resets_at_ms)
    return envelope(THRESHOLD, node, attrs, ts_ms)


def forecast_event(node: str, handle: str, email: Optional[str], window: str, wall_at: str,
                   resets_at_ms: Optional[int], rate: float, ts_ms: Optional[int] = None,
                   provider: Optional[str] = None) -> Dict[str, Any]:
    attrs: Dict[str, Any] = {"event.label": email or handle, "account.handle": handle}
    if email is not None:
        attrs["account.email"] = email
    provider_attrs(attrs, provider)
    attrs.update({"node.name": node, "ratelimit.window": window, "ratelimit.wall_at": wall_at})
    if resets_at_ms is not None:
        attrs["ratelimit.resets_at"] = iso_from_ms(resets_at_ms)
    attrs["ratelimit.rate_pct_per_hour"] = rate
    return envelope(FORECAST, node, attrs, ts_ms)


def wall_event(node: str, handle: str, email: Optional[str], window: str, pct: float, resets_at_ms: Optional[int],
               usable_at_ms: Optional[int], ts_ms: Optional[int] = None,
               provider: Optional[str] = None) -> Dict[str, Any]:
    attrs: Dict[str, Any] = {"event.label": email or handle, "account.handle": handle}
    if email is not None:
        attrs["account.email"] = email
    provider_attrs(attrs, provider)
    attrs.update({"node.name": node, "ratelimit.window": window, "ratelimit.pct": pct})
    if resets_at_ms is not None:
        attrs["ratelimit.resets_at"] = iso_from_ms(resets_at_ms)
    if usable_at_ms is not None:
        attrs["ratelimit.usable_at"] = iso_from_ms(usable_at_ms)
    return envelope(WALL, node, attrs, ts_ms)


def usable_event(node: str, handle: str, email: Optional[str], window: str, pct: float,
                 resets_at_ms: Optional[int], ts_ms: Optional[int] = None,
                 provider: Optional[str] = None) -> Dict[str, Any]:
    """`window` is the one that held the account, `pct` and `resets_at_ms` its figures now."""
    attrs: Dict[str, Any] = {"event.label": email or handle, "account.handle": handle}
    if email is not None:
        attrs["account.email"] = email
    provider_attrs(attrs, provider)
    attrs.update({"node.name": node, "ratelimit.window": window, "ratelimit.pct": pct})
    if resets_at_ms is not None:
        attrs["ratelimit.resets_at"] = iso_from_ms(resets_at_ms)
    return envelope(USABLE, node, attrs, ts_ms)


# ---------------------------------------------------------------- pure cycle logic

def find_cycle(cycles: Sequence[Dict[str, Any]], resets_at_ms: Optional[int]) -> Optional[Dict[str, Any]]:
    for cycle in cycles:
        if same_cycle(cycle.get("resetsAt"), resets_at_ms):
            return cycle
    return None


def thresholds_to_fire(fired: Sequence[int], pct: float, thresholds: Sequence[int]) -> Tuple[Optional[int], List[int]]:
    """(the threshold to fire or None, the fired list afterwards): upward only, highest only."""
    reached = [t for t in thresholds if pct >= t]
    new = [t for t in reached if t not in fired]
    if not new:
        return None, list(fired)
    return max(new), sorted(set(fired) | set(reached))


def _valid_cycle(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    resets = value.get("resetsAt")
    if resets is not None and (not is_int(resets)):
        return False
    fired = value.get("fired")
    return (isinstance(fired, list) and all(is_int(t) for t in fired)
            and isinstance(value.get("forecast"), bool) and isinstance(value.get("wall", False), bool))


def _valid_latch(data: Any) -> bool:
    if not isinstance(data, dict) or data.get("version") != LATCH_VERSION:
        return False
    windows = data.get("windows")
    if not isinstance(windows, dict):
        return False
    held = data.get("held", {})
    return (all(isinstance(k, str) and isinstance(v, list) and all(_valid_cycle(c) for c in v)
                for k, v in windows.items())
            and isinstance(held, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in held.items()))


def _key(label: str, window: str) -> str:
    return "%s/%s" % (label, window)


# ---------------------------------------------------------------- the latch

class AlertLatch:
    """Decides and emits the alerts of each probe result; see the module docstring."""

    def __init__(self, path: "Path | str", event_log: EventLog, node: str,
                 thresholds: Sequence[int] = DEFAULT_THRESHOLDS) -> None:
        self.path = Path(path)
        self.log = event_log
        self.node = node
        self.thresholds = tuple(thresholds)
        self._lock = threading.Lock()
        self._windows: Dict[str, List[Dict[str, Any]]] = {}
        # label -> the window that holds the account at the wall (absent: not held).
        self._held: Dict[str, str] = {}
        self._loaded = False
        self.moved_aside: Optional[Path] = None

    def load(self) -> None:
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> None:
        windows: Dict[str, List[Dict[str, Any]]] = {}
        held: Dict[str, str] = {}
        try:
            data = read_json(self.path)
        except (CorruptFileError, OSError, ValueError):
            data = False
        if data is not None and not _valid_latch(data):
            self.moved_aside = move_aside(self.path)
            log.warning("alert latch %s was corrupt; moved aside and rebuilt from the event log", self.path)
        elif data is not None:
            windows = {k: [dict(c) for c in v] for k, v in data["windows"].items()}
            held = dict(data.get("held") or {})
        self._merge_log(windows, held)
        self._windows = windows
        self._held = held
        self._loaded = True
        self._write_quietly()

    def _merge_log(self, windows: Dict[str, List[Dict[str, Any]]], held: Dict[str, str]) -> None:
        """Mark fired every alert the log holds (the log wins: fired facts only grow), and take
        whether each account is held from its newest wall or usable alert (the log wins there too)."""
        since = now_ms() - RECONCILE_MS
        decided: set = set()  # labels whose newest wall or usable alert has been seen
        for event in self.log.iter_newest_first(contains=_NEEDLE):
            name = event_name(event)
            if name not in ALERT_KINDS:
                continue
            attrs = event["attributes"]
            handle, window = attrs.get("account.handle"), attrs.get("ratelimit.window")
            if not isinstance(handle, str) or window not in WINDOW_CLAIMS:
                continue
            try:
                ts = parse_iso_ms(event.get("ts")) if isinstance(event.get("ts"), str) else None
                resets = attrs.get("ratelimit.resets_at")
                resets_ms = parse_iso_ms(resets) if isinstance(resets, str) else None
            except ValueError:
                continue
            if ts is not None and ts < since:
                break  # newest first: everything further back is older still
            if name in (WALL, USABLE) and handle not in decided:
                decided.add(handle)
                if name == WALL:
                    held[handle] = window
                else:
                    held.pop(handle, None)
            if name == USABLE:
                continue  # its resets_at is the new cycle's, which it fires nothing in
            cycle = self._cycle(windows, _key(handle, window), resets_ms)
            if name == FORECAST:
                cycle["forecast"] = True
            elif name == WALL:
                cycle["wall"] = True
            else:
                threshold = attrs.get("ratelimit.threshold")
                if is_int(threshold):
                    below = [t for t in self.thresholds if t <= threshold]
                    cycle["fired"] = sorted(set(cycle["fired"]) | set(below) | {threshold})

    @staticmethod
    def _cycle(windows: Dict[str, List[Dict[str, Any]]], key: str, resets_ms: Optional[int]) -> Dict[str, Any]:
        cycles = windows.setdefault(key, [])
        cycle = find_cycle(cycles, resets_ms)
        if cycle is None:
            cycle = {"resetsAt": resets_ms, "fired": [], "forecast": False, "wall": False}
            cycles.append(cycle)
            # Newest reset last; only the last few cycles matter.
            cycles.sort(key=lambda c: -1 if c["resetsAt"] is None else c["resetsAt"])
            del cycles[:-KEEP_CYCLES]
        return cycle

    def _ensure_current(self) -> None:
        # The file is the durable truth: one deleted or damaged under a running
        # monitor is rebuilt (from itself and the log) before anything is decided.
        if not self._loaded or not self.path.exists():
            self._load_locked()

    def observe(self, trajectory_accounts: Sequence[Mapping[str, Any]], ts_ms: Optional[int] = None) -> List[Dict[str, Any]]:
        """Emit the alerts one probe's trajectory accounts call for; returns them.

        Each account is `{"label", "email", "active", "fiveHour": {"pct",
        "resetsAt" (ISO or None), "forecast"} | None, "sevenDay": ...}`. An
        alert whose append fails is not advanced (one log line): the next probe
        of the same cycle tries again.
        """
        emitted: List[Dict[str, Any]] = []
        with self._lock:
            self._ensure_current()
            for account in trajectory_accounts:
                readable = []
                for field in ("fiveHour", "sevenDay"):
                    window = account.get(field)
                    if isinstance(window, Mapping) and read_pct(window.get("pct")) is not None:
                        readable.append((CLAIM_OF_FIELD[field], window))
                        emitted.extend(self._observe_window(account, CLAIM_OF_FIELD[field], window, ts_ms))
                emitted.extend(self._observe_wall(account, readable, ts_ms))
        return emitted

    def _observe_window(self, account: Mapping[str, Any], claim: str, window: Mapping[str, Any],
                        ts_ms: Optional[int]) -> List[Dict[str, Any]]:
        label, email = account["label"], account.get("email")
        resets = window.get("resetsAt")
        try:
            resets_ms = parse_iso_ms(resets) if isinstance(resets, str) else None
        except ValueError:
            resets_ms = None
        key = _key(label, claim)
        cycle = self._cycle(self._windows, key, resets_ms)
        out = []
        threshold, fired = thresholds_to_fire(cycle["fired"], float(window["pct"]), self.thresholds)
        if threshold is not None:
            event = threshold_event(self.node, label, email, claim, threshold, float(window["pct"]),
                                    resets_ms, ts_ms, provider=account.get("provider"))
            if self._emit(event):
                cycle["fired"] = fired
                self._write_quietly()
                out.append(event)
        forecast = window.get("forecast")
        if account.get("active") and not cycle["forecast"] and _forecast_alarm(forecast, ts_ms):
            event = forecast_event(self.node, label, email, claim, forecast["wallAt"], resets_ms,
                                   forecast["ratePctPerHour"], ts_ms, provider=account.get("provider"))
            if self._emit(event):
                cycle["forecast"] = True
                self._write_quietly()
                out.append(event)
        return out

    def _observe_wall(self, account: Mapping[str, Any], windows: List[Tuple[str, Mapping[str, Any]]],
                      ts_ms: Optional[int]) -> List[Dict[str, Any]]:
        """The wall alert of each window that reached 100 % in its cycle, and the usable alert of a
        held account none of whose windows is at the wall any more."""
        if not windows:
            return []  # an account with no reading says nothing of the wall
        label, email, provider = account["label"], account.get("email"), account.get("provider")
        at_wall = [(claim, w) for claim, w in windows if float(w["pct"]) >= WALL_PCT]
        usable_at = max((_reset_ms(w) or 0 for _c, w in at_wall), default=0) or None
        out = []
        for claim, window in at_wall:
            cycle = self._cycle(self._windows, _key(label, claim), _reset_ms(window))
            if cycle.get("wall"):
                continue
            event = wall_event(self.node, label, email, claim, float(window["pct"]), _reset_ms(window), usable_at,
                               ts_ms, provider=provider)
            if self._emit(event):
                cycle["wall"] = True
                self._held[label] = claim
                self._write_quietly()
                out.append(event)
        held_by = self._held.get(label)
        if held_by is not None and not at_wall:
            # Named by the window that held it (its figures now: after its reset), if it is still read.
            by_claim = dict(windows)
            claim = held_by if held_by in by_claim else windows[0][0]
            event = usable_event(self.node, label, email, claim, float(by_claim[claim]["pct"]),
                                 _reset_ms(by_claim[claim]), ts_ms, provider=provider)
            if self._emit(event):
                del self._held[label]
                self._write_quietly()
                out.append(event)
        return out

    def _emit(self, event: Dict[str, Any]) -> bool:
        try:
            self.log.append(event)
        except OSError as exc:
            log.error("could not append %s (%s); retried on the next probe", event_name(event), exc.strerror or exc)
            return False
        return True

    def _write_quietly(self) -> None:
        try:
            write_json_atomic(self.path, {"version": LATCH_VERSION, "windows": self._windows, "held": self._held})
        except OSError as exc:
            # The event is durable already; the log reconciles a latch left behind.
            log.warning("cannot write %s: %s", self.path, exc.strerror or exc)

    def snapshot(self) -> Dict[str, List[Dict[str, Any]]]:
        with self._lock:
            return {k: [dict(c) for c in v] for k, v in self._windows.items()}


def _reset_ms(window: Mapping[str, Any]) -> Optional[int]:
    resets = window.get("resetsAt")
    try:
        return parse_iso_ms(resets) if isinstance(resets, str) else None
    except ValueError:
        return None


def _forecast_alarm(forecast: Any, ts_ms: Optional[int]) -> bool:
    if not isinstance(forecast, Mapping) or forecast.get("beforeReset") is not True:
        return False
    wall = forecast.get("wallAt")
    if not isinstance(wall, str):
        return False
    try:
        wall_ms = parse_iso_ms(wall)
    except ValueError:
        return False
    return wall_ms - (now_ms() if ts_ms is None else ts_ms) <= FORECAST_HORIZON_MS


def recent_alerts(event_log: EventLog, limit: int = 20) -> List[Dict[str, Any]]:
    """The newest `limit` alert events of the log (at most 8 days back), newest first."""
    found: List[Dict[str, Any]] = []
    since = now_ms() - RECONCILE_MS
    for event in event_log.iter_newest_first(contains=_NEEDLE):
        ts = event.get("ts")
        try:
            if isinstance(ts, str) and parse_iso_ms(ts) < since:
                break
        except ValueError:
            continue
        if event_name(event) in ALERT_KINDS:
            found.append(event)
            if len(found) >= limit:
                break
    return found

