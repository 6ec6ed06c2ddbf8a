"""The monitor's application: every route, the guard, and the byte caches.

MonitorApp is a plain object between the sockets and the node's services. A
Request goes in (method, path, query, headers); out comes a Response (status,
headers, body) or an sse.Stream, a source of frames that sse.pump writes. It
never sees a connection: the server side adds the `Connection:` line and drops
the body of an answer to HEAD (response.Response.encode), so every route can
be exercised without a socket (tests/monitor/test_app.py).

Methods for the caller (the server side, typed as protocols.Application):

    respond(request)         the reply to any request: a Response or an sse.Stream
                             (405 for a method no route has, 404 for a path, the
                             read guard before every route)
    fast_reads()             request target -> cached read (a Response, or None
                             to hand over) the fast lane may answer itself
    listening(host, port, streams)
                             the server is bound: trust this address, count these streams
    wake_streams()           let every stream waiting for a frame see a hang-up

The services come in one `services.Services` value, built by the node; every
vendor is served the same way, through its posture service and its
`PostureReads` (posture_reads.py). Adding a route is one line in ROUTES and
one endpoint function:

    ROUTES = (..., Route("GET", "/api/hello", MonitorApp.get_hello))

    def get_hello(self, request: Request) -> Reply:
        return json_response(200, {"hello": self.node})

An endpoint takes the Request and returns a Response built with
response.Response, json_response or error_response, or for a stream
sse.Stream(source, self.settings.keepalive_s) over a per-subscriber source
(see sse.py, streams.py). HEAD, 404 and 405 need nothing from it.

The forced-refresh guard decision is refresh_refusal(headers); the read guard
(SVC_MONITOR_READ_GUARD=1) is host_origin_refusal(headers) before every route.
"""
from __future__ import annotations

import html
import logging
import threading
from typing import Any, Dict, Mapping, Optional, Tuple

from urllib.parse import unquote

from .._time import iso_now
from .._version import __version__
from ..cluster.dispatch import bad_ticket, owner_with_headroom
from ..cluster.fleetaccounts import accounts_view
from ..envfile.fileid import file_id
from ..settings import Settings
from ..steering.advisor import reserve_of
from ..summary import disabled_body
from ..trajectory.history import DEFAULT_HOURS, MAX_HOURS
from ..vendors import DEFAULT_PROVIDER, provider_from_query, registered
from .advice_route import AdviceRoute
from .assets import PAGE_HEADERS, load_static
from .exposition import METRICS_TYPE, account_keys, render_metrics, render_trajectory_metrics
from .fleet import FleetCache, collect_report
from .memo import Memo
from .openapi import openapi_document
from .posture_reads import PostureReads
from .protocols import FastRead, Reply
from .request import Request, RequestHeaders
from .response import JSON_HEADERS, JSON_TYPE, Response, dumps, error_response, json_response
from .routes import NOT_FOUND, Route, RouteTable, refusal
from .services import Services
from .sse import Stream, StreamSlots
from .streams import TrajectoryFrames
from .trust import GUARD_MESSAGES, TrustPolicy

log = logging.getLogger("svcposture.monitor")

__all__ = ["MonitorApp", "Request", "Reply", "ROUTES", "Route", "parse_hours", "refresh_requested"]

NO_LOGIN_REASON = "this process samples no interactive login (only the svc-monitor command starts the samplers)"


