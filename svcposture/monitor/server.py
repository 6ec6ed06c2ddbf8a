"""svc-monitor: the node's HTTP surface (dashboard, posture JSON, SSE, /metrics, OpenAPI).

One ThreadingHTTPServer subclass carries every piece of state; the handler only
reads it. Responses are built as one bytes object and written with one send:
a status line written apart from its body stalls keep-alive clients on delayed
ACKs, and the cached posture read is the hot path.
"""
from __future__ import annotations

import argparse
import fcntl
import io
import ipaddress
import json
import logging
import os
import re
import selectors
import signal
import socket
import socketserver
import sys
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .._files import ensure_dir, read_json, write_json_atomic
from .._spawn import child_env, is_token_var, module_command
from .._time import iso_now, now_ms, parse_iso_ms
from .._version import __version__
from ..paths import Paths
from ..posture import reply

log = logging.getLogger("svcposture.monitor")

DEFAULT_BIND = "127.0.0.1"
DEFAULT_PORT = 7400
REQUEST_READ_TIMEOUT_S = 10.0
DEFAULT_MAX_STREAMS = 1024
DEFAULT_KEEPALIVE_S = 15.0
SSE_RETRY_MS = 5000
CLOUD_ENV_INTERVAL_S = 600.0
STATIC_DIR = Path(__file__).parent / "static"
# Dashboard assets served from memory; the names are a whitelist, never a path.
STATIC_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
    "/static/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
}
NODE_STATUSES = ("ok", "degraded", "rejected", "error", "unknown")
WINDOWS = (("fiveHour", "five_hour"), ("sevenDay", "seven_day"))
JSON_TYPE = "application/json"
_JSON_HEADERS = b"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
_PAGE_HEADERS = (b"Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"
                 b"X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"
                 b"Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
                 b"connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
                 b"frame-ancestors 'none'\r\n")
_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 408: "Request Timeout", 414: "URI Too Long",
            431: "Request Header Fields Too Large", 500: "Internal Server Error",
            501: "Not Implemented", 503: "Service Unavailable", 505: "HTTP Version Not Supported"}
_ERROR_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed",
                408: "request_timeout", 414: "uri_too_long", 431: "header_fields_too_large",
                500: "internal", 501: "not_implemented", 503: "unavailable",
                505: "http_version_not_supported"}


class MonitorConfigError(ValueError):
    """A bad --bind/--port or SVC_MONITOR_* setting; the monitor refuses to start."""


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# --------------------------------------------------------------------- trust

# `name[:port]`: a DNS-ish name or a bracketed IPv6 literal, nothing else.
# Userinfo, paths, spaces, percent-escapes and underscores all fail this.
_HOST_RE = re.compile(
    r"^(?:\[(?P<v6>[0-9A-Fa-f:.]{2,45})\]|(?P<name>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})))"
    r"(?::(?P<port>[0-9]{1,5}))?$")
