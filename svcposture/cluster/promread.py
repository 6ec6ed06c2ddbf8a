"""Liveness and posture read from Prometheus (SVC_LIVENESS_READ_SOURCE=prometheus).

Past one bot user's tracker budget (docs/fleet-prometheus.md) the fleet comes from the engine
that already scrapes every monitor. Its targets come from `svc-cluster roster
sd`, which labels each one `node=<roster name>`, so every series a monitor
exports carries its roster name. At most four instant queries, whatever the
fleet size (W is twice the publish interval):

    hosts     per node: max_over_time(up[W]) (live or stale)
    accounts  per node: every account (label, provider, account_key) with when its
              figures were read, and the few whose health is not ok; the newest
              reading of each key across the fleet is picked from these
    active    per node: which account is active and when it was last scraped, and
              whether its probes fail (node status error)
    readings  the windows, wall and status of each account's newest reading (its
              node, asked for that account), and of accounts without a key; the
              health of the accounts that are not ok (their nodes, asked by name)

A roster host is `live` when a scrape of it succeeded within W, `stale` when
it was scraped but none succeeded, and `missing` when Prometheus has no series
for it. The readings are asked for once per account, not once per host: a
fleet of 10,000 hosts sharing a thousand accounts is a thousand readings, and
neither the engine's work nor the replies grow with every host's windows.

The first three queries are independent and asked at once; the fourth needs the
second's answer, and while the engine answers it this process drafts every host
row from the first three (svcposture.cluster.fleetread): the engine and this
process each work on their own core instead of in turn. The replies come from a service
this node does not control: bounded, checked field by field, and any failure is
one PrometheusError, so that nobody is marked dead by a broken read. Any
Prometheus-compatible query API works (VictoriaMetrics, Thanos, Mimir).
"""
from __future__ import annotations

import contextlib
import gc
import math
import re
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .._http import DeadlineExceeded
from .._http import get as deadline_get
from .._text import loads_bounded
from .._version import __version__
from ..settings import PROMETHEUS_URL_ENV
from ..vendors import DEFAULT_PROVIDER
from .fleetread import FleetRead, PrometheusError, PrometheusResponseError, Sample, draft_rows
from .promql import node_pattern, promql_string

__all__ = ["PrometheusError", "PrometheusConfigError", "PrometheusUnreachableError", "PrometheusResponseError",
           "fleet_queries", "readings_query", "fleet_rows", "node_pattern"]

# One deadline for all the queries of one status, not one per request.
READ_DEADLINE_S = 10.0
# ~100 bytes a series; 10,000 hosts of three accounts are about 8 MiB.
MAX_REPLY_BYTES = 64 * 1024 * 1024
MAX_SERIES = 500000


class PrometheusConfigError(PrometheusError, ValueError):
    """SVC_PROMETHEUS_URL is unset or not an http(s) URL."""


class PrometheusUnreachableError(PrometheusError, ConnectionError):
    """No answer: connection refused, timeout, or the read deadline passed."""


def _default_vendor(expr: str) -> str:
    """The default vendor's node-level series have no `provider` label (the contract's, as the
    shipped rules read them): name it."""
    return 'label_replace(%s, "provider", "%s", "provider", "")' % (expr, promql_string(DEFAULT_PROVIDER))


# A reading's windows and forecast wall, asked by name. Its status is a family of one series per
# status, 1 marking the current one: asked apart, `== 1` keeps only that one.
FIGURE_NAMES = ("svc_account_utilization_percent", "svc_account_window_resets_at_seconds",
                "svc_account_forecast_wall_timestamp_seconds")
_SPLIT = ('max by (__name__, node, provider, account, window) ({__name__=~"%s",%%(m)s})'
          ' or max by (node, provider, account, status) (svc_account_status{%%(m)s} == 1)' % "|".join(FIGURE_NAMES))
