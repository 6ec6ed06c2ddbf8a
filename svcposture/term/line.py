"""One line of posture text: the HUD strip and the agent's status line, from one formatter.

Both take the posture body (/api/accounts) and, when the monitor has one, the
trajectory body (/api/trajectory, docs/trajectory.md) and return one line of text
with no control character in it. The pieces are shared: a window's pct and
time to reset, the wall forecast when it beats the reset, the sibling with
headroom, the staleness of an old probe (docs/posture.md) and the status colours. The
HUD spells things out (node, email, local clock time of each reset); the
status line is the compact form docs/monitor.md shows.

Pure: the caller passes `now` (epoch ms) and the staleness limit, and
decides about colour. Only the local clock time reads the process's time zone.
"""
from __future__ import annotations

import time

from .._names import HEALTH_OK, NODE_STATUSES, REFUSED
from .._text import duration, finite_number, is_int, pct_text, printable, read_pct
from ..settings import DEFAULT_INTERVAL_S as DEFAULT_PROBE_INTERVAL_S, probe_interval_s
from ..steering.healthwords import SHORT as HEALTH_SHORT, health_of, health_sentence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Tuple

# A value older than this many probe intervals is shown as stale (docs/posture.md).
STALE_INTERVALS = 2
MISSING = "--"
NOT_RUNNING = "svc: monitor not running"
UNAVAILABLE_WHY = ("no usable account in the accounts env file, or probing is off "
                   "(svc-monitor init creates the file)")
# A status line has room for one short line; a hostile monitor must not fill the agent's screen.
MAX_STATUS_CHARS = 160
MAX_HUD_CHARS = 400
MAX_LABEL_CHARS = 32

COLOURS = {"ok": "32", "degraded": "33", "rejected": "1;31", "error": "35", "unknown": "90",
           "unavailable": "90", "stale": "90"}
_WINDOWS = (("5h", "fiveHour"), ("7d", "sevenDay"))


# ---------------------------------------------------------------- small pieces

def local_clock(at_ms: int, now_ms: int) -> str:
    """The local wall-clock time of an instant: `14:30` within a day, else `Mon 14:30`."""
    try:
        stamp = time.localtime(at_ms / 1000.0)
    except (OverflowError, OSError, ValueError):
        return ""
    return time.strftime("%H:%M" if 0 <= at_ms - now_ms < 86_400_000 else "%a %H:%M", stamp)


def until(at_ms: int, now_ms: int) -> str:
    """How long until an instant and its local clock time: `1m 40s (14:32)`, `now (14:32)`."""
    clock = local_clock(at_ms, now_ms)
    return duration(at_ms - now_ms) + (" (%s)" % clock if clock else "")


def stale_after_ms(environ: "Mapping[str, str]") -> int:
    """How old a reading is before it shows as stale: STALE_INTERVALS of the monitor's probe
    interval, which a client reads from its own environment by the monitor's rule."""
    return int(STALE_INTERVALS * probe_interval_s(environ) * 1000)


def paint(text: str, status: str, colour: bool) -> str:
    # C0, DEL and C1 controls from a hostile or broken monitor must never reach the
    # terminal: an escape sequence in a label could rewrite the operator's screen.
    text = printable(text)
    if not colour:
        return text
    return "\x1b[%sm%s\x1b[0m" % (COLOURS.get(status, "0"), text)


def _number(value: "Any") -> "Optional[float]":
    number = finite_number(value)
    return None if number is None else float(number)