class MonitorApp:
    """Every route of the monitor over a node's services."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.node = services.node
        self.settings: Settings = services.settings
        self.trajectory = services.trajectory
        # Every vendor's posture, each read the same way, by vendor name.
        self.postures: Dict[str, PostureReads] = {
            name: PostureReads(posture, services.settings.keepalive_s) for name, posture in services.postures.items()}
        self.advice = AdviceRoute(services.postures, services.advisor, services.node)
        self.started_at = iso_now()
        self.streams = StreamSlots(services.settings.max_streams)  # the server lends its own in listening()
        self.trust: Optional[TrustPolicy] = None
        self.static = load_static()
        self.openapi = Response(200, JSON_TYPE, dumps(openapi_document()), JSON_HEADERS)
        self.fleet = FleetCache(self._fleet_report, services.settings.fleet_ttl_s)
        self._trajectory_read: Memo[Response] = Memo()
        self._login_read: Memo[Response] = Memo()
        self._lock = threading.Lock()
        self._history_index: Any = None
        default = services.postures.get(DEFAULT_PROVIDER)
        self._index_page(default.interval_s if default is not None else None)
        self.routes = RouteTable(tuple(Route("GET", path, MonitorApp.get_static) for path in self.static)
                                 + self.ROUTES, self)
        self._fast = self._fast_table()

    # -- methods for the caller --

    def listening(self, host: str, port: int, streams: Optional[StreamSlots] = None) -> None:
        """The server is bound to `host`:`port` (trusted by the guard, so that
        `--port 0` trusts the port actually bound); `streams` are its stream
        slots, which /metrics reports."""
        self.trust = TrustPolicy(host, port, self.node, extra_hosts=self.settings.trusted_hosts,
                                 extra_origins=self.settings.trusted_origins)
        if streams is not None:
            self.streams = streams

    def respond(self, request: Request) -> Reply:
        """The reply to any request: 405, the read guard, then the route or a 404."""
        refused = refusal(self.routes, request.method)
        if refused is not None:
            return refused
        if self.settings.read_guard:
            reason = self.host_origin_refusal(request.headers)
            if reason:
                return self.forbidden(reason)
        endpoint = self.routes.endpoint(request.method, request.path)
        return NOT_FOUND if endpoint is None else endpoint(request)

    def fast_reads(self) -> Mapping[bytes, FastRead]:
        """The cached reads the fast lane may answer itself (none under the read guard,
        which every request must pass through respond())."""
        return {} if self.settings.read_guard else self._fast

    def _fast_table(self) -> Dict[bytes, FastRead]:
        reads: Dict[bytes, FastRead] = {b"/api/trajectory": self.cached_trajectory}
        for name, posture in self.postures.items():
            query = b"?provider=" + name.encode("ascii")
            reads[b"/api/accounts" + query] = posture.cached
            reads[b"/api/advice" + query] = (lambda provider=name: self.advice.fast(provider))
        default = self.postures.get(DEFAULT_PROVIDER)
        if default is not None:
            reads[b"/api/accounts"] = default.cached
            reads[b"/api/advice"] = (lambda: self.advice.fast(DEFAULT_PROVIDER))
        return reads

    def wake_streams(self) -> None:
        """Wake every stream waiting for a frame, so that those whose client hung up end."""
        for posture in self.services.postures.values():
            posture.broadcast.wake()
        self.trajectory.broadcast.wake()

    # -- the guard --

    def host_origin_refusal(self, headers: RequestHeaders) -> Optional[str]:
        """Why the Host or Origin of a request does not name this monitor, or None."""
        trust = self.trust
        if trust is None:
            return "untrusted_host"  # not listening yet: nothing names it
        if not trust.host_trusted(headers.get_all("Host") or []):
            return "untrusted_host"
        origins = headers.get_all("Origin")
        if origins is not None and not trust.origin_trusted(origins):
            return "untrusted_origin"
        return None

    def refresh_refusal(self, headers: RequestHeaders) -> Optional[str]:
        """Why a forced refresh is refused (it then spends no probe), or None."""
        if headers.get("X-Svc-Refresh") is None:
            return "refresh_header_missing"
        return self.host_origin_refusal(headers)

    @staticmethod
    def forbidden(reason: str) -> Response:
        return json_response(403, {"error": "forbidden", "reason": reason, "message": GUARD_MESSAGES[reason]})

    # -- the endpoints --

    def get_accounts(self, request: Request) -> Reply:
        provider, bad = provider_from_query(request.query)
        if bad is not None or provider is None:
            return json_response(400, bad)
        refresh = refresh_requested(request.query)
        if refresh:
            reason = self.refresh_refusal(request.headers)
            if reason:
                return self.forbidden(reason)
        posture = self.postures.get(provider)
        if posture is None:  # a vendor registered after this node was built
            return json_response(200, disabled_body(self.node))
        return posture.respond(refresh)

    def get_accounts_stream(self, request: Request) -> Reply:
        provider, bad = provider_from_query(request.query)
        if bad is not None or provider is None:
            return json_response(400, bad)
        posture = self.postures.get(provider)
        if posture is None:
            return json_response(200, disabled_body(self.node))
        return posture.stream()

    def get_vendors(self, request: Request) -> Reply:
        """The registered vendors, as pages and clients name them, and which this node shows."""
        shown = {name for name, posture in self.services.postures.items() if posture.shows()}
        return json_response(200, {"node": self.node, "default": DEFAULT_PROVIDER, "vendors": [
            {"name": v.name, "displayName": v.display_name, "shown": v.name in shown} for v in registered()]})

    def get_advice(self, request: Request) -> Reply:
        return self.advice.respond(request.query)

    def get_trajectory(self, request: Request) -> Reply:
        return self.cached_trajectory()

    def get_history(self, request: Request) -> Reply:
        hours = parse_hours(request.query)
        if hours is None:
            return json_response(400, {"error": "bad_request",
                                       "message": "hours must be one integer from 1 to %d" % MAX_HOURS})
        try:
            body = self.history_body(hours)
        except Exception as exc:  # the history could not be read: say so, keep serving
            log.warning("history read failed: %s: %s", type(exc).__name__, exc)
            return error_response(500, "The history could not be read.")
        return Response(200, JSON_TYPE, dumps(body), JSON_HEADERS)

    def get_trajectory_stream(self, request: Request) -> Reply:
        return Stream(TrajectoryFrames(self.trajectory), self.settings.keepalive_s)

    def get_healthz(self, request: Request) -> Reply:
        # probeIntervalS: a posture older than twice it is stale (docs/posture.md); accountsFile:
        # which accounts file it watches, for a switch to compare with the file it edits.
        return json_response(200, {"ok": True, "node": self.node, "version": __version__,
                                   "startedAt": self.started_at, "probeIntervalS": self.settings.probe_interval_s,
                                   "accountsFile": file_id(str(self.services.paths.accounts_env))})

    def get_metrics(self, request: Request) -> Reply:
        figures = []
        for name, posture in self.services.postures.items():
            try:
                figures.append((name, posture.metrics()))
            except Exception as exc:
                log.warning("%s posture metrics failed: %s: %s", name, type(exc).__name__, exc)
                figures.append((name, {}))
        text = render_metrics(figures, subscribers=self.streams.count, subscribers_max=self.streams.limit)
        keys = account_keys(*[(name, (fig or {}).get("last")) for name, fig in figures])
        text += render_trajectory_metrics(self.trajectory.metrics(), keys)
        return Response(200, METRICS_TYPE, text.encode("utf-8"), b"Cache-Control: no-store\r\n")

    def get_fleet(self, request: Request) -> Reply:
        return Response(200, JSON_TYPE, self.fleet.body(), JSON_HEADERS)

    def get_fleet_accounts(self, request: Request) -> Reply:
        """The fleet by account (docs/fleet.md), built from the same cached read as /api/fleet."""
        return Response(200, JSON_TYPE, self.fleet.view(accounts_view), JSON_HEADERS)

    def get_fleet_owner(self, request: Request) -> Reply:
        """Which host takes a ticket, around the hosts without headroom (docs/liveness.md), from the
        same cached read as /api/fleet and the node's human reserve."""
        ticket, problem = parse_ticket(request.query)
        if problem is not None:
            return json_response(400, {"error": "bad_request", "message": problem})
        provider, bad = provider_from_query(request.query)
        if bad is not None or provider is None:
            return json_response(400, bad)
        report, view = self.fleet.derived(accounts_view)
        reserve = reserve_of(self.trajectory.body(), str(self.services.paths.home))
        return json_response(200, owner_with_headroom(str(ticket), report, view, provider, reserve))

    def get_login(self, request: Request) -> Reply:
        """This machine's interactive login from its sampler's newest sample (docs/first-look.md)."""
        logins = self.services.logins
        key = tuple(login.login_key() for login in logins)
        return self._login_read.get(key, self._login_response)

    def get_openapi(self, request: Request) -> Reply:
        return self.openapi

    def get_static(self, request: Request) -> Reply:
        body, ctype = self.static[request.path]
        return Response(200, ctype, body, PAGE_HEADERS)

    # -- the cached reads --

    def cached_trajectory(self) -> Response:
        """The Response to GET /api/trajectory from the body of the last probe."""
        body = self.trajectory.body()
        return self._trajectory_read.get((body,), _json_ok, body)

    def history_body(self, hours: int) -> Dict[str, Any]:
        with self._lock:
            if self._history_index is None:
                from ..trajectory.historyindex import HistoryIndex
                self._history_index = HistoryIndex(self.services.paths)
            index = self._history_index
        return index.body(node=self.node, hours=hours)

    def _login_response(self) -> Response:
        for login in self.services.logins:
            body = login.login_body()
            if body.get("available") is True:
                return _json_ok(body)
        if self.services.logins:
            return _json_ok(self.services.logins[0].login_body())
        return _json_ok({"available": False, "node": self.node, "reason": NO_LOGIN_REASON})

    def _fleet_report(self) -> Dict[str, Any]:
        if self.services.fleet_source is not None:
            return self.services.fleet_source()
        return collect_report(self.services.paths, self.settings)

    def _index_page(self, interval_s: Any) -> None:
        # The page greys out a value older than twice the probe interval; it
        # learns the interval here, so the contract's bodies stay as they are.
        page = self.static.get("/")
        if page is not None and isinstance(interval_s, (int, float)):
            page = (page[0].replace(b'content="300" data-svc="probe-interval"',
                                    b'content="%g" data-svc="probe-interval"' % interval_s), page[1])
        # A node without accounts is told which file to fill in, by its path.
        if page is not None:
            page = (page[0].replace(b'data-svc="accounts-file">its accounts env file<',
                                    b'data-svc="accounts-file">%s<' % html.escape(
                                        str(self.services.paths.accounts_env)).encode("utf-8", "replace")), page[1])
            self.static["/"] = page

    # The routes: (method, path, the function answering it). The dashboard's
    # files (assets.STATIC_FILES) are GET routes too, answered by get_static.
    ROUTES: Tuple[Route, ...] = ()


