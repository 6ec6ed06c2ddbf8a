"""The monitor's sockets: bind, accept, descriptor pressure, the connection cap, hand-off, stream slots.

MonitorServer listens and wraps each accepted socket in a Connection for the
fast lane, which answers cached plain reads itself and hands everything else,
on the same Connection, to a handler thread of its own. It holds no route and
no cache: every reply comes from the application it is given (an
Application, app.MonitorApp). start_server serves one in a daemon thread
around a posture service the caller owns; the node's services are node.py's,
the process around them (lock, logging, signals, monitor.json) is main.py.

Methods for the caller:

    MonitorServer(address, app, settings, tls=None)
                                            bind `address` and serve `app`; with `tls`
                                            (an ssl.SSLContext) speak TLS on every connection
    serve_forever(), shutdown(), server_close()   as socketserver's
    url                                     http://host:port actually bound
    stopping                                an Event: set it before closing
                                            the app's broadcasts, so streams end
    connections_held()                      connections in the fast lane and on threads

The fast lane and the handler threads get what they need when they are built
(FastLane's arguments, protocols.Serving), never the server itself.

A TLS listener has no fast lane (the lane reads plain bytes off the socket):
each connection goes to a handler thread at once, which first completes the
handshake within the request timeout, counted in all, not per read. Past the
connection cap a new connection is closed at once: there is no lane to shed
idle ones.
"""
from __future__ import annotations

import errno
import logging
import socket
import socketserver
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import Any, Optional, Tuple

from ..settings import DEFAULT_BIND, DEFAULT_PORT, Settings
from .connection import Connection
from .fastlane import FastLane
from .handler import MonitorHandler
from .hangup import HangupWatch
from .protocols import Application, Serving
from .sse import StreamSlots

log = logging.getLogger("svcposture.monitor")

__all__ = ["DEFAULT_BIND", "DEFAULT_PORT", "MonitorServer", "descriptor_limit"]

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
    """The monitor's listening socket and the connections it holds.

    Methods that may be overridden: server_close() (a server that owns its
    services stops them there, see node.py), and socketserver's own.
    """

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 1024  # the stdlib's 5 drops connection bursts

    def __init__(self, address: Tuple[str, int], app: Application, settings: Optional[Settings] = None, *,
                 tls: Any = None) -> None:
        settings = app.settings if settings is None else settings
        self.tls = tls  # an ssl.SSLContext for the server side, or None: plain HTTP
        host = address[0]
        if ":" in host.strip("[]"):
            self.address_family = socket.AF_INET6
            address = (host.strip("[]"), address[1])
        self.app = app
        self.request_timeout_s = settings.request_timeout_s
        # Connections held at once (waiting in the fast lane or served by a
        # thread), at most the descriptor limit less a reserve: past it the
        # oldest idle connections are closed, and accept never runs dry.
        self.max_connections = max(16, min(settings.max_connections, descriptor_limit() - FD_RESERVE))
        self.streams = StreamSlots(settings.max_streams)
        self.stopping = threading.Event()
        self._threaded = 0  # connections served by a handler thread
        self._threaded_lock = threading.Lock()
        self._out_of_descriptors = False
        self.fast_lane: Optional[FastLane] = None  # server_close may run inside a failed bind
        # A stream whose client hung up ends (and frees its slot) at once, not at its next write.
        self.hangups = HangupWatch(app.wake_streams)
        self.serving = Serving(app, self.stopping, self.request_timeout_s, self.streams, self.hangups)
        super().__init__(address, MonitorHandler)
        if tls is None:
            self.fast_lane = FastLane(app.fast_reads(), self.hand_off, self._threads_held,
                                      max_connections=self.max_connections,
                                      request_timeout_s=self.request_timeout_s, stopping=self.stopping)
        # After bind, so that `--port 0` trusts the port actually bound.
        try:
            app.listening(host, self.server_port, self.streams)
        except BaseException:
            self.server_close()
            raise

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
        return "%s://%s:%d" % ("http" if self.tls is None else "https", host, self.server_port)

    def process_request(self, request: Any, client_address: Any) -> None:
        conn = Connection(request, client_address)
        lane = self.fast_lane
        if lane is not None and not self.stopping.is_set():
            lane.adopt(conn)
        elif self._threaded >= self.max_connections:
            conn.close()  # no lane to shed idle connections into: the newest one is refused
        else:
            self.hand_off(conn)

    def hand_off(self, conn: Connection) -> None:
        """Serve `conn`, with what the fast lane left on it, on a handler thread of its own."""
        with self._threaded_lock:
            self._threaded += 1
        try:
            # socketserver passes the request object through untouched to the
            # handler and shutdown_request(), so it may be the Connection itself.
            ThreadingHTTPServer.process_request(self, conn, conn.address)  # type: ignore[arg-type]
        except BaseException:
            self._release()
            raise

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is not None:
            # The TLS socket replaces the plain one first, so that it is the one closed on a failure.
            request.sock = self.tls.wrap_socket(request.sock, server_side=True, do_handshake_on_connect=False)
            tls_handshake(request.sock, self.request_timeout_s)
        # A handler is given what it needs (Serving), never the server itself.
        self.RequestHandlerClass(request, client_address, self.serving)  # type: ignore[arg-type]

    def shutdown_request(self, request: Any) -> None:
        if isinstance(request, Connection):
            self._release()
        super().shutdown_request(request)

    def _release(self) -> None:
        with self._threaded_lock:
            self._threaded -= 1

    def _threads_held(self) -> int:
        return self._threaded

    def connections_held(self) -> int:
        """Client connections held: waiting in the fast lane, or served on threads."""
        lane = self.fast_lane
        return (lane.held if lane is not None else 0) + self._threaded

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
                        self.connections_held())
        lane = self.fast_lane
        if lane is not None:
            lane.request_shed(16)
        self.stopping.wait(ACCEPT_PAUSE_S)

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


def tls_handshake(sock: Any, timeout_s: float) -> None:
    """Complete the server side of the TLS handshake on `sock` (an ssl.SSLSocket) within `timeout_s`.

    It runs on the handler's thread, never the accept loop's, so a client that
    connects and says nothing stalls no one else. The ssl module bounds one
    handshake call by the socket's timeout as a whole (not per read), so a
    client trickling its hello byte by byte is cut off at the deadline. A
    failed or late handshake raises an OSError (ssl.SSLError, socket.timeout),
    which the server drops without a traceback, as it does a hang-up.
    """
    sock.settimeout(timeout_s)
    sock.do_handshake()
