"""One advice for every surface: stay, wait, switch, or none (docs/steering.md).

    advise(posture, trajectory, provider=DEFAULT_PROVIDER, reserve=0, wait_s=600, now_ms=...)

maps one vendor's posture body (the /api/accounts shape) and the trajectory
body (/api/trajectory, for the forecasts) to

    {"provider", "active": {label, email, health, note, fix} | None,
     "advice": "stay" | "wait" | "switch" | "none",
     "to": {label, email} | None, "waitS", "waitUntil", "reason",
     "ranked": [{label, email, health, candidate, headroomPct, wallAt, reachesReset, note, fix}]}

The rules, with `limit` = 100 - reserve (or the automatic switch's threshold
when that is lower):

- an account whose health (docs/posture.md) is not `ok` was not read, or not
  lately: it is never a candidate, never stays, and neither "headroom" nor
  "full" is said of it; its `note` says what is wrong instead, and, for a
  refused credential, the fix (healthwords);
- a window is every window the account reports: fiveHour, sevenDay and each
  of `extraWindows`; a window whose pct cannot be read is a doubt, never
  headroom;
- a candidate is a healthy sibling that is not rejected, has every window
  below `limit`, and has more headroom on its fuller window than the active
  account;
- `ranked` lists every other account of the vendor: the candidates first, by
  whether their forecast reaches their reset below `limit` (reachesReset),
  then by headroom on the fuller window, then by label; then the others;
- an active account whose health is not `ok`: switch to the first candidate,
  else none; the reason names what is wrong (a refused token and its fix);
- stay: the active account is below `limit` on every window and its forecast
  reaches its reset; wait: it is not, and its holding window resets within
  `wait_s` (waitS says when; 0 never waits); switch: otherwise, to the first candidate; with
  no candidate, stay while the active account is below `limit`, else none
  (waitS: until its holding window resets).

With `wait` and `none`, `waitUntil` is the holding window's resetsAt itself: every surface
counts down to that instant, so two of them never disagree about what is left of waitS.

Pure: no clock, no I/O; `now_ms` is given. Everything read may be missing,
null, of the wrong type or out of range; such a value never makes an account
look better than it is.
"""
from __future__ import annotations

from .._names import HEALTH_OK, REFUSED
from .._text import finite_number, is_int, pct_figure, pct_text, read_pct
from ..vendors import DEFAULT_PROVIDER
from .healthwords import SHORT as HEALTH_SHORT, health_of, health_sentence, renew_fix, span

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Tuple

STAY, WAIT, SWITCH, NONE = "stay", "wait", "switch", "none"
ADVICE_WORDS = (STAY, WAIT, SWITCH, NONE)
DEFAULT_WAIT_S = 600
FORECAST_FIELDS = ("fiveHour", "sevenDay")
SHORT = {"fiveHour": "5h", "sevenDay": "7d"}
BINDING_FIELD = {"five_hour": "fiveHour", "seven_day": "sevenDay"}


# ---------------------------------------------------------------- reading one account

def iso_ms(text: "Any") -> "Optional[int]":
    """`YYYY-MM-DDTHH:MM:SS.mmmZ` (or epoch ms) as epoch ms, else None."""
    if is_int(text):
        return text if 0 <= text < 253402300800000 else None
    if not isinstance(text, str) or len(text) != 24 or text[-1] != "Z" or not text.isascii():
        return None
    try:
        import calendar
        parts = (int(text[0:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]), int(text[14:16]),
                 int(text[17:19]))
        millis = int(text[20:23])
    except ValueError:
        return None
    if not (1 <= parts[1] <= 12 and 1 <= parts[2] <= 31 and parts[3] < 24 and parts[4] < 60 and parts[5] < 61):
        return None
    return calendar.timegm(parts + (0, 0, 0)) * 1000 + millis


def ms_iso(ms: int) -> str:
    """Epoch ms as `YYYY-MM-DDTHH:MM:SS.mmmZ`, the form every body of the package carries."""
    import time
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


def windows_of(view: "Mapping[str, Any]") -> "Tuple[List[Tuple[str, float, Optional[int], Any]], bool]":
    """([(name, pct, resets ms, status)] of every readable window, whether any window is a doubt).

    A window that is present (not null) but whose pct is not a finite number
    from 0 up is a doubt: the account is never judged to have room on it.
    """
    found: "List[Tuple[str, float, Optional[int], Any]]" = []
    doubt = False
    extras = view.get("extraWindows")
    named: "List[Tuple[str, Any]]" = [(field, view.get(field)) for field in FORECAST_FIELDS]
    if isinstance(extras, list):
        for window in extras:
            name = window.get("name") if isinstance(window, dict) else None
            seconds = window.get("seconds") if isinstance(window, dict) else None
            label = name if isinstance(name, str) and name else "%ss window" % seconds if is_int(seconds) else "extra"
            named.append((label, window))
    elif extras is not None:
        doubt = True
    for name, window in named:
        if window is None:
            continue
        pct = read_pct(window.get("pct")) if isinstance(window, dict) else None
        if pct is None:
            doubt = True
            continue
        found.append((name, pct, iso_ms(window.get("resetsAt")), window.get("status")))
    return found, doubt


