"""What the monitor says about itself: the /metrics text (its OpenAPI document is openapi.py).

A pure function of its inputs, as in prometheus_client's exposition.py; the
handler reads the figures and writes the bytes.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._names import CLAIM_OF_FIELD, HEALTHS, NODE_STATUSES
from .._text import is_number
from .._time import parse_iso_ms
from ..vendors import DEFAULT_PROVIDER
from ..accountkey import account_key
from ..summary import node_status
from ..trajectory.alerts import ALERT_KIND_NAMES

METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
WINDOWS = tuple(CLAIM_OF_FIELD.items())  # (body field, metric label)

Samples = List[Tuple[str, Any]]


# ------------------------------------------------------------------ metrics

def _epoch_s(stamp: Any) -> Optional[float]:
    """An ISO timestamp of the package's own form as epoch seconds; None when it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        return parse_iso_ms(stamp) / 1000.0
    except ValueError:
        return None


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: Any) -> Optional[str]:
    if not is_number(value):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return repr(float(value)) if isinstance(value, float) else str(value)


def _family(lines: List[str], name: str, kind: str, help_text: str, samples: Sequence[Tuple[str, Any]]) -> None:
    lines.append("# HELP %s %s" % (name, help_text))
    lines.append("# TYPE %s %s" % (name, kind))
    for labels, value in samples:
        text = _number(value)
        if text is not None:
            lines.append("%s%s %s" % (name, labels, text))


def _account_labels(account: Mapping[str, Any], provider: str) -> str:
    """`account="…",provider="…"` plus `account_key="…"` when the account's email is known (docs/fleet.md)."""
    labels = 'account="%s",provider="%s"' % (_label(account["label"]), _label(provider))
    key = account_key(provider, account.get("email"))
    return labels if key is None else labels + ',account_key="%s"' % key


def account_keys(*bodies: Tuple[str, Optional[Mapping[str, Any]]]) -> Dict[Tuple[str, str], str]:
    """(provider, label) -> account key of every account with a known email in (provider, posture body)."""
    keys: Dict[Tuple[str, str], str] = {}
    for provider, body in bodies:
        for account in (body or {}).get("accounts") or []:
            if isinstance(account, Mapping) and isinstance(account.get("label"), str):
                key = account_key(provider, account.get("email"))
                if key is not None:
                    keys[(provider, account["label"])] = key
    return keys


def _read_ms(account: Mapping[str, Any], probed_ms: Any) -> Any:
    """When the account's figures were read: its `readAt` (the good reading shown, kept beside a
    failed one), else its own `sampledAt` (a Codex sample), else the posture's `probedAt`."""
    for key in ("readAt", "sampledAt"):
        if is_number(account.get(key)):
            return account[key]
    return None if "readAt" in account else probed_ms


def _account_samples(accounts: Any, provider: str,
                     probed_ms: Any = None) -> Tuple[Samples, Samples, Samples, Samples, Samples, Samples]:
    """(utilization pct, window reset seconds, active flag, status, probed-at seconds, health)
    samples per account of one vendor (_read_ms says when its figures were read)."""
    pct: Samples = []
    resets: Samples = []
    active: Samples = []
    statuses: Samples = []
    probed: Samples = []
    healths: Samples = []
    for account in accounts if isinstance(accounts, list) else []:
        if not isinstance(account, dict) or not isinstance(account.get("label"), str):
            continue
        label = _account_labels(account, provider)
        active.append(("{%s}" % label, 1 if account.get("active") else 0))
        status = node_status(account)
        statuses.extend(('{%s,status="%s"}' % (label, s), 1 if s == status else 0) for s in NODE_STATUSES)
        health = account.get("health")
        if health in HEALTHS:
            healths.extend(('{%s,health="%s"}' % (label, h), 1 if h == health else 0) for h in HEALTHS)
        read_ms = _read_ms(account, probed_ms)
        if is_number(read_ms) and read_ms > 0:
            probed.append(("{%s}" % label, read_ms / 1000.0))
        for key, window in WINDOWS:
            view = account.get(key)
            if not isinstance(view, dict):
                continue
            labels = '{%s,window="%s"}' % (label, window)
            pct.append((labels, view.get("pct")))
            seconds = _epoch_s(view.get("resetsAt"))
            if seconds is not None:
                resets.append((labels, seconds))
    return pct, resets, active, statuses, probed, healths


def _node_active_account_family(lines: List[str], bodies: Sequence[Tuple[str, Any]]) -> None:
    """`svc_node_active_account{node,account,provider} 1`: which account this node works on, per vendor.

    The series a fleet read from Prometheus joins on (cluster/promread.py): its
    `node` is this host's name, which Prometheus keeps as `exported_node` when
    the roster's file_sd target label `node` is set on the scrape too.
    """
    samples: Samples = []
    for provider, body in bodies:
        active = body.get("active") if body else None
        node = body.get("node") if body else None
        if isinstance(active, Mapping) and isinstance(active.get("label"), str) and isinstance(node, str):
            samples.append(('{node="%s",%s}' % (_label(node), _account_labels(active, provider)), 1))
    _family(lines, "svc_node_active_account", "gauge",
            "1 for the account this node works on, by node name and provider.", samples)


def _node_samples(figures: Mapping[str, Any], vendor: str) -> Dict[str, Samples]:
    """One vendor's node-level samples by family; `vendor` is the label set ("" for the default vendor's)."""
    last = figures.get("last") if isinstance(figures.get("last"), dict) else None
    status = last.get("status") if last else None
    sep = "," if vendor else ""
    last_ok = figures.get("lastSuccessMs")
    return {
        "available": [("{%s}" % vendor if vendor else "", 1 if last and last.get("available") else 0)],
        "status": [('{%s%sstatus="%s"}' % (vendor, sep, s), 1 if s == status else 0) for s in NODE_STATUSES],
        "runs": [("{%s}" % vendor if vendor else "", figures.get("probeRuns", 0))],
        "errors": [("{%s}" % vendor if vendor else "", figures.get("probeErrors", 0))],
        "success": ([("{%s}" % vendor if vendor else "", last_ok / 1000.0)]
                    if is_number(last_ok) else []),
    }


