"""svc-monitor demo: a simulated provider, a throw-away node home with every registered vendor's
demo accounts, and the real monitor against them, all on loopback in one process.

The simulated provider is the package's only stand-in for the real providers:
one loopback server that hands each request to the demo part of every vendor
that has one (`vendor.DemoPart`, docs/vendors.md), each answering in its
vendor's real wire format from the window state its account's story gives
(`timeline`). Each part's base-URL knobs point at it, so everything downstream
(the token-scoped probe child, the cache, the latch, the event log, SSE) runs
for real. The demo's tokens are fixed, public demo values, not secrets.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from .._dirs import ensure_dir
from .._files import write_json_atomic, write_text_atomic
from ..paths import Paths
from ..settings import DEFAULT_PORT, VENDORS_ENV, vendor_modules
from ..vendor import DemoReply, DemoRequest, optional_member
from ..vendors import registered
from . import fleet, routing, timeline

DEMO_NODE = "demo-node"
DEMO_ENV = {
    # Short clocks so that a visitor sees every transition in a few minutes.
    "SVC_PROBE_INTERVAL_S": "10",
    "SVC_POSTURE_TTL_S": "10",
    "SVC_REFRESH_FLOOR_S": "3",
    "SVC_QUOTA_POLL_INTERVAL_S": "180",  # the floor: a lower value would only log a warning
    "SVC_PROBE_DEADLINE_S": "20",
}
NOT_FOUND = DemoReply(404, {"error": "not found"})
MAX_REQUEST_BODY = 65536


def demo_parts() -> List[Any]:
    """The demo part of every registered vendor that has one, in registration order."""
    parts = (optional_member(vendor, "demo") for vendor in registered())
    return [part for part in parts if part is not None]


def _stories(parts: Sequence[Any]) -> Dict[str, str]:
    """{label: story} of every demo account of `parts`."""
    return {account.label: account.timeline for part in parts for account in part.accounts}


def account_state(label: str, elapsed_s: float, started: float,
                  parts: Optional[Sequence[Any]] = None) -> Dict[str, Any]:
    """The simulated windows of one demo account `elapsed_s` into the demo (its story's state)."""
    story = _stories(demo_parts() if parts is None else parts).get(label, "pace")
    return timeline.state(story, elapsed_s, started)


def seed_rows(started: float, hours: float = 25.0, step_s: float = 60.0,
              parts: Optional[Sequence[Any]] = None) -> List[Dict[str, Any]]:
    """History rows of the simulated accounts for the `hours` before `started`.

    The demo begins as if its accounts had been probed for a day already, so
    that the forecasts (which need 10 min of a 5 h window, 2 h of a 7 d one)
    are there from the first probe instead of after an hour.
    """
    stories = _stories(demo_parts() if parts is None else parts)
    rows: List[Dict[str, Any]] = []
    elapsed = -hours * 3600.0
    while elapsed < 0:
        t_ms = int((started + elapsed) * 1000)
        for label, story in stories.items():
            state = timeline.state(story, elapsed, started)
            row: Dict[str, Any] = {"t": t_ms, "label": label}
            for field, short in (("fiveHour", "5h"), ("sevenDay", "7d")):
                fraction, _, reset = state[short]
                row[field] = {"pct": math.floor(max(0.0, fraction) * 1000 + 0.5) / 10.0, "resetsAt": int(reset) * 1000}
            rows.append(row)
        elapsed += step_s
    return rows


class _ProviderHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, provider: "SimulatedProvider") -> None:
        self.provider = provider
        super().__init__(("127.0.0.1", 0), _ProviderHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a probe child hanging up is routine


class _ProviderHandler(BaseHTTPRequestHandler):
    server: _ProviderHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _send(self, reply: DemoReply) -> None:
        data = json.dumps(reply.body).encode("utf-8")
        head = ["HTTP/1.1 %d %s" % (reply.status, {200: "OK", 401: "Unauthorized", 404: "Not Found",
                                                   429: "Too Many Requests"}.get(reply.status, "Error")),
                "Content-Type: application/json", "Content-Length: %d" % len(data)]
        head += ["%s: %s" % kv for kv in reply.headers]
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if 0 < length <= MAX_REQUEST_BODY:
            self.rfile.read(length)  # no vendor's endpoint is answered from its body
        elif length:
            self.close_connection = True
        headers = {name.lower(): value for name, value in self.headers.items()}
        request = DemoRequest(self.command, self.path.split("?")[0], headers)
        self._send(self.server.provider.answer(request))

    do_GET = do_POST = _answer  # noqa: N815 - http.server's names


class SimulatedProvider:
    """The demo provider on 127.0.0.1 and a free port; `.url`, `.start()`, `.stop()`.

    Every vendor's demo part answers on it (`parts`, by default those of the registered vendors)."""

    def __init__(self, clock: Callable[[], float] = time.time, parts: Optional[Sequence[Any]] = None) -> None:
        self.clock = clock
        self.started = clock()
        self.parts = list(demo_parts() if parts is None else parts)
        self.stories = _stories(self.parts)
        self._server: Optional[_ProviderHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self.url = ""

    def state(self, label: str) -> Dict[str, Any]:
        return timeline.state(self.stories.get(label, "pace"), self.clock() - self.started, self.started)

    def answer(self, request: DemoRequest) -> DemoReply:
        """The first part's reply that answers `request`, in registration order; else 404."""
        now_s = self.clock()
        for part in self.parts:
            reply = part.answer(request, self.state, now_s)
            if reply is not None:
                return reply
        return NOT_FOUND

    def start(self) -> "SimulatedProvider":
        self._server = _ProviderHTTPServer(self)
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.25},
                                        name="demo-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class DemoNode:
    """A temporary node home with every vendor's demo accounts, pointed at a simulated provider."""

    def __init__(self, provider_url: str, base_environ: Optional[Mapping[str, str]] = None,
                 started: Optional[float] = None, parts: Optional[Sequence[Any]] = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="svc-demo-"))
        self.home = self.root / "home"
        ensure_dir(self.home)
        self.parts = list(demo_parts() if parts is None else parts)
        source = os.environ if base_environ is None else base_environ
        environ = {k: v for k, v in source.items()
                   if not k.startswith(("SVC_", "MODEL_", "EXECUTION_CORE_"))}
        environ.update(DEMO_ENV)
        environ["HOME"] = str(self.home)
        modules = vendor_modules(source)
        if modules:
            # The probe children learn of a vendor registered by name only from this variable.
            environ[VENDORS_ENV] = ",".join(modules)
        for part in self.parts:
            for knob in part.url_knobs:
                environ[knob.name] = provider_url
        self.environ: Dict[str, str] = environ
        self.paths = Paths(self.home, environ=environ)
        self._write_files()
        if started is not None:
            from ..trajectory.history import append_rows
            append_rows(self.paths, seed_rows(started, parts=self.parts), fsync=False)

    def _write_files(self) -> None:
        write_json_atomic(self.paths.node_json, {"svc": {"host": {"name": DEMO_NODE}}})
        lines = ["# svc-monitor demo accounts: fixed demo tokens for the simulated provider"]
        for part in self.parts:
            home = part.home(self.root, self.paths)
            lines.extend(home.lines)
            for path, document in home.files:
                write_json_atomic(self._inside(path), document)
        write_text_atomic(self.paths.accounts_env, "\n".join(lines) + "\n")

    def _inside(self, path: Any) -> Path:
        """`path`, refused (ValueError) unless it is inside the demo's temporary directory."""
        target = Path(os.path.abspath(str(path)))
        if os.path.commonpath([str(target), str(self.root)]) != str(self.root):
            raise ValueError("a demo part's file %s is outside the demo's directory %s" % (target, self.root))
        return target

    def remove(self, timeout_s: float = 5.0) -> None:
        """Remove the temporary home. A thread of the stopping monitor may still write a file
        into it (an event, a history row) while it goes, so it is removed until it stays gone."""
        deadline = time.monotonic() + timeout_s
        while True:
            shutil.rmtree(str(self.root), ignore_errors=True)
            if not self.root.exists() or time.monotonic() > deadline:
                return
            time.sleep(0.05)