MonitorApp.ROUTES = (
    Route("GET", "/api/accounts", MonitorApp.get_accounts),
    Route("GET", "/api/accounts/stream", MonitorApp.get_accounts_stream),
    Route("GET", "/api/vendors", MonitorApp.get_vendors),
    Route("GET", "/api/trajectory", MonitorApp.get_trajectory),
    Route("GET", "/api/history", MonitorApp.get_history),
    Route("GET", "/api/trajectory/stream", MonitorApp.get_trajectory_stream),
    Route("GET", "/healthz", MonitorApp.get_healthz),
    Route("GET", "/metrics", MonitorApp.get_metrics),
    Route("GET", "/api/fleet", MonitorApp.get_fleet),
    Route("GET", "/api/fleet/accounts", MonitorApp.get_fleet_accounts),
    Route("GET", "/api/fleet/owner", MonitorApp.get_fleet_owner),
    Route("GET", "/api/login", MonitorApp.get_login),
    Route("GET", "/api/openapi.json", MonitorApp.get_openapi),
    Route("GET", "/api/advice", MonitorApp.get_advice),
)
ROUTES = MonitorApp.ROUTES


def _json_ok(body: Any) -> Response:
    return Response(200, JSON_TYPE, dumps(body), JSON_HEADERS)


def refresh_requested(query: str) -> bool:
    """Whether a query asks for a forced refresh (`refresh=true`)."""
    if not query:
        return False
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name == "refresh" and value == "true":
            return True
    return False


