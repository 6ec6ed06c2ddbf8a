"""The doctor's `tracker-budget` check: can the roster's heartbeats fit in the tracker's hourly limit?

PASS while they need at most 60 % of the limit at the configured interval,
WARN up to 100 % (the publisher stretches its interval, so peers are judged on
a coarser clock), FAIL above (the tracker cannot carry this fleet's liveness:
read it from Prometheus instead). Under Prometheus the check reads it, so the
doctor says whether the switch works.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from . import budget, promread
from ..settings import PROMETHEUS_URL_ENV, READ_SOURCE_ENV, Settings

NAME = "tracker-budget"
REMEDY = ("read liveness from Prometheus instead: %s=prometheus with %s (docs/fleet-prometheus.md)"
          % (READ_SOURCE_ENV, PROMETHEUS_URL_ENV))


def _result(status: str, detail: str) -> Dict[str, str]:
    return {"name": NAME, "status": status, "detail": detail}


def _prometheus_check(settings: Settings, hosts: List[str]) -> Dict[str, str]:
    try:
        rows = promread.fleet_rows(settings.prometheus_url, hosts, settings.liveness_interval_ms)
    except promread.PrometheusError as exc:
        return _result("WARN", "liveness is read from Prometheus, which cannot be read: %s" % exc)
    live = sum(1 for row in rows if row["state"] == "live")
    return _result("INFO", "liveness is read from Prometheus (%s): %d of %d roster host(s) live; no heartbeats "
                           "are published, so the tracker's budget does not apply" % (
                               promread.base_url(settings.prometheus_url), live, len(rows)))


def check_tracker_budget(settings: Settings, hosts: Optional[List[str]],
                         stated: Optional[budget.RateBudget]) -> Dict[str, str]:
    """The check, from the roster and the budget the tracker stated on the doctor's anchor read."""
    source = settings.liveness_read_source
    if hosts is None:
        return _result("WARN", "cannot judge the budget without a readable roster")
    if source == "prometheus":
        return _prometheus_check(settings, hosts)
    if source != "tracker":
        return _result("INFO", "liveness is read from %s; no heartbeats are published" % source.capitalize())
    count = len(set(hosts))
    configured = settings.liveness_interval_ms
    window = settings.tracker_window_ms
    limit = stated.requests_limit if stated is not None else None
    shown_limit = limit or budget.DOCUMENTED_LIMIT
    need = budget.heartbeat_need(count, configured, shown_limit, window)
    hour = window / 3600000.0
    figures = "%d host(s) every %g s need %.0f of %d requests per %s (%.0f %%)" % (
        count, configured / 1000.0, count * window / float(configured), shown_limit,
        "hour" if hour == 1 else "%g s" % (window / 1000.0), need * 100)
    if limit is None:
        return _result("INFO", "the tracker stated no rate limit (no answer, or no X-RateLimit headers); at "
                               "Linear's documented %d: %s" % (budget.DOCUMENTED_LIMIT, figures))
    if need <= budget.HEARTBEAT_SHARE:
        return _result("PASS", "%s; the publisher keeps them within %.0f %%" % (
            figures, budget.HEARTBEAT_SHARE * 100))
    stretched = budget.interval_in_force_ms(configured, count, budget.RateBudget(
        limit, None, None, None, None, None, None), window, 0)
    detail = "%s: the publisher stretches its interval to %g s, so a host is seen stale only after %g s; %s" % (
        figures, stretched / 1000.0, 2 * stretched / 1000.0, REMEDY)
    return _result("WARN" if need <= 1.0 else "FAIL", detail)
