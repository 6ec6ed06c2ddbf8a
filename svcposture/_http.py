"""One HTTP exchange with a total deadline, for the clients of services this node does not control.

A socket timeout bounds each recv, not the exchange: a peer that sends one
byte every few seconds stays inside it forever, and holds whichever thread
reads it. So every exchange (connect, request, status line, headers, body)
runs under a Deadline: a timer that, when the time is up, shuts down every
socket the exchange opened, which ends any read blocked on it, TLS included.
The reader then sees `DeadlineExceeded` (a socket.timeout), never a short body.

    with Deadline(10.0) as deadline:
        response = deadline.open(request)
        raw = deadline.read(response, limit + 1)

urllib.request and http.client are imported on first use: the commands that
never talk to a server do not pay for them.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, List, Optional, Tuple

from .errors import SvcpostureError



def is_loopback(host: str) -> bool:
    host = host.lower()
    return host in ("localhost", "::1") or host.startswith("127.")


class DeadlineExceeded(SvcpostureError, socket.timeout):
    """The exchange did not finish within its total deadline."""


class Deadline:
    """A total time limit on one HTTP exchange; use as a context manager."""

    def __init__(self, seconds: float) -> None:
        self.seconds = max(0.001, float(seconds))
        self.at = time.monotonic() + self.seconds
        self.expired = False
        self._lock = threading.Lock()
        self._socks: List[socket.socket] = []
        self._timer: Optional[threading.Timer] = None

    def __enter__(self) -> "Deadline":
        self._timer = threading.Timer(max(0.0, self.at - time.monotonic()), self._expire)
        self._timer.daemon = True
        self._timer.name = "svc-http-deadline"
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join(1.0)  # a cancelled timer ends at once: no thread is left behind
        with self._lock:
            socks, self._socks = self._socks, []
        for sock in socks:
            sock.close()

    def left(self) -> float:
        return self.at - time.monotonic()

    def watch(self, sock: socket.socket) -> None:
        """Shut `sock`'s connection down when the deadline passes (at once if it has).

        Through a duplicate of its descriptor: TLS takes the descriptor over
        from the socket object before its handshake, and the handshake must be
        cut short too. shutdown() acts on the connection, whichever descriptor
        names it.
        """
        sock.settimeout(max(0.001, min(sock.gettimeout() or self.seconds, self.left())))
        try:
            twin = socket.socket(fileno=os.dup(sock.fileno()))
        except OSError:
            return
        with self._lock:
            self._socks.append(twin)
            expired = self.expired
        if expired:
            _shutdown(twin)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            socks = list(self._socks)
        for sock in socks:
            _shutdown(sock)

    def check(self) -> None:
        if self.expired or self.left() <= 0:
            raise DeadlineExceeded("no complete answer within %g s" % self.seconds)

    def open(self, request: Any, *handlers: Any) -> Any:
        """Open `request` (urllib) under this deadline; whatever a cut-short exchange
        raises (a bad status line, a reset) surfaces as DeadlineExceeded. An
        HTTPError of an exchange that finished in time is raised as it is."""
        try:
            return self.opener(request.full_url, *handlers).open(request)
        except Exception:
            self.check()
            raise

    def read(self, response: Any, amount: int) -> bytes:
        """`response.read(amount)`, raising DeadlineExceeded when the deadline cut it short."""
        try:
            raw = response.read(amount)
        except Exception:
            self.check()
            raise
        self.check()
        return raw

    def opener(self, url: str, *handlers: Any) -> Any:
        """An urllib opener whose connections this deadline watches; a loopback URL
        never goes through an environment proxy."""
        import urllib.parse
        import urllib.request

        extra = list(handlers)
        proxied = not any(isinstance(h, urllib.request.ProxyHandler) for h in extra)
        if proxied and is_loopback(urllib.parse.urlsplit(url).hostname or ""):
            extra.insert(0, urllib.request.ProxyHandler({}))
        return urllib.request.build_opener(*extra, *_handlers(self))


def get(url: str, timeout: float, max_bytes: int, user_agent: str) -> Tuple[int, bytes]:
    """(HTTP status, at most max_bytes + 1 bytes of the body) of one JSON GET under
    a total deadline; an error status is still read (query APIs explain a 400 in
    the body). Raises DeadlineExceeded, or OSError/ValueError for what urllib and
    http.client raise (no route, reset, a bad status line)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": user_agent})
    with Deadline(timeout) as deadline:
        try:
            response = deadline.open(request)
        except urllib.error.HTTPError as exc:
            response = exc
        with response:
            status = response.getcode() or 0
            return status, deadline.read(response, max_bytes + 1)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _handlers(deadline: Deadline) -> List[Any]:
    import http.client
    import urllib.request

    def create_connection(address: Any, timeout: Any = None, source_address: Any = None) -> socket.socket:
        deadline.check()
        sock = socket.create_connection(address, max(0.001, deadline.left()), source_address)
        deadline.watch(sock)
        return sock

    class _Watched(http.client.HTTPConnection):
        def connect(self) -> None:
            self._create_connection = create_connection
            super().connect()

    class _WatchedTLS(http.client.HTTPSConnection):
        def connect(self) -> None:
            self._create_connection = create_connection
            super().connect()

    class _Plain(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(_Watched, req)

    class _TLS(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            return self.do_open(_WatchedTLS, req, context=self._context)

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        # urllib re-sends a redirected request with its headers, Authorization
        # included: a redirect would carry the bearer token to wherever it
        # points. The 3xx reaches the caller as an HTTPError instead.
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return [_Plain(), _TLS(), _NoRedirect()]