def _trajectory_rows(trajectory: "Any") -> "Dict[str, Mapping[str, Any]]":
    rows = trajectory.get("accounts") if isinstance(trajectory, dict) else None
    out: "Dict[str, Mapping[str, Any]]" = {}
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("label"), str):
            out.setdefault(row["label"], row)
    return out


def _forecast_windows(row: "Optional[Mapping[str, Any]]") -> "List[Tuple[str, Any]]":
    """(name, trajectory window) of each window of a trajectory row: fiveHour, sevenDay, then
    each extra window (a model's own limit, credits) under its name."""
    if row is None:
        return []
    found: "List[Tuple[str, Any]]" = [(field, row.get(field)) for field in FORECAST_FIELDS]
    extras = row.get("extraWindows")
    for window in extras if isinstance(extras, list) else []:
        if isinstance(window, dict):
            name, seconds = window.get("name"), window.get("seconds")
            found.append((name if isinstance(name, str) and name else
                          "%ss window" % seconds if is_int(seconds) else "extra", window))
    return found


def _forecast_misses(row: "Optional[Mapping[str, Any]]", limit: float) -> "Tuple[List[Tuple[str, Optional[int]]], Optional[str]]":
    """([(window, its reset)] whose forecast reaches `limit` before its reset, the earliest wallAt)."""
    misses: "List[Tuple[str, Optional[int]]]" = []
    walls: "List[str]" = []
    for name, window in _forecast_windows(row):
        forecast = window.get("forecast") if isinstance(window, dict) else None
        if not isinstance(forecast, dict):
            continue
        wall = forecast.get("wallAt")
        if iso_ms(wall) is not None:
            walls.append(wall)
        at_reset = finite_number(forecast.get("pctAtReset"))
        if at_reset is not None and at_reset >= limit:
            misses.append((name, iso_ms(window.get("resetsAt"))))
    return misses, (min(walls) if walls else None)


def judge(view: "Mapping[str, Any]", row: "Optional[Mapping[str, Any]]", limit: float) -> "Dict[str, Any]":
    """What the rules need of one account: its windows, whether it is below `limit`
    on every one, its headroom on the fuller one, its forecast and what holds it."""
    windows, doubt = windows_of(view)
    error = bool(view.get("error"))
    rejected = view.get("bindingStatus") == "rejected" or any(
        status == "rejected" or pct >= 100 for _n, pct, _r, status in windows)
    used = max((pct for _n, pct, _r, _s in windows), default=None)
    below = bool(windows) and not doubt and not error and not rejected and used is not None and used < limit
    misses, wall = _forecast_misses(row, limit)
    over = [(name, pct, resets) for name, pct, resets, status in windows if pct >= limit or status == "rejected"]
    if not over and view.get("bindingStatus") == "rejected":
        claim = view.get("bindingWindow")
        field = BINDING_FIELD.get(claim) if isinstance(claim, str) else None
        over = [(n, p, r) for n, p, r, _s in windows if n == field]
    return {"windows": windows, "below": below, "error": error, "rejected": rejected,
            "headroom": (limit - used) if used is not None and not doubt and not error else None,
            "reaches": below and not misses, "wallAt": wall, "over": over, "misses": misses}


def _ident(view: "Mapping[str, Any]") -> "Dict[str, Any]":
    email = view.get("email")
    return {"label": view.get("label"), "email": email if isinstance(email, str) else None}


def _health(view: "Mapping[str, Any]", provider: str, now_ms: int,
            accounts_file: "Optional[str]") -> "Dict[str, Any]":
    """{health, note, fix} of one account: what is wrong when its health is not `ok` (else null),
    and for a refused credential the fix alone (the note says it too)."""
    health = health_of(view)
    fix = renew_fix(view, provider, accounts_file) if health == REFUSED else None
    return {"health": health, "note": health_sentence(view, health, now_ms, fix), "fix": fix}


