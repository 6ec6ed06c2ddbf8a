"""Debian's real Prometheus, VictoriaMetrics and Alertmanager, started by a test on loopback
ports with temporary storage, and a loopback webhook that records what Alertmanager delivers.

A missing binary fails the test under CI (scripts/run_tests.sh installs the
packages) and skips it elsewhere, with the reason printed.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

from tests.support.httpserver import StandInServer
from tests.support.waiting import wait_until

PACKAGES = {"prometheus": "prometheus", "promtool": "prometheus", "victoria-metrics": "victoria-metrics",
            "prometheus-alertmanager": "prometheus-alertmanager", "amtool": "prometheus-alertmanager"}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    reason = "%s is not installed (apt-get install %s)" % (name, PACKAGES.get(name, name))
    if os.environ.get("CI"):
        pytest.fail("%s under CI: scripts/run_tests.sh installs it" % reason)
    print("skipped: " + reason)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_json(url: str, timeout: float = 10) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return json.loads(response.read())


def query(base: str, promql: str) -> List[Dict[str, Any]]:
    return http_json(base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))["data"]["result"]


class Engine:
    """One engine process on 127.0.0.1:<port>, its output in <dir>/<name>.log."""

    def __init__(self, name: str, argv: Sequence[str], port: int, workdir: Path, ready_path: str) -> None:
        self.name = name
        self.port = port
        self.base = "http://127.0.0.1:%d" % port
        self.log_path = workdir / ("%s.log" % name)
        self._log = open(str(self.log_path), "w")
        self.proc = subprocess.Popen(list(argv), stdout=self._log, stderr=subprocess.STDOUT, cwd=str(workdir))
        wait_until(lambda: self._ready(ready_path), timeout=60, interval=0.1, message="%s ready" % name)

    def _ready(self, path: str) -> bool:
        assert self.proc.poll() is None, "%s exited:\n%s" % (self.name, self.log_tail())
        try:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(self.base + path, timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def log_tail(self, size: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()

    def stop(self, grace_s: float = 2.0) -> None:
        """Terminate, and kill what is still running after `grace_s`: its storage is thrown away anyway."""
        self.terminate()
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


def start_victoria(workdir: Path) -> Engine:
    port = free_port()
    argv = [tool("victoria-metrics"), "-storageDataPath=%s" % (workdir / "vm-data"),
            "-httpListenAddr=127.0.0.1:%d" % port, "-retentionPeriod=1d",
            # Instant queries see the newest points at once (default: only those 30 s old).
            "-search.latencyOffset=0s"]
    return Engine("victoria-metrics", argv, port, workdir, "/health")


def start_alertmanager(workdir: Path, config: Path) -> Engine:
    port = free_port()
    argv = [tool("prometheus-alertmanager"), "--config.file=%s" % config,
            "--storage.path=%s" % (workdir / "am-data"), "--web.listen-address=127.0.0.1:%d" % port,
            "--cluster.listen-address="]
    return Engine("alertmanager", argv, port, workdir, "/-/ready")


def start_prometheus(workdir: Path, config: Path) -> Engine:
    port = free_port()
    argv = [tool("prometheus"), "--config.file=%s" % config, "--storage.tsdb.path=%s" % (workdir / "tsdb"),
            "--web.listen-address=127.0.0.1:%d" % port]
    return Engine("prometheus", argv, port, workdir, "/-/ready")


class Webhook:
    """A loopback receiver of Alertmanager's webhook notifications."""

    def __init__(self) -> None:
        self.notifications: List[Dict[str, Any]] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with owner._lock:
                    owner.notifications.append(json.loads(body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

        self._httpd = StandInServer(("127.0.0.1", 0), self, Handler)
        self.url = "http://127.0.0.1:%d/hook" % self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def received(self) -> List[Dict[str, Any]]:
        with self._lock:
            return list(self.notifications)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def stop_all(engines: Sequence[Optional[Any]]) -> None:
    """Signal every engine first, then wait for each: they shut down side by side."""
    running = [engine for engine in engines if engine is not None]
    for engine in running:
        engine.terminate()
    for engine in running:
        engine.stop()