def main(argv: Optional[Sequence[str]], *, run_monitor: Callable[..., int], configure_logging: Callable[[], None],
         install_stop_signals: Callable[[threading.Event], None]) -> int:
    parser = argparse.ArgumentParser(
        prog="svc-monitor demo",
        description=("Run the monitor against a simulated provider with every vendor's demo accounts in a "
                     "temporary home, all on 127.0.0.1. In its first minutes the active account climbs "
                     "to its limit and back (ok -> degraded -> rejected, then its 5-hour window resets: "
                     "ok), so the dashboard, the exhausted banner, the SSE stream and the "
                     "account.status.changed events all happen for real; then it is used at a steady "
                     "pace, with a forecast, as a real account is. acct2 climbs towards a wall before "
                     "its reset (the forecast) and threshold alerts fire within the first minute. "
                     "Ctrl-C, SIGTERM or SIGHUP stops it and removes the temporary home."))
    parser.add_argument("--port", default=None,
                        help="dashboard port on 127.0.0.1 (0 picks a free one; a port given here that is taken "
                             "is an error; without --port, %d, or a free port when %d is taken)"
                             % (DEFAULT_PORT, DEFAULT_PORT))
    parser.add_argument("--keep-home", action="store_true", help="keep the temporary home on exit (to inspect events)")
    args = parser.parse_args(argv)
    port = _port_arg(args.port)
    if port is None:
        print("svc-monitor demo: --port must be a number in 0..65535", file=sys.stderr)
        return 2
    if args.port is not None and port != 0 and not _port_free(port):
        # A port asked for by name is a promise to whoever reads the command line: no silent fallback.
        print("svc-monitor demo: port %d on 127.0.0.1 is taken; stop what uses it, or leave out --port "
              "to let the demo pick a free one" % port, file=sys.stderr)
        return 1
    configure_logging()
    stop_event = threading.Event()
    install_stop_signals(stop_event)
    # The demo's home is temporary: a closed terminal (SIGHUP) stops it and removes it too,
    # as SIGTERM (timeout, systemd, container runtimes) and Ctrl-C do.
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, lambda signum, frame: stop_event.set())
    provider = SimulatedProvider().start()
    node = DemoNode(provider.url, started=provider.started)
    try:
        if args.port is None and not _port_free(port):
            print("svc-monitor demo: port %d is busy; using a free port instead" % port, file=sys.stderr)
            port = 0
        command = invoked_as()

        def ready(server: Any) -> None:
            print("svc-monitor demo: dashboard at %s/  (Ctrl-C to stop)" % server.url, flush=True)
            print("svc-monitor demo: simulated fleet at %s/fleet" % server.url, flush=True)
            # The demo's monitor.json is in its temporary home, where `hud` without --url never looks.
            print("svc-monitor demo: terminal HUD: %s hud --url %s" % (command, server.url), flush=True)
            print("svc-monitor demo: status line: %s statusline --url %s" % (command, server.url), flush=True)
            print("svc-monitor demo: fleet in a terminal: %s status --url %s" % (cluster_command(command), server.url),
                  flush=True)
            routing.announce(provider, cluster_command(command), server.url)
            print("svc-monitor demo: demo home %s; events in %s" % (node.home, node.paths.events_dir), flush=True)
        return run_monitor(node.paths, node.environ, bind="127.0.0.1", port=port, probe_enabled=True,
                           stop_event=stop_event, on_ready=ready, liveness=False,
                           fleet_source=fleet.fleet_source(provider.started, provider.clock))
    finally:
        provider.stop()
        _stopped(node, args.keep_home)


