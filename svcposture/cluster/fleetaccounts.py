"""The fleet by account: GET /api/fleet/accounts, built from a fleet status report (docs/fleet.md).

A provider account is one quota, whichever hosts use it: its utilization is
the vendor's figure for the whole account, so the freshest reading (and its
forecast) already includes every host's burn. The view lists each account
once, keyed by `key` (svcposture.accountkey), with the labels hosts give it,
the hosts that have it (and whether it is their active one), and each window
from the newest probe of it across the fleet:

    {"accounts": [{"key", "provider", "labels", "hosts": [{"host", "active", "health"}],
                   "status", "health", "fiveHour": {"pct", "resetsAt", "probedAt", "host"},
                   "sevenDay": {...}, "wallAt"}],
     "source", "readAt"}

Health (docs/posture.md, "Health") is a host's: each host says whether it read
the account with its own credential (`hosts[].health`), and the account's
`health` is its newest reading's. A reading whose health is not `ok` (a
refused credential, figures kept from an older reading) comes after every
good one, however recent its probe: one host's refused token must not hide
the account's fresh figures from the hosts that read it. Where no host read
it well, the newest reading says why (`refused`).

An account whose host does not know its email has no key: nothing says that
two hosts' entries are the same account, so it is listed per host and label
(`key` null, one host). Most urgent first: rejected, then the soonest wall,
then the fullest window. Pure: the report comes from the tracker, Prometheus
or the demo's simulated fleet, all in the same shape.

A reading probed more than a minute after the report was read (heartbeat.MAX_AHEAD_MS)
comes from a clock that runs fast: it is no newer than any other, however far
ahead its stamp. It is taken only where no host has a believable reading, and
then marked (`suspect` on each window taken from it); otherwise one fast clock
would hide every fresh reading of the account, a rejected one included.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

from .._names import HEALTH_OK
from .._time import parse_iso_ms
from ..vendors import DEFAULT_PROVIDER, block_keys
from .heartbeat import ahead

WINDOWS = (("fiveHour", "five_hour_pct", "five_hour_resets_at"),
           ("sevenDay", "seven_day_pct", "seven_day_resets_at"))
_FAR = float("inf")
_GOOD = (HEALTH_OK, None)


def _ms(stamp: Any) -> Optional[int]:
    if not isinstance(stamp, str):
        return None
    try:
        return parse_iso_ms(stamp)
    except (ValueError, OverflowError):
        return None


def host_entries(row: Mapping[str, Any], blocks: Optional[Tuple[Tuple[str, str], ...]] = None
                 ) -> List[Mapping[str, Any]]:
    """A host row's account entries; a heartbeat without `accounts` (an older publisher) gives its
    active blocks, those of `blocks` ((provider, field) pairs; default: every registered vendor's,
    vendors.block_keys), which have no key unless they carry one."""
    entries = row.get("accounts")
    if isinstance(entries, list) and entries:
        return [e for e in entries if isinstance(e, Mapping) and isinstance(e.get("label"), str)]
    out = []
    for provider, field in block_keys() if blocks is None else blocks:
        block = row.get(field)
        if isinstance(block, Mapping) and isinstance(block.get("label"), str):
            out.append(dict(block, provider=provider, active=True))
    return out


def _identity(entry: Mapping[str, Any], host: str) -> Tuple[str, ...]:
    key = entry.get("key")
    provider = entry.get("provider") or DEFAULT_PROVIDER
    if isinstance(key, str) and key:
        return ("key", key)
    return ("host", host, provider, entry["label"])


# (suspect, not good, order, host, entry): sorted, the newest believable good reading first, then
# the newest believable one whose health is not ok, then the suspect ones, the nearest the present first.
Reading = Tuple[bool, bool, int, str, Mapping[str, Any]]


def _window(readings: List[Reading], pct_field: str, reset_field: str) -> Dict[str, Any]:
    """The window of the first reading that has it; nulls when no host has read it."""
    for suspect, _, _, host, entry in readings:
        if entry.get(pct_field) is not None:
            return {"pct": entry[pct_field], "resetsAt": entry.get(reset_field),
                    "probedAt": entry.get("probed_at"), "host": host, "suspect": suspect}
    return {"pct": None, "resetsAt": None, "probedAt": None, "host": None, "suspect": False}


def _account(group: Dict[str, Any]) -> Dict[str, Any]:
    readings = sorted(group["readings"], key=lambda r: r[:3])
    newest = readings[0][4] if readings else {}
    out = {"key": group["key"], "provider": group["provider"], "labels": group["labels"], "hosts": group["hosts"],
           "status": newest.get("status") or group["status"],
           "health": newest.get("health") if readings else group["health"]}
    for name, pct_field, reset_field in WINDOWS:
        out[name] = _window(readings, pct_field, reset_field)
    out["wallAt"] = newest.get("wall_at")
    return out


def urgency(account: Mapping[str, Any]) -> Tuple[int, float, float]:
    """Sort key, most urgent first: rejected, then the soonest wall, then the fullest window."""
    wall = _ms(account.get("wallAt"))
    pcts = [w.get("pct") for w in (account.get("fiveHour") or {}, account.get("sevenDay") or {})
            if isinstance(w, Mapping) and isinstance(w.get("pct"), (int, float))]
    return (0 if account.get("status") == "rejected" else 1, wall if wall is not None else _FAR,
            -max(pcts) if pcts else 0.0)


def accounts_view(report: Mapping[str, Any], now: Optional[int] = None) -> Dict[str, Any]:
    """The body of GET /api/fleet/accounts from a fleet status report. Pure. A reading is suspect
    when probed more than heartbeat.MAX_AHEAD_MS after `now` (ms; default: the report's
    `generatedAt`, when it was read; without either, none is). The loop runs once
    per account of every host (30,000 at 10,000 hosts): a reading's time is parsed only where an
    entry has one, and Mapping is collections.abc's (typing's alias takes twice as long to check)."""
    groups: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    blocks = block_keys()
    read = _ms(report.get("generatedAt")) if now is None else now
    believed = float("inf") if read is None else read
    for row in report.get("hosts") or []:
        host = row.get("host") if isinstance(row, Mapping) else None
        if not isinstance(host, str):
            continue
        for entry in host_entries(row, blocks):
            ident = _identity(entry, host)
            group = groups.get(ident)
            if group is None:
                group = groups[ident] = {"key": ident[1] if ident[0] == "key" else None,
                                         "provider": entry.get("provider") or DEFAULT_PROVIDER, "labels": [],
                                         "hosts": [], "status": None, "health": None, "readings": []}
            label = entry["label"]
            if label not in group["labels"]:
                group["labels"].append(label)
            health = entry.get("health")
            group["hosts"].append({"host": host, "active": entry.get("active") is True, "health": health})
            stamp = entry.get("probed_at")
            probed = _ms(stamp) if stamp is not None else None
            if probed is not None:
                suspect = ahead(probed, believed)
                # A publisher that predates health says none: its reading counts as good.
                group["readings"].append((suspect, health not in _GOOD, probed if suspect else -probed, host, entry))
            else:
                if group["status"] is None:
                    group["status"] = entry.get("status")
                if group["health"] is None:
                    group["health"] = health
    accounts = sorted((_account(g) for g in groups.values()),
                      key=lambda a: (urgency(a), a["provider"], a["labels"][0], a["key"] or ""))
    body: Dict[str, Any] = {"accounts": accounts, "source": report.get("source"), "readAt": report.get("generatedAt")}
    for field in ("error", "stale", "staleAgeS"):
        if field in report:
            body[field] = report[field]
    return body