def render_metrics(vendors: Sequence[Tuple[str, Mapping[str, Any]]], *, subscribers: int,
                   subscribers_max: int) -> str:
    """Prometheus text format 0.0.4 of every vendor's posture figures.

    `vendors` are (name, PostureService.metrics()) of each vendor ({} when it
    failed); `subscribers` and `subscribers_max` are the open
    /api/accounts/stream connections and their cap. Every account series
    carries `provider`. The default vendor's node-level series (the contract's
    posture) carry no `provider` label, as the shipped rules read them, and
    are always there; another vendor's add `provider="<name>"` and are there
    only while its posture is available (a node without a vendor's accounts
    says nothing of it).
    """
    nodes: Dict[str, Samples] = {"available": [], "status": [], "runs": [], "errors": [], "success": []}
    pct: Samples = []
    resets: Samples = []
    active: Samples = []
    statuses: Samples = []
    probed: Samples = []
    healths: Samples = []
    bodies: List[Tuple[str, Any]] = []
    for provider, figures in vendors:
        last = figures.get("last") if figures and isinstance(figures.get("last"), dict) else None
        bodies.append((provider, last))
        default = provider == DEFAULT_PROVIDER
        if not default and (last is None or last.get("available") is not True):
            continue
        for family, samples in _node_samples(figures, "" if default else 'provider="%s"' % _label(provider)).items():
            nodes[family].extend(samples)
        more = _account_samples(last.get("accounts") if last else None, provider, last.get("probedAt") if last else None)
        for mine, theirs in zip((pct, resets, active, statuses, probed, healths), more):
            mine.extend(theirs)
    lines: List[str] = []
    _family(lines, "svc_posture_available", "gauge", "1 when the posture surface is enabled and probed.",
            nodes["available"])
    _family(lines, "svc_node_status", "gauge",
            "Node-level account status, one series per status; 1 marks the current one.", nodes["status"])
    _family(lines, "svc_account_utilization_percent", "gauge",
            "Account utilization of a rate-limit window, percent (may exceed 100).", pct)
    _family(lines, "svc_account_window_resets_at_seconds", "gauge", "When the window resets, Unix seconds.", resets)
    _family(lines, "svc_account_active", "gauge", "1 for the node's active account.", active)
    _family(lines, "svc_account_status", "gauge",
            "Account status as the node status it would give, one series per status; 1 marks the current one.",
            statuses)
    _family(lines, "svc_account_probed_at_seconds", "gauge",
            "When the account's figures were last read, Unix seconds.", probed)
    _family(lines, "svc_account_health", "gauge",
            "Account health (ok, refused, limited, unreachable, stale, unread), one series per state; 1 marks "
            "the current one.", healths)
    _node_active_account_family(lines, bodies)
    _family(lines, "svc_probe_runs_total", "counter", "Header probes run since start.", nodes["runs"])
    _family(lines, "svc_probe_errors_total", "counter", "Header probes that ended in an error posture.",
            nodes["errors"])
    _family(lines, "svc_probe_last_success_timestamp_seconds", "gauge", "When a probe last succeeded, Unix seconds.",
            nodes["success"])
    _family(lines, "svc_sse_subscribers", "gauge", "Open /api/accounts/stream connections.", [("", subscribers)])
    _family(lines, "svc_sse_subscribers_max", "gauge", "Stream subscriber cap (SVC_MONITOR_MAX_STREAMS).",
            [("", subscribers_max)])
    return "\n".join(lines) + "\n"


def render_trajectory_metrics(figures: Mapping[str, Any],
                              keys: Optional[Mapping[Tuple[str, str], str]] = None) -> str:
    """The trajectory families of /metrics (docs/trajectory.md), appended to render_metrics' text.

    `figures` is TrajectoryService.metrics(): `windows`, a list of (account,
    window, forecast, provider), and `alerts`, the alert counts by kind. `keys`
    (account_keys()) adds each account's `account_key` where its email is known.
    """
    rate: Samples = []
    at_reset: Samples = []
    wall: Samples = []
    for account, window, forecast, provider in figures.get("windows") or []:
        key = (keys or {}).get((provider, account))
        labels = '{account="%s",provider="%s",%swindow="%s"}' % (
            _label(account), _label(provider), 'account_key="%s",' % key if key else "", _label(window))
        rate.append((labels, forecast.get("ratePctPerHour")))
        at_reset.append((labels, forecast.get("pctAtReset")))
        seconds = _epoch_s(forecast.get("wallAt"))
        if seconds is not None:
            wall.append((labels, seconds))
    lines: List[str] = []
    _family(lines, "svc_account_burn_rate_percent_per_hour", "gauge",
            "Least-squares burn rate of a window over its lookback, percent per hour.", rate)
    _family(lines, "svc_account_forecast_pct_at_reset", "gauge",
            "Forecast utilization of a window when it resets, percent (may exceed 100).", at_reset)
    _family(lines, "svc_account_forecast_wall_timestamp_seconds", "gauge",
            "When a window is forecast to reach 100 percent, Unix seconds (only while a wall is forecast).", wall)
    alerts = figures.get("alerts") or {}
    _family(lines, "svc_alerts_total", "counter", "Quota alerts emitted since start, by kind.",
            [('{kind="%s"}' % kind, alerts.get(kind, 0)) for kind in ALERT_KIND_NAMES])
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ openapi