_ORIGIN_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<hostport>[^/?#\s]*)$")
_QUAD_RE = re.compile(r"^[0-9]{1,3}(?:\.[0-9]{1,3}){3}$")


def split_host(value: str) -> Optional[Tuple[str, Optional[int]]]:
    """(normalised name, port or None) of a Host value, or None when it is not one.

    Names are lower-cased with one trailing dot dropped; IPv6 stays bracketed."""
    match = _HOST_RE.match(value)
    if not match:
        return None
    port: Optional[int] = None
    if match.group("port") is not None:
        port = int(match.group("port"))
        if not 0 < port < 65536:
            return None
    v6 = match.group("v6")
    if v6 is not None:
        try:
            return "[%s]" % ipaddress.IPv6Address(v6).compressed, port
        except ValueError:
            return None
    name = match.group("name").lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or name.endswith(".") or ".." in name or name.endswith("-"):
        return None
    return name, port


def _is_loopback_v4(name: str) -> bool:
    if not _QUAD_RE.match(name):
        return False
    try:
        return ipaddress.IPv4Address(name).is_loopback
    except ValueError:
        return False


class TrustPolicy:
    """Which Host and Origin values count as this monitor (DESIGN §5)."""

    def __init__(self, bind: str, port: int, node: str, *, os_hostname: Optional[str] = None,
                 extra_hosts: str = "", extra_origins: str = "") -> None:
        self.port = port
        bind_l = bind.strip().lower()
        loopback_or_wildcard = bind_l in ("", "0.0.0.0", "::", "[::]", "localhost")
        if not loopback_or_wildcard:
            try:
                address = ipaddress.ip_address(bind_l.strip("[]"))
                loopback_or_wildcard = address.is_loopback or address.is_unspecified
            except ValueError:
                loopback_or_wildcard = False
        self.loopback = loopback_or_wildcard
        names = set()
        for raw in (node,) + ((os_hostname or os.uname().nodename or "",) if loopback_or_wildcard else ()):
            parsed = split_host(raw) if raw else None
            if parsed:
                names.add(parsed[0])
                if loopback_or_wildcard and "." in parsed[0] and not parsed[0].startswith("["):
                    names.add(parsed[0].split(".")[0])
        if loopback_or_wildcard:
            names.update(("localhost", "[::1]"))
        else:
            own = split_host(bind_l if ":" not in bind_l or bind_l.startswith("[") else "[%s]" % bind_l)
            if own:
                names.add(own[0])
        self.names = frozenset(names)
        self.extra_hosts: List[Tuple[str, Any]] = []
        for entry in (e.strip() for e in extra_hosts.split(",")):
            if not entry:
                continue
            any_port = entry.endswith(":*")
            parsed = split_host(entry[:-2] if any_port else entry)
            if parsed is None:
                raise MonitorConfigError("SVC_MONITOR_TRUSTED_HOSTS: %r is not name, name:port or name:*" % entry)
            self.extra_hosts.append((parsed[0], "*" if any_port else parsed[1]))
        self.extra_origins = frozenset(
            e.strip().lower().rstrip("/") for e in extra_origins.split(",") if e.strip())

    def name_trusted(self, name: str) -> bool:
        return name in self.names or (self.loopback and _is_loopback_v4(name))

    def _hostport_trusted(self, name: str, port: Optional[int], default_port: Optional[int]) -> bool:
        for entry_name, entry_port in self.extra_hosts:
            if entry_name != name:
                continue
            if entry_port == "*":
                return True
            if entry_port is None:
                if port is None or port == self.port:
                    return True
            elif port is None or port == entry_port:
                return True
        if not self.name_trusted(name):
            return False
        effective = port if port is not None else default_port
        return effective is None or effective == self.port

    def host_trusted(self, values: Sequence[str]) -> bool:
        if len(values) != 1:
            return False  # missing, or duplicated to confuse a proxy
        parsed = split_host(values[0])
        return parsed is not None and self._hostport_trusted(parsed[0], parsed[1], None)

    def origin_trusted(self, values: Sequence[str]) -> bool:
        if len(values) != 1:
            return False
        value = values[0].strip()
        if value.lower().rstrip("/") in self.extra_origins and value.lower() != "null":
            return True
        match = _ORIGIN_RE.match(value)
        if not match:
            return False
        scheme = match.group("scheme").lower()
        if scheme not in ("http", "https"):
            return False
        parsed = split_host(match.group("hostport"))
        if parsed is None:
            return False
        default = 80 if scheme == "http" else 443
        name, port = parsed
        if port is None:
            port = default
        return self._hostport_trusted(name, port, default)


# ------------------------------------------------------------------- fast lane

class _ReplayRaw(io.RawIOBase):
    """A socket's byte stream with bytes already read off it put back in front."""

    def __init__(self, prefix: bytes, sock: socket.socket) -> None:
        self._prefix = prefix
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return self._sock.recv_into(buffer)


class _ClosedSocket:
    def recv_into(self, buffer: Any) -> int:
        return 0


class _Conn:
    __slots__ = ("sock", "address", "inbox", "last")

    def __init__(self, sock: socket.socket, address: Any) -> None:
        self.sock = sock
        self.address = address
        self.inbox = b""
        self.last = time.monotonic()


_FAST_TARGET = b"/api/accounts"


class FastLane:
    """Cached plain reads of /api/accounts on kept-alive connections, in one thread.

    A thread per connection makes 32 busy connections fight over the GIL after
    every recv and send; one selector loop answering from prebuilt bytes does
    not. Anything that is not a well-formed `GET /api/accounts HTTP/1.1` with a
    fresh cached posture (streams, forced refreshes, other routes, odd or
    oversized requests, a slow reader) is handed, with the bytes already read
    and any answers not yet sent, to the ordinary threaded handler, which
    applies every rule of the surface. The fast lane therefore only ever
    answers what that handler would have answered byte for byte.
    """

    def __init__(self, server: "MonitorServer") -> None:
        self.server = server
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._incoming: List[_Conn] = []
        self._lock = threading.Lock()
        self._closed = False
        self.thread = threading.Thread(target=self._loop, name="svc-monitor-fast-lane", daemon=True)
        self.thread.start()

    def adopt(self, sock: socket.socket, address: Any) -> None:
        with self._lock:
            if self._closed:
                sock.close()
                return
            self._incoming.append(_Conn(sock, address))
        self._wake()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._wake()
        self.thread.join(5.0)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass

    def _loop(self) -> None:
        server = self.server
        try:
            while True:
                with self._lock:
                    closed = self._closed
                    incoming, self._incoming = self._incoming, []
                if closed:
                    for conn in incoming:
                        conn.sock.close()
                    break
                for conn in incoming:
                    try:
                        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    except OSError:
                        pass
                    conn.sock.setblocking(False)
                    self.selector.register(conn.sock, selectors.EVENT_READ, conn)
                for key, _ in self.selector.select(timeout=1.0):
                    if key.data is None:
                        try:
                            self._wake_r.recv(4096)
                        except OSError:
                            pass
                        continue
                    self._readable(key.data)
                self._expire(time.monotonic() - server.request_timeout_s)
        finally:
            for key in list(self.selector.get_map().values()):
                if key.data is not None:
                    self._drop(key.data)
            self.selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _expire(self, cutoff: float) -> None:
        # An idle keep-alive connection, or a request trickling in (slowloris),
        # is closed after the read timeout, as the threaded handler would.
        for key in list(self.selector.get_map().values()):
            conn = key.data
            if conn is not None and conn.last < cutoff:
                self._drop(conn)

    def _drop(self, conn: _Conn) -> None:
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.close()
        except OSError:
            pass

    def _readable(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self._drop(conn)
        if not data:
            return self._drop(conn)
        conn.last = time.monotonic()
        inbox = conn.inbox + data
        answers: List[bytes] = []
        close_after = False
        while inbox:
            end = inbox.find(b"\r\n\r\n")
            if end < 0:
                if len(inbox) > MAX_HEADER_LINE or b"\n\n" in inbox:
                    return self._hand_off(conn, inbox, answers)  # oversized or bare-LF framing
                break
            answer, close_after = self._answer(inbox[:end])
            if answer is None:
                return self._hand_off(conn, inbox, answers)
            answers.append(answer)
            inbox = inbox[end + 4:]
            if close_after:
                break
        conn.inbox = inbox
        if answers:
            payload = b"".join(answers)
            try:
                sent = conn.sock.send(payload)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                return self._drop(conn)
            if sent < len(payload):
                # A slow reader: let a thread block on it, never this loop.
                return self._hand_off(conn, inbox, [payload[sent:]], close_after)
        if close_after:
            self._drop(conn)

    def _answer(self, head: bytes) -> Tuple[Optional[bytes], bool]:
        """The response to one request head, or (None, _) to hand it off."""
        server = self.server
        line, _, fields = head.partition(b"\r\n")
        if line != b"GET " + _FAST_TARGET + b" HTTP/1.1" or server.read_guard or server.stopping.is_set():
            return None, False
        close = False
        count = 0
        token = _TOKEN_BYTES_RE.match
        for field in fields.split(b"\r\n") if fields else ():
            count += 1
            name, colon, value = field.partition(b":")
            if count > MAX_HEADERS or not colon or not token(name) or len(field) > MAX_HEADER_LINE:
                return None, False
            lower = name.lower()
            if lower == b"connection":
                option = value.strip(b" \t").lower()
                if option == b"close":
                    close = True
                elif option != b"keep-alive":
                    return None, False
            elif lower == b"transfer-encoding" or (lower == b"content-length" and value.strip(b" \t") != b"0"):
                return None, False
        fresh = getattr(server.service, "fresh_summary", None)
        summary = fresh() if fresh is not None else None
        if summary is None:
            return None, False
        return server.cached_read_response(summary, b"Connection: close\r\n" if close else b""), close

    def _hand_off(self, conn: _Conn, inbox: bytes, answers: List[bytes], close_after: bool = False) -> None:
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.setblocking(True)
        except OSError:
            return self._drop(conn)
        self.server.hand_off(conn.sock, conn.address, b"".join(answers), b"" if close_after else inbox,
                             close_after)


# ------------------------------------------------------------------- server

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
        self.max_streams = _env_int(environ, "SVC_MONITOR_MAX_STREAMS", DEFAULT_MAX_STREAMS, 1, 100000)
        self.keepalive_s = _env_float(environ, "SVC_SSE_KEEPALIVE_S", DEFAULT_KEEPALIVE_S, 0.05, 3600.0)
        self.read_guard = environ.get("SVC_MONITOR_READ_GUARD", "") == "1"
        self.request_timeout_s = _env_float(environ, "SVC_MONITOR_REQUEST_TIMEOUT_S", REQUEST_READ_TIMEOUT_S,
                                            0.1, 300.0)
        self._trusted_hosts_env = environ.get("SVC_MONITOR_TRUSTED_HOSTS", "")
        self._trusted_origins_env = environ.get("SVC_MONITOR_TRUSTED_ORIGINS", "")
        self.started_at = iso_now()
        self.stopping = threading.Event()
        self._streams = 0
        self._streams_lock = threading.Lock()
        self._frame_lock = threading.Lock()
        self._frame: Tuple[int, bytes] = (-1, b"")
        self._body_lock = threading.Lock()
        self._body_key: Any = None
        self._cached_read: Tuple[Any, bytes] = (None, b"")
        self._body_parts: Tuple[bytes, bytes] = (b"", b"")
        self._date_second = -1
        self._date_header = b""
        self.static = _load_static()
        self._handoffs: Dict[int, Tuple[bytes, bytes, bool]] = {}
        self._handoffs_lock = threading.Lock()
        self.fast_lane: Optional[FastLane] = None  # server_close may run inside a failed bind
        super().__init__(address, MonitorHandler)
        self.fast_lane = FastLane(self)
        # Built after bind so that `--port 0` trusts the port actually bound.
        self.trust = TrustPolicy(host, self.server_port, node, extra_hosts=self._trusted_hosts_env,
                                 extra_origins=self._trusted_origins_env)
        self.openapi_body = dumps(openapi_document())

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
        ThreadingHTTPServer.process_request(self, sock, address)

    def take_handoff(self, sock: Any) -> Optional[Tuple[bytes, bytes, bool]]:
        with self._handoffs_lock:
            return self._handoffs.pop(id(sock), None)

    def server_close(self) -> None:
        lane, self.fast_lane = self.fast_lane, None
        if lane is not None:
            lane.close()
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
            self.date_header(), JSON_TYPE.encode("ascii"), len(body), conn, _JSON_HEADERS, body)
        # One tuple assignment is atomic: readers see the old pair or the new one.
        self._cached_read = (key, response)
        return response

    def sse_frame(self, seq: int, body: Mapping[str, Any]) -> bytes:
        """One `account` frame; a pushed frame is serialised once for all subscribers."""
        with self._frame_lock:
            if self._frame[0] == seq:
                return self._frame[1]
        frame = b"event: account\nid: %d\ndata: %s\n\n" % (seq, dumps(body))
        with self._frame_lock:
            if seq > self._frame[0]:
                self._frame = (seq, frame)
        return frame

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


def _load_static() -> Dict[str, Tuple[bytes, str]]:
    assets: Dict[str, Tuple[bytes, str]] = {}
    for route, (name, ctype) in STATIC_FILES.items():
        try:
            assets[route] = ((STATIC_DIR / name).read_bytes(), ctype)
        except OSError:
            assets[route] = (("dashboard asset %s is missing from the svcposture package\n" % name)
                             .encode("utf-8"), "text/plain; charset=utf-8")
    return assets


def _env_int(environ: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise MonitorConfigError("%s=%r is not an integer" % (name, raw)) from None
    if not low <= value <= high:
        raise MonitorConfigError("%s=%d is outside %d..%d" % (name, value, low, high))
    return value


def _env_float(environ: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise MonitorConfigError("%s=%r is not a number" % (name, raw)) from None
    if not low <= value <= high:
        raise MonitorConfigError("%s=%s is outside %s..%s" % (name, raw, low, high))
    return value


# ------------------------------------------------------------------ handler

_GUARD_MESSAGES = {
    "refresh_header_missing": "A forced refresh needs the X-Svc-Refresh request header.",
    "untrusted_host": "The Host header does not name this monitor.",
    "untrusted_origin": "The Origin header is not a trusted origin of this monitor.",
}


MAX_HEADERS = 100
MAX_HEADER_LINE = 65536


class RequestHeaders:
    """Request header fields, looked up case-insensitively.

    The stdlib hands header blocks to the email parser, which costs more than
    the rest of a cached read put together; HTTP/1.1 fields need far less."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Dict[str, List[str]]) -> None:
        self._fields = fields

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        values = self._fields.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str, failobj: Any = None) -> Any:
        values = self._fields.get(name.lower())
        return list(values) if values else failobj

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def items(self) -> List[Tuple[str, str]]:
        return [(k, v) for k, values in self._fields.items() for v in values]


_TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_TOKEN_BYTES_RE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")


class MonitorHandler(BaseHTTPRequestHandler):
    server: MonitorServer
    protocol_version = "HTTP/1.1"
    server_version = "svc-monitor/" + __version__
    sys_version = ""
    timeout = REQUEST_READ_TIMEOUT_S
    # Every response is one write, so Nagle has nothing to merge; left on, it
    # holds back the answers to pipelined requests until the client's delayed ACK.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        # Slowloris: a request (or the next one on a kept-alive connection)
        # must arrive within the read timeout, 10 s unless configured.
        self.timeout = self.server.request_timeout_s
        super().setup()
        handoff = self.server.take_handoff(self.request)
        if handoff is not None:
            unsent, unread, close = handoff
            if unread:
                self.rfile = io.BufferedReader(_ReplayRaw(unread, self.connection), self.rbufsize
                                               if self.rbufsize > 0 else io.DEFAULT_BUFFER_SIZE)
            if unsent:
                self.wfile.write(unsent)
            if close:
                # The fast lane answered a `Connection: close` request: nothing follows.
                self.rfile = io.BufferedReader(_ReplayRaw(b"", _ClosedSocket()))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # per-request logging would dominate the hot path

    def parse_request(self) -> bool:
        self.command = None  # type: ignore[assignment]
        self.request_version = self.default_request_version
        self.close_connection = True
        requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        self.requestline = requestline
        words = requestline.split()
        if not words:
            return False
        if len(words) != 3:
            self.send_error(400, "Bad request line.")
            return False
        command, path, version = words
        if not version.startswith("HTTP/") or not _TOKEN_RE.match(command):
            self.send_error(400, "Bad request line.")
            return False
        major, dot, minor = version[5:].partition(".")
        if not (major.isdigit() and minor.isdigit() and dot and len(major) < 4 and len(minor) < 4):
            self.send_error(400, "Bad request version.")
            return False
        if major != "1":
            self.send_error(505, "Only HTTP/1.x is supported.")
            return False
        self.request_version = version
        if minor != "0":
            self.close_connection = False
        if path.startswith("//"):
            path = "/" + path.lstrip("/")  # never let it read as a network-path reference
        self.command, self.path = command, path
        fields: Dict[str, List[str]] = {}
        count = 0
        readline = self.rfile.readline
        token = _TOKEN_BYTES_RE.match
        while True:
            line = readline(MAX_HEADER_LINE + 1)
            if line == b"\r\n" or line == b"\n" or not line:
                break
            if len(line) > MAX_HEADER_LINE:
                self.send_error(431, "Header line too long.")
                return False
            count += 1
            if count > MAX_HEADERS:
                self.send_error(431, "Too many header fields.")
                return False
            name, colon, value = line.partition(b":")
            # No folded lines, no space before the colon: both are smuggling tools.
            if not colon or not token(name):
                self.send_error(400, "Malformed header field.")
                return False
            key = name.decode("ascii").lower()
            text = value.strip(b" \t\r\n").decode("iso-8859-1")
            values = fields.get(key)
            if values is None:
                fields[key] = [text]
            else:
                values.append(text)
        self.headers = RequestHeaders(fields)  # type: ignore[assignment]
        conntype = (self.headers.get("Connection") or "").lower()
        if conntype == "close":
            self.close_connection = True
        elif conntype == "keep-alive":
            self.close_connection = False
        return True

    def __getattr__(self, name: str) -> Any:
        # Every method other than GET/HEAD, however spelled, is a 405.
        if name.startswith("do_"):
            return self._method_not_allowed
        raise AttributeError(name)

    # -- response writing: always one write --

    def _send(self, status: int, ctype: str, body: bytes, extra: bytes = b"",
              head_only: Optional[bool] = None) -> None:
        if head_only is None:
            head_only = self.command == "HEAD"
        conn = self._connection_header()
        head = b"HTTP/1.1 %d %s\r\nServer: svc-monitor\r\n%sContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n" % (
            status, _REASONS.get(status, "Unknown").encode("ascii"), self.server.date_header(),
            ctype.encode("ascii"), len(body), conn, extra)
        self.wfile.write(head if head_only else head + body)

    def _connection_header(self) -> bytes:
        if self.close_connection:
            return b"Connection: close\r\n"
        if self.request_version == "HTTP/1.0":
            return b"Connection: keep-alive\r\n"
        return b""

    def _send_json(self, status: int, obj: Any, extra: bytes = b"") -> None:
        self._send(status, JSON_TYPE, dumps(obj), _JSON_HEADERS + extra)

    def _error(self, status: int, message: str, extra: bytes = b"") -> None:
        self._send_json(status, {"error": _ERROR_CODES.get(status, "error"), "message": message}, extra)

    def send_error(self, code: int, message: Optional[str] = None, explain: Optional[str] = None) -> None:
        # The stdlib's parse errors (400/414/431/505/501) as JSON, closing the
        # connection since the request's framing can no longer be trusted.
        self.close_connection = True
        try:
            text = message or _REASONS.get(code, "error")
            self._send_json(code, {"error": _ERROR_CODES.get(code, "error"), "message": text})
        except OSError:
            pass

    def _method_not_allowed(self) -> None:
        self.close_connection = True  # any request body is left unread
        self._error(405, "Only GET and HEAD are supported.", b"Allow: GET, HEAD\r\n")

    # -- routing --

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        server = self.server
        path, _, query = self.path.partition("?")
        if self.headers.get("Content-Length") not in (None, "0") or "Transfer-Encoding" in self.headers:
            self.close_connection = True  # a GET with a body: don't parse it as the next request
        if server.read_guard:
            reason = self._host_origin_reason()
            if reason:
                return self._forbidden(reason)
        if path == "/api/accounts":
            return self._accounts(query)
        if path == "/api/accounts/stream":
            return self._stream()
        if path == "/healthz":
            return self._send_json(200, {"ok": True, "node": server.node, "version": __version__,
                                         "startedAt": server.started_at})
        if path == "/metrics":
            return self._send(200, "text/plain; version=0.0.4; charset=utf-8",
                              render_metrics(server).encode("utf-8"), b"Cache-Control: no-store\r\n")
        if path == "/api/openapi.json":
            return self._send(200, JSON_TYPE, server.openapi_body, _JSON_HEADERS)
        asset = server.static.get(path)
        if asset is not None:
            return self._send(200, asset[1], asset[0], _PAGE_HEADERS)
        self._error(404, "No such route. See /api/openapi.json.")

    def _host_origin_reason(self) -> Optional[str]:
        trust = self.server.trust
        if not trust.host_trusted(self.headers.get_all("Host") or []):
            return "untrusted_host"
        origins = self.headers.get_all("Origin")
        if origins is not None and not trust.origin_trusted(origins):
            return "untrusted_origin"
        return None

    def _forbidden(self, reason: str) -> None:
        self._send_json(403, {"error": "forbidden", "reason": reason, "message": _GUARD_MESSAGES[reason]})

    def _accounts(self, query: str) -> None:
        refresh = _refresh_requested(query)
        if refresh:
            if self.headers.get("X-Svc-Refresh") is None:
                return self._forbidden("refresh_header_missing")
            reason = self._host_origin_reason()
            if reason:
                return self._forbidden(reason)
        if not refresh and self.command == "GET":
            fresh = getattr(self.server.service, "fresh_summary", None)
            summary = fresh() if fresh is not None else None
            if summary is not None:
                self.wfile.write(self.server.cached_read_response(summary, self._connection_header()))
                return
        try:
            body = self.server.service.read(refresh=refresh)
        except Exception as exc:  # the posture layer failed: say so, keep serving
            log.warning("posture read failed: %s: %s", type(exc).__name__, exc)
            return self._error(500, "The posture could not be read.")
        self._send(200, JSON_TYPE, self.server.posture_bytes(body), _JSON_HEADERS)

    def _stream(self) -> None:
        server = self.server
        if self.command == "HEAD":
            return self._send(200, "text/event-stream", b"", b"Cache-Control: no-cache\r\n")
        if not server.acquire_stream():
            return self._error(503, "Too many stream subscribers; retry later.", b"Retry-After: 5\r\n")
        try:
            self._stream_locked()
        finally:
            server.release_stream()

    def _stream_locked(self) -> None:
        server = self.server
        broadcast = server.service.broadcast
        self.close_connection = True
        head = (b"HTTP/1.1 200 OK\r\nServer: svc-monitor\r\n%sContent-Type: text/event-stream\r\n"
                b"Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\nX-Content-Type-Options: nosniff\r\n"
                b"Connection: close\r\n\r\nretry: %d\n\n" % (server.date_header(), SSE_RETRY_MS))
        self.wfile.write(head)
        after, _ = broadcast.latest()
        try:
            body = server.service.read()
        except Exception as exc:
            log.warning("posture read failed: %s: %s", type(exc).__name__, exc)
            return
        if server.stopping.is_set():
            return
        self.wfile.write(b"event: account\nid: %d\ndata: %s\n\n" % (after, server.posture_bytes(body)))
        sent = _frame_identity(body)
        keepalive = server.keepalive_s
        while True:
            item = broadcast.wait(after, keepalive)
            if server.stopping.is_set() or broadcast.closed:
                return
            if item is None:
                self.wfile.write(b": keepalive\n\n")
                continue
            after, body = item
            identity = _frame_identity(body)
            if identity == sent:
                continue  # the on-connect frame already carried this result
            sent = identity
            self.wfile.write(server.sse_frame(after, body))


def _frame_identity(body: Mapping[str, Any]) -> Tuple[Any, Any]:
    # A disabled body has no probedAt, so repeats of it collapse to one frame.
    return body.get("available"), body.get("probedAt")


def _refresh_requested(query: str) -> bool:
    if not query:
        return False
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name == "refresh" and value == "true":
            return True
    return False


# ------------------------------------------------------------------ metrics

def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: Any) -> Optional[str]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return repr(float(value)) if isinstance(value, float) else str(value)


def render_metrics(server: MonitorServer) -> str:
    try:
        figures = server.service.metrics()
    except Exception as exc:
        log.warning("posture metrics failed: %s: %s", type(exc).__name__, exc)
        figures = {}
    last = figures.get("last") if isinstance(figures.get("last"), dict) else None
    lines: List[str] = []

    def family(name: str, kind: str, help_text: str, samples: Sequence[Tuple[str, Any]]) -> None:
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s %s" % (name, kind))
        for labels, value in samples:
            text = _number(value)
            if text is not None:
                lines.append("%s%s %s" % (name, labels, text))

    available = bool(last and last.get("available"))
    family("svc_posture_available", "gauge", "1 when the posture surface is enabled and probed.",
           [("", 1 if available else 0)])
    status = last.get("status") if last else None
    family("svc_node_status", "gauge", "Node-level account status, one series per status; 1 marks the current one.",
           [('{status="%s"}' % s, 1 if s == status else 0) for s in NODE_STATUSES])
    pct: List[Tuple[str, Any]] = []
    resets: List[Tuple[str, Any]] = []
    active: List[Tuple[str, Any]] = []
    accounts = last.get("accounts") if last else None
    for account in accounts if isinstance(accounts, list) else []:
        if not isinstance(account, dict) or not isinstance(account.get("label"), str):
            continue
        label = _label(account["label"])
        active.append(('{account="%s"}' % label, 1 if account.get("active") else 0))
        for key, window in WINDOWS:
            view = account.get(key)
            if not isinstance(view, dict):
                continue
            labels = '{account="%s",window="%s"}' % (label, window)
            pct.append((labels, view.get("pct")))
            stamp = view.get("resetsAt")
            if isinstance(stamp, str):
                try:
                    resets.append((labels, parse_iso_ms(stamp) / 1000.0))
                except ValueError:
                    pass
    family("svc_account_utilization_percent", "gauge", "Account utilization of a rate-limit window, percent (may exceed 100).", pct)
    family("svc_account_window_resets_at_seconds", "gauge", "When the window resets, Unix seconds.", resets)
    family("svc_account_active", "gauge", "1 for the node's active account.", active)
    family("svc_probe_runs_total", "counter", "Header probes run since start.", [("", figures.get("probeRuns", 0))])
    family("svc_probe_errors_total", "counter", "Header probes that ended in an error posture.",
           [("", figures.get("probeErrors", 0))])
    last_ok = figures.get("lastSuccessMs")
    family("svc_probe_last_success_timestamp_seconds", "gauge", "When a probe last succeeded, Unix seconds.",
           [("", last_ok / 1000.0)] if isinstance(last_ok, (int, float)) and not isinstance(last_ok, bool) else [])
    family("svc_sse_subscribers", "gauge", "Open /api/accounts/stream connections.", [("", server.stream_count)])
    family("svc_sse_subscribers_max", "gauge", "Stream subscriber cap (SVC_MONITOR_MAX_STREAMS).",
           [("", server.max_streams)])
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ openapi

def openapi_document() -> Dict[str, Any]:
    window = {"oneOf": [{"type": "null"}, {"type": "object", "additionalProperties": False,
                                             "required": ["pct", "resetsAt", "status"],
                                             "properties": {
                                                 "pct": {"type": ["number", "null"], "description": "Percent of the window limit; may exceed 100."},
                                                 "resetsAt": {"type": ["string", "null"], "format": "date-time"},
                                                 "status": {"type": ["string", "null"], "examples": ["allowed", "allowed_warning", "rejected"]}}}]}
    error_kinds = ["transport", "timeout", "auth", "http", "no_headers", "parse", "config", "internal"]
    probe_error = {"type": "object", "required": ["kind", "message"],
                   "properties": {"kind": {"type": "string", "enum": error_kinds},
                                  "message": {"type": "string"},
                                  "httpStatus": {"type": ["integer", "null"]}}}
    account = {"type": "object", "additionalProperties": False,
               "required": ["label", "email", "active", "overallStatus", "representativeClaim",
                            "bindingWindow", "bindingStatus", "fiveHour", "sevenDay", "error"],
               "properties": {
                   "label": {"type": "string", "pattern": "^[a-z0-9_]+$", "examples": ["acct2"]},
                   "email": {"type": ["string", "null"]},
                   "active": {"type": "boolean"},
                   "overallStatus": {"type": ["string", "null"]},
                   "representativeClaim": {"type": ["string", "null"]},
                   "bindingWindow": {"type": ["string", "null"], "enum": ["five_hour", "seven_day", None]},
                   "bindingStatus": {"type": ["string", "null"]},
                   "fiveHour": {"$ref": "#/components/schemas/Window"},
                   "sevenDay": {"$ref": "#/components/schemas/Window"},
                   "error": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/ProbeError"}]}}}
    posture = {"type": "object",
               "required": ["available", "node", "generatedAt", "probedAt", "cached", "status",
                            "active", "accounts", "siblingWithHeadroom"],
               "properties": {
                   "available": {"const": True},
                   "node": {"type": "string"},
                   "generatedAt": {"type": "string", "format": "date-time"},
                   "probedAt": {"type": "integer", "description": "Epoch ms of the probe; unchanged across cached replies."},
                   "cached": {"type": "boolean"},
                   "status": {"type": "string", "enum": list(NODE_STATUSES)},
                   "active": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/Account"}]},
                   "accounts": {"type": "array", "items": {"$ref": "#/components/schemas/Account"}},
                   "siblingWithHeadroom": {"oneOf": [{"type": "null"}, {
                       "type": "object", "required": ["label", "email"], "additionalProperties": False,
                       "properties": {"label": {"type": "string"}, "email": {"type": ["string", "null"]}}}]},
                   "error": {"description": "Node-level error (status error): the probe itself failed.",
                             "$ref": "#/components/schemas/ProbeError"}}}
    disabled = {"type": "object", "additionalProperties": False, "required": ["available", "node"],
                "properties": {"available": {"const": False}, "node": {"type": "string"}}}
    body_schema = {"oneOf": [{"$ref": "#/components/schemas/Posture"}, {"$ref": "#/components/schemas/Disabled"}]}
    forbidden = {"type": "object", "additionalProperties": False, "required": ["error", "reason", "message"],
                 "properties": {"error": {"const": "forbidden"},
                                "reason": {"type": "string", "enum": list(_GUARD_MESSAGES)},
                                "message": {"type": "string"}}}
    error = {"type": "object", "required": ["error", "message"],
             "properties": {"error": {"type": "string"}, "message": {"type": "string"}}}
    health = {"type": "object", "required": ["ok", "node", "version", "startedAt"],
              "properties": {"ok": {"const": True}, "node": {"type": "string"},
                             "version": {"type": "string"}, "startedAt": {"type": "string", "format": "date-time"}}}

    def json_response(description: str, ref: str, headers: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        out: Dict[str, Any] = {"description": description,
                               "content": {JSON_TYPE: {"schema": {"$ref": "#/components/schemas/" + ref}}}}
        if headers:
            out["headers"] = headers
        return out

    common = {
        "405": {"$ref": "#/components/responses/MethodNotAllowed"},
        "414": {"$ref": "#/components/responses/TooLarge"},
        "431": {"$ref": "#/components/responses/TooLarge"},
    }
    guarded = {"403": {"$ref": "#/components/responses/Forbidden"}}

    def get_op(op_id: str, summary: str, responses: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
        op = {"operationId": op_id, "summary": summary, "responses": dict(responses, **common, **guarded)}
        op.update(extra)
        return {"get": op, "head": dict(op, operationId=op_id + "Head",
                                        summary=summary + " (headers only)")}

    def text_response(description: str, ctype: str) -> Dict[str, Any]:
        return {"description": description, "content": {ctype: {"schema": {"type": "string"}}}}

    paths = {
        "/": get_op("dashboard", "The dashboard page (plain HTML, CSS and JS).",
                    {"200": text_response("Dashboard HTML.", "text/html")}),
        "/static/dashboard.css": get_op("dashboardCss", "Dashboard stylesheet.",
                                        {"200": text_response("CSS.", "text/css")}),
        "/static/dashboard.js": get_op("dashboardJs", "Dashboard script.",
                                       {"200": text_response("JavaScript.", "text/javascript")}),
        "/api/accounts": get_op(
            "getAccounts", "The node's account posture (cached for the TTL).",
            {"200": {"description": "The posture body, or exactly {available:false,node} when disabled.",
                     "headers": {"Cache-Control": {"schema": {"const": "no-store"}}},
                     "content": {JSON_TYPE: {"schema": body_schema}}},
             "500": json_response("The posture layer failed.", "Error")},
            description=("A plain read needs no header. `refresh=true` forces a fresh probe (floor and "
                         "single-flight apply) and needs the X-Svc-Refresh header, a trusted Host and, "
                         "when present, a trusted Origin; otherwise 403 and no probe is spent."),
            parameters=[
                {"name": "refresh", "in": "query", "required": False,
                 "schema": {"type": "string", "enum": ["true"]},
                 "description": "`true` forces a fresh probe; any other value is a plain read."},
                {"name": "X-Svc-Refresh", "in": "header", "required": False, "schema": {"type": "string"},
                 "description": "Required (any value, even empty) with refresh=true."}]),
        "/api/accounts/stream": get_op(
            "streamAccounts", "Server-sent events: the current posture, then one frame per refresh.",
            {"200": {"description": ("`retry: 5000`, then frames `event: account`, `id: <seq>`, `data: <posture body>`; "
                                     "`: keepalive` comments every SVC_SSE_KEEPALIVE_S seconds."),
                     "content": {"text/event-stream": {"schema": {"type": "string"}, "x-data-schema": body_schema}}},
             "503": json_response("Too many subscribers.", "Error",
                                  {"Retry-After": {"schema": {"type": "integer"}}})}),
        "/api/openapi.json": get_op("openapi", "This document.",
                                    {"200": {"description": "OpenAPI 3.1 document.",
                                             "content": {JSON_TYPE: {"schema": {"type": "object"}}}}}),
        "/metrics": get_op("metrics", "Prometheus text exposition.",
                           {"200": text_response("Prometheus text format 0.0.4.", "text/plain")}),
        "/healthz": get_op("healthz", "Liveness of the monitor process.",
                           {"200": json_response("Serving.", "Health")}),
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "svc-monitor", "version": __version__,
                 "description": "Read-only, token-free account posture of one node."},
        "paths": paths,
        "components": {
            "schemas": {"Window": window, "ProbeError": probe_error, "Account": account, "Posture": posture,
                        "Disabled": disabled, "Forbidden": forbidden, "Error": error, "Health": health},
            "responses": {
                "Forbidden": json_response("Forced-refresh guard (or SVC_MONITOR_READ_GUARD) refused the request.",
                                           "Forbidden"),
                "MethodNotAllowed": json_response("Only GET and HEAD.", "Error",
                                                  {"Allow": {"schema": {"const": "GET, HEAD"}}}),
                "TooLarge": json_response("Request line or header fields too large.", "Error"),
            },
        },
    }


# ------------------------------------------------------------------ running

def start_server(service: Any, bind: str = DEFAULT_BIND, port: int = DEFAULT_PORT, *, node: str,
                 environ: Optional[Mapping[str, str]] = None) -> Tuple[MonitorServer, threading.Thread]:
    """Bind and serve in a daemon thread; returns (server, thread)."""
    server = MonitorServer((bind, port), service, node=node, environ=environ)
    thread = threading.Thread(target=server.serve_forever, name="svc-monitor-http", daemon=True)
    thread.start()
    return server, thread


class _CloudEnvProjector:
    """Projects the cloud token at start and every 10 min; failures are one log line."""

    def __init__(self, paths: Paths, interval_s: float = CLOUD_ENV_INTERVAL_S) -> None:
        self.paths = paths
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="svc-cloud-env", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                from ..cluster import stack
                report = stack.project_cloud_env(self.paths)
                if isinstance(report, dict) and report.get("ok") is False:
                    log.warning("cloud env projection failed: %s", str(report.get("error"))[:300])
            except Exception as exc:  # never fatal: the core does not need the cloud token
                log.warning("cloud env projection failed: %s", _one_line(exc))
            self._stop.wait(self.interval_s)


def _one_line(exc: BaseException) -> str:
    return ("%s: %s" % (type(exc).__name__, exc)).replace("\n", " ")[:300]


def run_monitor(paths: Paths, environ: Mapping[str, str], *, bind: str, port: int, probe_enabled: bool,
                stop_event: Optional[threading.Event] = None,
                on_ready: Optional[Callable[[MonitorServer], None]] = None) -> int:
    """The monitor process: posture service, HTTP server, sampler, publisher.
    Returns when `stop_event` is set (the caller maps SIGTERM/SIGINT to it)."""
    stop_event = stop_event or threading.Event()
    instance_fd = _claim_node(paths)
    if instance_fd == -2:
        print("svc-monitor: another monitor is already running for %s (see %s); stop it first"
              % (paths.home, paths.monitor_json), file=sys.stderr)
        return 1
    try:
        return _run_claimed(paths, environ, bind=bind, port=port, probe_enabled=probe_enabled,
                            stop_event=stop_event, on_ready=on_ready)
    finally:
        if instance_fd >= 0:
            os.close(instance_fd)


def _claim_node(paths: Paths) -> int:
    """One monitor per node HOME: two would each emit the same status edge.

    Returns the fd holding the lock, -2 when another process holds it, and -1
    when the lock cannot be taken at all (the monitor then runs unguarded).
    The kernel drops the lock when the process dies, even by SIGKILL.
    """
    try:
        ensure_dir(paths.run_dir)
        fd = os.open(str(paths.run_dir / "monitor.instance.lock"),
                     os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        log.warning("cannot take the one-monitor-per-node lock: %s", exc.strerror or exc)
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return -2
    return fd


def _run_claimed(paths: Paths, environ: Mapping[str, str], *, bind: str, port: int, probe_enabled: bool,
                 stop_event: threading.Event, on_ready: Optional[Callable[[MonitorServer], None]]) -> int:
    from ..cluster import liveness
    from ..config import node_name
    from ..events import EventLog
    from ..latch import Latch, LatchError
    from ..posture import PostureService, QuotaSampler

    node = node_name(paths)
    event_log = EventLog.for_paths(paths)
    latch = Latch(paths.latch, event_log, node)
    try:
        latch.load()
    except (LatchError, OSError) as exc:
        log.warning("latch could not be loaded: %s", _one_line(exc))
    service = PostureService(paths, node=node, log=event_log, latch=latch, environ=environ,
                             probe_enabled=probe_enabled)
    try:
        server = MonitorServer((bind, port), service, node=node, environ=environ)
    except OSError as exc:
        print("svc-monitor: cannot listen on %s:%s: %s" % (bind, port, exc.strerror or exc), file=sys.stderr)
        return 1
    started: List[Any] = []
    serving = False
    try:
        service.start()  # the first probe is under way before /healthz can answer
        started.append(service)
        sampler = QuotaSampler(paths, node=node, log=event_log, environ=environ)
        sampler.start()
        started.append(sampler)
        projector = _CloudEnvProjector(paths)
        projector.start()
        started.append(projector)
        try:
            started.append(liveness.start_publisher(paths, environ, node, service.account_status, event_log))
        except Exception as exc:
            log.warning("liveness publisher not started: %s", _one_line(exc))
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.25},
                                  name="svc-monitor-http", daemon=True)
        thread.start()
        serving = True
        record = {"pid": os.getpid(), "url": server.url, "startedAt": server.started_at}
        try:
            write_json_atomic(paths.monitor_json, record)
        except OSError as exc:
            log.warning("cannot write %s: %s", paths.monitor_json, exc.strerror or exc)
        log.info("svc-monitor listening on %s", server.url)
        if on_ready is not None:
            on_ready(server)
        while not stop_event.wait(0.5):
            pass
    finally:
        server.stopping.set()
        service.broadcast.close()  # wakes every stream so it can end
        if serving:
            server.shutdown()
        server.server_close()
        for part in reversed(started):
            try:
                part.stop()
            except Exception as exc:
                log.warning("stopping %s failed: %s", type(part).__name__, _one_line(exc))
        _remove_monitor_json(paths.monitor_json)
    return 0


def _remove_monitor_json(path: Path) -> None:
    try:
        record = read_json(path)
    except (ValueError, OSError):
        return
    if isinstance(record, dict) and record.get("pid") == os.getpid():
        try:
            path.unlink()
        except OSError:
            pass


class _LogFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.name != log.name:
            text = "%s: %s" % (record.name.rsplit(".", 1)[-1], text)
        return text


def configure_logging() -> None:
    root = logging.getLogger("svcposture")
    if not any(getattr(h, "_svc_monitor", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_LogFormatter())
        handler._svc_monitor = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False


def install_stop_signals(stop_event: threading.Event) -> None:
    def handler(signum: int, frame: Any) -> None:
        stop_event.set()
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="svc-monitor",
        description=("Serve this node's model-provider account posture: the dashboard at /, "
                     "GET /api/accounts[?refresh=true], the SSE stream /api/accounts/stream, "
                     "/metrics, /api/openapi.json and /healthz. Read-only and token-free."),
        epilog=("subcommands:\n"
                "  svc-monitor hud [--url URL] [--once]   one-line terminal HUD fed by the stream\n"
                "  svc-monitor demo [--port PORT]         simulated provider + 3 demo accounts + a real monitor\n\n"
                "environment: SVC_MONITOR_BIND, SVC_MONITOR_PORT, SVC_MONITOR_READ_GUARD=1,\n"
                "  SVC_MONITOR_TRUSTED_HOSTS (name, name:port, name:*), SVC_MONITOR_TRUSTED_ORIGINS,\n"
                "  SVC_MONITOR_MAX_STREAMS (1024), SVC_SSE_KEEPALIVE_S (15), SVC_ACCOUNTS_PROBE=0,\n"
                "  SVC_ACCOUNTS_ENV, SVC_POSTURE_TTL_S, SVC_PROBE_INTERVAL_S, SVC_REFRESH_FLOOR_S.\n"
                "A forced refresh needs the X-Svc-Refresh header, a trusted Host and a trusted Origin\n"
                "(when one is sent); otherwise it gets 403 and spends no probe."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bind", default=None,
                        help="address to listen on (default $SVC_MONITOR_BIND or 127.0.0.1)")
    parser.add_argument("--port", default=None,
                        help="port to listen on; 0 picks a free one (default $SVC_MONITOR_PORT or 7400)")
    parser.add_argument("--no-probe", action="store_true",
                        help="never probe the provider; the posture endpoints answer {available:false}")
    return parser


def parse_port(raw: str, source: str) -> int:
    try:
        port = int(raw.strip())
    except ValueError:
        raise MonitorConfigError("%s: %r is not a port number" % (source, raw)) from None
    if not 0 <= port <= 65535:
        raise MonitorConfigError("%s: %d is not in 0..65535" % (source, port))
    return port


def _reexec_without_tokens(args: Sequence[str]) -> None:
    """Start this command afresh when the caller's environment holds a token.

    Deleting a variable from os.environ leaves it in /proc/<pid>/environ and in
    the memory that held it; a new process image started without it holds
    neither. The probe child sources the accounts file itself, so the monitor
    never needs a token.
    """
    if not any(is_token_var(name) for name in os.environ):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, module_command("", "monitor", *args), child_env(os.environ))
    except OSError:
        # Cannot re-exec (no interpreter path, say): at least keep them out of children.
        for name in [n for n in os.environ if is_token_var(n)]:
            del os.environ[name]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "hud":
        from . import hud
        return hud.main(args_list[1:])
    _reexec_without_tokens(args_list)
    if args_list and args_list[0] == "demo":
        from . import demo
        return demo.main(args_list[1:], run_monitor=run_monitor, configure_logging=configure_logging,
                         install_stop_signals=install_stop_signals)
    args = _build_parser().parse_args(args_list)
    environ = os.environ
    try:
        bind = args.bind if args.bind is not None else (environ.get("SVC_MONITOR_BIND") or DEFAULT_BIND)
        if args.port is not None:
            port = parse_port(args.port, "--port")
        elif environ.get("SVC_MONITOR_PORT"):
            port = parse_port(environ["SVC_MONITOR_PORT"], "SVC_MONITOR_PORT")
        else:
            port = DEFAULT_PORT
        paths = Paths(environ=environ)
        probe_enabled = not args.no_probe and environ.get("SVC_ACCOUNTS_PROBE", "").strip() != "0"
        configure_logging()
        stop_event = threading.Event()
        install_stop_signals(stop_event)
        return run_monitor(paths, environ, bind=bind, port=port, probe_enabled=probe_enabled,
                           stop_event=stop_event)
    except MonitorConfigError as exc:
        print("svc-monitor: %s" % exc, file=sys.stderr)
        return 2
