"""The monitor's application: every route, the guard, and the byte caches.

MonitorApp is a plain object between the sockets and the node's services. A
Request goes in (method, path, query, headers); out comes a Response (status,
headers, body) or an sse.Stream, a source of frames that sse.pump writes. It
never sees a connection: the server side adds the `Connection:` line and drops
the body of an answer to HEAD (response.Response.encode), so every route can
be exercised without a socket (tests/test_app.py).

Methods for the caller (the server side, typed as protocols.Application):

    respond(request)         the reply to any request: a Response or an sse.Stream
                             (405 for a method no route has, 404 for a path, the
                             read guard before every route)
    fast_reads()             request target -> cached read (a Response, or None
                             to hand over) the fast lane may answer itself
    listening(host, port, streams)
                             the server is bound: trust this address, count these streams
    wake_streams()           let every stream waiting for a frame see a hang-up

Adding a route is one line in ROUTES and one endpoint method:

    ROUTES = (..., Route("GET", "/api/hello", "get_hello"))

    def get_hello(self, request: Request) -> Reply:
        return json_response(200, {"hello": self.node})

An endpoint takes the Request and returns a Response built with
response.Response, json_response or error_response, or for a stream
sse.Stream(source, self.settings.keepalive_s) over a per-subscriber source
(see sse.py, streams.py). HEAD, 404 and 405 need nothing from it. A cached
read the fast lane may answer is one more entry in FAST_READS.

The forced-refresh guard decision is refresh_refusal(headers); the read guard
(SVC_MONITOR_READ_GUARD=1) is host_origin_refusal(headers) before every route.
"""
from __future__ import annotations

import html
import logging
import threading
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from urllib.parse import unquote

from .._time import iso_now, now_ms
from .._version import __version__
from ..trajectory.history import DEFAULT_HOURS, MAX_HOURS
from ..claude.loginview import login_body, no_sampler_reason
from ..summary import reply
from ..cluster.fleetaccounts import accounts_view
from ..settings import Settings
from .advice_route import AdviceRoute
from .assets import PAGE_HEADERS, load_static
from .exposition import METRICS_TYPE, account_keys, render_metrics, render_trajectory_metrics
from .fleet import FleetCache, collect_report
from .memo import Memo
from .openapi import openapi_document
from .protocols import FastRead, Reply
from .request import Request, RequestHeaders
from .response import JSON_HEADERS, JSON_TYPE, Response, dumps, error_response, json_response
from .routes import NOT_FOUND, Route, RouteTable, refusal
from .sse import FrameCache, Stream, StreamSlots
from .streams import ACCOUNT, PostureFrames, TrajectoryFrames
from .trust import GUARD_MESSAGES, TrustPolicy
from .vendor_routes import cached_reply_bytes, vendor_accounts_reply, vendor_service, vendor_target
from ..vendors import DEFAULT_PROVIDER

log = logging.getLogger("svcposture.monitor")

__all__ = ["MonitorApp", "Request", "Reply", "ROUTES", "Route", "parse_hours", "refresh_requested"]

# The routes: (method, path, the name of the method answering it). The
# dashboard's files (assets.STATIC_FILES) are GET routes too, answered by get_static.
ROUTES: Tuple[Route, ...] = (
    Route("GET", "/api/accounts", "get_accounts"),
    Route("GET", "/api/accounts/stream", "get_accounts_stream"),
    Route("GET", "/api/trajectory", "get_trajectory"),
    Route("GET", "/api/history", "get_history"),
    Route("GET", "/api/trajectory/stream", "get_trajectory_stream"),
    Route("GET", "/healthz", "get_healthz"),
    Route("GET", "/metrics", "get_metrics"),
    Route("GET", "/api/fleet", "get_fleet"),
    Route("GET", "/api/fleet/accounts", "get_fleet_accounts"),
    Route("GET", "/api/login", "get_login"),
    Route("GET", "/api/openapi.json", "get_openapi"),
    Route("GET", "/api/advice", "get_advice"),
)
# Request target -> the name of the cached read the fast lane answers it with.
# Each other vendor's plain read is one more, added per app (fast_reads).
FAST_READS = {b"/api/accounts": "cached_accounts", b"/api/trajectory": "cached_trajectory",
              b"/api/advice": "cached_advice"}