# The same in one selector, for a node filter too long to be written twice: topk keeps the status
# series at 1 (it costs the engine about a third more).
_ONE_SELECTOR = ('max by (__name__, node, provider, account, window, status) (topk by (__name__, node, provider,'
                 ' account, window) (1, {__name__=~"%s|svc_account_status",%%(m)s}))' % "|".join(FIGURE_NAMES))
_KEYLESS = 'node!="",account_key=""'
# Which health an account that is not ok has: its nodes' series other than `ok`, at 1.
_HEALTH = 'max by (node, provider, account, health) (svc_account_health{%s,health!="ok"} == 1)'
# VictoriaMetrics refuses a query over 16 KiB by default. Past this, the readings are asked of
# every node, which is correct, only slower.
MAX_QUERY = 15000
# Names and labels come from the replies, so from whatever the hosts export. Each is matched whole
# (fullmatch: `$` would also match before a final newline) and every value written is escaped
# (promql.py), so that one host's odd label costs at most its own figures, never the whole read.
# Nodes named like hosts are asked by a regex of their names; any other name, and the filter
# is left out.
_NODE_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,253}")
# Nodes are grouped by the label of their newest reading when every such label is a plain
# one, and there are at most this many: else they are asked by node alone.
_LABEL_RE = re.compile(r"[A-Za-z0-9._@+-]{1,64}")
MAX_LABEL_GROUPS = 16


def fleet_queries(interval_ms: int) -> Tuple[str, str, str]:
    """The first three PromQL queries of one status (the module docstring explains each);
    the fourth, `readings_query`, names the nodes the second showed to hold the newest readings.
    They carry no matcher on `node`: a series without one is set aside when the reply is read,
    which costs the engine less than checking every series it selects."""
    window_s = max(1, int(math.ceil(2 * interval_ms / 1000.0)))
    hosts = 'max by (node) (max_over_time(up[%ds]))' % window_s
    # Health, folded in: every account has six health series, and asking them all costs the engine
    # five times the reading times' series. The `ok` series alone is one per account, and only
    # those at 0 come back: the accounts that are not ok, a few in a working fleet.
    accounts = ('max by (node, provider, account, account_key) (svc_account_probed_at_seconds)'
                ' or max by (node, provider, account, account_key, health) (svc_account_health{health="ok"} == 0)')
    # The active account's series exists only in a scrape that succeeded: its timestamp is when
    # the host was last scraped, read with the account and without selecting another series.
    active = ('max by (node, provider, account) (timestamp(svc_node_active_account))'
              ' or max by (node, provider, status) (%s)' % _default_vendor('svc_node_status{status="error"} == 1'))
    return hosts, accounts, active


def readings_query(places: Sequence[Tuple[str, str]], keyless: bool,
                   unhealthy: Sequence[str] = ()) -> Optional[str]:
    """The figures of the accounts at `places`, the (node, account label) of each account's
    newest reading: each window's series, the forecast wall and the account's current status;
    with `keyless`, also those of every account without a key; and the health of the accounts
    of the `unhealthy` nodes that are not ok. None when there is nothing to ask.

    The cheapest form that fits the engine's query length is sent: the nodes grouped by the
    label their reading has (a fleet names its accounts with a few labels, and a node holding
    one account's newest reading is asked for that account only, not for all of its own);
    else every account of those nodes; else, for names too unlike each other to be written
    twice, in one selector; else every node's."""
    nodes = sorted({node for node, _ in places})
    shapes: List[str] = []
    if nodes and all(_NODE_NAME_RE.fullmatch(n) for n in nodes):
        by_label: Dict[str, List[str]] = {}
        for node, label in sorted(places):
            by_label.setdefault(label, []).append(node)
        if len(by_label) <= MAX_LABEL_GROUPS and all(_LABEL_RE.fullmatch(label) for label in by_label):
            shapes.append(_by_label(by_label))
        matcher = 'node=~"%s"' % node_pattern(nodes)
        shapes += [_SPLIT % {"m": matcher}, _ONE_SELECTOR % {"m": matcher}]
    if nodes:
        shapes.append(_SPLIT % {"m": 'node!=""'})
    tail = [_SPLIT % {"m": _KEYLESS}] if keyless else []
    for health in _health_tails(unhealthy):
        for shape in shapes or [""]:
            query = " or ".join(([shape] if shape else []) + tail + health)
            if len(query) <= MAX_QUERY:
                return query or None
    return None  # not reached: the last shapes are a few hundred characters


