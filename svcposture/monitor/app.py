"""The monitor's application: every route, the guard, and the bytes caches.

MonitorApp is a plain object between the sockets and the node's services. A
request goes in (method, path, query, headers, and the Connection line the
reply must carry); out comes either the whole response as one bytes object or
an sse.Stream, a source of frames that sse.pump writes. It never touches a
socket, so every route can be exercised without one (tests/test_app.py).

Methods for the caller (the handler, the fast lane, the server):

    handle(request)          the reply to any GET or HEAD: bytes or an sse.Stream
    fast_response(target, conn)
                             the whole response of a cached plain read the fast
                             lane may write itself, or None to hand it over
    FAST_TARGETS             the request targets fast_response may answer
    listening(host, port, streams)
                             the server is bound: trust this address, count these streams
    wake_streams()           let every stream waiting for a frame see a hang-up

Methods that may be overridden or added:

    ROUTES                   path -> name of the method answering it
    get_<name>(request)      the route ROUTES maps a path to: adding a route is
                             one entry in ROUTES and one such method returning
                             bytes (built with wire.response, json_response or
                             error_response, carrying request.conn) or, for a
                             stream, sse.Stream(source, settings.keepalive_s)
                             over a per-subscriber source (see sse.py, streams.py)

The forced-refresh guard decision is refresh_refusal(headers); the read guard
(SVC_MONITOR_READ_GUARD=1) is host_origin_refusal(headers) before every route.
"""
from __future__ import annotations

import html
import logging
import threading
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

from urllib.parse import unquote

from .._time import iso_now, now_ms
from .._version import __version__
from ..history import DEFAULT_HOURS, MAX_HOURS
from ..claude.loginview import login_body, no_sampler_reason
from ..summary import reply
from ..cluster.fleetaccounts import accounts_view
from ..settings import Settings
from . import wire
from .assets import PAGE_HEADERS, load_static
from .exposition import METRICS_TYPE, account_keys, render_metrics, render_trajectory_metrics
from .advice_route import TARGETS as ADVICE_TARGETS, AdviceRoute
from .openapi import openapi_document
from .fleet import FleetCache, collect_report
from .sse import FrameCache, Stream, StreamSlots
from .streams import ACCOUNT, PostureFrames, TrajectoryFrames
from .trust import GUARD_MESSAGES, TrustPolicy
from .vendor_routes import CODEX_TARGET, cached_reply_bytes, vendor_accounts_reply, vendor_service
from .wire import JSON_HEADERS, JSON_TYPE, Request, dumps

log = logging.getLogger("svcposture.monitor")

Reply = Union[bytes, Stream]
__all__ = ["MonitorApp", "Request", "Reply", "ROUTES", "parse_hours", "refresh_requested"]

# path -> the name of the method that answers it. The dashboard's files
# (assets.STATIC_FILES) are answered after these; anything else is a 404.
ROUTES = {
    "/api/accounts": "get_accounts",
    "/api/accounts/stream": "get_accounts_stream",
    "/api/trajectory": "get_trajectory",
    "/api/history": "get_history",
    "/api/trajectory/stream": "get_trajectory_stream",
    "/healthz": "get_healthz",
    "/metrics": "get_metrics",
    "/api/fleet": "get_fleet",
    "/api/fleet/accounts": "get_fleet_accounts",
    "/api/login": "get_login",
    "/api/openapi.json": "get_openapi",
    "/api/advice": "get_advice",
}
# What a stream answers to HEAD: no slot is taken and no frame is sent.
_STREAM_HEAD_HEADERS = b"Cache-Control: no-cache\r\n"


