"""Dispatch around the wall: a ticket's owner among the hosts with headroom (docs/liveness.md).

    owner_with_headroom(ticket, report, view, provider, reserve)

maps a fleet status report (`svc-cluster status --json`, GET /api/fleet, the
demo's simulated fleet: all in one shape) and its accounts view
(fleetaccounts.accounts_view of the same report) to

    {"ticket", "owner", "candidates", "livenessKnown", "headroom": true, "provider",
     "skipped": [{"host", "reason"}], "waitUntil"}

The rules, with `line` = 100 - reserve:

- the candidates are the contract's (hrw.candidates: the live roster hosts when
  liveness is known, else every one), tried in HRW order, the contract's owner
  first;
- an account has headroom when its health on that host is `ok` (the host read
  it with its own credential, and lately), it is not rejected, and every window
  published is below `line` (at least one is: no figures is a doubt, never
  headroom). Its figures are the account's newest good reading across the
  fleet, as the accounts view shows them (utilization is the vendor's figure for
  the whole account, whichever host read it); an account without a key has only
  its host's own;
- a host has headroom for `provider` when its active account of that vendor has
  it, or when another account of that vendor there has it: the host's advice
  would be to switch to it (steering/advice.py takes the same account);
- the owner is the first candidate with headroom; `skipped` lists the candidates
  tried before it, each with one line saying why;
- when no candidate has headroom, the owner is the contract's (the first
  candidate), every candidate is in `skipped` with its reason, and `waitUntil`
  is the earliest time one of them has an account whose holding windows have
  all reset (null when none is known: a refused credential does not reset).

A host that published no accounts, none of `provider`, or accounts whose health
is not `ok` (refused, limited, unreachable, stale, unread) has no headroom and
says so. Everything read may be missing or of the wrong type (a remote monitor's
report is read with `--url`): such a value never gives a host headroom. Pure:
no clock, no I/O.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .._names import HEALTH_OK, HEALTHS, REJECTED, UNREAD
from .._text import pct_text, printable, read_pct
from .._time import iso_from_ms, parse_iso_ms
from ..hrw import candidates, hrw_score
from ..steering.healthwords import SHORT as HEALTH_SHORT
from ..vendors import DEFAULT_PROVIDER
from ._common import valid_ticket
from .fleetaccounts import host_entries

# A reading's status that says a reading was taken (an older publisher's entry has no health).
READ_STATUSES = ("ok", "degraded", REJECTED)
MAX_REASON = 300
# (the window's short name, its entry fields, its accounts-view field)
_WINDOWS = (("5h", "five_hour_pct", "five_hour_resets_at", "fiveHour"),
            ("7d", "seven_day_pct", "seven_day_resets_at", "sevenDay"))

# (has headroom, what keeps it out, when its holding windows have all reset (ms), whether a window
# is at or above the line)
Verdict = Tuple[bool, str, Optional[int], bool]


def bad_ticket(ticket: Any) -> Optional[str]:
    """Why `ticket` (None: not given) is not a tracker ticket identifier, as a sentence; None when it is."""
    if ticket is None:
        return "ticket is required: one tracker ticket identifier like ENG-123"
    if isinstance(ticket, str) and valid_ticket(ticket):
        return None
    return "%r is not a tracker ticket identifier like ENG-123 (letters and digits, a dash, then digits)" \
        % printable(ticket)[:80]


def _ms(stamp: Any) -> Optional[int]:
    if not isinstance(stamp, str):
        return None
    try:
        return parse_iso_ms(stamp)
    except (ValueError, OverflowError):
        return None


def keyed_accounts(view: Mapping[str, Any]) -> Dict[str, Mapping[str, Any]]:
    """The accounts of an accounts view by key (an account without one is its host's alone)."""
    found = view.get("accounts") if isinstance(view, Mapping) else None
    return {a["key"]: a for a in found if isinstance(a, Mapping) and isinstance(a.get("key"), str)} \
        if isinstance(found, list) else {}


def _figures(entry: Mapping[str, Any], accounts: Mapping[str, Mapping[str, Any]]
             ) -> Tuple[Any, List[Tuple[str, Any, Any]]]:
    """(status, [(window, pct, resets at)]) of an account: its newest reading across the fleet
    when it has a key the view knows, else the host's own entry."""
    account = accounts.get(entry.get("key")) if isinstance(entry.get("key"), str) else None
    if account is not None:
        windows = []
        for short, _, _, field in _WINDOWS:
            window = account.get(field)
            window = window if isinstance(window, Mapping) else {}
            windows.append((short, window.get("pct"), window.get("resetsAt")))
        return account.get("status"), windows
    return entry.get("status"), [(short, entry.get(pct), entry.get(reset)) for short, pct, reset, _ in _WINDOWS]


def _health(entry: Mapping[str, Any], status: Any) -> str:
    """The account's health on its host; an entry from a publisher that predates health is `ok`
    when it carries a reading, else unread (as steering.healthwords.health_of rules)."""
    word = entry.get("health")
    if isinstance(word, str) and word in HEALTHS:
        return word
    return HEALTH_OK if status in READ_STATUSES else UNREAD


def account_verdict(entry: Mapping[str, Any], accounts: Mapping[str, Mapping[str, Any]], line: float) -> Verdict:
    """Whether one account of a host has headroom below `line`; if not, what keeps it out (a few
    words) and when its holding windows have all reset (None: unknown, or nothing resets it)."""
    status, windows = _figures(entry, accounts)
    health = _health(entry, status)
    if health != HEALTH_OK:
        return False, HEALTH_SHORT.get(health, health), None, False
    read = [(name, read_pct(pct), _ms(resets)) for name, pct, resets in windows if pct is not None]
    if status == "error" or not read or any(pct is None for _, pct, _ in read):
        return False, "no window figures to judge by", None, False
    over = [(name, pct, resets) for name, pct, resets in read if pct >= line]
    if over:
        resets = [r for _, _, r in over]
        until = None if None in resets else max(r for r in resets if r is not None)
        return False, ", ".join("%s at %s" % (name, pct_text(pct)) for name, pct, _ in over), until, True
    if status == REJECTED:
        return False, "rejected by the provider", None, False
    return True, "", None, False


def host_verdict(row: Mapping[str, Any], provider: str, accounts: Mapping[str, Mapping[str, Any]],
                 line: float) -> Verdict:
    """Whether a host has headroom for `provider`: its active account has it, or another account
    of that vendor there has it (the host would switch to it). The reason names each account
    and what keeps it out: `acct1 (active): 5h at 100%; acct3: token refused`."""
    entries = host_entries(row)
    if not entries:
        return False, "no accounts published", None, False
    mine = [e for e in entries if (e.get("provider") or DEFAULT_PROVIDER) == provider]
    if not mine:
        return False, "no %s account (only other vendors')" % provider, None, False
    mine.sort(key=lambda e: e.get("active") is not True)  # the active account first
    verdicts = [account_verdict(e, accounts, line) for e in mine]
    if any(ok for ok, _, _, _ in verdicts):
        return True, "", None, False
    words = ["%s%s: %s" % (printable(e.get("label"))[:64], " (active)" if e.get("active") is True else "", why)
             for e, (_, why, _, _) in zip(mine, verdicts)]
    if mine[0].get("active") is not True:
        words.insert(0, "no active %s account" % provider)
    reason = "; ".join(words)
    full = any(over for _, _, _, over in verdicts)
    if full and line < 100:
        reason += " (the line is %s: the human reserve)" % pct_text(line)
    resets = [until for _, _, until, _ in verdicts if until is not None]
    return False, reason[:MAX_REASON], min(resets) if resets else None, full


def _liveness(rows: Sequence[Mapping[str, Any]], report: Mapping[str, Any]) -> Optional[List[str]]:
    """The live hosts, or None when the report says liveness is unknown (its `error`)."""
    if report.get("error"):
        return None
    return [row["host"] for row in rows if row.get("state") == "live"]


def hrw_order(ticket: str, hosts: Sequence[str]) -> List[str]:
    """`hosts` by HRW score, the contract's owner first (ties to the smaller name)."""
    return sorted(hosts, key=lambda h: (-hrw_score(ticket, h), h))


def owner_with_headroom(ticket: str, report: Mapping[str, Any], view: Mapping[str, Any],
                        provider: str = DEFAULT_PROVIDER, reserve: int = 0) -> Dict[str, Any]:
    """The `--headroom` answer for `ticket` (see the module's rules); `view` is
    fleetaccounts.accounts_view(report). Pure."""
    found = report.get("hosts") if isinstance(report, Mapping) else None
    rows = [r for r in found if isinstance(r, Mapping) and isinstance(r.get("host"), str)] \
        if isinstance(found, list) else []
    by_host = {}
    for row in rows:
        by_host.setdefault(row["host"], row)
    live = _liveness(rows, report)
    pool = candidates(list(by_host), live)
    accounts = keyed_accounts(view)
    line = float(100 - reserve)
    out: Dict[str, Any] = {"ticket": ticket, "owner": None, "candidates": pool, "livenessKnown": live is not None,
                           "headroom": True, "provider": provider, "skipped": [], "waitUntil": None}
    order = hrw_order(ticket, pool)
    resets: List[int] = []
    for host in order:
        ok, reason, until, _ = host_verdict(by_host[host], provider, accounts, line)
        if ok:
            out["owner"] = host
            return out
        out["skipped"].append({"host": host, "reason": reason})
        if until is not None:
            resets.append(until)
    out["owner"] = order[0] if order else None
    out["waitUntil"] = iso_from_ms(min(resets)) if resets else None
    return out


def headroom_found(body: Mapping[str, Any]) -> bool:
    """Whether the answer's owner has headroom (else it is the contract's owner, named for want
    of one: every candidate is in `skipped`)."""
    owner = body.get("owner")
    return owner is not None and all(s.get("host") != owner for s in body.get("skipped") or ())
