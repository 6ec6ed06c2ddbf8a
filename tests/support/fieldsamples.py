"""The field samples of tests/fixtures/field (see its SOURCES.md), loaded and replayed at a chosen time.

A captured reply or log line carries the instants of the day it was captured.
Replayed in a live monitor, those instants would lie in the past (a window
whose reset has passed says nothing any more), so `shifted_reply` and
`shifted_lines` move every absolute instant (`reset_at`, `resets_at`, the
line's `timestamp`) by the same amount, keeping every length and every
relative delay as captured.
"""
from __future__ import annotations

import calendar
import json
import time
from pathlib import Path
from typing import Any, List, Optional, Tuple

FIELD = Path(__file__).resolve().parent.parent / "fixtures" / "field"
# The keys whose numbers are epoch seconds in the vendors' replies and logs.
EPOCH_KEYS = ("reset_at", "resets_at")


def field_path(name: str) -> Path:
    return FIELD / name


def reply(name: str) -> Any:
    """A captured reply body (JSON) as captured."""
    return json.loads(field_path(name).read_text())


def lines(name: str) -> List[Any]:
    """The JSON lines of a captured session log, as captured."""
    return [json.loads(line) for line in field_path(name).read_text().splitlines() if line.strip()]


def stamp_s(text: str) -> float:
    """Epoch seconds of a `...Z` ISO instant with or without a fraction."""
    head, _, frac = text.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)


def iso(seconds: float) -> str:
    """Epoch seconds as the monitor writes them: UTC, milliseconds truncated."""
    ms = int(seconds * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


def _shift(obj: Any, by: float) -> Any:
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if key in EPOCH_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = int(value + by)
            elif key == "timestamp" and isinstance(value, str):
                out[key] = iso(stamp_s(value) + by)
            else:
                out[key] = _shift(value, by)
        return out
    if isinstance(obj, list):
        return [_shift(v, by) for v in obj]
    return obj


def shifted_reply(name: str, by: int) -> Any:
    """The reply with its absolute instants moved by `by` whole seconds."""
    return _shift(reply(name), by)


def shifted_lines(name: str, last_at: float) -> Tuple[List[str], float]:
    """The log's lines with its newest line stamped `last_at`; (lines as text, the shift applied)."""
    raw = lines(name)
    by = int(last_at - max(stamp_s(line["timestamp"]) for line in raw))
    return [json.dumps(_shift(line, by), separators=(",", ":")) for line in raw], by


def earliest_epoch(obj: Any) -> float:
    """The earliest absolute instant (epoch s) in a reply, to shift it into the future."""
    found: List[float] = []

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            for key, value in o.items():
                if key in EPOCH_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool):
                    found.append(float(value))
                else:
                    walk(value)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(obj)
    return min(found) if found else time.time()


# ---------------------------------------------------------------- the key vendors' instants

# Keys whose values are instants in the key vendors' replies: epoch milliseconds, and ISO texts (a
# date alone, as Copilot sends one, moves by whole days and stays a date).
MS_KEYS = ("nextResetTime",)
ISO_KEYS = ("resetTime", "reset_time", "resetAt", "reset_at", "quota_reset_date_utc", "quota_reset_date",
            "limited_user_reset_date")


def _text_s(text: str) -> float:
    """Epoch seconds of an ISO instant (any fraction, `Z`) or of a date alone (midnight UTC)."""
    return stamp_s(text if "T" in text else text + "T00:00:00Z")


def _moved_text(text: str, by: float) -> str:
    """An instant's text moved by `by` seconds, spelled as it was: a date stays a date, a fraction of
    nine digits keeps nine."""
    if "T" not in text:
        return time.strftime("%Y-%m-%d", time.gmtime(_text_s(text) + -(-by // 86400) * 86400))
    head, _, frac = text.rstrip("Z").partition(".")
    moved = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M:%S"))
                                                             + int(by)))
    return moved + ("." + frac if frac else "") + "Z"


def plan_instants(obj: Any, by: float = 0.0, found: Optional[List[float]] = None) -> Any:
    """A key vendor's reply with its instants moved by `by` seconds; with `found`, each instant's
    epoch seconds (as it was) appended to it."""
    if isinstance(obj, list):
        return [plan_instants(v, by, found) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for key, value in obj.items():
        if key in MS_KEYS and isinstance(value, int) and not isinstance(value, bool):
            out[key] = value + int(by * 1000)
            if found is not None:
                found.append(value / 1000.0)
        elif key in ISO_KEYS and isinstance(value, str) and value:
            out[key] = _moved_text(value, by)
            if found is not None:
                found.append(_text_s(value))
        else:
            out[key] = plan_instants(value, by, found)
    return out


def plan_reply_ahead(name: str, now_s: float, lead_s: float = 3600.0) -> Any:
    """A key vendor's captured reply with every instant moved so that its earliest is `lead_s` ahead of
    `now_s` (a reply without one as captured)."""
    body = reply(name)
    found: List[float] = []
    plan_instants(body, 0.0, found)
    return plan_instants(body, now_s + lead_s - min(found)) if found else body