def _instant_ms(value: "Any") -> "Optional[int]":
    """Epoch ms of an ISO-8601 string; None for anything else."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    fast = canonical_ms(value)
    if fast is not None:
        return fast
    # Any other spelling goes through the package's full parser. Imported here:
    # datetime and strptime would cost a status line render more than its HTTP.
    from .._time import parse_iso_ms
    try:
        return parse_iso_ms(value)
    except ValueError:
        return None


_DIGITS = frozenset("0123456789")
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def canonical_ms(text: str) -> "Optional[int]":
    """Epoch ms of the package's own timestamp form `YYYY-MM-DDTHH:MM:SS.mmmZ` (every
    body the monitor serves), by arithmetic; None for any other text."""
    if len(text) != 24 or text[4] != "-" or text[7] != "-" or text[10] != "T" or text[13] != ":" \
            or text[16] != ":" or text[19] != "." or text[23] != "Z":
        return None
    fields = (text[0:4], text[5:7], text[8:10], text[11:13], text[14:16], text[17:19], text[20:23])
    if not all(_DIGITS.issuperset(f) for f in fields):
        return None
    year, month, day, hour, minute, second, milli = (int(f) for f in fields)
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not (1 <= year and 1 <= month <= 12 and hour < 24 and minute < 60 and second < 60):
        return None
    if not 1 <= day <= _MONTH_DAYS[month - 1] + (1 if month == 2 and leap else 0):
        return None
    # Days from the civil date (H. Hinnant's algorithm), epoch 1970-01-01.
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + milli


def _word(value: "Any", limit: int = MAX_LABEL_CHARS) -> str:
    text = printable(value) if isinstance(value, str) else "?"
    return text if len(text) <= limit else text[:limit - 1] + "~"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---------------------------------------------------------------- the body, read defensively

def _window(view: "Any") -> "Optional[Tuple[Optional[float], Optional[int]]]":
    """(pct, resetsAt ms) of a `{pct, resetsAt, status}` window, None when there is none."""
    if not isinstance(view, dict):
        return None
    return read_pct(view.get("pct")), _instant_ms(view.get("resetsAt"))


def forecast_walls(trajectory: "Any", label: "Any") -> "Dict[str, int]":
    """{"fiveHour"|"sevenDay": wallAt ms} of the windows of account `label` whose
    forecast beats the reset (the trajectory's `beforeReset`); empty without a usable body."""
    if not isinstance(trajectory, dict) or not isinstance(label, str):
        return {}
    accounts = trajectory.get("accounts")
    if not isinstance(accounts, list):
        return {}
    for entry in accounts[:256]:
        if isinstance(entry, dict) and entry.get("label") == label:
            break
    else:
        return {}
    walls: "Dict[str, int]" = {}
    for _short, field in _WINDOWS:
        view = entry.get(field)
        cast = view.get("forecast") if isinstance(view, dict) else None
        if not isinstance(cast, dict) or cast.get("beforeReset") is not True:
            continue
        wall = _instant_ms(cast.get("wallAt"))
        if wall is not None:
            walls[field] = wall
    return walls


def stale_age(body: "Mapping[str, Any]", now: int, limit_ms: int) -> "Optional[int]":
    """How old the probe behind `body` is, when that is more than `limit_ms`; else None."""
    probed = _number(body.get("probedAt"))
    if probed is None:
        return None
    age = now - int(probed)
    return age if age > limit_ms else None


def _sibling(body: "Mapping[str, Any]") -> "Optional[Dict[str, Any]]":
    sibling = body.get("siblingWithHeadroom")
    if isinstance(sibling, dict) and isinstance(sibling.get("label"), str) and sibling["label"]:
        return sibling
    return None


def _unread_others(advice: "Mapping[str, Any]") -> "Optional[str]":
    """`acct2: token refused; ...` for the other accounts the advice says were not read; None
    when every one was (then "headroom" may be said of them)."""
    ranked = advice.get("ranked") if isinstance(advice.get("ranked"), list) else []
    found = ["%s: %s" % (_word(r["label"]), HEALTH_SHORT[r["health"]]) for r in ranked[:16]
             if isinstance(r, dict) and isinstance(r.get("label"), str) and r.get("health") in HEALTH_SHORT]
    return "; ".join(found) if found else None


def _text_of(entry: "Any", key: str, limit: int = 300) -> "Optional[str]":
    value = entry.get(key) if isinstance(entry, dict) else None
    return _word(value, limit) if isinstance(value, str) and value else None


def _advice_until(advice: "Mapping[str, Any]", wait: "Optional[int]") -> "Optional[int]":
    """When the advice's wait ends: its waitUntil, else waitS from when it was generated."""
    until = _instant_ms(advice.get("waitUntil"))
    if until is None and wait is not None:
        generated = _instant_ms(advice.get("generatedAt"))
        until = generated + wait * 1000 if generated is not None else None
    return until


def advised(body: "Mapping[str, Any]", advice: "Any") -> "Optional[Dict[str, Any]]":
    """{word, label, email, wait, fromAdvice, note, fix, unread} of the monitor's /api/advice body
    when it is about this posture (same probe, same active account): `note` and `fix` say what
    is wrong with the active account and what to do, `unread` the other accounts that were not
    read; else, from a monitor without it, siblingWithHeadroom under the word `sibling`; None
    when neither names anything."""
    active = body.get("active") if isinstance(body.get("active"), dict) else None
    if isinstance(advice, dict) and advice.get("probedAt") == body.get("probedAt") \
            and advice.get("advice") in ("stay", "wait", "switch", "none") \
            and isinstance(advice.get("active"), (dict, type(None))) \
            and (advice.get("active") or {}).get("label") == (active or {}).get("label"):
        to = advice.get("to") if isinstance(advice.get("to"), dict) else {}
        wait = advice.get("waitS")
        label = to.get("label") if isinstance(to.get("label"), str) and to.get("label") else None
        wait = wait if isinstance(wait, int) and not isinstance(wait, bool) else None
        return {"word": advice["advice"], "label": label, "email": to.get("email"), "fromAdvice": True,
                "active": (active or {}).get("label"), "wait": wait, "until": _advice_until(advice, wait),
                "note": _text_of(advice.get("active"), "note"), "fix": _text_of(advice.get("active"), "fix"),
                "unread": _unread_others(advice)}
    sibling = _sibling(body)
    if sibling is None:
        return None
    return {"word": "sibling", "label": sibling["label"], "email": sibling.get("email"), "wait": None,
            "until": None, "fromAdvice": False}


def _advice_text(said: "Optional[Mapping[str, Any]]", hud: bool, now: "Optional[int]" = None,
                 email: bool = True) -> "Optional[str]":
    """The advice in the words the dashboard uses, short: `switch to acct3`, `wait 30s for the
    reset`, `no account has headroom until 02:20`, and on the HUD `stay on acct1`. A wait counts
    down to the advice's waitUntil, so it moves between readings as the pages' does."""
    if said is None:
        return None
    word, label = said["word"], said["label"]
    if word == "stay" and hud and said["fromAdvice"] and said.get("active"):
        return "stay on %s" % _word(said["active"])
    if word in ("switch", "sibling") and label:
        if not hud:
            return "next %s" % _word(label)
        address = said.get("email") if email else None
        return "switch to %s%s" % (_word(label), " <%s>" % _word(address, 96) if isinstance(address, str) and address
                                   else "")
    until, wait = said.get("until"), said["wait"]
    if until is None and wait is not None and now is not None:
        until = now + wait * 1000
    if word == "wait":
        return "wait %s for the reset" % duration(until - now) if until is not None and now is not None and \
            until > now else "wait for the reset"
    if word == "none":
        if said.get("unread"):
            # "Headroom" is said only of accounts that were read.
            return "no other account can take over (%s)" % said["unread"]
        if said["fromAdvice"] and until is not None and now is not None:
            clock = local_clock(until, now)
            return "no account has headroom until %s" % clock if clock else "no account has headroom"
        return "no sibling with headroom"
    return None


def _ill(active: "Optional[Mapping[str, Any]]") -> "Optional[str]":
    """The active account's health when it is not `ok` (it was not read, or not lately), else None."""
    if not active:
        return None
    health = health_of(active)
    return None if health == HEALTH_OK else health


def _ill_words(active: "Mapping[str, Any]", health: str) -> str:
    """`token refused (HTTP 401)`, `not read yet`: the active account's health in a few words."""
    error = active.get("error") if isinstance(active.get("error"), dict) else {}
    status = error.get("httpStatus")
    http = " (HTTP %d)" % status if health == REFUSED and is_int(status) else ""
    return HEALTH_SHORT.get(health, health) + http


def wait_until_ms(advice: "Any", now: int) -> "Optional[int]":
    """When the advice's wait ends (its waitUntil, so every countdown ticks to the same instant),
    else waitS from `now`; None without either."""
    if not isinstance(advice, dict):
        return None
    wait = advice.get("waitS")
    wait = wait if isinstance(wait, int) and not isinstance(wait, bool) else None
    until = _advice_until(advice, wait)
    return until if until is not None or wait is None else now + wait * 1000


def _used_text(body: "Any", label: str) -> str:
    """`acct2, at 43%`: an account and its fuller window, from the posture."""
    accounts = body.get("accounts") if isinstance(body, dict) else None
    for view in accounts if isinstance(accounts, list) else []:
        if not isinstance(view, dict) or view.get("label") != label:
            continue
        pcts = [parsed[0] for parsed in (_window(view.get(field)) for _short, field in _WINDOWS)
                if parsed is not None and parsed[0] is not None]
        if pcts:
            return "%s, at %s" % (_word(label), pct_text(max(pcts)))
    return _word(label)


def advice_words(advice: "Any", body: "Any", now: int) -> str:
    """The guard's hold line's `; advice: ...`: what the advice names (switch to whom and how full
    it is, how long to wait and the alternative, or that nothing has headroom and until when);
    empty for anything else."""
    if not isinstance(advice, dict):
        return ""
    word, to, ranked = advice.get("advice"), advice.get("to"), advice.get("ranked")
    first = ranked[0] if isinstance(ranked, list) and ranked and isinstance(ranked[0], dict) else None
    other = first.get("label") if first is not None and isinstance(first.get("label"), str) else None
    until = wait_until_ms(advice, now)
    if word == "switch" and isinstance(to, dict) and isinstance(to.get("label"), str):
        return "; advice: switch to %s" % _used_text(body, to["label"])
    if word == "wait" and until is not None:
        return "; advice: wait %s for the reset%s" % (duration(until - now),
                                                      ", or switch to %s" % _used_text(body, other) if other else "")
    if word == "none":
        unread = _unread_others(advice)
        if unread:
            # "Headroom" is said only of accounts that were read.
            return "; advice: none, no other account can take over (%s)" % unread
        reserve = advice.get("reservePct")
        below = " below the %s reserve" % pct_text(reserve) if isinstance(reserve, int) and reserve > 0 else ""
        return "; advice: none, no other account has headroom%s%s" % (
            below, " until %s" % local_clock(until, now) if until is not None else "")
    return ""


def _acting(said: "Optional[Mapping[str, Any]]") -> bool:
    """Whether the advice asks for something even while the status is ok."""
    return said is not None and said["fromAdvice"] and said["word"] in ("switch", "wait")


def _error_kind(body: "Mapping[str, Any]", active: "Optional[Mapping[str, Any]]") -> "Optional[str]":
    error = body.get("error") or (active or {}).get("error")
    if isinstance(error, dict) and isinstance(error.get("kind"), str):
        return _word(error["kind"], 16)
    return None


def _parts(body: "Any") -> "Tuple[str, str, Optional[Dict[str, Any]]]":
    """(node, status, active) of a posture body; status `unavailable` for the disabled body."""
    node = _word(body.get("node") or "?", 64)
    if body.get("available") is not True:
        return node, "unavailable", None
    status = body.get("status")
    status = status if isinstance(status, str) and status in NODE_STATUSES else "unknown"
    active = body.get("active") if isinstance(body.get("active"), dict) else None
    return node, status, active


# ---------------------------------------------------------------- the HUD strip

def _hud_window(short: str, view: "Any", wall: "Optional[int]", now: int, clocks: bool = True) -> str:
    parsed = _window(view)
    if parsed is None:
        return "%s %s" % (short, MISSING)
    pct, resets = parsed
    text = "%s %s" % (short, pct_text(pct, MISSING))
    if resets is not None:
        clock = local_clock(resets, now) if clocks else ""
        text += " (%s%s)" % (duration(resets - now), ", " + clock if clock else "")
    if wall is not None and (resets is None or wall < resets):
        text += " -> 100%% %s" % ("now" if wall <= now else "in " + duration(wall - now))
    return text


# What the HUD leaves out, in this order, until its line fits the terminal: the email, then the
# clock times beside the countdowns (the countdowns say the same).
HUD_FITS = ({"email": True, "clocks": True}, {"email": False, "clocks": True}, {"email": False, "clocks": False})


def fitted(build: "Any", width: "Optional[int]", limit: int) -> str:
    """The first of `build(email=..., clocks=...)`'s lines (HUD_FITS order) that fits `width`
    columns, else the shortest clipped to it; `limit` when the width is not known."""
    text = ""
    for fit in HUD_FITS:
        text = build(**fit)
        if width is None or len(text) <= width:
            break
    return _clip(text, min(limit, width) if width is not None else limit)


def hud_line(body: "Any", trajectory: "Any" = None, *, colour: bool = False, now: "Optional[int]" = None,
             stale_ms: "Optional[int]" = None, advice: "Any" = None, width: "Optional[int]" = None) -> str:
    """The HUD strip: `svc NODE | LABEL <EMAIL> | STATUS | 5h PCT (LEFT, CLOCK) | 7d ... | ...`,
    at most `width` columns (the email goes first, then the clock times)."""
    now = int(time.time() * 1000) if now is None else now
    stale_ms = int(STALE_INTERVALS * DEFAULT_PROBE_INTERVAL_S * 1000) if stale_ms is None else stale_ms
    if not isinstance(body, dict):
        return "svc: no posture"
    node, status, active = _parts(body)
    if status == "unavailable":
        text = "svc %s: posture unavailable: %s" % (node, UNAVAILABLE_WHY)
        return paint(_clip(text, min(MAX_HUD_CHARS, width or MAX_HUD_CHARS)), status, colour)
    age = stale_age(body, now, stale_ms)

    def build(email: bool, clocks: bool) -> str:
        return " | ".join(_hud_parts(body, trajectory, advice, now, stale_ms, email, clocks))
    return paint(fitted(build, width, MAX_HUD_CHARS), "stale" if age is not None else status, colour)


def _hud_parts(body: "Mapping[str, Any]", trajectory: "Any", advice: "Any", now: int, stale_ms: int,
               email: bool, clocks: bool) -> "List[str]":
    node, status, active = _parts(body)
    parts = ["svc %s" % node]
    if active:
        who = _word(active.get("label"))
        if email and isinstance(active.get("email"), str) and active["email"]:
            who += " <%s>" % _word(active["email"], 96)
        parts.append(who)
    else:
        parts.append("no active account")
    ill = _ill(active)
    parts.append(_ill_words(active, ill).upper() if active and ill else status.upper())
    if active:
        walls = forecast_walls(trajectory, active.get("label"))
        parts += _extras_instead(active) or [_hud_window(short, active.get(field), walls.get(field), now, clocks)
                                             for short, field in _WINDOWS]
    said = advised(body, advice)
    text = _advice_text(said, hud=True, now=now, email=email)
    if active and ill:
        # What is wrong, and the fix of a refused token, as the advice says it; then what it names.
        parts.append(said["note"] if said and said.get("note") else
                     str(health_sentence(active, ill, now)))
        if text and said and said["fromAdvice"]:
            parts.append("advice: %s" % text)
    elif status == "rejected":
        parts.append("EXHAUSTED -> %s" % text if text and said and said["word"] not in ("none", "stay")
                     else "EXHAUSTED, %s" % (text if text and said and said["word"] == "none"
                                             else "no sibling with headroom"))
    elif text and said and said["fromAdvice"]:
        # The monitor's advice, always: the same sentence the dashboard opens with, short.
        parts.append("advice: %s" % text)
    kind = _error_kind(body, active)
    if kind and not ill:
        parts.append("error: %s" % kind)
    age = stale_age(body, now, stale_ms)
    if age is not None:
        # The threshold in the words: a reading is overdue after STALE_INTERVALS probe intervals.
        parts.append("no new reading for %s (readings every %s)" % (duration(age), duration(stale_ms / STALE_INTERVALS)))
    return parts


# ---------------------------------------------------------------- the agent's status line

def _status_window(short: str, view: "Any", now: int) -> str:
    parsed = _window(view)
    if parsed is None:
        return "%s %s" % (short, MISSING)
    pct, resets = parsed
    text = "%s %s" % (short, pct_text(pct, MISSING))
    return text + (" " + duration(resets - now) if resets is not None else "")


def status_line(body: "Any", trajectory: "Any" = None, *, colour: bool = False, now: "Optional[int]" = None,
                stale_ms: "Optional[int]" = None, advice: "Any" = None) -> str:
    """docs/monitor.md: `acct1 5h 61% 1h 2m | 7d 41% 3d 6h | 100% in 48m! | next acct2`."""
    now = int(time.time() * 1000) if now is None else now
    stale_ms = int(STALE_INTERVALS * DEFAULT_PROBE_INTERVAL_S * 1000) if stale_ms is None else stale_ms
    if not isinstance(body, dict):
        return NOT_RUNNING
    _node, status, active = _parts(body)
    if status == "unavailable":
        return paint("svc: no usable account (svc-monitor init)", status, colour)
    parts: "List[str]" = []
    ill = _ill(active)
    said = advised(body, advice)
    if active and ill:
        # Its figures (kept, or none) say nothing now: what is wrong, then the fix or the advice.
        parts.append("%s %s" % (_word(active.get("label")), _ill_words(active, ill)))
        if said and said["word"] == "switch" and said["label"]:
            parts.append("next %s" % _word(said["label"]))
        elif said and said.get("fix"):
            parts.append("fix: %s" % said["fix"])
        elif said and said.get("unread"):
            parts.append("no other account can take over")
        return paint(_clip(" | ".join(parts), MAX_STATUS_CHARS), status, colour)
    if active:
        windows = _extras_instead(active) or [_status_window(short, active.get(field), now)
                                              for short, field in _WINDOWS]
        parts.append("%s %s" % (_word(active.get("label")), windows[0]))
        parts += windows[1:]
        walls = forecast_walls(trajectory, active.get("label"))
        beating = [wall for field, wall in walls.items()
                   if _beats_reset(wall, active.get(field))]
        if beating:
            wall = min(beating)
            parts.append("100%% %s!" % ("now" if wall <= now else "in " + duration(wall - now)))
    elif status == "error":
        # A node-level error: the sensor is broken, no account is known.
        kind = _error_kind(body, None)
        parts.append("svc: probe error" + (" (%s)" % kind if kind else ""))
    else:
        parts.append("svc: no active account")
    if active and status in ("rejected", "error"):
        kind = _error_kind(body, active) if status == "error" else None
        parts.append(status + (" (%s)" % kind if kind else ""))
    text = _advice_text(said, hud=False, now=now)
    if text and (status != "ok" or _acting(said)):
        parts.append(text)
    elif status == "rejected":
        parts.append("no sibling with headroom")
    age = stale_age(body, now, stale_ms)
    if age is not None:
        parts.append("stale %s" % duration(age))
    return paint(_clip(" | ".join(parts), MAX_STATUS_CHARS), "stale" if age is not None else status, colour)


def _beats_reset(wall: int, view: "Any") -> bool:
    parsed = _window(view)
    return parsed is None or parsed[1] is None or wall < parsed[1]


def local_line(payload: "Any", *, colour: bool = False, now: "Optional[int]" = None) -> "Optional[str]":
    """The agent's own `rate_limits` (stdin payload) as a status line marked `(local)`;
    None when the payload carries no readable window.

    `rate_limits.five_hour` / `.seven_day` are `{used_percentage, resets_at}`,
    `resets_at` in epoch seconds (an ISO string is accepted too)."""
    now = int(time.time() * 1000) if now is None else now
    limits = payload.get("rate_limits") if isinstance(payload, dict) else None
    if not isinstance(limits, dict):
        return None
    parts: "List[str]" = []
    worst = -1.0
    for short, key in (("5h", "five_hour"), ("7d", "seven_day")):
        window = limits.get(key)
        if not isinstance(window, dict):
            continue
        pct = _number(window.get("used_percentage"))
        if pct is not None:
            # The agent's own number, unchecked: none below 0; past 100 it is written as every
            # surface writes it (`100%+`).
            pct = max(0.0, pct)
        resets = _local_reset_ms(window.get("resets_at"))
        if pct is None and resets is None:
            continue
        worst = max(worst, pct if pct is not None else -1.0)
        view = {"pct": pct, "resetsAt": None}
        text = _status_window(short, view, now)
        parts.append(text + (" " + duration(resets - now) if resets is not None else ""))
    if not parts:
        return None
    status = "rejected" if worst >= 100 else "degraded" if worst >= 80 else "ok"
    return paint(_clip(" | ".join(parts) + " (local)", MAX_STATUS_CHARS), status, colour)


def _local_reset_ms(value: "Any") -> "Optional[int]":
    seconds = _number(value)
    if seconds is not None:
        return int(seconds * 1000) if abs(seconds) < 1e11 else None
    return _instant_ms(value)



# ---------------------------------------------------------------- this machine's login (GET /api/login)

LOGIN_MARK = "this machine's Claude Code login"


def login_line(login: "Any", *, hud: bool, colour: bool = False, now: "Optional[int]" = None,
               width: "Optional[int]" = None) -> "Optional[str]":
    """The HUD strip (`hud`, at most `width` columns) or the status line for a /api/login body,
    marked as this machine's Claude Code login with its plan; None when it shows nothing."""
    if not isinstance(login, dict) or login.get("available") is not True:
        return None
    now = int(time.time() * 1000) if now is None else now
    plan = login.get("plan")
    mark = LOGIN_MARK + (" (%s)" % _word(plan, 24) if isinstance(plan, str) and plan else "")
    worst = -1.0
    for _short, field in _WINDOWS:
        parsed = _window(login.get(field))
        if parsed is not None and parsed[0] is not None:
            worst = max(worst, parsed[0])
    status = "rejected" if worst >= 100 else "degraded" if worst >= 80 else "ok" if worst >= 0 else "unknown"
    if not hud:
        windows = [_status_window(short, login.get(field), now) for short, field in _WINDOWS]
        return paint(_clip("%s: %s" % (mark, " | ".join(windows)), MAX_STATUS_CHARS), status, colour)

    def build(email: bool, clocks: bool) -> str:
        parts = ["svc %s" % _word(login.get("node") or "?", 64), mark, status.upper()]
        parts += [_hud_window(short, login.get(field), None, now, clocks) for short, field in _WINDOWS]
        parts += _login_extras(login.get("extraWindows"))
        sampled = _instant_ms(login.get("sampledAt"))
        if sampled is not None:
            parts.append("sampled %s ago" % duration(max(0, now - sampled)))
        return " | ".join(parts)
    return paint(fitted(build, width, MAX_HUD_CHARS), status, colour)


def _extras_instead(account: "Mapping[str, Any]") -> "List[str]":
    """An account with no 5-hour or weekly window but extra ones (a Copilot plan's monthly quotas, a
    credit limit) is shown by those, `<name> <pct>` each; any other shows its 5h and 7d (empty)."""
    if any(isinstance(account.get(field), dict) for _short, field in _WINDOWS):
        return []
    return _login_extras(account.get("extraWindows"))


# Extra windows shown in the HUD's login strip at most (the strip is clipped anyway).
MAX_LOGIN_EXTRAS = 4


def _login_extras(extras: "Any") -> "List[str]":
    """`<name> <pct>` per extra window of the login (a model-scoped limit, another weekly bucket)."""
    shown = []
    for extra in (extras if isinstance(extras, list) else [])[:MAX_LOGIN_EXTRAS]:
        parsed = _window(extra) if isinstance(extra, dict) else None
        if parsed is not None and parsed[0] is not None and isinstance(extra.get("name"), str):
            shown.append("%s %s" % (_word(extra["name"], 24), pct_text(parsed[0], MISSING)))
    return shown
