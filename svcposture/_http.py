"""One HTTP exchange with a total deadline, a bound on what is read and no redirect: every
HTTP request the package makes as a client goes through here.

Two ways through, one contract:

- **The local monitor, over a plain socket** (`parse_url`, `get_reply`, `get_json`,
  `open_socket`): the terminal clients and the MCP server read the node's own
  monitor on every render, run or tool call, so this path imports only the C
  socket module (`_socket`; `socket` and `ssl` for an https URL, when used):
  no urllib, no http.client. The deadline is an instant (time.monotonic) that
  every connect and recv is given what is left of; a reply's head and body are
  bounded (MAX_HEAD, MAX_BODY), a chunked body is joined, and a redirect is an
  answer like any other, never followed.
- **Services beyond this node, through urllib** (`get`, `Exchange`, `Deadline`):
  Prometheus, Loki, another monitor, the tracker, and the providers the probe
  child asks. urllib brings what they need (TLS, an environment proxy for a
  host that is not the loopback). A socket timeout bounds each recv, not the
  exchange: a peer that sends one byte every few seconds stays inside it
  forever, and holds whichever thread reads it. So every exchange (connect,
  request, status line, headers, body) runs under a Deadline: a timer that,
  when the time is up, shuts down every socket the exchange opened, which ends
  any read blocked on it, TLS included. The reader then sees `DeadlineExceeded`
  (a socket.timeout), never a short body. A redirect would carry the
  Authorization header to wherever it points, so none is followed: the 3xx is
  the reply.

    status, raw = get(url, timeout=10.0, max_bytes=limit, user_agent=agent)
    with Exchange(url, 10.0, headers, data=body, method="POST") as reply:
        reply.status, reply.headers, reply.read(limit + 1)

Importing this costs no more than the status line's own imports: urllib,
http.client, socket, threading and typing are imported where they are used.
"""
from __future__ import annotations

import os
import time

# The C socket module, not `socket`: the wrapper's enums and selectors would
# cost several times the rest of a status line render's imports.
import _socket

from ._text import loads_bounded, printable
from .errors import SvcpostureError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any, Dict, List, Optional, Tuple

# What a reply of the local monitor may hold: its head, and its body (a posture body is far below).
MAX_HEAD = 16 * 1024
MAX_BODY = 1024 * 1024


def is_loopback(host: str) -> bool:
    host = host.lower()
    return host in ("localhost", "::1") or host.startswith("127.")


class DeadlineExceeded(SvcpostureError, _socket.timeout):
    """The exchange did not finish within its total deadline."""


class Deadline:
    """A total time limit on one HTTP exchange; use as a context manager."""

    def __init__(self, seconds: float) -> None:
        import threading

        self.seconds = max(0.001, float(seconds))
        self.at = time.monotonic() + self.seconds
        self.expired = False
        self._lock = threading.Lock()
        self._socks: List[socket.socket] = []
        self._timer: Optional[threading.Timer] = None

    def __enter__(self) -> "Deadline":
        import threading

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
        import socket

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


class Exchange:
    """One request through urllib under a Deadline, and its reply whatever its status;
    use as a context manager.

    `status` and `headers` (the reply's header fields, names matched without regard
    to case) are read on entry; `read(amount)` reads the body, raising
    DeadlineExceeded when the deadline cut it short. An error status is a reply like
    any other: rate-limit headers ride on a 429, and query APIs explain a 400 in the
    body. Entering raises DeadlineExceeded, or OSError/ValueError for what urllib and
    http.client raise (no route, reset, a bad status line)."""

    def __init__(self, url: str, timeout: float, headers: Dict[str, str], data: Optional[bytes] = None,
                 method: str = "GET") -> None:
        self.url, self.timeout, self.data, self.method = url, timeout, data, method
        self.request_headers = dict(headers)
        self.status = 0
        self.headers: Any = None
        self._deadline = Deadline(timeout)
        self._response: Any = None

    def __enter__(self) -> "Exchange":
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.url, data=self.data, method=self.method, headers=self.request_headers)
        self._deadline.__enter__()
        try:
            try:
                self._response = self._deadline.open(request)
            except urllib.error.HTTPError as exc:
                self._response = exc
        except BaseException:
            self._deadline.__exit__(None, None, None)
            raise
        self.status = int(self._response.getcode() or 0)
        self.headers = self._response.headers
        return self

    def read(self, amount: int) -> bytes:
        """At most `amount` bytes of the body."""
        return self._deadline.read(self._response, amount)

    def __exit__(self, *exc: Any) -> None:
        try:
            self._response.close()
        finally:
            self._deadline.__exit__(*exc)


def get(url: str, timeout: float, max_bytes: int, user_agent: str) -> Tuple[int, bytes]:
    """(HTTP status, at most max_bytes + 1 bytes of the body) of one JSON GET (an
    Exchange): an error status is still read. Raises as Exchange does."""
    with Exchange(url, timeout, {"Accept": "application/json", "User-Agent": user_agent}) as reply:
        return reply.status, reply.read(max_bytes + 1)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(_socket.SHUT_RDWR)
    except OSError:
        pass


def _handlers(deadline: Deadline) -> List[Any]:
    import http.client
    import socket
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


# ---------------------------------------------------------------- the local monitor, over a plain socket

class Target:
    """Where a monitor is: scheme, host, port, Host header and path prefix (parse_url)."""

    __slots__ = ("scheme", "host", "port", "netloc", "prefix")

    def __init__(self, scheme: str, host: str, port: int, netloc: str, prefix: str) -> None:
        self.scheme, self.host, self.port, self.netloc, self.prefix = scheme, host, port, netloc, prefix