class MonitorApp:
    """Every route of the monitor over a posture service (and its trajectory service)."""

    ROUTES: Dict[str, str] = ROUTES
    FAST_TARGETS = frozenset((b"/api/accounts", b"/api/trajectory", CODEX_TARGET) + tuple(ADVICE_TARGETS))

    def __init__(self, service: Any, *, node: str, settings: Settings) -> None:
        self.service = service
        self.node = node
        self.settings = settings
        self.trajectory = getattr(service, "trajectory", None)
        self.codex = getattr(service, "codex", None)  # the Codex posture (docs/codex.md), on the same probes
        self._codex_frames = FrameCache(ACCOUNT)
        self._codex_read: Tuple[Any, bytes] = (None, b"")
        self.advice = AdviceRoute(service, self.trajectory)
        self.started_at = iso_now()
        self.streams = StreamSlots(settings.max_streams)  # the server lends its own in listening()
        self.trust: Optional[TrustPolicy] = None
        self.static = load_static()
        self.openapi_body = dumps(openapi_document())
        # Where /api/fleet reads from: the cluster's status report unless a
        # source (a callable returning such a report, as the demo's simulated fleet) is given.
        self.fleet_source: Optional[Callable[[], Dict[str, Any]]] = None
        self.fleet = FleetCache(self._fleet_report, settings.fleet_ttl_s)
        # The quota sampler (its latest, reason and login_body()), when this process runs one.
        self.login_source: Any = None
        self._login_cache: Tuple[Any, bytes] = (object(), b"")
        self._frames = FrameCache(ACCOUNT)
        self._routes = {path: getattr(self, name) for path, name in self.ROUTES.items()}
        self._lock = threading.Lock()
        self._body_key: Any = None
        self._body_parts: Tuple[bytes, bytes] = (b"", b"")
        self._cached_read: Tuple[Any, bytes] = (None, b"")
        self._trajectory_cache: Tuple[Any, bytes] = (None, b"")
        self._history_index: Any = None
        self._index_page(getattr(service, "interval_s", None))

    # -- methods for the caller --

    def listening(self, host: str, port: int, streams: Optional[StreamSlots] = None) -> None:
        """The server is bound to `host`:`port` (trusted by the guard, so that
        `--port 0` trusts the port actually bound); `streams` are its stream
        slots, which /metrics reports."""
        self.trust = TrustPolicy(host, port, self.node, extra_hosts=self.settings.trusted_hosts,
                                 extra_origins=self.settings.trusted_origins)
        if streams is not None:
            self.streams = streams

    def handle(self, request: Request) -> Reply:
        """The reply to a GET or HEAD (any other method is the handler's 405)."""
        if self.settings.read_guard:
            reason = self.host_origin_refusal(request.headers)
            if reason:
                return self.forbidden(reason, request)
        route = self._routes.get(request.path)
        if route is not None:
            return route(request)
        asset = self.static.get(request.path)
        if asset is not None:
            return wire.response(200, asset[1], asset[0], request.conn, PAGE_HEADERS, request.head_only)
        return wire.error_response(404, "No such route. See /api/openapi.json.", request.conn,
                                   head_only=request.head_only)

    def fast_response(self, target: bytes, conn: bytes) -> Optional[bytes]:
        """The whole response to a plain `GET target` the fast lane may write
        itself (byte for byte what handle() would answer), or None."""
        if self.settings.read_guard:
            return None
        if target == b"/api/accounts":
            return self.cached_accounts(conn)
        if target == b"/api/trajectory":
            return self.trajectory_response(conn)
        if target == CODEX_TARGET:
            return self.cached_codex_accounts(conn)
        return self.advice.fast(target, conn)

    def wake_streams(self) -> None:
        """Wake every stream waiting for a frame, so that those whose client hung up end."""
        self.service.broadcast.wake()
        if self.codex is not None:
            self.codex.broadcast.wake()
        if self.trajectory is not None:
            self.trajectory.broadcast.wake()

    # -- the guard --

    def host_origin_refusal(self, headers: Any) -> Optional[str]:
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

    def refresh_refusal(self, headers: Any) -> Optional[str]:
        """Why a forced refresh is refused (it then spends no probe), or None."""
        if headers.get("X-Svc-Refresh") is None:
            return "refresh_header_missing"
        return self.host_origin_refusal(headers)

    def forbidden(self, reason: str, request: Request) -> bytes:
        return wire.json_response(403, {"error": "forbidden", "reason": reason, "message": GUARD_MESSAGES[reason]},
                                  request.conn, head_only=request.head_only)

    # -- the routes --

    def get_accounts(self, request: Request) -> Reply:
        service, bad = vendor_service(self.service, request.query)
        if bad is not None:
            return wire.json_response(400, bad, request.conn, head_only=request.head_only)
        if service is not self.service:
            return self.vendor_accounts(service, request)
        refresh = refresh_requested(request.query)
        if refresh:
            reason = self.refresh_refusal(request.headers)
            if reason:
                return self.forbidden(reason, request)
        elif request.method == "GET":
            cached = self.cached_accounts(request.conn)
            if cached is not None:
                return cached
        try:
            body = self.service.read(refresh=refresh)
        except Exception as exc:  # the posture layer failed: say so, keep serving
            log.warning("posture read failed: %s: %s", type(exc).__name__, exc)
            return wire.error_response(500, "The posture could not be read.", request.conn,
                                       head_only=request.head_only)
        return wire.response(200, JSON_TYPE, self.posture_bytes(body), request.conn, JSON_HEADERS,
                             request.head_only)

    def vendor_accounts(self, service: Any, request: Request) -> bytes:
        """/api/accounts?provider=codex: the same guard and caching rules, another vendor's body."""
        refresh = refresh_requested(request.query)
        reason = self.refresh_refusal(request.headers) if refresh else None
        if reason:
            return self.forbidden(reason, request)
        if not refresh and request.method == "GET" and service is self.codex:
            cached = self.cached_codex_accounts(request.conn)
            if cached is not None:
                return cached
        status, body = vendor_accounts_reply(service, refresh)
        return wire.response(status, JSON_TYPE, body, request.conn, JSON_HEADERS, request.head_only)

    def get_accounts_stream(self, request: Request) -> Reply:
        service, bad = vendor_service(self.service, request.query)
        if bad is not None:
            return wire.json_response(400, bad, request.conn, head_only=request.head_only)
        if request.head_only:
            return wire.response(200, "text/event-stream", b"", request.conn, _STREAM_HEAD_HEADERS, True)
        if service is not self.service:
            return Stream(PostureFrames(service, dumps, self._codex_frames), self.settings.keepalive_s)
        return Stream(PostureFrames(self.service, self.posture_bytes, self._frames), self.settings.keepalive_s)

    def get_trajectory(self, request: Request) -> Reply:
        if self.trajectory is None:
            return self._no_trajectory(request)
        response = self.trajectory_response(request.conn) or b""
        return response.partition(b"\r\n\r\n")[0] + b"\r\n\r\n" if request.head_only else response

    def get_history(self, request: Request) -> Reply:
        if self.trajectory is None:
            return self._no_trajectory(request)
        hours = parse_hours(request.query)
        if hours is None:
            return wire.json_response(400, {"error": "bad_request",
                                            "message": "hours must be one integer from 1 to %d" % MAX_HOURS},
                                      request.conn, head_only=request.head_only)
        try:
            body = self.history_body(hours)
        except Exception as exc:  # the history could not be read: say so, keep serving
            log.warning("history read failed: %s: %s", type(exc).__name__, exc)
            return wire.error_response(500, "The history could not be read.", request.conn,
                                       head_only=request.head_only)
        return wire.response(200, JSON_TYPE, dumps(body), request.conn, JSON_HEADERS, request.head_only)

    def get_trajectory_stream(self, request: Request) -> Reply:
        if self.trajectory is None:
            return self._no_trajectory(request)
        if request.head_only:
            return wire.response(200, "text/event-stream", b"", request.conn, _STREAM_HEAD_HEADERS, True)
        return Stream(TrajectoryFrames(self.trajectory), self.settings.keepalive_s)

    def get_healthz(self, request: Request) -> Reply:
        # probeIntervalS: a posture older than twice it is stale (docs/posture.md).
        return wire.json_response(200, {"ok": True, "node": self.node, "version": __version__,
                                        "startedAt": self.started_at, "probeIntervalS": self.service.interval_s},
                                  request.conn, head_only=request.head_only)

    def get_metrics(self, request: Request) -> Reply:
        try:
            figures = self.service.metrics()
        except Exception as exc:
            log.warning("posture metrics failed: %s: %s", type(exc).__name__, exc)
            figures = {}
        codex = self.codex.metrics() if self.codex is not None else None
        text = render_metrics(figures, subscribers=self.streams.count, subscribers_max=self.streams.limit,
                              codex=codex)
        if self.trajectory is not None:
            keys = account_keys(("claude", figures.get("last")), ("codex", (codex or {}).get("last")))
            text += render_trajectory_metrics(self.trajectory.metrics(), keys)
        return wire.response(200, METRICS_TYPE, text.encode("utf-8"), request.conn, b"Cache-Control: no-store\r\n",
                             request.head_only)

    def get_fleet(self, request: Request) -> Reply:
        return wire.response(200, JSON_TYPE, self.fleet.body(), request.conn, JSON_HEADERS, request.head_only)

    def get_fleet_accounts(self, request: Request) -> Reply:
        """The fleet by account (docs/fleet.md), built from the same cached read as /api/fleet."""
        return wire.response(200, JSON_TYPE, self.fleet.view(accounts_view), request.conn, JSON_HEADERS,
                             request.head_only)

    def get_login(self, request: Request) -> Reply:
        """This machine's Claude Code login from the sampler's newest sample (docs/first-look.md)."""
        source = self.login_source
        key = (id(source), id(getattr(source, "latest", None)), getattr(source, "reason", None))
        cached = self._login_cache
        if cached[0] == key:
            body = cached[1]
        else:
            body = dumps(source.login_body() if source is not None
                         else login_body(self.node, None, no_sampler_reason()))
            self._login_cache = (key, body)
        return wire.response(200, JSON_TYPE, body, request.conn, JSON_HEADERS, request.head_only)

    def get_advice(self, request: Request) -> Reply:
        return self.advice.response(request.query, request.conn, request.head_only)

    def get_openapi(self, request: Request) -> Reply:
        return wire.response(200, JSON_TYPE, self.openapi_body, request.conn, JSON_HEADERS, request.head_only)

    def _no_trajectory(self, request: Request) -> bytes:
        return wire.error_response(404, "No trajectory on this server.", request.conn, head_only=request.head_only)

    # -- the bytes caches (one tuple assignment each: readers see the old pair or the new one) --

    def posture_bytes(self, body: Mapping[str, Any]) -> bytes:
        """The JSON of a posture body. Bodies of one probe differ only in
        generatedAt, so the rest is serialised once per probe and spliced."""
        generated = body.get("generatedAt")
        key = (body.get("available"), body.get("node"), body.get("probedAt"), body.get("cached"),
               body.get("status"), id(body.get("accounts")))
        if not isinstance(generated, str) or body.get("probedAt") is None:
            return dumps(body)
        with self._lock:
            if key == self._body_key:
                prefix, suffix = self._body_parts
                return prefix + dumps(generated) + suffix
        marker = "\u0000svc-generated-at\u0000"
        whole = dumps(dict(body, generatedAt=marker))
        prefix, found, suffix = whole.partition(dumps(marker))
        if not found:
            return dumps(body)
        with self._lock:
            self._body_key = key
            self._body_parts = (prefix, suffix)
        return prefix + dumps(generated) + suffix

    def cached_accounts(self, conn: bytes) -> Optional[bytes]:
        """The whole response of a cached plain read of /api/accounts, or None
        when the posture service has no fresh summary.

        Replies within one millisecond are byte-identical (generatedAt has ms
        resolution), so under load most reads reuse the previous bytes instead
        of building a body and a head again.
        """
        fresh = getattr(self.service, "fresh_summary", None)
        summary = fresh() if fresh is not None else None
        if summary is None:
            return None
        ms = now_ms()
        key = (id(summary), ms, conn)
        cached = self._cached_read
        if cached[0] == key:
            return cached[1]
        body = self.posture_bytes(reply(summary, cached=True, generated_ms=ms))
        response = wire.response(200, JSON_TYPE, body, conn, JSON_HEADERS)
        self._cached_read = (key, response)
        return response

    def cached_codex_accounts(self, conn: bytes) -> Optional[bytes]:
        """The whole response of a cached plain read of /api/accounts?provider=codex, or None
        (no fresh summary); built once per summary, millisecond and Connection line, as Claude's."""
        summary = self.codex.fresh_summary() if self.codex is not None else None
        if summary is None:
            return None
        key = (id(summary), now_ms(), conn)
        cached = self._codex_read
        if cached[0] == key:
            return cached[1]
        response = wire.response(200, JSON_TYPE, cached_reply_bytes(self.codex, summary, key[1]), conn, JSON_HEADERS)
        self._codex_read = (key, response)
        return response

    def trajectory_response(self, conn: bytes) -> Optional[bytes]:
        """The whole response to GET /api/trajectory from the body of the last probe."""
        trajectory = self.trajectory
        if trajectory is None:
            return None
        body = trajectory.body()
        key = (id(body), wire.date_header(), conn)
        cached = self._trajectory_cache
        if cached[0] == key:
            return cached[1]
        response = wire.response(200, JSON_TYPE, dumps(body), conn, JSON_HEADERS)
        self._trajectory_cache = (key, response)
        return response

    def history_body(self, hours: int) -> Dict[str, Any]:
        with self._lock:
            if self._history_index is None:
                from ..historyindex import HistoryIndex
                self._history_index = HistoryIndex(self.service.paths)
            index = self._history_index
        return index.body(node=self.node, hours=hours)

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
