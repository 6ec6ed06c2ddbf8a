"""Runs the real svc-monitor as a subprocess on a loopback port, for tests.

    mon = start_monitor(env, args=("--no-probe",))
    try:
        urllib.request.urlopen(mon.url + "/healthz")
    finally:
        mon.stop()

The port comes from the monitor's own `svc-monitor listening on http://HOST:PORT`
line, so `port=0` (the default) is race-free. stderr is drained by a thread into
`mon.stderr_text()`; stdout likewise into `mon.stdout_text()`.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

LISTEN_RE = re.compile(r"svc-monitor listening on (http://(\S+):(\d+))")


class MonitorStartError(RuntimeError):
    pass


class MonitorProc:
    def __init__(self, proc: "subprocess.Popen[bytes]") -> None:
        self.proc = proc
        self.url = ""
        self.host = ""
        self.port = 0
        self._stderr: List[str] = []
        self._stdout: List[str] = []
        self._lock = threading.Lock()
        self._listening = threading.Event()
        self._threads = [
            threading.Thread(target=self._drain, args=(proc.stderr, self._stderr, True), daemon=True),
            threading.Thread(target=self._drain, args=(proc.stdout, self._stdout, False), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _drain(self, stream: Any, sink: List[str], look_for_listen: bool) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            with self._lock:
                sink.append(line)
            if look_for_listen and not self._listening.is_set():
                match = LISTEN_RE.search(line)
                if match:
                    self.url, self.host, self.port = match.group(1), match.group(2), int(match.group(3))
                    self._listening.set()
        stream.close()

    def stderr_text(self) -> str:
        with self._lock:
            return "".join(self._stderr)

    def stdout_text(self) -> str:
        with self._lock:
            return "".join(self._stdout)

    def get(self, path: str, headers: Optional[Mapping[str, str]] = None, timeout: float = 15.0) -> Any:
        """GET `path`; returns (status, headers dict lower-cased, body bytes), HTTP errors included."""
        request = urllib.request.Request(self.url + path, headers=dict(headers or {}))
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=timeout) as resp:
                return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()
            return exc.code, {k.lower(): v for k, v in exc.headers.items()}, body

    def get_json(self, path: str, headers: Optional[Mapping[str, str]] = None) -> Any:
        status, _, body = self.get(path, headers)
        return status, json.loads(body.decode("utf-8"))

    def wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._listening.wait(0.05):
                return
            if self.proc.poll() is not None:
                for t in self._threads:
                    t.join(2)
                raise MonitorStartError("svc-monitor exited %s before listening:\n%s"
                                        % (self.proc.returncode, self.stderr_text()))
        raise MonitorStartError("svc-monitor did not log its listening line in %.0fs:\n%s"
                                % (timeout, self.stderr_text()))

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: Any = None
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

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, then wait; SIGKILL only if it does not stop in time. Returns the exit code."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for t in self._threads:
            t.join(5)
        return self.proc.returncode

    def __enter__(self) -> "MonitorProc":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def monitor_command(args: Sequence[str] = (), port: Optional[int] = 0) -> List[str]:
    cmd = [sys.executable, "-m", "svcposture", "monitor"]
    if port is not None:
        cmd += ["--port", str(port)]
    return cmd + list(args)


def start_monitor(env: Mapping[str, str], args: Iterable[str] = (), port: Optional[int] = 0,
                  timeout: float = 20.0, healthy: bool = True) -> MonitorProc:
    """Start `python -m svcposture monitor --port PORT ARGS` and wait for /healthz.

    `port=None` passes no --port (SVC_MONITOR_PORT or the default then apply)."""
    proc = subprocess.Popen(monitor_command(list(args), port), env=dict(env), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    mon = MonitorProc(proc)
    try:
        mon.wait_listening(timeout)
        if healthy:
            mon.wait_healthy(timeout)
    except BaseException:
        mon.stop()
        raise
    return mon
