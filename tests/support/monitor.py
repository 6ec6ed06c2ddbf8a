"""The real svc-monitor as a subprocess on a loopback port, and clients for it.

    mon = start_monitor(env, args=("--no-probe",))
    try:
        status, headers, body = mon.get("/healthz")
    finally:
        mon.stop()

- Monitor: `python -m svcposture monitor --port 0 ARGS` in its own session
  (process group), so kill9() takes the monitor and any probe child it had in
  flight. The port comes from the monitor's own `svc-monitor listening on
  http://HOST:PORT` line, so port 0 is race-free. Readiness is that line, then
  /healthz answering 200, polled until a deadline. stdout and stderr are
  drained by threads (stderr_text(), stdout_text()) and, when start() gets a
  log path, copied there as they arrive.
- http_get / raw_http / read_response / get_request: plain and byte-exact HTTP.
- SSEClient: an EventSource reading frames off a real socket.
"""
from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket as _socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from .home import REPO

LISTEN_RE = re.compile(r"svc-monitor listening on (http://(\S+):(\d+))")


class MonitorStartError(RuntimeError):
    pass


class Monitor:
    """One monitor process; `start()` it, then `.url`, `.host`, `.port`, `.pid`, `.proc`."""

    def __init__(self, env: Mapping[str, str], args: Iterable[str] = (), *, port: Optional[int] = 0,
                 bind: Optional[str] = None, module: str = "svcposture", cwd: Optional[str] = None,
                 python: str = sys.executable) -> None:
        self.env = dict(env)
        self.args = list(args)
        self.port_arg = port
        self.bind = bind
        self.module = module
        self.cwd = cwd or str(REPO)
        self.python = python
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.started_at = 0.0
        self.url = ""
        self.host = ""
        self.port = 0
        self._stderr: List[str] = []
        self._stdout: List[str] = []
        self._lock = threading.Lock()
        self._log: Optional[IO[str]] = None
        self._threads: List[threading.Thread] = []
        self.listening = threading.Event()

    def command(self) -> List[str]:
        cmd = [self.python, "-m", self.module, "monitor"]
        if self.bind is not None:
            cmd += ["--bind", self.bind]
        if self.port_arg is not None:
            cmd += ["--port", str(self.port_arg)]
        return cmd + self.args

    # ------------------------------------------------------------ lifecycle

    def start(self, log_path: Optional[Path] = None, *, wait: bool = True, healthy: bool = True,
              timeout: float = 20.0) -> "Monitor":
        """Start the process; with `wait`, return once it listens (and, with `healthy`, serves /healthz)."""
        if log_path is not None:
            self._log = open(str(log_path), "a", encoding="utf-8")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.command(), cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self._threads = [
            threading.Thread(target=self._drain, args=(self.proc.stderr, self._stderr, True), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stdout, self._stdout, False), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        if wait:
            try:
                self.wait_ready(timeout, healthy=healthy)
            except BaseException:
                self.stop(check=False)
                raise
        return self

    def _drain(self, stream: Any, sink: List[str], look_for_listen: bool) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            with self._lock:
                sink.append(line)
                if self._log is not None:
                    self._log.write(line)
                    self._log.flush()
            if look_for_listen and not self.listening.is_set():
                match = LISTEN_RE.search(line)
                if match:
                    self.url, self.host, self.port = match.group(1), match.group(2), int(match.group(3))
                    self.listening.set()
        stream.close()

    def wait_listening(self, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.listening.wait(0.05):
                return self.url
            if self.proc.poll() is not None:
                self._join()
                raise MonitorStartError("svc-monitor exited %s before listening:\n%s"
                                        % (self.proc.returncode, self.stderr_text()))
        raise MonitorStartError("svc-monitor did not log its listening line in %.0fs:\n%s"
                                % (timeout, self.stderr_text()))

    def wait_healthy(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        last: Any = None
        assert self.proc is not None
        while time.monotonic() < deadline:
            try:
                status, _, _ = self.get("/healthz", timeout=2)
                if status == 200:
                    return
                last = status
            except OSError as exc:
                last = exc
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise MonitorStartError("/healthz never answered 200 (last: %r):\n%s" % (last, self.stderr_text()))

    def wait_ready(self, timeout: float = 20.0, healthy: bool = True) -> str:
        deadline = time.monotonic() + timeout
        self.wait_listening(timeout)
        if healthy:
            self.wait_healthy(max(1.0, deadline - time.monotonic()))
        return self.url

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill9(self) -> None:
        """SIGKILL the whole group: the monitor and every probe child in flight."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self._join()

    def stop(self, timeout: float = 15.0, check: bool = True) -> int:
        """SIGTERM and wait; returns the exit code. A monitor still running after
        `timeout` s has its group killed, and (with `check`) fails the test."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
                if check:
                    raise AssertionError("monitor ignored SIGTERM for %.0f s:\n%s" % (timeout, self.stderr_text()))
        self._join()
        return self.proc.returncode

    def _join(self) -> None:
        for thread in self._threads:
            thread.join(5)
        with self._lock:
            if self._log is not None and not any(t.is_alive() for t in self._threads):
                self._log.close()
                self._log = None

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.stop(check=exc_type is None)

    # ------------------------------------------------------------ output and requests

    def stderr_text(self) -> str:
        with self._lock:
            return "".join(self._stderr)

    def stdout_text(self) -> str:
        with self._lock:
            return "".join(self._stdout)

    def get(self, path: str, headers: Optional[Mapping[str, str]] = None,
            timeout: float = 15.0) -> Tuple[int, Dict[str, str], bytes]:
        """GET `path`: (status, headers with lower-case names, body); HTTP errors included."""
        return http_get(self.url, path, headers, timeout)

    def get_json(self, path: str, headers: Optional[Mapping[str, str]] = None) -> Any:
        status, _, body = self.get(path, headers)
        return status, json.loads(body.decode("utf-8"))


def start_monitor(env: Mapping[str, str], args: Iterable[str] = (), port: Optional[int] = 0,
                  timeout: float = 20.0, healthy: bool = True, **options: Any) -> Monitor:
    """Start `python -m svcposture monitor --port PORT ARGS` and wait until it is ready.

    `port=None` passes no --port (SVC_MONITOR_PORT or the default then apply);
    `options` go to Monitor (bind, module, cwd, python)."""
    return Monitor(env, args, port=port, **options).start(wait=True, healthy=healthy, timeout=timeout)


# ------------------------------------------------------------ plain and raw HTTP


def http_get(url: str, path: str, headers: Optional[Mapping[str, str]] = None,
             timeout: float = 15.0) -> Tuple[int, Dict[str, str], bytes]:
    """One GET on a fresh connection: (status, {lower name: value}, body)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", path, headers=dict(headers or {}))
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def raw_http(port: int, request: bytes, timeout: float = 10.0, host: str = "127.0.0.1") -> Any:
    """Send `request` verbatim; return (status, {lower name: value}, body).

    The response is read by Content-Length, so it works on keep-alive too."""
    with _socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(request)
        return read_response(sock)


def read_response(sock: "_socket.socket") -> Any:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed before the response head: %r" % buf[:200])
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        key = name.strip().lower()
        headers[key] = (headers[key] + ", " + value.strip()) if key in headers else value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, headers, rest[:length]


def get_request(path: str, host: Optional[str], extra: Sequence[str] = (), method: str = "GET") -> bytes:
    lines = ["%s %s HTTP/1.1" % (method, path)]
    if host is not None:
        lines.append("Host: %s" % host)
    lines += list(extra)
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


# ------------------------------------------------------------ server-sent events


class SSEClient:
    """A raw-socket EventSource: parses frames per the WHATWG rules, line by line.

    Events are dicts {"event", "data", "id", "retry"}; comments are counted.
    A read that times out raises socket.timeout and loses nothing: the next
    next_event() carries on where it stopped."""

    def __init__(self, port: int, path: str = "/api/accounts/stream", host: str = "127.0.0.1",
                 timeout: float = 20.0, headers: Sequence[str] = ()) -> None:
        self.sock = _socket.create_connection((host, port), timeout=timeout)
        self.sock.sendall(get_request(path, "127.0.0.1:%d" % port, ["Accept: text/event-stream", *headers]))
        self._buf = b""
        self.status = 0
        self.headers: Dict[str, str] = {}
        self.comments: List[str] = []
        self.retry: Optional[int] = None
        self.last_id: Optional[str] = None
        self._event = ""
        self._data: List[str] = []
        self._first_line = True
        self._timeout = timeout
        self._deadline: Optional[float] = None
        self._read_head()

    def _fill(self) -> bool:
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise _socket.timeout("read_for deadline")
            self.sock.settimeout(min(left, self._timeout))
        chunk = self.sock.recv(65536)
        if not chunk:
            return False
        self._buf += chunk
        return True

    def _read_head(self) -> None:
        while b"\r\n\r\n" not in self._buf:
            if not self._fill():
                raise ConnectionError("stream closed before its head")
        head, _, self._buf = self._buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        if self.status != 200:
            length = int(self.headers.get("content-length", "0"))
            while len(self._buf) < length and self._fill():
                pass
            self.body = self._buf[:length]

    def _next_line(self) -> Optional[str]:
        while True:
            # A line ends at CRLF, LF or CR (a lone CR at the buffer end may be half a CRLF).
            idx_n = self._buf.find(b"\n")
            idx_r = self._buf.find(b"\r")
            if idx_r != -1 and (idx_n == -1 or idx_r < idx_n):
                if idx_r == len(self._buf) - 1:
                    if not self._fill():
                        line, self._buf = self._buf[:idx_r], b""
                        return line.decode("utf-8", "replace")
                    continue
                end = idx_r + (2 if self._buf[idx_r + 1:idx_r + 2] == b"\n" else 1)
                line, self._buf = self._buf[:idx_r], self._buf[end:]
                return line.decode("utf-8", "replace")
            if idx_n != -1:
                line, self._buf = self._buf[:idx_n], self._buf[idx_n + 1:]
                return line.decode("utf-8", "replace")
            if not self._fill():
                return None

    def next_event(self) -> Optional[Dict[str, Any]]:
        """The next dispatched event, or None when the stream ends. Raises socket.timeout."""
        while True:
            line = self._next_line()
            if line is None:
                return None
            if self._first_line:
                line = line.lstrip("\ufeff")
                self._first_line = False
            if line == "":
                if self._data:
                    event = {"event": self._event or "message", "data": "\n".join(self._data),
                             "id": self.last_id, "retry": self.retry}
                    self._event, self._data = "", []
                    return event
                self._event = ""
                continue
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
                continue
            field, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if field == "event":
                self._event = value
            elif field == "data":
                self._data.append(value)
            elif field == "id":
                if "\0" not in value:
                    self.last_id = value
            elif field == "retry":
                if value.isdigit():
                    self.retry = int(value)

    def read_for(self, seconds: float) -> List[Dict[str, Any]]:
        """Every event dispatched within `seconds` (comments are collected too)."""
        events: List[Dict[str, Any]] = []
        self._deadline = time.monotonic() + seconds
        try:
            while True:
                event = self.next_event()
                if event is None:
                    break
                events.append(event)
        except _socket.timeout:
            pass
        finally:
            self._deadline = None
            self.sock.settimeout(self._timeout)
        return events

    def next_account(self) -> Dict[str, Any]:
        event = self.next_event()
        if event is None:
            raise ConnectionError("stream ended")
        assert event["event"] == "account", event
        return json.loads(event["data"])

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "SSEClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
