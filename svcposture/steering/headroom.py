"""Headroom under the human reserve: the guard's decision and the switch's choice (docs/steering.md).

Pure functions over a posture body (the posture body's shape, for either vendor). The
guard imports this module on every call, so it imports nothing at run time but
the package's number rules and the advice's window reader, itself pure (the
switch's HRW comes with its first fleet pick).
"""
from __future__ import annotations

from .._names import HEALTH_OK
from .._text import is_int, pct_text, read_pct
from .advice import iso_ms, windows_of
from .healthwords import health_of, health_sentence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

GO = "go"
HOLD = "hold"
UNAVAILABLE = "unavailable"
WINDOWS = (("fiveHour", "five_hour", "5h"), ("sevenDay", "seven_day", "7d"))
CLAIM_FIELD = {"five_hour": "fiveHour", "seven_day": "sevenDay"}
FIELD_CLAIM = {"fiveHour": "five_hour", "sevenDay": "seven_day"}
# Fleet spread: hosts choose among the accounts within this many points of the best.
SPREAD_POINTS = 10.0


def resets_ms(window: "Any") -> "Optional[int]":
    """A window's resetsAt (`YYYY-MM-DDTHH:MM:SS.mmmZ`) as epoch ms, else None."""
    text = window.get("resetsAt") if isinstance(window, dict) else None
    return iso_ms(text) if isinstance(text, str) else None


# The reason when nothing answered; the guard command adds the URL it tried.
NO_ANSWER = "the monitor did not answer"


def _result(decision: str, reason: str, provider: str, reserve: int, account: "Optional[str]" = None,
            window: "Optional[str]" = None, pct: "Optional[float]" = None, resets_at: "Optional[str]" = None,
            retry_after_s: "Optional[int]" = None) -> "Dict[str, Any]":
    return {"decision": decision, "account": account, "provider": provider, "reason": reason,
            "window": window, "pct": pct, "reservePct": reserve, "resetsAt": resets_at,
            "retryAfterS": retry_after_s}


# The fields and types every posture body of the monitor has: anything else
# answering on the port (another service, a proxy's error page) is not one.
POSTURE_TYPES = (("node", str), ("generatedAt", str), ("cached", bool), ("status", str),
                 ("accounts", list))
FUTURE_SLACK_MS = 60 * 1000
UNKNOWN_ACCOUNT = "unknown_account"


def is_posture(body: "Any") -> bool:
    """Whether `body` has the posture body's shape (docs/posture.md), available or not."""
    if not isinstance(body, dict) or not isinstance(body.get("node"), str):
        return False
    if body.get("available") is False:
        return True
    return (body.get("available") is True and is_int(body.get("probedAt"))
            and all(isinstance(body.get(key), kind) for key, kind in POSTURE_TYPES)
            and (body.get("active") is None or isinstance(body.get("active"), dict))
            and (body.get("siblingWithHeadroom") is None or isinstance(body.get("siblingWithHeadroom"), dict))
            and "active" in body and "siblingWithHeadroom" in body)


