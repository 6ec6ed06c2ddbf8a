"""Liveness and posture read from Prometheus (SVC_LIVENESS_READ_SOURCE=prometheus).

Past one bot user's tracker budget (docs/fleet-prometheus.md) the fleet comes from the engine
that already scrapes every monitor. Its targets come from `svc-cluster roster
sd`, which labels each one `node=<roster name>`, so every series a monitor
exports carries its roster name. At most three instant queries, whatever the
fleet size (W is twice the publish interval):

    hosts     per node: max_over_time(up[W]) (live or stale), when it was last
              scraped, and whether its probes fail (node status error)
    accounts  per node: every account (label, provider, account_key) with when its
              figures were read, and which one is active; the newest reading of
              each key across the fleet is picked from these
    readings  the windows, wall and status of the accounts on the nodes holding
              some account's newest reading, and of accounts without a key

A roster host is `live` when a scrape of it succeeded within W, `stale` when
it was scraped but none succeeded, and `missing` when Prometheus has no series
for it. The readings are asked for once per account, not once per host: a
fleet of 10,000 hosts sharing a thousand accounts is a thousand readings, and
neither the engine's work nor the replies grow with every host's windows. Each host
row's `accounts` entries carry figures only where that host holds the newest
reading; its active `account` block carries the account's newest reading
(`probed_at` says when). The replies come from a service this node does not
control: bounded, checked field by field, and any failure is one
PrometheusError, so that nobody is marked dead by a broken read. Any
Prometheus-compatible query API works (VictoriaMetrics, Thanos, Mimir).
"""
from __future__ import annotations

import contextlib
import functools
import gc
import math
import re
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

from .._http import DeadlineExceeded
from .._http import get as deadline_get
from .._text import has_control, loads_bounded
from .._time import iso_from_ms
from .._version import __version__
from ..accountkey import valid_key
from ..errors import SvcpostureError
from ..settings import PROMETHEUS_URL_ENV
from .heartbeat import MAX_LABEL, MAX_PCT
from .hostaccounts import PROVIDER_RE

# One deadline for all the queries of one status, not one per request.
READ_DEADLINE_S = 10.0
# ~100 bytes a series; 10,000 hosts of three accounts are about 8 MiB.
MAX_REPLY_BYTES = 64 * 1024 * 1024
MAX_SERIES = 500000
_PCT = {"five_hour": "five_hour_pct", "seven_day": "seven_day_pct"}
_RESET = {"five_hour": "five_hour_resets_at", "seven_day": "seven_day_resets_at"}
_STATUSES = ("ok", "degraded", "rejected", "error", "unknown")


class PrometheusError(SvcpostureError):
    """Base of every Prometheus read failure; each concern below also subclasses a builtin."""


class PrometheusConfigError(PrometheusError, ValueError):
    """SVC_PROMETHEUS_URL is unset or not an http(s) URL."""


class PrometheusUnreachableError(PrometheusError, ConnectionError):
    """No answer: connection refused, timeout, or the read deadline passed."""


class PrometheusResponseError(PrometheusError, ValueError):
    """Prometheus answered, but not with a successful instant-vector result."""


Sample = Tuple[Dict[str, str], float]


def _claude(expr: str) -> str:
    """Claude's node-level series have no `provider` label (they predate Codex): name it."""
    return 'label_replace(%s, "provider", "claude", "provider", "")' % expr


# The series of a reading; the status family has one series per status, 1 marking the current one.
READING_NAMES = ("svc_account_utilization_percent", "svc_account_window_resets_at_seconds",
                 "svc_account_forecast_wall_timestamp_seconds", "svc_account_status")
# A node filter longer than this is left out (VictoriaMetrics refuses queries over 16 KiB by default):
# the readings are then asked of every node, which is correct, only slower.
MAX_NODE_FILTER = 12000
_NODE_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")


def fleet_queries(interval_ms: int) -> Tuple[str, str]:
    """The first two PromQL queries of one status (the module docstring explains each);
    the third, `readings_query`, names the nodes the second showed to hold the newest readings."""
    window_s = max(1, int(math.ceil(2 * interval_ms / 1000.0)))
    hosts = ('max by (node) (max_over_time(up{node!=""}[%ds]))'
             ' or max by (node, seen) (label_replace(timestamp(svc_posture_available{node!=""}),'
             ' "seen", "1", "", ""))'
             ' or max by (node, provider, status) (%s)'
             % (window_s, _claude('svc_node_status{node!="",status="error"} == 1')))
    accounts = ('max by (node, provider, account, account_key) (svc_account_probed_at_seconds{node!=""})'
                ' or max by (node, provider, account, active)'
                ' (label_replace(svc_node_active_account{node!=""} == 1, "active", "1", "", ""))')
    return hosts, accounts


