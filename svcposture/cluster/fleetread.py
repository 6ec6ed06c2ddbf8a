"""The fleet read from Prometheus, parsed: replies in, status rows out (pure, no I/O).

promread asks the engine; this module reads what it answered (docs/fleet-prometheus.md).
The rows are built in two steps so that a reader can overlap them with its last
query: `draft_rows` writes every host row from the first three replies (states,
accounts, which one is active, where each account's newest reading is), and
`Draft.filled` writes the figures of the fourth into the places the draft left
for them. Each host row's `accounts` entries carry figures only where that host
holds the account's newest reading; its active `account` block carries the
account's newest reading wherever it was taken (`probed_at` says when).

A series without a `provider` label is the default vendor's (its node-level
series carry none); a provider this node has not registered keeps its accounts
in `accounts`, and each registered vendor's active account is the row's block
under `vendors.block_key` (`account` for the default vendor), as in a heartbeat.

Labels are checked where they are read (every one must be a string), figures
field by field: a reply comes from a service this node does not control.

Each account's health on its host (docs/posture.md, "Health") comes in two
steps, because asking every account's six health series costs the engine
five times what the rest of the read does: the accounts reply carries the
accounts whose `ok` series is 0 (not ok), and the readings query asks which
health those few have, by their nodes. Every other account is `ok`, as an
account of a monitor that predates health is without an error (its status
says an error where the read has one). An account its host has never read
(a refused credential) exports no reading time, only its health: it is
listed all the same, without figures.

When each account was read (`svc_account_probed_at_seconds`) is the value its
host exports, from that host's clock: a reading more than a minute ahead of
this reader's (heartbeat.MAX_AHEAD_MS) is suspect. It is an account's newest
only where no host has a believable reading, and is then marked (`suspect` on
the active block); otherwise one fast clock would hide every fresh reading.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from .._names import HEALTH_OK, HEALTHS, UNREAD
from .._text import has_control, read_pct
from .._time import iso_from_ms
from ..accountkey import valid_key
from ..errors import SvcpostureError
from ..vendors import DEFAULT_BLOCK_KEY, DEFAULT_PROVIDER, block_keys
from .heartbeat import MAX_AHEAD_MS, MAX_LABEL, MAX_PCT
from .hostaccounts import MAX_ACCOUNTS, PROVIDER_RE

_PCT = {"five_hour": "five_hour_pct", "seven_day": "seven_day_pct"}
_RESET = {"five_hour": "five_hour_resets_at", "seven_day": "seven_day_resets_at"}
_STATUSES = ("ok", "degraded", "rejected", "error", "unknown")

Sample = Tuple[Dict[str, Any], float]
# (node, provider, account label): where an account's figures were read
Place = Tuple[str, str, str]


class PrometheusError(SvcpostureError):
    """Base of every Prometheus read failure; each concern (here and in promread) also subclasses
    a builtin."""


class PrometheusResponseError(PrometheusError, ValueError):
    """Prometheus answered, but not with a successful instant-vector result."""


def _label(labels: Dict[str, Any], name: str) -> str:
    value = labels.get(name, "")
    if type(value) is not str:
        raise PrometheusResponseError("Prometheus reply has a non-string label")
    return value


# A fleet repeats a few labels and providers on every host: each is checked once per distinct value.
@functools.lru_cache(maxsize=4096)
def _known_provider(provider: str) -> bool:
    return PROVIDER_RE.fullmatch(provider) is not None


@functools.lru_cache(maxsize=4096)
def _clean_label(value: str) -> Optional[str]:
    return value if value and len(value) <= MAX_LABEL and not has_control(value) else None


def _newer(value: float, held: float, believed: float) -> bool:
    """Whether a reading at `value` (epoch s) replaces one at `held` as an account's newest: a
    believable one (at most `believed`) beats any suspect one; among the suspect, the nearest the
    present wins."""
    if held > believed:
        return value <= believed or value < held
    return held < value <= believed


def _iso_s(seconds: float) -> Optional[str]:
    try:
        return iso_from_ms(int(seconds * 1000)) if math.isfinite(seconds) and seconds > 0 else None
    except (ValueError, OverflowError):
        return None


class FleetRead:
    """What each node and each account says, one reply at a time; `now_s` is the reader's clock
    (epoch s), against which a reading from the future is told."""

    def __init__(self, now_s: float) -> None:
        # A reading stamped after this is suspect (heartbeat.MAX_AHEAD_MS).
        self.believed_s = now_s + MAX_AHEAD_MS / 1000.0
        self.up: Dict[str, float] = {}
        self.seen: Dict[str, float] = {}
        self.errors: Set[Tuple[str, str]] = set()
        # node -> [(not the default vendor's, label, provider, key, when its figures were read, epoch s)]
        self.members: Dict[str, List[Tuple[bool, str, str, str, float]]] = {}
        self.active: Set[Place] = set()
        # key -> ((node, provider, label), when read): where the newest reading of the account is,
        # a suspect one only where no reading is believable (the nearest the present of them)
        self.newest: Dict[str, Tuple[Place, float]] = {}
        # The accounts whose health is not ok, and the health the readings said each has.
        self.unhealthy: Dict[Place, str] = {}
        self.healths: Dict[Place, str] = {}
        self._figures: Dict[Place, Dict[str, Any]] = {}
        self._fields: Dict[Place, Dict[str, Any]] = {}

    def hosts(self, samples: List[Sample]) -> None:
        up = self.up
        for labels, value in samples:
            node = _label(labels, "node")
            if node:
                up[node] = value

    def accounts(self, samples: List[Sample]) -> None:
        newest, members, default, believed = self.newest, self.members, DEFAULT_PROVIDER, self.believed_s
        for labels, value in samples:
            node, key = _label(labels, "node"), _label(labels, "account_key")
            provider, label = _label(labels, "provider") or default, _label(labels, "account")
            if not node or not _known_provider(provider):
                continue  # a series no roster target labelled, or no provider this node knows
            if "health" in labels:
                # Its `ok` series at 0: the account is not ok (the readings say how).
                self.unhealthy[(node, provider, label)] = key
                continue
            held = members.get(node)
            if held is None:
                held = members[node] = []
            # The default vendor's first, then by label: the order of a row's entries, by a plain tuple sort.
            held.append((provider != default, label, provider, key, value))
            # A reading whose label a row would drop (docs/fleet.md: printable, at most 64) is no
            # account's newest, as in a heartbeat: one host's odd label costs its own entry only.
            if key and math.isfinite(value) and _clean_label(label) is not None:
                best = newest.get(key)
                if best is None or _newer(value, best[1], believed):
                    newest[key] = ((node, provider, label), value)
        self._unread_members()

    def _unread_members(self) -> None:
        """An account that is not ok and has no reading time (never read) is a member all the same:
        its host has it. Its reading time is 0, which no reading has."""
        for (node, provider, label), key in self.unhealthy.items():
            held = self.members.setdefault(node, [])
            if not any(m[1] == label and m[2] == provider for m in held):
                held.append((provider != DEFAULT_PROVIDER, label, provider, key, 0.0))

    def unhealthy_nodes(self) -> List[str]:
        """The nodes with an account whose health is not ok, for the readings query to ask which."""
        return sorted({node for node, _, _ in self.unhealthy})

    def actives(self, samples: List[Sample]) -> None:
        """Each node's active accounts, valued when their series was last scraped (so when the
        node was), and the nodes whose probes fail (a `status` series at 1)."""
        seen = self.seen
        for labels, value in samples:
            node, provider = _label(labels, "node"), _label(labels, "provider") or DEFAULT_PROVIDER
            if "status" in labels:
                if value == 1:
                    self.errors.add((node, provider))
                continue
            self.active.add((node, provider, _label(labels, "account")))
            if math.isfinite(value) and value > seen.get(node, 0.0):
                seen[node] = value

    def reading_places(self) -> List[Tuple[str, str]]:
        """(node, account label) of every account's newest reading."""
        return sorted({(node, label) for (node, _, label), _ in self.newest.values()})

    def keyless(self) -> bool:
        return any(not member[3] for held in self.members.values() for member in held)

    def readings(self, samples: List[Sample]) -> None:
        for labels, value in samples:
            if "health" in labels:
                health = _label(labels, "health")
                if value == 1 and health in HEALTHS:
                    place = (_label(labels, "node"), _label(labels, "provider") or DEFAULT_PROVIDER,
                             _label(labels, "account"))
                    self.healths[place] = health
                continue
            # A status series has its name, or only its `status` label when asked apart.
            name = _label(labels, "__name__") or ("svc_account_status" if "status" in labels else "")
            node, provider = _label(labels, "node"), _label(labels, "provider") or DEFAULT_PROVIDER
            figures = self._figures.setdefault((node, provider, _label(labels, "account")), {})
            window = _label(labels, "window")
            if name == "svc_account_status":
                status = _label(labels, "status")
                if value == 1 and status in _STATUSES:
                    figures["status"] = status
            elif name == "svc_account_utilization_percent" and window in _PCT:
                figures[_PCT[window]] = read_pct(value, MAX_PCT)
            elif name == "svc_account_window_resets_at_seconds" and window in _RESET:
                figures[_RESET[window]] = _iso_s(value)
            elif name == "svc_account_forecast_wall_timestamp_seconds" and math.isfinite(value):
                # The first wall is the binding one: the heartbeat's wall_at is the binding window's.
                figures["wall_s"] = min(value, figures.get("wall_s", value))

    def fields(self, place: Place, read_s: float) -> Dict[str, Any]:
        """The reading at `place` as entry fields (computed once per place)."""
        fields = self._fields.get(place)
        if fields is None:
            raw = self._figures.get(place, {})
            fields = self._fields[place] = {
                "status": raw.get("status"), "five_hour_pct": raw.get("five_hour_pct"),
                "five_hour_resets_at": raw.get("five_hour_resets_at"), "seven_day_pct": raw.get("seven_day_pct"),
                "seven_day_resets_at": raw.get("seven_day_resets_at"),
                "wall_at": _iso_s(raw["wall_s"]) if "wall_s" in raw else None,
                "probed_at": _iso_s(read_s), "probed_s": read_s}
        return fields


