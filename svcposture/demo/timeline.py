"""The demo's simulated stories: one account's windows at any moment of the demo (docs/first-look.md).

Each demo account follows one story, named by its vendor's demo part
(`vendor.DEMO_TIMELINES`); `state(story, elapsed_s, started)` is its window
state `elapsed_s` into a demo started at `started` (epoch s), negative for
the history the demo seeds before its start. A state is the one the vendors'
demo parts answer from (`vendor.DemoPart`). Pure: no clock, no I/O.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

# The default vendor's active account: its 5-hour window resets FIRST_RESET_S into the demo, after
# the climb to its limit a visitor sees in the first minutes (ok -> degraded -> rejected -> ok).
FIRST_RESET_S = 135.0
WINDOW_S = 5 * 3600.0
# Where the window that resets at FIRST_RESET_S stands when the demo starts, and the steady pace of
# every window after it, as a real account is used: about 65 % when each resets.
AT_START, STEADY_PER_H = 0.55, 0.12


def _seven_reset(started: float) -> float:
    return started + 3 * 86400 + 7 * 3600


def cycle(elapsed_s: float, started: float) -> Dict[str, Any]:
    """The default vendor's active account, as a real account's windows go, with a first act in the
    demo's first minutes: the window it is in at the start (55 %, resetting at 2m15s) climbs to its
    limit and is rejected (ok -> degraded -> rejected), resets (ok), and from then on each 5-hour
    window climbs at a steady pace. Its history before the start is the same window's (so its
    forecast is there from the first probe) and, before that, whole windows each climbing 5 -> 65 %."""
    seven = (0.41 + 0.004 * elapsed_s / 3600.0, "allowed", _seven_reset(started))
    if elapsed_s >= FIRST_RESET_S:
        into = (elapsed_s - FIRST_RESET_S) % WINDOW_S
        five = (0.05 + STEADY_PER_H * into / 3600.0, "allowed", started + elapsed_s - into + WINDOW_S)
    elif elapsed_s >= 0:
        five = _first_act(elapsed_s, started + FIRST_RESET_S)
    else:
        five = _before(elapsed_s, started)
    status = five[1]
    return {"status": status, "claim": "five_hour", "5h": five, "7d": seven}


def _first_act(elapsed_s: float, reset: float) -> Any:
    """The window the demo starts in: 55 % -> 78 % (ok), 82 % -> 97 % (degraded), then past 100 %
    (rejected) until it resets."""
    if elapsed_s < 45.0:
        return AT_START + 0.23 * elapsed_s / 45.0, "allowed", reset
    if elapsed_s < 90.0:
        return 0.82 + 0.15 * (elapsed_s - 45.0) / 45.0, "allowed_warning", reset
    return 1.0 + 0.02 * (elapsed_s - 90.0) / 45.0, "rejected", reset


def _before(elapsed_s: float, started: float) -> Any:
    """Before the demo: the start's window from its own start (5 % -> 55 %), and each 5-hour window
    before it climbing 5 % -> 65 % and resetting."""
    window_start = FIRST_RESET_S - WINDOW_S
    if elapsed_s >= window_start:
        done = (elapsed_s - window_start) / -window_start
        return 0.05 + (AT_START - 0.05) * done, "allowed", started + FIRST_RESET_S
    back = (window_start - elapsed_s) // WINDOW_S  # whole windows between this one and the start's
    ends = window_start - back * WINDOW_S
    phase = 1.0 - (ends - elapsed_s) / WINDOW_S
    return 0.05 + 0.60 * phase, "allowed", started + ends


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
