"""The heartbeat's format (docs/fleet.md), in one place: built by the publisher, read by peers.

Every host upserts one attachment `svc://heartbeat/<host>` onto the liveness
anchor; its metadata is

    {"host", "publishedAt", "publishIntervalMs", "version", "accountStatus",
     "quota", "account", "accounts"}

`quota` is the contract's block (§6.2), derived from the newest
`account.ratelimit.sampled` event. `account` is the default vendor's active
account on the publishing host, in snake_case like the quota block:

    {"key", "label", "status", "five_hour_pct", "five_hour_resets_at", "seven_day_pct",
     "seven_day_resets_at", "wall_at", "probed_at", "probe_interval_ms"}

`key` names the account across hosts (svcposture.accountkey; null when its
email is unknown). Every other vendor's active account is the same block under
the vendor's name (`codex`), there only while the host has that vendor's
accounts; `vendors.block_key` says which field holds which vendor's block.
`accounts` lists every account of the host, of every vendor, active or not
(at most 16, hostaccounts.py), so the fleet can be read by account.

`probed_at` and `probe_interval_ms` go beyond the seven fields the fleet page documents (docs/fleet.md):
without them a reader cannot tell a value probed a minute ago from one probed
an hour ago (staleness in the open, docs/posture.md). `wall_at` is the wall forecast of the
active account's binding window, taken from the node's trajectory (the body
/api/trajectory serves, already computed after each probe); null while the
history holds too few points for a rate.

Building is pure: the publisher gathers the values and `metadata()` shapes
them. A peer's metadata is not ours to echo: readers copy each field only when
it has the expected type and shape, and drop anything else.
"""
from __future__ import annotations

import itertools
import urllib.parse
from typing import Any, Callable, Dict, Iterable, Mapping, Optional

from .._names import FIELD_OF_CLAIM, NODE_STATUSES
from ..accountkey import account_key, valid_key
from .._text import finite_number, has_control, is_int, printable
from .._time import now_ms, parse_iso_ms
from ..events import RATELIMIT_SAMPLED, EventLog, event_name
from ..vendors import DEFAULT_PROVIDER
from .budget import claimed_interval_ms
from .tracker import HEARTBEAT_URL_PREFIX

METADATA_FIELDS = ("host", "publishedAt", "publishIntervalMs", "version", "accountStatus", "quota", "account",
                   "accounts")
# What a heartbeat says when the node cannot tell its own account status.
UNAVAILABLE = "unavailable"
PCT_FIELDS = ("five_hour_pct", "seven_day_pct")
TIME_FIELDS = ("five_hour_resets_at", "seven_day_resets_at", "wall_at", "probed_at")
ACCOUNT_FIELDS = ("key", "label", "status") + PCT_FIELDS + TIME_FIELDS + ("probe_interval_ms",)
# Heartbeat `quota` block field for each contract key of account.ratelimit.sampled (contract 6.2).
QUOTA_BLOCK_FIELDS = {
    "ratelimit.five_hour_pct": "five_hour_pct",
    "ratelimit.seven_day_pct": "seven_day_pct",
    "ratelimit.seven_day_large_pct": "seven_day_large_pct",
    "ratelimit.seven_day_medium_pct": "seven_day_medium_pct",
    "ratelimit.five_hour_resets_at": "five_hour_resets_at",
    "ratelimit.seven_day_resets_at": "seven_day_resets_at",
    "subscription.type": "subscription_type",
    "rate_limit.tier": "rate_limit_tier",
}
QUOTA_NUMBERS = tuple(f for k, f in QUOTA_BLOCK_FIELDS.items() if k.endswith("_pct"))
QUOTA_STRINGS = tuple(f for k, f in QUOTA_BLOCK_FIELDS.items() if not k.endswith("_pct"))
# How far back the publisher looks for the newest quota sample; older means none.
QUOTA_SCAN_LIMIT = 5000
MAX_LABEL = 64
MAX_TIME_TEXT = 40
MAX_QUOTA_TEXT = 100
# A pct beyond this is not a utilization, it is junk.
MAX_PCT = 1e6
# How far ahead of the reader's clock a peer's stamp may be and still count as an instant that has
# passed: clocks drift by seconds, not minutes. A stamp further ahead comes from a fast clock (or a
# peer lying); taken at its word it would be the newest reading, and a heartbeat always fresh, forever.
MAX_AHEAD_MS = 60000
_WINDOW_OF_PREFIX = {"five_hour": "fiveHour", "seven_day": "sevenDay"}


def heartbeat_url(host: str) -> str:
    return HEARTBEAT_URL_PREFIX + urllib.parse.quote(host, safe="-._~")