def readings_query(nodes: Sequence[str], keyless: bool) -> Optional[str]:
    """The figures of the accounts on `nodes` (every node when the filter would be too long or a
    name is no host name): each window's series and the account's current status (topk keeps
    the status series at 1); with `keyless`, also those of every account without a key.
    None when there is nothing to ask."""
    figures = ('max by (__name__, node, provider, account, window, status) (topk by (__name__, node, provider,'
               ' account, window) (1, {__name__=~"%s",%%s}))' % "|".join(READING_NAMES))
    names = sorted(set(nodes))
    pattern = "|".join(n.replace(".", "\\\\.") for n in names)
    parts = []
    if names and len(pattern) <= MAX_NODE_FILTER and all(_NODE_NAME_RE.match(n) for n in names):
        parts.append(figures % ('node=~"%s"' % pattern))
    elif names:
        parts.append(figures % 'node!=""')
    if keyless:
        parts.append(figures % 'node!="",account_key=""')
    return " or ".join(parts) or None


def base_url(url: str) -> str:
    """$SVC_PROMETHEUS_URL (Settings.prometheus_url) checked: set, and http(s)."""
    base = (url or "").strip()
    if not base:
        raise PrometheusConfigError("SVC_LIVENESS_READ_SOURCE=prometheus but %s is unset" % PROMETHEUS_URL_ENV)
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise PrometheusConfigError("%s must be an http(s) URL" % PROMETHEUS_URL_ENV)
    return base.rstrip("/")


# ---------------------------------------------------------------- transport

def http_get(url: str, timeout_s: float, max_bytes: int) -> Tuple[int, bytes]:
    """(HTTP status, at most max_bytes + 1 bytes of the body); an error status is still read.
    The whole exchange is bounded by timeout_s, however slowly Prometheus trickles it."""
    try:
        return deadline_get(url, timeout_s, max_bytes, "svcposture/%s" % __version__)
    except DeadlineExceeded:
        raise PrometheusUnreachableError("Prometheus did not answer within %g s" % timeout_s) from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise PrometheusUnreachableError("cannot reach Prometheus: %s" % str(reason)[:200]) from None


def instant_query(base: str, query: str, deadline: float) -> List[Sample]:
    """One /api/v1/query: [(labels, value)] of its instant vector, or a PrometheusError."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise PrometheusUnreachableError("Prometheus did not answer within %g s" % READ_DEADLINE_S)
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": query})
    status, raw = http_get(url, left, MAX_REPLY_BYTES)
    if len(raw) > MAX_REPLY_BYTES:
        raise PrometheusResponseError("Prometheus reply larger than %d bytes" % MAX_REPLY_BYTES)
    try:
        reply = loads_bounded(raw, MAX_REPLY_BYTES)
    except ValueError:
        raise PrometheusResponseError("Prometheus reply is not JSON (HTTP %d)" % status) from None
    return _samples(reply, status)


def _samples(reply: Any, status: int) -> List[Sample]:
    """The vector's (labels, value) pairs. Labels are checked where they are read (every one
    read must be a string); here each entry's shape and number."""
    from .tracker import CONTROL_RUN_RE
    if not isinstance(reply, dict):
        raise PrometheusResponseError("Prometheus reply is not a JSON object (HTTP %d)" % status)
    if reply.get("status") != "success" or status >= 300:
        error = reply.get("error")
        detail = CONTROL_RUN_RE.sub(" ", error)[:200] if isinstance(error, str) else "no detail"
        raise PrometheusResponseError("Prometheus query failed (HTTP %d): %s" % (status, detail))
    data = reply.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(result, list):
        raise PrometheusResponseError("Prometheus reply is not an instant vector")
    if len(result) > MAX_SERIES:
        raise PrometheusResponseError("Prometheus reply has more than %d series" % MAX_SERIES)
    try:
        # One comprehension: this runs once per series of a 10,000-host fleet.
        samples = [(e["metric"], float(e["value"][1])) for e in result]
    except (TypeError, KeyError, IndexError, ValueError):
        raise PrometheusResponseError("Prometheus reply has a malformed sample") from None
    if not all(type(m) is dict for m, _ in samples):
        raise PrometheusResponseError("Prometheus reply has a malformed sample")
    return samples


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
    return _text(value)


def _text(value: str, limit: int = MAX_LABEL) -> Optional[str]:
    return value if value and len(value) <= limit and not has_control(value) else None