def _stopped(node: DemoNode, keep_home: bool) -> None:
    """The demo's last line, however it was stopped: that it stopped, and where its home went."""
    if keep_home:
        print("svc-monitor demo: stopped; kept its temporary home %s" % node.root, flush=True)
    else:
        node.remove()
        print("svc-monitor demo: stopped; its temporary home is removed", flush=True)


def _port_arg(text: Optional[str]) -> Optional[int]:
    """--port as a number (DEFAULT_PORT when not given), or None when it is not one in 0..65535."""
    if text is None:
        return DEFAULT_PORT
    try:
        port = int(text)
    except ValueError:
        return None
    return port if 0 <= port <= 65535 else None


def invoked_as(argv0: Optional[str] = None, executable: Optional[str] = None) -> str:
    """How this process was started, as a command prefix the printed commands can use:
    `python3 -m svcposture monitor` under `-m`, `svc monitor` under the `svc` command,
    else the script's own name (`svc-monitor`)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    base = os.path.basename(argv0)
    if base in ("__main__.py", "-m", "-c", ""):
        python = executable
        found = shutil.which("python3")
        if found and os.path.realpath(found) == os.path.realpath(executable):
            python = "python3"
        package = (__package__ or "svcposture.monitor").rsplit(".", 1)[0]
        return "%s -m %s monitor" % (python, package)
    return "svc monitor" if base == "svc" else base


def cluster_command(monitor_command: str) -> str:
    """The `svc-cluster` command beside a monitor command invoked_as() gave."""
    if monitor_command.endswith(" monitor"):
        return monitor_command[:-len(" monitor")] + " cluster"
    if monitor_command.endswith("svc-monitor"):
        return monitor_command[:-len("svc-monitor")] + "svc-cluster"
    return "svc-cluster"


def _port_free(port: int) -> bool:
    import socket
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        probe.close()