def host_of_heartbeat_url(url: str) -> Optional[str]:
    if not url.startswith(HEARTBEAT_URL_PREFIX):
        return None
    host = urllib.parse.unquote(url[len(HEARTBEAT_URL_PREFIX):])
    return host or None


# ---------------------------------------------------------------- building (publisher)

def metadata(*, host: str, published_at: str, publish_interval_ms: int, version: str,
             account_status: Any, quota: Any, account: Any, accounts: Any = None) -> Dict[str, Any]:
    """The attachment's metadata. Pure; a status that is not a non-empty string is
    UNAVAILABLE, a quota or account that is not a dict is null, accounts that are
    not a list are empty (the keys are always there)."""
    return {
        "host": host,
        "publishedAt": published_at,
        "publishIntervalMs": publish_interval_ms,
        "version": version,
        "accountStatus": account_status if isinstance(account_status, str) and account_status else UNAVAILABLE,
        "quota": quota if isinstance(quota, dict) else None,
        "account": account if isinstance(account, dict) else None,
        "accounts": accounts if isinstance(accounts, list) else [],
    }


def quota_block(event: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """The `quota` block derived from an `account.ratelimit.sampled` event.

    Pure. Absent keys stay absent; None when there is no usable event.
    """
    if not isinstance(event, Mapping):
        return None
    attrs = event.get("attributes")
    if not isinstance(attrs, Mapping) or attrs.get("event.name") != RATELIMIT_SAMPLED:
        return None
    block: Dict[str, Any] = {}
    for key, field in QUOTA_BLOCK_FIELDS.items():
        value = attrs.get(key)
        if value is None:
            continue
        if key.endswith("_pct") and not (is_int(value) or finite_number(value) is not None):
            continue
        if not key.endswith("_pct") and not isinstance(value, str):
            continue
        block[field] = value
    return block


def newest_quota(log: Optional[EventLog]) -> Optional[Dict[str, Any]]:
    """The quota block of the newest sample among the last QUOTA_SCAN_LIMIT events, or None."""
    if log is None:
        return None
    for event in itertools.islice(log.iter_newest_first(), QUOTA_SCAN_LIMIT):
        if event_name(event) == RATELIMIT_SAMPLED:
            return quota_block(event)
    return None


def account_block(summary: Optional[Mapping[str, Any]], *, wall_at: Optional[str] = None,
                  probe_interval_ms: Optional[int] = None,
                  provider: str = DEFAULT_PROVIDER) -> Optional[Dict[str, Any]]:
    """The block of a posture body, or None when the node has no active account (or no posture)."""
    if not isinstance(summary, Mapping) or summary.get("available") is not True:
        return None
    active = summary.get("active")
    if not isinstance(active, Mapping) or not isinstance(active.get("label"), str):
        return None
    block: Dict[str, Any] = {"key": account_key(provider, active.get("email")), "label": active["label"],
                             "status": summary.get("status")}
    for prefix, field in _WINDOW_OF_PREFIX.items():
        window = active.get(field)
        window = window if isinstance(window, Mapping) else {}
        block[prefix + "_pct"] = window.get("pct")
        block[prefix + "_resets_at"] = window.get("resetsAt")
    block["wall_at"] = wall_at
    probed = summary.get("probedAt")
    block["probed_at"] = iso_or_none(probed) if is_int(probed) else None
    block["probe_interval_ms"] = probe_interval_ms
    return block


def iso_or_none(ms: int) -> Optional[str]:
    from .._time import iso_from_ms
    try:
        return iso_from_ms(ms)
    except (ValueError, OverflowError):
        return None


def binding_wall_at(summary: Mapping[str, Any], trajectory: Any) -> Optional[str]:
    """`wallAt` of the forecast of the active account's binding window, from a trajectory body.

    Pure. The trajectory service computes every window's forecast after each
    probe (docs/trajectory.md); this picks the active account's binding window out of
    that body. None when there is no active account, no binding window, no such
    account in the body, or no forecast yet (too few points for a rate).
    """
    active = summary.get("active")
    if not isinstance(active, Mapping) or not isinstance(trajectory, Mapping):
        return None
    claim = active.get("bindingWindow")
    field = FIELD_OF_CLAIM.get(claim) if isinstance(claim, str) else None
    accounts = trajectory.get("accounts")
    if field is None or not isinstance(accounts, list):
        return None
    for account in accounts:
        if isinstance(account, Mapping) and account.get("label") == active.get("label"):
            view = account.get(field)
            forecast = view.get("forecast") if isinstance(view, Mapping) else None
            wall = forecast.get("wallAt") if isinstance(forecast, Mapping) else None
            return wall if isinstance(wall, str) else None
    return None


def account_source(current: Callable[[], Optional[Mapping[str, Any]]], trajectory: Callable[[], Any],
                   probe_interval_s: float, provider: str = DEFAULT_PROVIDER) -> Callable[[], Optional[Dict[str, Any]]]:
    """The publisher's `account` callable: the block of the newest posture (`current()`),
    its wall from the trajectory body in memory (`trajectory()`); nothing is read from disk."""
    interval_ms = int(round(probe_interval_s * 1000))

    def source() -> Optional[Dict[str, Any]]:
        summary = current()
        if not isinstance(summary, Mapping) or summary.get("available") is not True:
            return None
        return account_block(summary, wall_at=binding_wall_at(summary, trajectory()), probe_interval_ms=interval_ms,
                             provider=provider)

    return source


# ---------------------------------------------------------------- reading (status, /api/fleet)

def ahead(stamp_ms: float, now: float) -> bool:
    """Whether a peer's stamp is further ahead of the reader's clock (`now`, ms) than drift explains."""
    return stamp_ms > now + MAX_AHEAD_MS


def published_ms(heartbeat: Any, now: Optional[int] = None) -> Optional[int]:
    """When a heartbeat (a tracker.Heartbeat) was published: its `publishedAt`, else the
    attachment's subtitle, else its last update; None when none of them is an instant.

    A stamp more than MAX_AHEAD_MS ahead of `now` (default: the clock) is no instant of
    publication and the next one is taken: `publishedAt` and the subtitle come from the peer's
    clock, the update time from the tracker's, so a host whose clock runs fast is judged by when
    the tracker last saw its heartbeat, and a host with no believable stamp is never fresh."""
    current = now_ms() if now is None else now
    meta = heartbeat.metadata if isinstance(heartbeat.metadata, Mapping) else {}
    for value in (meta.get("publishedAt"), heartbeat.subtitle, heartbeat.updated_at):
        if isinstance(value, str):
            try:
                stamp = parse_iso_ms(value)
            except (ValueError, OverflowError):
                continue
            if not ahead(stamp, current):
                return stamp
    return None


def newest_by_host(heartbeats: Iterable[Any], now: Optional[int] = None) -> Dict[str, Any]:
    """One heartbeat per host: of duplicates (two urls decoding to one host, a
    tracker repeating a node), the newest published wins (published_ms: a stamp
    from the future does not make a duplicate the newest)."""
    current = now_ms() if now is None else now
    by_host: Dict[str, Any] = {}
    for heartbeat in heartbeats:
        host = host_of_heartbeat_url(heartbeat.url)
        if host is None:
            continue
        seen = by_host.get(host)
        if seen is None or (published_ms(heartbeat, current) or 0) >= (published_ms(seen, current) or 0):
            by_host[host] = heartbeat
    return by_host


def peer_interval_ms(value: Any, default: float) -> float:
    """A peer's `publishIntervalMs` when it is a finite positive number, else `default` (the reader's own);
    a claim past the longest stretch is cut to it, so no heartbeat keeps a dead host live for hours."""
    interval = finite_number(value)
    if interval is None or interval <= 0:
        return default
    return claimed_interval_ms(interval, default)


def peer_quota(value: Any) -> Optional[Dict[str, Any]]:
    """A peer's quota block, whitelisted field by field."""
    if not isinstance(value, dict):
        return None
    block: Dict[str, Any] = {}
    for field in QUOTA_NUMBERS:
        number = finite_number(value.get(field))
        if number is not None:
            block[field] = number
    for field in QUOTA_STRINGS:
        text = value.get(field)
        if isinstance(text, str) and len(text) <= MAX_QUOTA_TEXT and not has_control(text):
            block[field] = text
    return block


def clean_text(value: Any, limit: int) -> Optional[str]:
    if isinstance(value, str) and 0 < len(value) <= limit and not has_control(value):
        return value
    return None


def clean_time(value: Any) -> Optional[str]:
    text = clean_text(value, MAX_TIME_TEXT)
    if text is None:
        return None
    try:
        parse_iso_ms(text)
    except (ValueError, OverflowError):
        return None
    return text


def clean_number(value: Any, high: float) -> Optional[float]:
    number = finite_number(value)
    return number if number is not None and 0 <= number <= high else None


def peer_account(value: Any, *, publish_interval_ms: float, now: Optional[int] = None) -> Optional[Dict[str, Any]]:
    """A peer's block, whitelisted field by field, plus what a reader derives from it:

    `age_s`, seconds since `probed_at` (null when unknown), and `stale`, true
    when that age exceeds twice the longer of the peer's publish interval and
    its probe interval: such values are shown greyed with their age, never as
    current. `suspect` is true when `probed_at` is more than MAX_AHEAD_MS ahead
    of `now`: a clock runs fast, so nothing tells how old the reading is (its
    `age_s` is null) and it is stale too. A label may hold any printable text
    (a page shows it escaped); a status outside the node-status vocabulary
    becomes null.
    """
    if not isinstance(value, dict):
        return None
    block: Dict[str, Any] = {"key": value["key"] if valid_key(value.get("key")) else None,
                             "label": clean_text(value.get("label"), MAX_LABEL)}
    status = value.get("status")
    block["status"] = status if isinstance(status, str) and status in NODE_STATUSES else None
    for field in PCT_FIELDS:
        block[field] = clean_number(value.get(field), MAX_PCT)
    for field in TIME_FIELDS:
        block[field] = clean_time(value.get(field))
    interval = clean_number(value.get("probe_interval_ms"), 365 * 86400 * 1000.0)
    block["probe_interval_ms"] = int(interval) if interval else None
    age_s: Optional[float] = None
    suspect = False
    if block["probed_at"] is not None:
        current = now_ms() if now is None else now
        probed = parse_iso_ms(block["probed_at"])
        suspect = ahead(probed, current)
        age_s = None if suspect else round(max(0, current - probed) / 1000.0, 1)
    block["age_s"] = age_s
    limit_ms = 2 * max(publish_interval_ms, block["probe_interval_ms"] or 0)
    block["stale"] = suspect or (age_s is not None and age_s * 1000 > limit_ms)
    block["suspect"] = suspect
    return block


MAX_UNLISTED = 100


def unlisted_rows(roster: Any, published: Mapping[str, Optional[int]], now: int) -> list:
    """Heartbeats of hosts that are not in the roster: shown apart, never counted live.

    A name absent from the roster owns no tickets, so such a host is either a
    typo or a host about to be added. At most MAX_UNLISTED rows, names made
    printable and cut to 200 characters (they come from whoever can attach to
    the anchor).
    """
    members = set(roster)
    rows = []
    for host in sorted(h for h in published if h not in members)[:MAX_UNLISTED]:
        stamp = published[host]
        rows.append({"host": printable(host)[:200],
                     "ageS": None if stamp is None else round(max(0, now - stamp) / 1000.0, 1)})
    return rows


# ---------------------------------------------------------------- schemas (GET /openapi.json)

def account_schema() -> Dict[str, Any]:
    """JSON Schema of the `account` block as readers report it (peer_account)."""
    nullable_time = {"type": ["string", "null"], "format": "date-time"}
    props: Dict[str, Any] = {
        "key": {"type": ["string", "null"], "pattern": "^[0-9a-f]{16}$",
                "description": "The account across hosts: sha256(provider NUL lower-cased email), first 16 hex "
                               "digits; null when the host does not know the account's email."},
        "label": {"type": ["string", "null"], "maxLength": MAX_LABEL,
                  "description": "The active account's label on that host; any printable text, shown escaped."},
        "status": {"type": ["string", "null"], "enum": list(NODE_STATUSES) + [None]},
        "probe_interval_ms": {"type": ["integer", "null"], "minimum": 0},
        "age_s": {"type": ["number", "null"], "minimum": 0,
                  "description": "Seconds since probed_at, when the report was read; null when unknown or "
                                 "suspect."},
        "stale": {"type": "boolean", "description": "age_s beyond twice the longer of the host's publish "
                                                    "and probe intervals, or the reading is suspect: shown "
                                                    "greyed, never as current."},
        "suspect": {"type": "boolean",
                    "description": "probed_at is more than %d s ahead of the reader's clock (a clock runs "
                                   "fast): the reading's age is unknown, and it is an account's newest only "
                                   "where no host has a believable one. Every reader sets it; absent (the "
                                   "demo's simulated fleet) means false."
                                   % (MAX_AHEAD_MS // 1000)}}
    props.update({f: {"type": ["number", "null"], "minimum": 0} for f in PCT_FIELDS})
    props.update({f: nullable_time for f in TIME_FIELDS})
    required = sorted(p for p in props if p != "suspect")
    return {"type": "object", "additionalProperties": False, "required": required, "properties": props}


def quota_schema() -> Dict[str, Any]:
    """JSON Schema of the `quota` block as readers report it (peer_quota)."""
    props = {f: ({"type": "number"} if f in QUOTA_NUMBERS else {"type": "string"})
             for f in QUOTA_BLOCK_FIELDS.values()}
    return {"type": "object", "additionalProperties": False, "properties": props}
