"""The demo's simulated fleet: what /fleet shows in `svc-monitor demo`.

A demo node is no cluster member (it has no roster, no anchor), so the real
fleet read would answer "0 hosts" and an anchor error. The demo gives its
monitor this source instead (MonitorApp.fleet_source): six hosts in every
state a fleet has (live, stale, missing, unknown), each with its accounts
(docs/fleet.md: the same login has the same key on every host, whatever its
label there), windows moving with the demo's clock, and wall forecasts, one of
them before its reset. The report has the shape of `svc-cluster status
--json` with `source` "demo", so the page draws it as it draws a real one.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from .._time import iso_from_epoch, iso_now, parse_iso_ms
from ..accountkey import account_key
from ..settings import DEFAULT_INTERVAL_MS
from ..vendors import DEFAULT_PROVIDER

HOUR = 3600.0
PROBE_INTERVAL_MS = 10000
# The fleet's logins, all of the default vendor (whose labels carry no prefix): the first three are
# its demo accounts on this node, and one more: staging-1 calls a different login "acct1", which
# only its key tells apart.
EMAILS = {"acct1": "ada@demo.invalid", "acct2": "grace@demo.invalid", "acct3": "linus@demo.invalid",
          "staging": "alan@demo.invalid"}


def _account(label: str, login: Optional[str], status: str, five: float, seven: float, now: float, *,
             five_reset_h: float, seven_reset_h: float, wall_h: Optional[float], age_s: float,
             active: bool = True) -> Dict[str, Any]:
    """One account entry of a host's heartbeat; `login` names its email in EMAILS (None: no email known)."""
    return {"key": account_key(DEFAULT_PROVIDER, EMAILS.get(login or "")), "label": label, "provider": DEFAULT_PROVIDER,
            "status": status, "active": active, "five_hour_pct": round(five, 1), "seven_day_pct": round(seven, 1),
            "five_hour_resets_at": iso_from_epoch(now + five_reset_h * HOUR),
            "seven_day_resets_at": iso_from_epoch(now + seven_reset_h * HOUR),
            "wall_at": iso_from_epoch(now + wall_h * HOUR) if wall_h is not None else None,
            "probed_at": iso_from_epoch(now - age_s)}


def _host(name: str, state: str, age_s: Optional[float], accounts: List[Dict[str, Any]],
          stale: bool = False) -> Dict[str, Any]:
    """A status row: the active entry as the `account` block (with what a reader derives), and every entry."""
    active = next((a for a in accounts if a["active"]), None)
    block = None
    if active is not None:
        block = {k: v for k, v in active.items() if k not in ("provider", "active")}
        block.update(probe_interval_ms=PROBE_INTERVAL_MS, age_s=round(age_s or 0.0, 1) if age_s else None,
                     stale=stale)
    return {"host": name, "state": state, "ageS": age_s, "quota": None, "account": block, "accounts": accounts}


def simulated_report(started: float, now: float) -> Dict[str, Any]:
    """The fleet `now` (epoch s) into a demo started at `started`."""
    phase = ((now - started) % 600.0) / 600.0  # the fleet's numbers drift over ten minutes, then repeat
    acct1 = dict(five_reset_h=3.2, seven_reset_h=70.0, wall_h=None)
    acct2 = dict(five_reset_h=2.5, seven_reset_h=40.0)
    acct3 = dict(five_reset_h=4.1, seven_reset_h=30.0, wall_h=52.0)
    hosts: List[Dict[str, Any]] = [
        _host("build-01", "live", 12.0, [
            _account("acct1", "acct1", "ok", 38.0 + 20.0 * phase, 44.0, now, age_s=8.0, **acct1),
            _account("acct3", "acct3", "ok", 22.0, 91.0, now, age_s=8.0, active=False, **acct3)]),
        _host("build-02", "live", 25.0, [
            _account("acct2", "acct2", "degraded", 84.0 + 10.0 * phase, 61.0, now,
                     wall_h=0.5 + 0.4 * (1.0 - phase), age_s=15.0, **acct2),
            _account("acct1", "acct1", "ok", 38.0 + 20.0 * phase, 44.0, now, age_s=15.0, active=False, **acct1)]),
        _host("ci-runner-3", "live", 40.0, [
            _account("acct3", "acct3", "ok", 22.0, 91.0, now, age_s=30.0, **acct3),
            _account("scratch", None, "ok", 5.0, 12.0, now, five_reset_h=1.0, seven_reset_h=100.0, wall_h=None,
                     age_s=30.0, active=False)]),
        _host("gpu-box", "stale", 420.0, [
            _account("acct2", "acct2", "ok", 55.0, 58.0, now, wall_h=None, age_s=410.0, **acct2)], stale=True),
        _host("laptop-ada", "missing", 7200.0, []),
        _host("staging-1", "live", 5.0, [
            _account("acct1", "staging", "rejected", 100.0, 48.0, now, five_reset_h=0.6, seven_reset_h=70.0,
                     wall_h=0.0, age_s=4.0)]),
    ]
    return {"source": "demo", "anchor": "simulated fleet (svc-monitor demo)", "hosts": hosts,
            "unlisted": [{"host": "old-vm", "ageS": 86400.0}], "generatedAt": iso_now()}


# A real fleet's heartbeats age and its resets come nearer; the simulated one's do too, over a
# ten-minute loop (then they start again), so a visitor sees ages and countdowns move. A live host
# beats as a real one does, every publish interval: its heartbeat (and the readings it carries)
# ages up to BEAT_S and is new again, so it stays live; a stale or missing host only ages.
LOOP_S = 600.0
BEAT_S = DEFAULT_INTERVAL_MS / 1000.0
_AGES = ("ageS", "age_s")
_READ_AT = ("probed_at",)
_INSTANTS = ("five_hour_resets_at", "seven_day_resets_at", "wall_at")


def _moved(value: Any, seconds: float, aged: float) -> Any:
    """`value` with every instant `seconds` earlier, and every age (and reading time) `aged` older."""
    if isinstance(value, list):
        return [_moved(item, seconds, aged) for item in value]
    if not isinstance(value, dict):
        return value
    out: Dict[str, Any] = {}
    for key, item in value.items():
        if key in _AGES and isinstance(item, (int, float)) and not isinstance(item, bool):
            out[key] = round(item + aged, 1)
        elif key in _READ_AT and isinstance(item, str):
            out[key] = iso_from_epoch(parse_iso_ms(item) / 1000.0 - aged)
        elif key in _INSTANTS and isinstance(item, str):
            out[key] = iso_from_epoch(parse_iso_ms(item) / 1000.0 - seconds)
        else:
            out[key] = _moved(item, seconds, aged)
    return out


def moving_report(started: float, now: float) -> Dict[str, Any]:
    """simulated_report with its ages and countdowns moving with the clock, its live hosts beating."""
    report = simulated_report(started, now)
    seconds = (now - started) % LOOP_S
    report["hosts"] = [_moved(host, seconds, seconds % BEAT_S if host.get("state") == "live" else seconds)
                       for host in report.get("hosts") or []]
    report["unlisted"] = _moved(report.get("unlisted"), seconds, seconds)
    return report


def fleet_source(started: float, clock: Callable[[], float]) -> Callable[[], Dict[str, Any]]:
    """A MonitorApp.fleet_source over the demo's clock."""
    return lambda: moving_report(started, clock())