def _iso_s(seconds: float) -> Optional[str]:
    try:
        return iso_from_ms(int(seconds * 1000)) if math.isfinite(seconds) and seconds > 0 else None
    except (ValueError, OverflowError):
        return None


def _pct(value: float) -> Optional[float]:
    return value if math.isfinite(value) and 0 <= value <= MAX_PCT else None


# ---------------------------------------------------------------- the fleet

class FleetRead:
    """The replies, parsed: what each node and each account says (pure, no I/O)."""

    def __init__(self) -> None:
        self.up: Dict[str, float] = {}
        self.seen: Dict[str, float] = {}
        self.errors: Set[Tuple[str, str]] = set()
        # node -> [(provider, label, key, when its figures were read, epoch s)]
        self.members: Dict[str, List[Tuple[str, str, str, float]]] = {}
        self.active: Set[Tuple[str, str, str]] = set()
        # key -> (node, provider, label, when read): where the newest reading of the account is
        self.newest: Dict[str, Tuple[str, str, str, float]] = {}
        self._figures: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
        self._fields: Dict[Tuple[str, str, str], Dict[str, Any]] = {}

    def hosts(self, samples: List[Sample]) -> None:
        for labels, value in samples:
            node = _label(labels, "node")
            if "status" in labels:
                if value == 1:
                    self.errors.add((node, _label(labels, "provider") or "claude"))
            elif "seen" in labels:
                self.seen[node] = value
            elif node:
                self.up[node] = value

    def accounts(self, samples: List[Sample]) -> None:
        newest = self.newest
        for labels, value in samples:
            node, provider, label = _label(labels, "node"), _label(labels, "provider") or "claude", \
                _label(labels, "account")
            if "active" in labels:
                self.active.add((node, provider, label))
                continue
            key = _label(labels, "account_key")
            self.members.setdefault(node, []).append((provider, label, key, value))
            if key and math.isfinite(value) and (key not in newest or value > newest[key][3]):
                newest[key] = (node, provider, label, value)

    def reading_nodes(self) -> List[str]:
        """The nodes that hold some account's newest reading."""
        return sorted({place[0] for place in self.newest.values()})

    def keyless(self) -> bool:
        return any(not key for held in self.members.values() for _, _, key, _ in held)

    def readings(self, samples: List[Sample]) -> None:
        for labels, value in samples:
            name = _label(labels, "__name__")
            node, provider = _label(labels, "node"), _label(labels, "provider") or "claude"
            figures = self._figures.setdefault((node, provider, _label(labels, "account")), {})
            window = _label(labels, "window")
            if name == "svc_account_status":
                status = _label(labels, "status")
                if value == 1 and status in _STATUSES:
                    figures["status"] = status
            elif name == "svc_account_utilization_percent" and window in _PCT:
                figures[_PCT[window]] = _pct(value)
            elif name == "svc_account_window_resets_at_seconds" and window in _RESET:
                figures[_RESET[window]] = _iso_s(value)
            elif name == "svc_account_forecast_wall_timestamp_seconds" and math.isfinite(value):
                # The first wall is the binding one: the heartbeat's wall_at is the binding window's.
                figures["wall_s"] = min(value, figures.get("wall_s", value))

    def reading(self, node: str, provider: str, label: str, key: str,
                read_s: float) -> Tuple[Optional[Dict[str, Any]], bool]:
        """(the account's newest reading as entry fields, whether `node` holds it); (None, False) without one."""
        if key:
            found = self.newest.get(key)
            if found is None:
                return None, False
            place, read_s = (found[0], found[1], found[2]), found[3]
        else:
            place = (node, provider, label)
        fields = self._fields.get(place)
        if fields is None:
            raw = self._figures.get(place, {})
            fields = self._fields[place] = {
                "status": raw.get("status"), "five_hour_pct": raw.get("five_hour_pct"),
                "five_hour_resets_at": raw.get("five_hour_resets_at"), "seven_day_pct": raw.get("seven_day_pct"),
                "seven_day_resets_at": raw.get("seven_day_resets_at"),
                "wall_at": _iso_s(raw["wall_s"]) if "wall_s" in raw else None,
                "probed_at": _iso_s(read_s), "probed_s": read_s}
        return fields, place == (node, provider, label)


_NO_READING = {"status": None, "five_hour_pct": None, "five_hour_resets_at": None, "seven_day_pct": None,
               "seven_day_resets_at": None, "wall_at": None, "probed_at": None}
_ENTRY_FIGURES = tuple(_NO_READING)


