"""Liveness and posture read from Prometheus (SVC_LIVENESS_READ_SOURCE=prometheus).

Past one bot user's tracker budget (docs/fleet-prometheus.md) the fleet comes from the engine
that already scrapes every monitor. Its targets come from `svc-cluster roster
sd`, which labels each one `node=<roster name>`, so every series a monitor
exports carries its roster name. Three instant queries, whatever the fleet size
(W is twice the publish interval):

    liveness   max by (node) (max_over_time(up{node!=""}[W]))
    accounts   timestamp(svc_node_active_account{node!=""})
    figures    the active account's windows, node status and last probe

A roster host is `live` when a scrape of it succeeded within W (the first
query gives 1), `stale` when it was scraped but none succeeded (0), and
`missing` when Prometheus has no series for it. The replies come from a
service this node does not control: bounded, checked field by field, and any
failure is one PrometheusError, so that nobody is marked dead by a broken read.
Any Prometheus-compatible query API works (VictoriaMetrics, Thanos, Mimir).
"""
from __future__ import annotations

import math
import time
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._http import DeadlineExceeded
from .._http import get as deadline_get
from .._text import loads_bounded
from .._time import iso_from_ms
from .._version import __version__
from ..errors import SvcpostureError
from ..settings import PROMETHEUS_URL_ENV
from .heartbeat import peer_account

# One deadline for all the queries of one status, not one per request.
READ_DEADLINE_S = 10.0
# ~1 KiB a series; 1,000 hosts of two accounts are well under 8 MiB.
MAX_REPLY_BYTES = 32 * 1024 * 1024
MAX_SERIES = 200000
_WINDOW_FIELDS = {"five_hour": ("five_hour_pct", "five_hour_resets_at"),
                  "seven_day": ("seven_day_pct", "seven_day_resets_at")}
_FIGURES = ("svc_account_utilization_percent", "svc_account_window_resets_at_seconds",
            "svc_account_forecast_wall_timestamp_seconds")


class PrometheusError(SvcpostureError):
    """Base of every Prometheus read failure; each concern below also subclasses a builtin."""


class PrometheusConfigError(PrometheusError, ValueError):
    """SVC_PROMETHEUS_URL is unset or not an http(s) URL."""


class PrometheusUnreachableError(PrometheusError, ConnectionError):
    """No answer: connection refused, timeout, or the read deadline passed."""


class PrometheusResponseError(PrometheusError, ValueError):
    """Prometheus answered, but not with a successful instant-vector result."""


Sample = Tuple[Dict[str, str], float]


def fleet_queries(interval_ms: int) -> Tuple[str, str, str]:
    """The three PromQL queries of one status (the module docstring explains each)."""
    window_s = max(1, int(math.ceil(2 * interval_ms / 1000.0)))
    liveness = 'max by (node) (max_over_time(up{node!=""}[%ds]))' % window_s
    accounts = 'timestamp(svc_node_active_account{node!=""})'
    figures = ('({__name__=~"%s",node!=""} and on (node, account) svc_node_active_account)'
               ' or (svc_node_status{node!=""} == 1)'
               ' or svc_probe_last_success_timestamp_seconds{node!=""}' % "|".join(_FIGURES))
    return liveness, accounts, figures


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
    samples: List[Sample] = []
    for entry in result:
        metric = entry.get("metric") if isinstance(entry, dict) else None
        value = entry.get("value") if isinstance(entry, dict) else None
        if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2 \
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
            raise PrometheusResponseError("Prometheus reply has a malformed sample")
        try:
            number = float(value[1])
        except (TypeError, ValueError):
            raise PrometheusResponseError("Prometheus reply has a non-numeric sample value") from None
        samples.append((metric, number))
    return samples


# ---------------------------------------------------------------- the fleet

def fleet_rows(prometheus_url: str, roster: Sequence[str], interval_ms: int,
               now: Optional[int] = None) -> List[Dict[str, Any]]:
    """One status row per roster host, from at most three queries; PrometheusError when unreadable."""
    base = base_url(prometheus_url)
    deadline = time.monotonic() + READ_DEADLINE_S
    liveness, accounts, figures = fleet_queries(interval_ms)
    up = {labels.get("node"): value for labels, value in instant_query(base, liveness, deadline)}
    active = _active_accounts(instant_query(base, accounts, deadline))
    per_node = _figures(instant_query(base, figures, deadline), active)
    current = int(time.time() * 1000) if now is None else now
    rows: List[Dict[str, Any]] = []
    for host in dict.fromkeys(roster):
        value = up.get(host)
        state = "missing" if value is None else ("live" if value >= 1 else "stale")
        seen = active.get(host)
        age = round(max(0.0, current / 1000.0 - seen[1]), 1) if seen is not None and state == "live" else None
        block = per_node.get(host)
        account = peer_account(block, publish_interval_ms=interval_ms, now=current) if block else None
        rows.append({"host": host, "state": state, "ageS": age, "quota": _quota(account), "account": account})
    return rows


def _active_accounts(samples: List[Sample]) -> Dict[str, Tuple[str, float]]:
    """node -> (active account label, when it was last scraped, epoch s).

    The newest sample wins: after a switch of account, a store that keeps the
    replaced series visible for its lookback (VictoriaMetrics does, where
    Prometheus marks it stale) answers both.
    """
    active: Dict[str, Tuple[str, float]] = {}
    for labels, stamp in samples:
        node, account = labels.get("node"), labels.get("account")
        if node and account and math.isfinite(stamp) and (node not in active or stamp > active[node][1]):
            active[node] = (account, stamp)
    return active


def _iso_s(seconds: float) -> Optional[str]:
    try:
        return iso_from_ms(int(seconds * 1000)) if math.isfinite(seconds) and seconds > 0 else None
    except (ValueError, OverflowError):
        return None


def _figures(samples: List[Sample], active: Mapping[str, Tuple[str, float]]) -> Dict[str, Dict[str, Any]]:
    """node -> an account block in the heartbeat's shape, for the node's active account."""
    blocks: Dict[str, Dict[str, Any]] = {node: {"label": label} for node, (label, _) in active.items()}
    walls: Dict[str, List[float]] = {}
    for labels, value in samples:
        block = blocks.get(labels.get("node", ""))
        if block is None:
            continue
        name = labels.get("__name__")
        if "status" in labels and "account" not in labels:
            block["status"] = labels["status"]
        elif name == "svc_probe_last_success_timestamp_seconds":
            block["probed_at"] = _iso_s(value)
        elif labels.get("account") != block["label"]:
            continue
        elif name == "svc_account_forecast_wall_timestamp_seconds":
            walls.setdefault(labels["node"], []).append(value)
        elif labels.get("window") in _WINDOW_FIELDS:
            pct_field, reset_field = _WINDOW_FIELDS[labels["window"]]
            if name == "svc_account_utilization_percent":
                block[pct_field] = value
            elif name == "svc_account_window_resets_at_seconds":
                block[reset_field] = _iso_s(value)
    for node, stamps in walls.items():
        # The first wall is the binding one: the heartbeat's wall_at is the binding window's.
        block = blocks[node]
        block["wall_at"] = _iso_s(min(stamps))
    return blocks


def _quota(account: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if not account:
        return None
    fields = ("five_hour_pct", "seven_day_pct", "five_hour_resets_at", "seven_day_resets_at")
    quota = {f: account[f] for f in fields if account.get(f) is not None}
    return quota or None