_NO_READING = {"status": None, "five_hour_pct": None, "five_hour_resets_at": None, "seven_day_pct": None,
               "seven_day_resets_at": None, "wall_at": None, "probed_at": None}
_ENTRY_FIGURES = tuple(_NO_READING)
# An active block before its figures, copied for each (a copy of a dict is one C call).
_BLOCK = {"key": None, "label": None, "status": None, "five_hour_pct": None, "seven_day_pct": None,
          "five_hour_resets_at": None, "seven_day_resets_at": None, "wall_at": None, "probed_at": None,
          "probe_interval_ms": None, "age_s": None, "stale": False, "suspect": False}
_QUOTA_FIELDS = ("five_hour_pct", "seven_day_pct", "five_hour_resets_at", "seven_day_resets_at")


@functools.lru_cache(maxsize=8192)
def _shown_key(key: str) -> Optional[str]:
    return key if valid_key(key) else None


class Draft:
    """Host rows without their figures, and the places each figure goes once they are read."""

    def __init__(self, read: FleetRead, interval_ms: int, now_s: float) -> None:
        self.read, self.interval_ms, self.now_s = read, interval_ms, now_s
        # provider -> the row field of its active block: the registered vendors only (vendors.block_key).
        self.block_of: Dict[str, str] = dict(block_keys())
        self.rows: List[Dict[str, Any]] = []
        # (entry, place, when read): an entry whose host holds the account's newest reading
        self.entries: List[Tuple[Dict[str, Any], Place, float]] = []
        # (entry, place): an entry whose health is not ok, told by the readings
        self.sick: List[Tuple[Dict[str, Any], Place]] = []
        # (row, block field, block, whether the host's probes fail, place or None, when read)
        self.blocks: List[Tuple[Dict[str, Any], str, Dict[str, Any], bool, Optional[Place], float]] = []
        # place -> (the block's figures, the quota they make): the same for every host with the account
        self._made: Dict[Optional[Place], Tuple[Dict[str, Any], Optional[Dict[str, Any]]]] = {}

    def add(self, hosts: Sequence[str]) -> None:
        """A row for each of `hosts`. This runs for every host of the fleet: what the loop reads
        is held in locals, and every dict is written as a literal."""
        read, now_s, rows, blocks, pending, block_of = (self.read, self.now_s, self.rows, self.blocks,
                                                        self.entries, self.block_of)
        up, seen, members, newest, actives, errors = (read.up, read.seen, read.members, read.newest,
                                                      read.active, read.errors)
        unhealthy, sick = read.unhealthy, self.sick
        for host in hosts:
            value, seen_s = up.get(host), seen.get(host)
            state = "missing" if value is None else ("live" if value >= 1 else "stale")
            row: Dict[str, Any] = {"host": host, "state": state,
                                   "ageS": round(max(0.0, now_s - seen_s), 1)
                                   if seen_s is not None and state == "live" else None,
                                   "quota": None, DEFAULT_BLOCK_KEY: None}
            entries: List[Dict[str, Any]] = []
            for _, label, provider, key, read_s in sorted(members.get(host, ())):
                here: Place = (host, provider, label)
                place: Optional[Place] = here  # a keyless account is only its own host's
                if key:
                    place, read_s = newest.get(key) or (None, 0.0)
                active = here in actives
                clean, shown = _clean_label(label), _shown_key(key)
                field = block_of.get(provider)
                if active and field is not None and row.get(field) is None:
                    row[field] = block = dict(_BLOCK, key=shown, label=clean)
                    blocks.append((row, field, block, (host, provider) in errors, place, read_s))
                if clean is None:
                    continue
                entry = {"key": shown, "label": clean, "provider": provider, "status": None, "health": HEALTH_OK,
                         "five_hour_pct": None, "five_hour_resets_at": None, "seven_day_pct": None,
                         "seven_day_resets_at": None, "wall_at": None, "probed_at": None, "active": active}
                if here in unhealthy:
                    sick.append((entry, here))
                if place == here:
                    pending.append((entry, here, read_s))
                entries.append(entry)
            row["accounts"] = entries[:MAX_ACCOUNTS]
            rows.append(row)

    def filled(self) -> List[Dict[str, Any]]:
        """The rows, with the figures of the readings read since the draft."""
        read = self.read
        for entry, place, read_s in self.entries:
            fields = read.fields(place, read_s)
            for name in _ENTRY_FIGURES:
                entry[name] = fields[name]
        for entry, place in self.sick:
            # Not ok, and which the readings did not say (its host changed between two queries):
            # nothing of it is known to have been read.
            entry["health"] = read.healths.get(place, UNREAD)
        for row, field, block, failing, place, read_s in self.blocks:
            figures, quota = self._figures_of(place, read_s)
            block.update(figures)
            if failing:
                block["status"] = "error"
            if field == DEFAULT_BLOCK_KEY:
                row["quota"] = dict(quota) if quota else None
        return self.rows

    def _figures_of(self, place: Optional[Place],
                    read_s: float) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
        """The active block's figures from the reading at `place` (the account's newest), in the
        shape peer_account gives, and the row quota they make."""
        made = self._made.get(place)
        if made is None:
            fields = self.read.fields(place, read_s) if place is not None else {}
            probed_s = fields.get("probed_s")
            known = bool(fields.get("probed_at")) and probed_s is not None
            suspect = known and probed_s > self.read.believed_s
            age = round(max(0.0, self.now_s - probed_s), 1) if known and not suspect else None
            figures = {name: fields.get(name) for name in ("status",) + _QUOTA_FIELDS + ("wall_at", "probed_at")}
            figures["age_s"] = age
            figures["stale"] = suspect or (age is not None and age * 1000 > 2 * self.interval_ms)
            figures["suspect"] = suspect
            quota = {f: figures[f] for f in _QUOTA_FIELDS if figures[f] is not None}
            made = self._made[place] = (figures, quota or None)
        return made


def draft_rows(read: FleetRead, roster: Sequence[str], interval_ms: int, now_s: float) -> Draft:
    """One row per roster host (each once, in roster order) from what `read` holds so far."""
    draft = Draft(read, interval_ms, now_s)
    draft.add(list(dict.fromkeys(roster)))
    return draft