def _entry(view: "Mapping[str, Any]", seen: "Mapping[str, Any]", said: "Mapping[str, Any]",
           candidate: bool) -> "Dict[str, Any]":
    """One account of `ranked`: headroom and forecast only for an account that was read."""
    read = said["health"] == HEALTH_OK
    room = seen["headroom"] if read else None
    return dict(_ident(view), health=said["health"], candidate=candidate,
                headroomPct=round(room, 1) if room is not None else None,
                wallAt=seen["wallAt"] if read else None, reachesReset=bool(read and seen["reaches"]),
                note=said["note"], fix=said["fix"], _room=room)


def ranked_accounts(posture: "Mapping[str, Any]", trajectory: "Any", limit: float, *,
                    provider: str = DEFAULT_PROVIDER, now_ms: int = 0,
                    accounts_file: "Optional[str]" = None) -> "List[Dict[str, Any]]":
    """Every account of the vendor but the active one (`ranked` of the advice): the candidates
    first, best first, then the others (healthy ones by headroom, then the rest), each with
    its health and, when that is not `ok`, the note saying what is wrong."""
    accounts = posture.get("accounts") if isinstance(posture.get("accounts"), list) else []
    active = posture.get("active") if isinstance(posture.get("active"), dict) else None
    rows = _trajectory_rows(trajectory)
    floor = None
    if active is not None and health_of(active) == HEALTH_OK:
        floor = judge(active, rows.get(active.get("label")), limit)["headroom"]
    found = []
    for view in accounts:
        if not isinstance(view, dict) or not isinstance(view.get("label"), str) or view.get("active") is True:
            continue
        if active is not None and view["label"] == active.get("label"):
            continue
        seen = judge(view, rows.get(view["label"]), limit)
        said = _health(view, provider, now_ms, accounts_file)
        candidate = said["health"] == HEALTH_OK and seen["below"] and (floor is None or seen["headroom"] > floor)
        found.append(_entry(view, seen, said, candidate))
    found.sort(key=lambda c: (not c["candidate"], c["candidate"] and not c["reachesReset"],
                              c["health"] != HEALTH_OK, -(c["_room"] if c["_room"] is not None else float("-inf")),
                              c["label"]))
    for cand in found:
        del cand["_room"]
    return found


def candidates(posture: "Mapping[str, Any]", trajectory: "Any", limit: float) -> "List[Dict[str, Any]]":
    """The siblings worth switching to, best first (the candidates of `ranked`)."""
    return [r for r in ranked_accounts(posture, trajectory, limit) if r["candidate"]]


def candidates_of(advice: "Mapping[str, Any]") -> "List[Dict[str, Any]]":
    """The candidates of an advice body's `ranked` (an entry without `candidate`, from a monitor
    that listed nothing else, is one)."""
    ranked = advice.get("ranked")
    return [r for r in ranked if isinstance(r, dict) and r.get("candidate", True) is True] \
        if isinstance(ranked, list) else []


def _holding(seen: "Mapping[str, Any]") -> "Tuple[Optional[str], Optional[int]]":
    """(the window that holds the account back, its reset in ms): the one at or over
    the limit that resets last, else the one whose forecast misses its reset."""
    if seen["over"]:
        name, _pct, resets = max(seen["over"], key=lambda o: (o[2] is None, o[2] or 0))
        return name, resets
    if seen["misses"]:
        name, resets = max(seen["misses"], key=lambda m: (m[1] is None, m[1] or 0))
        return SHORT.get(name, name), resets
    return None, None


