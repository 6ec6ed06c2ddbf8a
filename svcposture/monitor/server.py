"""The monitor's server: the listening socket and every piece of state the handler reads.

MonitorServer binds, hands each accepted connection to the fast lane, keeps
the caches that make a cached read one prebuilt write (the Date header, the
posture JSON of the current probe, the whole cached-read response) and counts
stream subscribers against SVC_MONITOR_MAX_STREAMS. start_server runs one in
a daemon thread around a posture service the caller owns; the process around
it (lock, logging, signals, monitor.json) is main.py.

Responses are built as one bytes object and written with one send: a status
line written apart from its body stalls keep-alive clients on delayed ACKs,
and the cached posture read is the hot path.
"""
from __future__ import annotations

import errno
import logging
import os
import socket
import socketserver
import sys
import threading
import time
from email.utils import formatdate
from http.server import ThreadingHTTPServer
from typing import Any, Dict, Mapping, Optional, Tuple

from .._env import env_number
from .._time import iso_now, now_ms
from ..posture import reply
from .assets import load_static
from .exposition import openapi_document
from .fastlane import FastLane
from .handler import MonitorHandler
from .hangup import HangupWatch
from .sse import DEFAULT_KEEPALIVE_S, FrameCache
from .trust import TrustPolicy
from .wire import JSON_HEADERS, JSON_TYPE, REQUEST_READ_TIMEOUT_S, dumps

log = logging.getLogger("svcposture.monitor")