def parse_ticket(query: str) -> Tuple[Optional[str], Optional[str]]:
    """(the ticket, None) of a /api/fleet/owner query, or (None, why it is refused): exactly one
    `ticket`, a tracker ticket identifier (percent-encoding allowed)."""
    values = [part.partition("=")[2] for part in query.split("&") if part.partition("=")[0] == "ticket"] \
        if query else []
    if len(values) > 1:
        return None, "give one ticket, not %d" % len(values)
    try:
        ticket = unquote(values[0], errors="strict") if values else None
    except UnicodeDecodeError:
        return None, "the ticket is not UTF-8 text"
    problem = bad_ticket(ticket)
    return (ticket, None) if problem is None else (None, problem)


def parse_hours(query: str) -> Optional[int]:
    """`hours` of a /api/history query: default 24, else exactly one integer 1..192; None when bad."""
    values = [part.partition("=")[2] for part in query.split("&") if part.partition("=")[0] == "hours"] if query else []
    if not values:
        return DEFAULT_HOURS
    if len(values) != 1:
        return None
    try:
        text = unquote(values[0], errors="strict") if "%" in values[0] else values[0]
    except UnicodeDecodeError:
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 3:
        return None
    hours = int(text)
    return hours if 1 <= hours <= MAX_HOURS else None