def parse_url(url: "Any") -> "Optional[Target]":
    """A monitor base URL (`http[s]://host[:port][/prefix]`, IPv6 in brackets); None when
    it is not one. Parsed by hand: urllib.parse would double the import cost of a status line render."""
    if not isinstance(url, str) or len(url) > 2048 or printable(url) != url or " " in url \
            or "?" in url or "#" in url:
        return None
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return None
    scheme = scheme.lower()
    netloc, slash, path = rest.partition("/")
    if not netloc or "@" in netloc:
        return None
    if netloc.startswith("["):
        host, bracket, tail = netloc[1:].partition("]")
        if not bracket or not host or ":" not in host or (tail and not tail.startswith(":")):
            return None
        port_text = tail[1:]
    else:
        host, _, port_text = netloc.partition(":")
        if not host or ":" in port_text:
            return None
    if port_text:
        if not (port_text.isdigit() and port_text.isascii() and len(port_text) <= 5) \
                or not 0 < int(port_text) < 65536:
            return None
        port = int(port_text)
    else:
        port = 443 if scheme == "https" else 80
    if not host.isascii():
        return None
    return Target(scheme, host, port, netloc, (slash + path).rstrip("/"))


def _connect(host: str, port: int, deadline: float) -> "Any":
    """A connected stream socket to host:port, trying each address until the deadline."""
    # A bytes host skips the idna codec's import; parse_url admits ASCII hosts only.
    infos = _socket.getaddrinfo(host.encode("ascii"), port, 0, _socket.SOCK_STREAM)
    error: "Optional[OSError]" = None
    for family, kind, proto, _name, address in infos:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(left)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error or _socket.timeout("deadline passed")


def _connect_tls(target: Target, deadline: float) -> "Any":
    import socket
    import ssl
    sock = socket.create_connection((target.host, target.port), timeout=max(deadline - time.monotonic(), 0.001))
    try:
        return ssl.create_default_context().wrap_socket(sock, server_hostname=target.host)
    except BaseException:
        sock.close()
        raise


def open_socket(target: Target, deadline: float) -> "Any":
    """A socket connected to the monitor (TLS for https) before `deadline`; OSError otherwise."""
    if target.scheme == "https":
        return _connect_tls(target, deadline)
    return _connect(target.host, target.port, deadline)


def get_reply(target: Target, path: str, deadline: float, agent: str = "svc-monitor-statusline") -> "Tuple[int, bytes]":
    """(HTTP status, body) of one GET of `path` from the monitor before `deadline` (a chunked
    body is joined); OSError when it cannot be reached or does not answer in time, ValueError
    when what answers is no HTTP reply within the limits."""
    request = ("GET %s%s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n"
               "User-Agent: %s\r\nConnection: close\r\n\r\n"
               % (target.prefix, path, target.netloc, agent)).encode("ascii", "replace")
    if deadline - time.monotonic() <= 0:
        raise _socket.timeout("deadline passed")
    sock = open_socket(target, deadline)
    try:
        sock.sendall(request)
        status, headers, body = read_reply(sock, deadline)
    finally:
        sock.close()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    return status, body


def get_json(target: Target, path: str, deadline: float) -> "Any":
    """GET `path` from the monitor before `deadline`: the JSON body of a 200 (at most
    MAX_BODY bytes), else None, whatever went wrong."""
    try:
        status, body = get_reply(target, path, deadline)
    except (OSError, ValueError, UnicodeError):
        return None
    if status != 200:
        return None
    try:
        return loads_bounded(body, MAX_BODY)
    except ValueError:
        return None


def _recv(sock: "Any", deadline: float) -> bytes:
    left = deadline - time.monotonic()
    if left <= 0:
        raise _socket.timeout("deadline passed")
    sock.settimeout(left)
    return sock.recv(65536)


def read_reply(sock: "Any", deadline: float) -> "Tuple[int, Dict[str, str], bytes]":
    """(status, {lower name: value}, body) of one HTTP/1.x reply; ValueError when it is
    not one or is larger than the limits, socket.timeout past the deadline."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEAD:
            raise ValueError("reply head too large")
        chunk = _recv(sock, deadline)
        if not chunk:
            raise ValueError("closed before the reply head")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD:
        raise ValueError("reply head too large")
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not (code.isdigit() and code.isascii()):
        raise ValueError("not an HTTP reply")
    headers: "Dict[str, str]" = {}
    for raw in lines[1:]:
        name, _, value = raw.partition(":")
        headers[name.strip().lower()] = value.strip()
    length: "Optional[int]" = None
    if "content-length" in headers and headers.get("transfer-encoding") is None:
        text = headers["content-length"]
        if not (text.isdigit() and text.isascii()) or len(text) > 12:
            raise ValueError("bad Content-Length")
        length = int(text)
        if length > MAX_BODY:
            raise ValueError("reply too large")
    while length is None or len(body) < length:
        chunk = _recv(sock, deadline)
        if not chunk:
            if length is not None:
                raise ValueError("reply cut short")
            break
        body += chunk
        if len(body) > MAX_BODY + MAX_HEAD:
            raise ValueError("reply too large")
    return int(code), headers, body if length is None else body[:length]


def dechunk(data: bytes) -> bytes:
    """The payload of a complete chunked body; ValueError when it is not one."""
    out: "List[bytes]" = []
    pos = 0
    while True:
        end = data.find(b"\r\n", pos)
        if end < 0:
            raise ValueError("truncated chunk size")
        size_text = data[pos:end].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ValueError("bad chunk size") from None
        if size < 0 or len(size_text) > 8:
            raise ValueError("bad chunk size")
        if size == 0:
            return b"".join(out)
        start = end + 2
        if len(data) < start + size + 2:
            raise ValueError("truncated chunk")
        out.append(data[start:start + size])
        pos = start + size + 2
