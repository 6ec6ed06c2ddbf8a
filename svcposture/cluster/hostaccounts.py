"""The heartbeat's `accounts` list: every account of a host, built by the publisher, read by peers.

Each entry is (docs/fleet.md)

    {"key", "label", "provider", "status", "health", "five_hour_pct", "five_hour_resets_at",
     "seven_day_pct", "seven_day_resets_at", "wall_at", "probed_at", "active"}

in snake_case like the `account` block. `status` is the node status the
account would give were it active (ok, degraded, rejected, error, unknown);
`health` is the account's health on this host (docs/posture.md, "Health": ok,
refused, limited, unreachable, stale, unread; null from a publisher that
predates it), which the figures alone do not say: a credential refused here
may be read well on another host; `wall_at` is the forecast wall of its
binding window; `probed_at` is when its vendor's posture was last probed. At
most MAX_ACCOUNTS entries: an env file with more lists the first ones, the
vendors in registration order (the default first).

`key` (svcposture.accountkey) is null for an account whose email the host does
not know: such an entry can only be told apart by host and label.

A reader keeps an entry of a vendor it has not registered under the name the
peer gave (when it is a valid name): the account is real, whoever can read it.
An entry without a provider, or with one that is not a name, is the default
vendor's (a publisher that names no provider speaks of the contract's accounts);
nothing else is guessed.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .._names import FIELD_OF_CLAIM, HEALTHS, NODE_STATUSES
from .._text import is_int
from ..accountkey import account_key, valid_key
from ..summary import node_status
from ..vendors import DEFAULT_PROVIDER
from .heartbeat import (MAX_LABEL, MAX_PCT, PCT_FIELDS, TIME_FIELDS, clean_number, clean_text, clean_time,
                        iso_or_none)

MAX_ACCOUNTS = 16
ENTRY_FIELDS = ("key", "label", "provider", "status", "health") + PCT_FIELDS + TIME_FIELDS + ("active",)
PROVIDER_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_WINDOWS = (("five_hour", "fiveHour"), ("seven_day", "sevenDay"))

Summary = Optional[Mapping[str, Any]]


# ---------------------------------------------------------------- building (publisher)

def health_word(value: Any) -> Optional[str]:
    """A health as a heartbeat carries it: one of the words, else null (never guessed)."""
    return value if isinstance(value, str) and value in HEALTHS else None


def wall_of(view: Mapping[str, Any], provider: str, trajectory: Any) -> Optional[str]:
    """The forecast wall of an account's binding window in a trajectory body; None without one."""
    field = FIELD_OF_CLAIM.get(view.get("bindingWindow") or "")
    accounts = trajectory.get("accounts") if isinstance(trajectory, Mapping) else None
    if field is None or not isinstance(accounts, list):
        return None
    for entry in accounts:
        if isinstance(entry, Mapping) and entry.get("label") == view.get("label") \
                and entry.get("provider", DEFAULT_PROVIDER) == provider:
            window = entry.get(field)
            forecast = window.get("forecast") if isinstance(window, Mapping) else None
            wall = forecast.get("wallAt") if isinstance(forecast, Mapping) else None
            return wall if isinstance(wall, str) else None
    return None


def entry(view: Mapping[str, Any], provider: str, probed_at: Optional[str], wall_at: Optional[str]) -> Dict[str, Any]:
    """One account view of a posture body as a heartbeat entry. Pure."""
    out: Dict[str, Any] = {"key": account_key(provider, view.get("email")), "label": view.get("label"),
                           "provider": provider, "status": node_status(view),
                           "health": health_word(view.get("health"))}
    for prefix, field in _WINDOWS:
        window = view.get(field)
        window = window if isinstance(window, Mapping) else {}
        out[prefix + "_pct"] = window.get("pct")
        out[prefix + "_resets_at"] = window.get("resetsAt")
    out["wall_at"] = wall_at
    out["probed_at"] = probed_at
    out["active"] = view.get("active") is True
    return out