def _unavailable_reason(body: "Any", now_ms: int, stale_ms: int) -> "Optional[str]":
    if body is None:
        return NO_ANSWER
    if not is_posture(body):
        return "the reply is not the monitor's posture"
    if body.get("available") is not True:
        return "the posture is unavailable (no usable account, or probing is off)"
    probed = body["probedAt"]
    if probed - now_ms > FUTURE_SLACK_MS:
        return "the posture's probe time is %d s in the future" % ((probed - now_ms) // 1000)
    if now_ms - probed > stale_ms:
        return "the posture is %d s old, older than twice the probe interval" % ((now_ms - probed) // 1000)
    if "error" in body:
        kind = body["error"].get("kind") if isinstance(body.get("error"), dict) else None
        return "the probe failed (%s)" % (kind if isinstance(kind, str) else "error")
    return None


def known_labels(body: "Any") -> "List[str]":
    """The account labels a posture body names, in its order."""
    accounts = body.get("accounts") if isinstance(body, dict) else None
    return [a["label"] for a in accounts or [] if isinstance(a, dict) and isinstance(a.get("label"), str)]


def of_provider(label: "Any", provider: str) -> bool:
    """Whether an account label is the vendor's: each vendor but the first has its label prefix (docs/vendors.md)."""
    from ..vendors import provider_of_label
    return isinstance(label, str) and provider_of_label(label) == provider


def find_account(body: "Mapping[str, Any]", label: "Optional[str]") -> "Optional[Dict[str, Any]]":
    """The account named `label` in the body (None: the active one)."""
    if label is None:
        active = body.get("active")
        return active if isinstance(active, dict) else None
    for account in body.get("accounts") or []:
        if isinstance(account, dict) and account.get("label") == label:
            return account
    return None


def guard_decision(body: "Any", *, provider: str, account: "Optional[str]", reserve: int, now_ms: int,
                   stale_ms: int) -> "Dict[str, Any]":
    """May automation start another run now? `go`, `hold` or `unavailable` (or
    UNKNOWN_ACCOUNT: `account` names no account of the posture), with the account,
    the window that decided, its pct and reset, and the wait until that reset.

    No go on doubt: every window counts (extra windows included), a window whose
    pct cannot be read, an account without a readable window, or one whose
    health is not `ok` (a refused token, figures that are not fresh) is unavailable."""
    reason = _unavailable_reason(body, now_ms, stale_ms)
    if reason is not None:
        return _result(UNAVAILABLE, reason, provider, reserve, account)
    view = find_account(body, account)
    if view is None and account:
        known = [label for label in known_labels(body) if of_provider(label, provider)]
        return _result(UNKNOWN_ACCOUNT, "no account %s on this node (known: %s)"
                       % (account, ", ".join(known) or "none"), provider, reserve, account)
    if view is None:
        return _result(HOLD, "no account is active", provider, reserve, account)
    label = view.get("label")
    if not of_provider(label, provider):
        # A monitor that predates Codex answers ?provider=codex with Claude's body.
        return _result(UNAVAILABLE, "the monitor serves no %s posture (account %s)" % (provider, label), provider,
                       reserve, account)
    health = health_of(view)
    if health != HEALTH_OK:
        # Not read, or not lately (a refused token, above all): its figures decide nothing.
        return _result(UNAVAILABLE, str(health_sentence(view, health, now_ms)), provider, reserve, label)
    windows, doubt = windows_of(view)
    if doubt:
        return _result(UNAVAILABLE, "%s has a window whose pct cannot be read" % label, provider, reserve, label)
    if not windows:
        return _result(UNAVAILABLE, "%s reports no readable window" % label, provider, reserve, label)
    limit = 100 - reserve
    holding = [w for w in windows if w[1] >= limit or w[3] == "rejected"]
    if view.get("bindingStatus") == "rejected" and not holding:
        claim = view.get("bindingWindow")
        field = CLAIM_FIELD.get(claim) if isinstance(claim, str) else None
        holding = [w for w in windows if w[0] == field] or [("account", None, None, "rejected")]  # type: ignore
    if not holding:
        return _go(view, windows, provider, reserve, limit)
    name, pct, resets, status = max(holding, key=lambda w: (w[2] is None, w[2] or 0))
    short = _short(name)
    if pct is not None and pct >= limit:
        why = "%s %s at %s, at or above %s (reserve %s)" % (label, short, pct_text(pct), pct_text(limit),
                                                          pct_text(reserve))
    else:
        why = "%s is rejected (%s)" % (label, short)
    window = view.get(name) if name in FIELD_CLAIM else _extra_window(view, name)
    retry = max(0, -(-(resets - now_ms) // 1000)) if resets is not None else None
    return _result(HOLD, why, provider, reserve, label, FIELD_CLAIM.get(name, name if name != "account" else None),
                   pct, window.get("resetsAt") if isinstance(window, dict) else None, retry)


# The account field of a decision taken on this machine's own login (GET /api/login).
LOGIN_ACCOUNT = "login"


def login_decision(login: "Any", *, provider: str, reserve: int, now_ms: int,
                   stale_ms: int) -> "Optional[Dict[str, Any]]":
    """The guard's decision on this machine's own login (the /api/login body), for a node whose
    posture is unavailable (no accounts file): its windows judged by guard_decision's rules, its
    sampledAt standing for probedAt, so the gate says what the status line shows. None when the
    login shows nothing."""
    if not isinstance(login, dict) or login.get("available") is not True:
        return None
    sampled = iso_ms(login.get("sampledAt"))
    name = login.get("loginName")
    who = "this machine's %s login" % (name if isinstance(name, str) and 0 < len(name) <= 40 else "own")
    if sampled is None:
        return _result(UNAVAILABLE, "%s has no reading time" % who, provider, reserve, LOGIN_ACCOUNT)
    view = {"label": LOGIN_ACCOUNT, "email": None, "active": True, "error": None, "bindingStatus": None,
            "fiveHour": login.get("fiveHour"), "sevenDay": login.get("sevenDay"),
            "extraWindows": login.get("extraWindows") if isinstance(login.get("extraWindows"), list) else []}
    body = {"available": True, "node": str(login.get("node")), "generatedAt": "", "probedAt": sampled,
            "cached": True, "status": "ok", "active": view, "accounts": [view], "siblingWithHeadroom": None}
    result = guard_decision(body, provider=provider, account=None, reserve=reserve, now_ms=now_ms,
                            stale_ms=stale_ms)
    reason = result["reason"]
    for said, meant in _LOGIN_WORDS:
        if reason.startswith(said):
            reason = meant + reason[len(said):]
            break
    result.update(account=LOGIN_ACCOUNT, reason="%s (no accounts file): %s" % (who, reason.replace(
        "probe interval", "sampling interval")))
    return result


# The words of guard_decision's reasons about a posture, said of the login's reading.
_LOGIN_WORDS = ((LOGIN_ACCOUNT + ": ", ""), (LOGIN_ACCOUNT + " ", ""), ("the posture's probe time", "its reading time"),
                ("the posture", "its reading"))


def _short(name: "Any") -> str:
    return {"fiveHour": "5h", "sevenDay": "7d"}.get(name, name if isinstance(name, str) else "?")


def _extra_window(view: "Mapping[str, Any]", name: "Any") -> "Any":
    for window in view.get("extraWindows") or []:
        if isinstance(window, dict) and (window.get("name") == name or "%ss window" % window.get("seconds") == name):
            return window
    return None


def _go(view: "Mapping[str, Any]", windows: "List[Any]", provider: str, reserve: int, limit: int) -> "Dict[str, Any]":
    name, pct, _resets, _status = max(windows, key=lambda w: w[1])
    label = view.get("label")
    window = view.get(name) if name in FIELD_CLAIM else _extra_window(view, name)
    shown = ", ".join("%s %s" % (_short(n), pct_text(p)) for n, p, _r, _s in windows)
    return _result(GO, "%s: %s, below %s (reserve %s)" % (label, shown, pct_text(limit), pct_text(reserve)),
                   provider, reserve, label, FIELD_CLAIM.get(name, name), pct,
                   window.get("resetsAt") if isinstance(window, dict) else None)


def _used(window: "Any") -> float:
    """A window's pct; one that cannot be read counts as full."""
    pct = read_pct(window.get("pct")) if isinstance(window, dict) else None
    return 100.0 if pct is None else pct


# ---------------------------------------------------------------- the switch's choice

def headroom(view: "Mapping[str, Any]", reserve: int) -> "Optional[float]":
    """Points left under 100 − reserve on the fuller of both windows; None when the
    account has none (an error, rejected, a window at or past the limit, or unknown), or
    was not read lately (its health is not ok)."""
    if view.get("error") or view.get("bindingStatus") == "rejected" or health_of(view) != HEALTH_OK:
        return None
    used = max(_used(view.get(field)) for field, _claim, _short in WINDOWS)
    room = (100 - reserve) - used  # type: ignore[operator]
    return room if room > 0 else None


def ranked(accounts: "Iterable[Any]", reserve: int, *, exclude: "Iterable[str]" = (),
           avoid: "Optional[Mapping[str, int]]" = None, now_ms: int = 0) -> "List[Tuple[str, float]]":
    """(label, headroom) of every account with headroom, most first (ties in file order),
    leaving out `exclude` and any label `avoid` holds back until a later time."""
    skip = set(exclude)
    avoid = avoid or {}
    out = []
    for order, view in enumerate(accounts):
        if not isinstance(view, dict) or not isinstance(view.get("label"), str) or view["label"] in skip:
            continue
        until = avoid.get(view["label"])
        if isinstance(until, int) and until > now_ms:
            continue
        room = headroom(view, reserve)
        if room is not None:
            out.append((order, view["label"], room))
    out.sort(key=lambda item: (-item[2], item[0]))
    return [(label, room) for _order, label, room in out]


def choose(candidates: "List[Tuple[str, float]]", host: "Optional[str]" = None,
           roster: "Optional[Iterable[str]]" = None) -> "Optional[str]":
    """The account to switch to: the most headroom, or, for an automatic switch
    (`host` given), a fleet-spread pick among the accounts within SPREAD_POINTS
    of the best, so a fleet leaving one exhausted account does not stampede
    onto one sibling:

    - with the cluster `roster` (holding `host`): the roster is ordered by HRW
      score over the near accounts, and the host at position i takes the i-th
      of them (by label) round-robin. Every host computes the same order, so
      each sibling takes its fair share, give or take one host;
    - without one: the host's HRW first among them (spread, though not evenly
      on a small fleet: 100 hosts over 4 siblings can put 38 on one).
    """
    if not candidates:
        return None
    if host is None:
        return candidates[0][0]
    from ..hrw import hrw_score
    best = candidates[0][1]
    near = sorted(label for label, room in candidates if room >= best - SPREAD_POINTS)
    hosts = sorted(set(roster or ()))
    if host in hosts:
        ticket = "switch:" + ",".join(near)
        order = sorted(hosts, key=lambda h: (-hrw_score(ticket, h), h))
        return near[order.index(host) % len(near)]
    return max(near, key=lambda label: (hrw_score(label, host), label))
