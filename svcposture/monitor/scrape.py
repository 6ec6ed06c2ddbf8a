"""The scrape listener's application: GET and HEAD of /metrics and /healthz, and nothing else.

ScrapeApp implements protocols.Application for the second MonitorServer that
SVC_METRICS_BIND opens (monitor/exposure.py decides where and behind what).
It knows no route of the monitor's own application: it is handed the one
endpoint it serves, the main application's /metrics, so the body is the same
byte for byte, and the main application never learns that it is scraped
elsewhere.

    /metrics    the main application's /metrics; with a BearerCheck, 401 (WWW-Authenticate:
                Bearer, Cache-Control: no-store) without the token
    /healthz    {"ok": true}: open, so that a load balancer or blackbox probe can reach it,
                and so it names no account, node or version
    any other   404 (the pages and /api/* included); a method but GET or HEAD, 405

The fast lane answers nothing here: every request passes the check on a
handler thread (fast_reads is empty).
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional

from ..settings import Settings
from .bearer import UNAUTHORIZED, BearerCheck
from .protocols import FastRead, Reply
from .request import Request
from .response import error_response, json_response
from .routes import METHOD_NOT_ALLOWED
from .sse import StreamSlots

__all__ = ["ScrapeApp", "SCRAPE_MAX_CONNECTIONS"]

# Connections the scrape listener holds at once: Prometheus keeps one per target, an HA pair two,
# so a small cap bounds the threads a flood of idle connections can take.
SCRAPE_MAX_CONNECTIONS = 64
_NOT_SCRAPED = error_response(404, "This listener serves /metrics and /healthz only.")
_HEALTHY = json_response(200, {"ok": True})
_METHODS = frozenset(("GET", "HEAD"))


class ScrapeApp:
    """/metrics (behind `check` when given) and /healthz, over the main application's /metrics."""

    def __init__(self, metrics: Callable[[Request], Reply], settings: Settings,
                 check: Optional[BearerCheck] = None) -> None:
        # No streams here, and few connections: the settings this listener's server is built with.
        self.settings = settings.replace(max_streams=1, max_connections=SCRAPE_MAX_CONNECTIONS)
        self.metrics = metrics
        self.check = check

    def respond(self, request: Request) -> Reply:
        if request.method not in _METHODS:
            return METHOD_NOT_ALLOWED
        if request.path == "/healthz":
            return _HEALTHY
        if request.path != "/metrics":
            return _NOT_SCRAPED
        if self.check is not None and not self.check.allows(request.headers):
            return UNAUTHORIZED
        return self.metrics(request)

    def fast_reads(self) -> Mapping[bytes, FastRead]:
        return {}

    def listening(self, host: str, port: int, streams: Optional[StreamSlots] = None) -> None:
        pass  # no guard trusts this listener's Host: it needs none, serving only two reads

    def wake_streams(self) -> None:
        pass  # it serves no stream