class MonitorApp:
    """Every route of the monitor over a posture service (and its trajectory service)."""

    ROUTES: Tuple[Route, ...] = ROUTES
    FAST_READS: Mapping[bytes, str] = FAST_READS

    def __init__(self, service: Any, *, node: str, settings: Settings) -> None:
        self.service = service
        self.node = node
        self.settings = settings
        self.trajectory = getattr(service, "trajectory", None)
        # Every other vendor's posture by name (docs/vendors.md), on the same probe schedule.
        self.vendor_postures: Dict[str, Any] = dict(getattr(service, "vendor_postures", None) or {})
        self.started_at = iso_now()
        self.streams = StreamSlots(settings.max_streams)  # the server lends its own in listening()
        self.trust: Optional[TrustPolicy] = None
        self.static = load_static()
        self.openapi = Response(200, JSON_TYPE, dumps(openapi_document()), JSON_HEADERS)
        # Where /api/fleet reads from: the cluster's status report unless a
        # source (a callable returning such a report, as the demo's simulated fleet) is given.
        self.fleet_source: Optional[Callable[[], Dict[str, Any]]] = None
        self.fleet = FleetCache(self._fleet_report, settings.fleet_ttl_s)
        # The quota sampler (its latest, reason and login_body()), when this process runs one.
        self.login_source: Any = None
        self._frames = FrameCache(ACCOUNT)
        self._vendor_frames = {name: FrameCache(ACCOUNT) for name in self.vendor_postures}
        self._posture_parts: Memo[Optional[Tuple[bytes, bytes]]] = Memo()
        self._accounts_read: Memo[Response] = Memo()
        self._vendor_reads: Dict[str, Memo[Response]] = {name: Memo() for name in self.vendor_postures}
        self._vendor_bodies: Memo[bytes] = Memo()
        self._trajectory_read: Memo[Response] = Memo()
        self._login_read: Memo[Response] = Memo()
        self._fresh_summary: Callable[[], Optional[Dict[str, Any]]] = getattr(service, "fresh_summary", _none)
        self._lock = threading.Lock()
        self._history_index: Any = None
        self.advice = AdviceRoute(service, self.trajectory)
        self._index_page(getattr(service, "interval_s", None))
        self.routes = RouteTable(tuple(Route("GET", path, "get_static") for path in self.static) + self.ROUTES,
                                 self)

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
        if self.settings.read_guard:
            return {}
        reads = {target: getattr(self, name) for target, name in self.FAST_READS.items()}
        for vendor in self.vendor_postures:
            reads[vendor_target(vendor)] = (lambda name=vendor: self.cached_vendor_accounts(name))
            reads[b"/api/advice?provider=" + vendor.encode("ascii")] = (lambda name=vendor: self.advice.fast(name))
        return reads

    def wake_streams(self) -> None:
        """Wake every stream waiting for a frame, so that those whose client hung up end."""
        self.service.broadcast.wake()
        for posture in self.vendor_postures.values():
            posture.broadcast.wake()
        if self.trajectory is not None:
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
        service, bad = vendor_service(self.service, request.query)
        if bad is not None:
            return json_response(400, bad)
        if service is not self.service:
            return self.vendor_accounts(service, request)
        refresh = refresh_requested(request.query)
        if refresh:
            reason = self.refresh_refusal(request.headers)
            if reason:
                return self.forbidden(reason)
        else:
            cached = self.cached_accounts()
            if cached is not None:
                return cached
        try:
            body = self.service.read(refresh=refresh)
        except Exception as exc:  # the posture layer failed: say so, keep serving
            log.warning("posture read failed: %s: %s", type(exc).__name__, exc)
            return error_response(500, "The posture could not be read.")
        return Response(200, JSON_TYPE, self.posture_bytes(body), JSON_HEADERS)

    def vendor_accounts(self, service: Any, request: Request) -> Response:
        """/api/accounts?provider=<name>: the same guard and caching rules, another vendor's body."""
        refresh = refresh_requested(request.query)
        reason = self.refresh_refusal(request.headers) if refresh else None
        if reason:
            return self.forbidden(reason)
        name = getattr(service, "provider", None)
        if not refresh and self.vendor_postures.get(name) is service:
            cached = self.cached_vendor_accounts(name)
            if cached is not None:
                return cached
        status, body = vendor_accounts_reply(service, refresh, self._vendor_bodies)
        return Response(status, JSON_TYPE, body, JSON_HEADERS)

    def get_accounts_stream(self, request: Request) -> Reply:
        service, bad = vendor_service(self.service, request.query)
        if bad is not None:
            return json_response(400, bad)
        if service is not self.service:
            frames = self._vendor_frames.get(getattr(service, "provider", None)) or FrameCache(ACCOUNT)
            return Stream(PostureFrames(service, dumps, frames), self.settings.keepalive_s)
        return Stream(PostureFrames(self.service, self.posture_bytes, self._frames), self.settings.keepalive_s)

    def get_advice(self, request: Request) -> Reply:
        return self.advice.respond(request.query)

    def get_trajectory(self, request: Request) -> Reply:
        return self.cached_trajectory() or _NO_TRAJECTORY

    def get_history(self, request: Request) -> Reply:
        if self.trajectory is None:
            return _NO_TRAJECTORY
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
        if self.trajectory is None:
            return _NO_TRAJECTORY
        return Stream(TrajectoryFrames(self.trajectory), self.settings.keepalive_s)

    def get_healthz(self, request: Request) -> Reply:
        # probeIntervalS: a posture older than twice it is stale (docs/posture.md).
        return json_response(200, {"ok": True, "node": self.node, "version": __version__,
                                   "startedAt": self.started_at, "probeIntervalS": self.service.interval_s})

    def get_metrics(self, request: Request) -> Reply:
        try:
            figures = self.service.metrics()
        except Exception as exc:
            log.warning("posture metrics failed: %s: %s", type(exc).__name__, exc)
            figures = {}
        others = [(name, posture.metrics()) for name, posture in self.vendor_postures.items()]
        text = render_metrics(figures, subscribers=self.streams.count, subscribers_max=self.streams.limit,
                              vendors=others)
        if self.trajectory is not None:
            keys = account_keys((DEFAULT_PROVIDER, figures.get("last")),
                                *[(name, (other or {}).get("last")) for name, other in others])
            text += render_trajectory_metrics(self.trajectory.metrics(), keys)
        return Response(200, METRICS_TYPE, text.encode("utf-8"), b"Cache-Control: no-store\r\n")

    def get_fleet(self, request: Request) -> Reply:
        return Response(200, JSON_TYPE, self.fleet.body(), JSON_HEADERS)

    def get_fleet_accounts(self, request: Request) -> Reply:
        """The fleet by account (docs/fleet.md), built from the same cached read as /api/fleet."""
        return Response(200, JSON_TYPE, self.fleet.view(accounts_view), JSON_HEADERS)

    def get_login(self, request: Request) -> Reply:
        """This machine's Claude Code login from the sampler's newest sample (docs/first-look.md)."""
        source = self.login_source
        key = (source, getattr(source, "latest", None), getattr(source, "reason", None))
        return self._login_read.get(key, self._login_response, source)

    def get_openapi(self, request: Request) -> Reply:
        return self.openapi

    def get_static(self, request: Request) -> Reply:
        body, ctype = self.static[request.path]
        return Response(200, ctype, body, PAGE_HEADERS)

    # -- the cached reads and the bytes caches (memo.Memo: the value of the newest key) --

    def posture_bytes(self, body: Mapping[str, Any]) -> bytes:
        """The JSON of a posture body. Bodies of one probe differ only in
        generatedAt, so the rest is serialised once per probe and spliced."""
        generated = body.get("generatedAt")
        if not isinstance(generated, str) or body.get("probedAt") is None:
            return dumps(body)
        key = (body.get("available"), body.get("node"), body.get("probedAt"), body.get("cached"),
               body.get("status"), body.get("accounts"))
        parts = self._posture_parts.get(key, _posture_parts, body)
        if parts is None:
            return dumps(body)
        return parts[0] + dumps(generated) + parts[1]

    def cached_accounts(self) -> Optional[Response]:
        """The Response to a cached plain read of /api/accounts, or None when the
        posture service has no fresh summary.

        Replies within one millisecond are byte-identical (generatedAt has ms
        resolution), so under load most reads reuse the previous Response (and
        its encoding) instead of building a body and a head again.
        """
        summary = self._fresh_summary()
        if summary is None:
            return None
        ms = now_ms()
        return self._accounts_read.get((ms, summary), self._accounts_response, summary, ms)

    def cached_vendor_accounts(self, name: str) -> Optional[Response]:
        """The Response to a cached plain read of /api/accounts?provider=<name>, or None
        (no fresh summary); built once per summary and millisecond, as Claude's."""
        posture = self.vendor_postures.get(name)
        summary = posture.fresh_summary() if posture is not None else None
        if summary is None:
            return None
        ms = now_ms()
        return self._vendor_reads[name].get((ms, summary), self._vendor_response, summary, ms)

    def cached_advice(self) -> Optional[Response]:
        """The Response to a cached plain read of /api/advice (docs/steering.md), or None."""
        return self.advice.fast(DEFAULT_PROVIDER)

    def cached_trajectory(self) -> Optional[Response]:
        """The Response to GET /api/trajectory from the body of the last probe (None: no trajectory)."""
        if self.trajectory is None:
            return None
        body = self.trajectory.body()
        return self._trajectory_read.get((body,), _json_ok, body)

    def history_body(self, hours: int) -> Dict[str, Any]:
        with self._lock:
            if self._history_index is None:
                from ..trajectory.historyindex import HistoryIndex
                self._history_index = HistoryIndex(self.service.paths)
            index = self._history_index
        return index.body(node=self.node, hours=hours)

    def _accounts_response(self, summary: Dict[str, Any], ms: int) -> Response:
        return Response(200, JSON_TYPE, self.posture_bytes(reply(summary, cached=True, generated_ms=ms)),
                        JSON_HEADERS)

    def _vendor_response(self, summary: Dict[str, Any], ms: int) -> Response:
        return Response(200, JSON_TYPE, cached_reply_bytes(summary, ms, self._vendor_bodies), JSON_HEADERS)

    def _login_response(self, source: Any) -> Response:
        return _json_ok(source.login_body() if source is not None
                        else login_body(self.node, None, no_sampler_reason()))

    def _fleet_report(self) -> Dict[str, Any]:
        if self.fleet_source is not None:
            return self.fleet_source()
        return collect_report(self.service.paths, self.settings)

    def _index_page(self, interval_s: Any) -> None:
        # The page greys out a value older than twice the probe interval; it
        # learns the interval here, so the contract's bodies stay as they are.
        page = self.static.get("/")
        if page is not None and isinstance(interval_s, (int, float)):
            page = (page[0].replace(b'content="300" data-svc="probe-interval"',
                                    b'content="%g" data-svc="probe-interval"' % interval_s), page[1])
        # A node without accounts is told which file to fill in, by its path.
        env_file = getattr(getattr(self.service, "paths", None), "accounts_env", None)
        if page is not None and env_file is not None:
            page = (page[0].replace(b'data-svc="accounts-file">its accounts env file<',
                                    b'data-svc="accounts-file">%s<' % html.escape(str(env_file)).encode(
                                        "utf-8", "replace")), page[1])
        if page is not None:
            self.static["/"] = page


_NO_TRAJECTORY = error_response(404, "No trajectory on this server.")
_GENERATED_MARKER = "\u0000svc-generated-at\u0000"


def _none() -> None:
    return None


def _json_ok(body: Any) -> Response:
    return Response(200, JSON_TYPE, dumps(body), JSON_HEADERS)


def _posture_parts(body: Mapping[str, Any]) -> Optional[Tuple[bytes, bytes]]:
    """A posture body's JSON split around its generatedAt value (None when it cannot be)."""
    whole = dumps(dict(body, generatedAt=_GENERATED_MARKER))
    prefix, found, suffix = whole.partition(dumps(_GENERATED_MARKER))
    return (prefix, suffix) if found else None


def refresh_requested(query: str) -> bool:
    """Whether a query asks for a forced refresh (`refresh=true`)."""
    if not query:
        return False
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name == "refresh" and value == "true":
            return True
    return False


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