def accounts_list(summaries: Sequence[Tuple[str, Summary]], trajectory: Any) -> List[Dict[str, Any]]:
    """Every account of every available posture (provider, summary), at most MAX_ACCOUNTS. Pure."""
    out: List[Dict[str, Any]] = []
    for provider, summary in summaries:
        if not isinstance(summary, Mapping) or summary.get("available") is not True:
            continue
        probed = summary.get("probedAt")
        probed_at = iso_or_none(probed) if is_int(probed) else None
        for view in summary.get("accounts") or []:
            if isinstance(view, Mapping) and isinstance(view.get("label"), str):
                out.append(entry(view, provider, probed_at, wall_of(view, provider, trajectory)))
    return out[:MAX_ACCOUNTS]


def accounts_source(currents: Sequence[Tuple[str, Callable[[], Summary]]],
                    trajectory: Callable[[], Any]) -> Callable[[], List[Dict[str, Any]]]:
    """The publisher's `accounts` callable over each vendor's newest posture, in memory."""
    def source() -> List[Dict[str, Any]]:
        return accounts_list([(provider, current()) for provider, current in currents], trajectory())
    return source


# ---------------------------------------------------------------- reading (status, /api/fleet)

def peer_entry(value: Any) -> Optional[Dict[str, Any]]:
    """One entry of a peer's list, whitelisted field by field; None when it has no label."""
    if not isinstance(value, dict):
        return None
    label = clean_text(value.get("label"), MAX_LABEL)
    if label is None:
        return None
    provider = value.get("provider")
    status = value.get("status")
    out: Dict[str, Any] = {
        "key": value["key"] if valid_key(value.get("key")) else None, "label": label,
        "provider": provider if isinstance(provider, str) and PROVIDER_RE.fullmatch(provider) else DEFAULT_PROVIDER,
        "status": status if isinstance(status, str) and status in NODE_STATUSES else None,
        "health": health_word(value.get("health"))}
    for field in PCT_FIELDS:
        out[field] = clean_number(value.get(field), MAX_PCT)
    for field in TIME_FIELDS:
        out[field] = clean_time(value.get(field))
    out["active"] = value.get("active") is True
    return out


def peer_accounts(value: Any) -> List[Dict[str, Any]]:
    """A peer's `accounts`, whitelisted: at most MAX_ACCOUNTS entries, anything else dropped."""
    if not isinstance(value, list):
        return []
    out = []
    for item in value[:MAX_ACCOUNTS]:
        checked = peer_entry(item)
        if checked is not None:
            out.append(checked)
    return out


def entry_schema() -> Dict[str, Any]:
    """JSON Schema of one entry as readers report it (peer_entry)."""
    nullable_time = {"type": ["string", "null"], "format": "date-time"}
    props: Dict[str, Any] = {
        "key": {"type": ["string", "null"], "pattern": "^[0-9a-f]{16}$",
                "description": "sha256(provider NUL lower-cased email), first 16 hex digits; null without an email."},
        "label": {"type": "string", "maxLength": MAX_LABEL},
        "provider": {"type": "string", "pattern": PROVIDER_RE.pattern},
        "status": {"type": ["string", "null"], "enum": list(NODE_STATUSES) + [None]},
        "health": {"type": ["string", "null"], "enum": list(HEALTHS) + [None],
                   "description": "The account's health on this host (ok: read, and lately; refused: the "
                                  "provider refused this host's credential; limited, unreachable, stale, unread: "
                                  "its figures are not a fresh reading); null from a publisher that predates it."},
        "active": {"type": "boolean"}}
    props.update({f: {"type": ["number", "null"], "minimum": 0} for f in PCT_FIELDS})
    props.update({f: nullable_time for f in TIME_FIELDS})
    return {"type": "object", "additionalProperties": False, "required": sorted(props), "properties": props}