def _health_tails(nodes: Sequence[str]) -> List[List[str]]:
    """The ways to ask the health of the accounts of `nodes` that are not ok, the cheapest first:
    by their names; else (names too many to write, or a name no PromQL string can hold) of
    every node, which is correct, only slower."""
    if not nodes:
        return [[]]
    every = [_HEALTH % 'node!=""']
    try:
        return [[_HEALTH % ('node=~"%s"' % node_pattern(nodes))], every]
    except ValueError:
        return [every]


def _by_label(by_label: Dict[str, List[str]]) -> str:
    """The readings query of nodes grouped by the label of the account each holds the newest
    reading of: one selector per label, for its nodes."""
    groups = [(promql_string(label), node_pattern(nodes)) for label, nodes in sorted(by_label.items())]
    figures = " or ".join('{__name__=~"%s",account="%s",node=~"%s"}' % ("|".join(FIGURE_NAMES), label, pattern)
                          for label, pattern in groups)
    statuses = " or ".join('svc_account_status{account="%s",node=~"%s"}' % group for group in groups)
    return ("max by (__name__, node, provider, account, window) (%s)"
            " or max by (node, provider, account, status) ((%s) == 1)" % (figures, statuses))


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


# ---------------------------------------------------------------- the fleet

def fleet_rows(prometheus_url: str, roster: Sequence[str], interval_ms: int,
               now: Optional[int] = None) -> List[Dict[str, Any]]:
    """One status row per roster host, from at most four queries; PrometheusError when unreadable."""
    base = base_url(prometheus_url)
    deadline = time.monotonic() + READ_DEADLINE_S
    hosts_query, accounts_query, active_query = fleet_queries(interval_ms)
    # The reader's clock when the read starts: readings stamped well after it are suspect.
    read = FleetRead((time.time() * 1000 if now is None else now) / 1000.0)
    with _collections_paused():
        hosts = _in_background(instant_query, base, hosts_query, deadline)
        active = _in_background(instant_query, base, active_query, deadline)
        read.accounts(instant_query(base, accounts_query, deadline))
        query = readings_query(read.reading_places(), read.keyless(), read.unhealthy_nodes())
        readings = _in_background(instant_query, base, query, deadline) if query is not None else None
        read.hosts(hosts())
        read.actives(active())
        now_s = (time.time() * 1000 if now is None else now) / 1000.0
        # Drafted while the engine answers the last query: the rows need only its figures.
        draft = draft_rows(read, roster, interval_ms, now_s)
        if readings is not None:
            read.readings(readings())
        return draft.filled()


def _in_background(call: Callable[..., List[Sample]], *args: Any) -> Callable[[], List[Sample]]:
    """Start call(*args) in a thread; the returned function waits for its result or raises its
    error. The engine answers queries side by side, and this process decodes one reply while
    waiting for the next. The deadline is in the args: the thread never outlives the read
    by more than that."""
    outcome: List[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call(*args)))
        except BaseException as exc:  # handed to the reader, raised there
            outcome.append((False, exc))

    worker = threading.Thread(target=run, name="promread-query", daemon=True)
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
    them frees nothing and costs a third of the read. The previous setting is restored.

    Turned back on as it was, the collector would still owe the youngest generation a pass
    over every object the read made. freeze() then unfreeze() hands them straight to the
    oldest generation instead, which the collector visits only as it grows by a quarter;
    they are freed by reference counting all the same."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if was:
            gc.enable()