def _block(read: FleetRead, host: str, provider: str, label: Optional[str], key: str,
           fields: Optional[Dict[str, Any]], interval_ms: int, now_s: float) -> Dict[str, Any]:
    """The row's active `account` block, in the shape peer_account gives: the account's newest reading."""
    fields = fields or {}
    probed_s = fields.get("probed_s")
    age = round(max(0.0, now_s - probed_s), 1) if fields.get("probed_at") and probed_s is not None else None
    return {"key": key if valid_key(key) else None, "label": label,
            "status": "error" if (host, provider) in read.errors else fields.get("status"),
            "five_hour_pct": fields.get("five_hour_pct"), "seven_day_pct": fields.get("seven_day_pct"),
            "five_hour_resets_at": fields.get("five_hour_resets_at"),
            "seven_day_resets_at": fields.get("seven_day_resets_at"),
            "wall_at": fields.get("wall_at"), "probed_at": fields.get("probed_at"), "probe_interval_ms": None,
            "age_s": age, "stale": age is not None and age * 1000 > 2 * interval_ms}


def _row(read: FleetRead, host: str, interval_ms: int, now_s: float) -> Dict[str, Any]:
    value = read.up.get(host)
    state = "missing" if value is None else ("live" if value >= 1 else "stale")
    seen = read.seen.get(host)
    row: Dict[str, Any] = {"host": host, "state": state,
                           "ageS": round(max(0.0, now_s - seen), 1) if seen is not None and state == "live" else None,
                           "quota": None, "account": None}
    entries: List[Dict[str, Any]] = []
    for provider, label, key, read_s in sorted(read.members.get(host, ()), key=lambda m: (m[0] != "claude", m[1])):
        if not _known_provider(provider):
            continue
        active = (host, provider, label) in read.active
        fields, here = read.reading(host, provider, label, key, read_s)
        clean = _clean_label(label)
        if active and provider in ("claude", "codex") and row.get(provider if provider == "codex" else "account") is None:
            row["codex" if provider == "codex" else "account"] = _block(read, host, provider, clean, key, fields,
                                                                        interval_ms, now_s)
        if clean is None:
            continue
        entry: Dict[str, Any] = {"key": key if valid_key(key) else None, "label": clean, "provider": provider}
        figures = fields if here and fields is not None else _NO_READING
        for name in _ENTRY_FIGURES:
            entry[name] = figures[name]
        entry["active"] = active
        entries.append(entry)
    row["quota"] = _quota(row["account"])
    row["accounts"] = entries[:16]
    return row


def fleet_rows(prometheus_url: str, roster: Sequence[str], interval_ms: int,
               now: Optional[int] = None) -> List[Dict[str, Any]]:
    """One status row per roster host, from at most three queries; PrometheusError when unreadable."""
    base = base_url(prometheus_url)
    deadline = time.monotonic() + READ_DEADLINE_S
    hosts, accounts = fleet_queries(interval_ms)
    read = FleetRead()
    with _collections_paused():
        host_samples = _in_background(instant_query, base, hosts, deadline)
        read.accounts(instant_query(base, accounts, deadline))
        read.hosts(host_samples())
        query = readings_query(read.reading_nodes(), read.keyless())
        if query is not None:
            read.readings(instant_query(base, query, deadline))
        now_s = (time.time() * 1000 if now is None else now) / 1000.0
        return [_row(read, host, interval_ms, now_s) for host in dict.fromkeys(roster)]


def _in_background(call: Callable[..., List[Sample]], *args: Any) -> Callable[[], List[Sample]]:
    """Start call(*args) in a thread; the returned function waits for its result or raises its
    error. The first two queries are independent, and the engine answers each on its own core,
    so the read takes the longer of the two instead of their sum. The deadline is in the args:
    the thread never outlives the read by more than that."""
    outcome: List[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call(*args)))
        except BaseException as exc:  # handed to the reader, raised there
            outcome.append((False, exc))

    worker = threading.Thread(target=run, name="promread-hosts", daemon=True)
    worker.start()

    def result() -> List[Sample]:
        worker.join()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value
    return result


@contextlib.contextmanager
def _collections_paused() -> Iterator[None]:
    """No cyclic garbage collection while a read builds its rows: the hundred thousand objects
    of a 10,000-host fleet all live until the rows are built, so every generational pass over
    them frees nothing and costs a third of the read. The previous setting is restored."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _quota(account: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if not account:
        return None
    fields = ("five_hour_pct", "seven_day_pct", "five_hour_resets_at", "seven_day_resets_at")
    quota = {f: account[f] for f in fields if account.get(f) is not None}
    return quota or None