DEFAULT_BIND = "127.0.0.1"
DEFAULT_PORT = 7400
DEFAULT_MAX_STREAMS = 1024
DEFAULT_MAX_CONNECTIONS = 4096
# Descriptors kept free of client connections: the listening socket, the
# selector, log and state files, probe-child pipes, the stdlib's own.
FD_RESERVE = 64
# How long accepts pause when the process is out of descriptors: long enough
# not to spin on EMFILE, short enough that the backlog waits only briefly.
ACCEPT_PAUSE_S = 0.1
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def descriptor_limit() -> int:
    """The soft RLIMIT_NOFILE, or a large number when it cannot be read."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 1 << 20
    return soft if soft > 0 else 1 << 20


class MonitorServer(ThreadingHTTPServer):
    """The monitor's listening socket plus every piece of state the handler reads."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 1024  # the stdlib's 5 drops connection bursts

    def __init__(self, address: Tuple[str, int], service: Any, *, node: str,
                 environ: Optional[Mapping[str, str]] = None) -> None:
        environ = os.environ if environ is None else environ
        host = address[0]
        if ":" in host.strip("[]"):
            self.address_family = socket.AF_INET6
            address = (host.strip("[]"), address[1])
        self.service = service
        self.node = node
        self.max_streams = env_number(environ, "SVC_MONITOR_MAX_STREAMS", DEFAULT_MAX_STREAMS,
                                      low=1, high=100000, kind=int, strict=True)
        self.keepalive_s = env_number(environ, "SVC_SSE_KEEPALIVE_S", DEFAULT_KEEPALIVE_S,
                                      low=0.05, high=3600.0, strict=True)
        self.read_guard = environ.get("SVC_MONITOR_READ_GUARD", "") == "1"
        self.request_timeout_s = env_number(environ, "SVC_MONITOR_REQUEST_TIMEOUT_S", REQUEST_READ_TIMEOUT_S,
                                            low=0.1, high=300.0, strict=True)
        # Connections held at once (waiting in the fast lane or served by a
        # thread), at most the descriptor limit less a reserve: past it the
        # oldest idle connections are closed, and accept never runs dry.
        configured = env_number(environ, "SVC_MONITOR_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS,
                                low=16, high=1000000, kind=int, strict=True)
        self.max_connections = max(16, min(configured, descriptor_limit() - FD_RESERVE))
        self._threaded: Dict[int, bool] = {}
        self._threaded_lock = threading.Lock()
        self._out_of_descriptors = False
        self._trusted_hosts_env = environ.get("SVC_MONITOR_TRUSTED_HOSTS", "")
        self._trusted_origins_env = environ.get("SVC_MONITOR_TRUSTED_ORIGINS", "")
        self.started_at = iso_now()
        self.stopping = threading.Event()
        self._streams = 0
        self._streams_lock = threading.Lock()
        self.frames = FrameCache()
        self._body_lock = threading.Lock()
        self._body_key: Any = None
        self._cached_read: Tuple[Any, bytes] = (None, b"")
        self._body_parts: Tuple[bytes, bytes] = (b"", b"")
        self._date_second = -1
        self._date_header = b""
        self.static = load_static()
        self._handoffs: Dict[int, Tuple[bytes, bytes, bool]] = {}
        self._handoffs_lock = threading.Lock()
        self.fast_lane: Optional[FastLane] = None  # server_close may run inside a failed bind
        # A stream whose client hung up ends (and frees its slot) at once, not at its next write.
        self.hangups = HangupWatch(self._wake_streams)
        super().__init__(address, MonitorHandler)
        self.fast_lane = FastLane(self)
        # Built after bind so that `--port 0` trusts the port actually bound.
        self.trust = TrustPolicy(host, self.server_port, node, extra_hosts=self._trusted_hosts_env,
                                 extra_origins=self._trusted_origins_env)
        self.openapi_body = dumps(openapi_document())
        self.trajectory = getattr(service, "trajectory", None)
        self.history_index: Any = None
        self._trajectory_cache: Tuple[Any, bytes] = (None, b"")
        self._index_page(getattr(service, "interval_s", None))

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), a reverse DNS lookup that can
        # hang for seconds on a host without resolvers; the name is not needed.
        socketserver.TCPServer.server_bind(self)
        sockname = self.socket.getsockname()
        self.server_name = str(sockname[0])
        self.server_port = int(sockname[1])

    @property
    def url(self) -> str:
        host = self.server_name
        if ":" in host:
            host = "[%s]" % host
        return "http://%s:%d" % (host, self.server_port)

    def process_request(self, request: Any, client_address: Any) -> None:
        lane = self.fast_lane
        if lane is not None and not self.stopping.is_set():
            lane.adopt(request, client_address)
        else:
            super().process_request(request, client_address)

    def hand_off(self, sock: socket.socket, address: Any, unsent: bytes, unread: bytes, close: bool) -> None:
        """Give a connection from the fast lane to a handler thread of its own."""
        with self._handoffs_lock:
            self._handoffs[id(sock)] = (unsent, unread, close)
        with self._threaded_lock:
            self._threaded[id(sock)] = True
        ThreadingHTTPServer.process_request(self, sock, address)

    def shutdown_request(self, request: Any) -> None:
        with self._threaded_lock:
            self._threaded.pop(id(request), None)
        super().shutdown_request(request)

    def connections_held(self, in_lane: int) -> int:
        """Client connections held: `in_lane` waiting in the fast lane plus those on threads."""
        return in_lane + len(self._threaded)

    def get_request(self) -> Tuple[Any, Any]:
        try:
            request = self.socket.accept()
        except OSError as exc:
            if exc.errno in _OUT_OF_DESCRIPTORS:
                self._pause_accepts(exc)
            raise  # socketserver drops this one attempt
        if self._out_of_descriptors:
            self._out_of_descriptors = False
            log.info("accepting connections again")
        return request

    def _pause_accepts(self, exc: OSError) -> None:
        # The listening socket stays readable while the backlog is full, so
        # retrying at once would spin. Free descriptors and wait a moment.
        if not self._out_of_descriptors:
            self._out_of_descriptors = True
            log.warning("out of file descriptors (%s) with %d connections held; closing the oldest idle "
                        "ones and pausing accepts", errno.errorcode.get(exc.errno or 0, exc.errno),
                        self.connections_held(self.fast_lane.held if self.fast_lane else 0))
        lane = self.fast_lane
        if lane is not None:
            lane.request_shed(16)
        self.stopping.wait(ACCEPT_PAUSE_S)

    def _wake_streams(self) -> None:
        """Wake every stream waiting for a frame, so that those whose client hung up end."""
        self.service.broadcast.wake()
        codex = getattr(self.service, "codex", None)
        if codex is not None:
            codex.broadcast.wake()
        trajectory = getattr(self, "trajectory", None)
        if trajectory is not None:
            trajectory.broadcast.wake()

    def take_handoff(self, sock: Any) -> Optional[Tuple[bytes, bytes, bool]]:
        with self._handoffs_lock:
            return self._handoffs.pop(id(sock), None)

    def server_close(self) -> None:
        lane, self.fast_lane = self.fast_lane, None
        if lane is not None:
            lane.close()
        self.hangups.close()
        super().server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, socket.timeout, OSError)):
            return  # a client hung up or stalled: routine, never a traceback
        log.warning("request from %s failed: %s: %s", client_address[0] if client_address else "?",
                    type(exc).__name__, exc)

    # -- small shared caches (each guarded by its own lock) --

    def date_header(self) -> bytes:
        second = int(time.time())
        if second != self._date_second:
            self._date_header = ("Date: %s\r\n" % formatdate(second, usegmt=True)).encode("ascii")
            self._date_second = second
        return self._date_header

    def posture_bytes(self, body: Mapping[str, Any]) -> bytes:
        """The JSON of a posture body. Bodies of one probe differ only in
        generatedAt, so the rest is serialised once per probe and spliced."""
        generated = body.get("generatedAt")
        key = (body.get("available"), body.get("node"), body.get("probedAt"), body.get("cached"),
               body.get("status"), id(body.get("accounts")))
        if not isinstance(generated, str) or body.get("probedAt") is None:
            return dumps(body)
        with self._body_lock:
            if key == self._body_key:
                prefix, suffix = self._body_parts
                return prefix + dumps(generated) + suffix
        marker = "\u0000svc-generated-at\u0000"
        whole = dumps(dict(body, generatedAt=marker))
        prefix, found, suffix = whole.partition(dumps(marker))
        if not found:
            return dumps(body)
        with self._body_lock:
            self._body_key = key
            self._body_parts = (prefix, suffix)
        return prefix + dumps(generated) + suffix

    def cached_read_response(self, summary: Mapping[str, Any], conn: bytes) -> bytes:
        """The whole HTTP response of a cached plain read of `summary`.

        Replies within one millisecond are byte-identical (generatedAt has ms
        resolution), so under load most reads reuse the previous bytes instead
        of building a body and a head again.
        """
        ms = now_ms()
        key = (id(summary), ms, conn)
        cached = self._cached_read
        if cached[0] == key:
            return cached[1]
        body = self.posture_bytes(reply(summary, cached=True, generated_ms=ms))
        response = b"HTTP/1.1 200 OK\r\nServer: svc-monitor\r\n%sContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n%s" % (
            self.date_header(), JSON_TYPE.encode("ascii"), len(body), conn, JSON_HEADERS, body)
        # One tuple assignment is atomic: readers see the old pair or the new one.
        self._cached_read = (key, response)
        return response

    def _index_page(self, interval_s: Any) -> None:
        # The page greys out a value older than twice the probe interval; it
        # learns the interval here, so the contract's bodies stay as they are.
        page = self.static.get("/")
        if page is not None and isinstance(interval_s, (int, float)):
            self.static["/"] = (page[0].replace(b'content="300" data-svc="probe-interval"',
                                                b'content="%g" data-svc="probe-interval"' % interval_s), page[1])

    def trajectory_response(self, conn: bytes) -> Optional[bytes]:
        """The whole response to GET /api/trajectory from the body of the last probe."""
        trajectory = self.trajectory
        if trajectory is None:
            return None
        body = trajectory.body()
        key = (id(body), self.date_header(), conn)
        cached = self._trajectory_cache
        if cached[0] == key:
            return cached[1]
        data = dumps(body)
        response = b"HTTP/1.1 200 OK\r\nServer: svc-monitor\r\n%sContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n%s" % (
            key[1], JSON_TYPE.encode("ascii"), len(data), conn, JSON_HEADERS, data)
        self._trajectory_cache = (key, response)
        return response

    def history_body(self, hours: int) -> Dict[str, Any]:
        from ..historyindex import HistoryIndex

        with self._body_lock:
            if self.history_index is None:
                self.history_index = HistoryIndex(self.service.paths)
        return self.history_index.body(node=self.node, hours=hours)

    def acquire_stream(self) -> bool:
        with self._streams_lock:
            if self._streams >= self.max_streams:
                return False
            self._streams += 1
            return True

    def release_stream(self) -> None:
        with self._streams_lock:
            self._streams -= 1

    @property
    def stream_count(self) -> int:
        return self._streams


def start_server(service: Any, bind: str = DEFAULT_BIND, port: int = DEFAULT_PORT, *, node: str,
                 environ: Optional[Mapping[str, str]] = None) -> Tuple[MonitorServer, threading.Thread]:
    """Bind and serve in a daemon thread; returns (server, thread)."""
    server = MonitorServer((bind, port), service, node=node, environ=environ)
    thread = threading.Thread(target=server.serve_forever, name="svc-monitor-http", daemon=True)
    thread.start()
    return server, thread