def _wait_s(resets: "Optional[int]", now_ms: int) -> "Optional[int]":
    return None if resets is None else max(0, -(-(resets - now_ms) // 1000))


def advise(posture: "Any", trajectory: "Any" = None, *, provider: str = DEFAULT_PROVIDER, reserve: int = 0,
           wait_s: int = DEFAULT_WAIT_S, now_ms: int = 0, ceiling: "Optional[float]" = None,
           accounts_file: "Optional[str]" = None) -> "Dict[str, Any]":
    """The advice for one vendor's accounts (see the module's rules). `ceiling`
    lowers the limit (the automatic switch's threshold); `accounts_file` is the
    accounts env file as the fix of a refused credential names it."""
    limit = float(100 - reserve)
    if ceiling is not None and ceiling < limit:
        limit = float(ceiling)
    out: "Dict[str, Any]" = {"provider": provider, "active": None, "advice": NONE, "to": None, "waitS": None,
                             "waitUntil": None, "reason": "", "ranked": []}
    if not isinstance(posture, dict) or posture.get("available") is not True or "error" in posture:
        out["reason"] = "the posture is unavailable"
        return out
    ranked = ranked_accounts(posture, trajectory, limit, provider=provider, now_ms=now_ms,
                             accounts_file=accounts_file)
    out["ranked"] = ranked
    active = posture.get("active") if isinstance(posture.get("active"), dict) else None
    first = next((r for r in ranked if r["candidate"]), None)
    if active is None:
        return _decided(out, SWITCH if first else NONE, first, None,
                        "no account is active" + (_why_first(first) if first else _nobody(ranked, limit, "")))
    out["active"] = dict(_ident(active), **_health(active, provider, now_ms, accounts_file))
    if out["active"]["health"] != HEALTH_OK:
        # Not read, or not lately: nothing is known of its headroom, so it neither stays nor waits.
        problem = str(out["active"]["note"])
        if first is not None:
            return _decided(out, SWITCH, first, None, problem + _why_first(first))
        return _decided(out, NONE, None, None, problem + _nobody(ranked, limit, " other"))
    label = str(active.get("label"))
    seen = judge(active, _trajectory_rows(trajectory).get(label), limit)
    if seen["reaches"]:
        return _decided(out, STAY, None, None, "%s is below %s on every window and its forecast reaches its "
                        "reset" % (label, pct_text(limit)))
    name, resets = _holding(seen)
    wait = _wait_s(resets, now_ms)
    out["waitUntil"] = ms_iso(resets) if wait is not None else None
    problem = _problem(label, seen, name, wait, limit)
    if wait is not None and wait <= wait_s and wait_s > 0:
        return _decided(out, WAIT, None, wait, "%s; waiting is cheaper than switching" % problem)
    if first is not None:
        return _decided(out, SWITCH, first, None, problem + _why_first(first))
    if seen["below"]:
        if _all_read(ranked):
            return _decided(out, STAY, None, None, "%s; no other account has more headroom below %s, so stay"
                            % (problem, pct_text(limit)))
        return _decided(out, STAY, None, None, "%s; so stay%s" % (problem, _nobody(ranked, limit, " other")))
    return _decided(out, NONE, None, wait, problem + _nobody(ranked, limit, " other"))


def _all_read(ranked: "List[Mapping[str, Any]]") -> bool:
    return all(r["health"] == HEALTH_OK for r in ranked)


def _nobody(ranked: "List[Mapping[str, Any]]", limit: float, other: str) -> str:
    """Why no account can take over. "Headroom" is said only of accounts that were read: with
    every one read, "no other account has headroom below 100%"; else each is named with what
    keeps it out ("acct2: token refused")."""
    if _all_read(ranked):
        return "; no%s account has headroom below %s" % (other, pct_text(limit))
    why = ["%s: %s" % (r["label"], HEALTH_SHORT.get(r["health"], r["health"]) if r["health"] != HEALTH_OK
                       else "no headroom below %s" % pct_text(limit)) for r in ranked]
    return "; no%s account can take over (%s)" % (other, "; ".join(why))


def _decided(out: "Dict[str, Any]", word: str, to: "Optional[Mapping[str, Any]]", wait: "Optional[int]",
             reason: str) -> "Dict[str, Any]":
    out.update(advice=word, to={"label": to["label"], "email": to["email"]} if to else None, waitS=wait,
               reason=reason)
    if wait is None:
        out["waitUntil"] = None
    return out


def _why_first(first: "Mapping[str, Any]") -> str:
    return "; switch to %s: %s points of headroom%s" % (
        first["label"], pct_figure(first["headroomPct"]),
        ", its forecast reaches its reset" if first["reachesReset"] else ", though its forecast does not reach "
        "its reset")


def _problem(label: str, seen: "Mapping[str, Any]", name: "Optional[str]", wait: "Optional[int]",
             limit: float) -> str:
    when = "" if wait is None else ", resets in %s" % span(wait)
    if seen["error"]:
        return "%s has no usable reading (its probe failed)" % label
    if not seen["windows"]:
        return "%s reports no readable window" % label
    if seen["over"] or seen["rejected"]:
        pct = max((p for n, p, _r in seen["over"] if n == name), default=None)
        what = "%s at %s" % (SHORT.get(str(name), name), pct_text(pct)) if pct is not None else "rejected"
        return "%s %s%s" % (label, what, when)
    if not seen["below"]:
        return "%s has a window that cannot be read" % label
    return "%s is forecast to reach %s on its %s before it resets%s" % (label, pct_text(limit), name, when)


def first_candidate(advice: "Mapping[str, Any]") -> "Optional[Dict[str, Any]]":
    """`{label, email}` of the first candidate, else None (siblingWithHeadroom's choice)."""
    found = candidates_of(advice)
    return {"label": found[0]["label"], "email": found[0]["email"]} if found else None
