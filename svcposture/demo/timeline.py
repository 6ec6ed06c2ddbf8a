"""The demo's simulated stories: one account's windows at any moment of the demo (docs/first-look.md).

Each demo account follows one story, named by its vendor's demo part
(`vendor.DEMO_TIMELINES`); `state(story, elapsed_s, started)` is its window
state `elapsed_s` into a demo started at `started` (epoch s), negative for
the history the demo seeds before its start. A state is the one the vendors'
demo parts answer from (`vendor.DemoPart`). Pure: no clock, no I/O.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

CYCLE_S = 180.0  # ok -> degraded -> rejected -> ok once every three minutes


def _seven_reset(started: float) -> float:
    return started + 3 * 86400 + 7 * 3600


def cycle(elapsed_s: float, started: float) -> Dict[str, Any]:
    """The first vendor's active account: ok -> degraded -> rejected -> ok every CYCLE_S, its
    5-hour window resetting as it recovers; before the demo, a real account's day."""
    if elapsed_s < 0:
        return _cycle_before(elapsed_s, started)
    cycle_start = started + (elapsed_s // CYCLE_S) * CYCLE_S
    t = elapsed_s % CYCLE_S
    reset_5h = cycle_start + 135.0 if t < 135.0 else cycle_start + CYCLE_S + 135.0
    if t < 45.0:
        five, status = 0.55 + 0.23 * t / 45.0, "allowed"
    elif t < 90.0:
        five, status = 0.82 + 0.15 * (t - 45.0) / 45.0, "allowed_warning"
    elif t < 135.0:
        five, status = 1.0 + 0.02 * (t - 90.0) / 45.0, "rejected"
    else:
        five, status = 0.05 + 0.3 * (t - 135.0) / 45.0, "allowed"
    seven = 0.41 + 0.004 * elapsed_s / 3600.0
    return {"status": status, "claim": "five_hour", "5h": (five, status, reset_5h),
            "7d": (seven, "allowed", _seven_reset(started))}


def _cycle_before(elapsed_s: float, started: float) -> Dict[str, Any]:
    """The cycling account before the demo started, as a real account is used: each 5 h window
    climbs from 5 % to 65 % and resets, the week climbs 0.4 % an hour (the live three-minute cycle
    would draw a day of history as a comb of ticks, and leave no forecast)."""
    window = 5 * 3600.0
    phase = (elapsed_s % window) / window
    five = 0.05 + 0.60 * phase
    return {"status": "allowed", "claim": "five_hour",
            "5h": (five, "allowed", started + elapsed_s + (1.0 - phase) * window),
            "7d": (0.41 + 0.004 * elapsed_s / 3600.0, "allowed", _seven_reset(started))}


def wall(elapsed_s: float, started: float) -> Dict[str, Any]:
    """Climbing 30 %/h, from 40 % at the start: the wall (in 2 h) beats the reset (in 3 h)."""
    hours = elapsed_s / 3600.0
    return {"status": "allowed", "claim": "five_hour", "5h": (0.40 + 0.30 * hours, "allowed", started + 3 * 3600),
            "7d": (0.33 + 0.002 * hours, "allowed", _seven_reset(started) - 86400)}


def weekly(elapsed_s: float, started: float) -> Dict[str, Any]:
    """Near its weekly limit and steady: about 91 % when the week resets."""
    return {"status": "allowed_warning", "claim": "seven_day", "5h": (0.30, "allowed", started + 2 * 3600),
            "7d": (0.91, "allowed_warning", _seven_reset(started) + 86400)}


def pace(elapsed_s: float, started: float) -> Dict[str, Any]:
    """A pace of its own, with no status words: the 5 h window climbing 12 %/h from 35 %, the week at 62 %."""
    hours = elapsed_s / 3600.0
    five = min(1.2, 0.35 + 0.12 * hours)
    return {"status": None, "claim": None, "5h": (five, None, started + 4 * 3600),
            "7d": (0.62 + 0.001 * hours, None, _seven_reset(started) + 2 * 86400)}


STORIES: Dict[str, Callable[[float, float], Dict[str, Any]]] = {
    "cycle": cycle, "wall": wall, "weekly": weekly, "pace": pace}


def state(story: str, elapsed_s: float, started: float) -> Dict[str, Any]:
    """The window state of an account following `story` (an unknown one follows `pace`)."""
    return STORIES.get(story, pace)(elapsed_s, started)
