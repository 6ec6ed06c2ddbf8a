"""A node's services: built, started and stopped in one place for both faces.

The `svc-monitor` command (main.py) and the library's start_server(home)
build the same node: its name, event log and latch, the posture service and
the trajectory service fed by it (history, forecasts, alerts, the notify
hook), and the MonitorApp over them. The command also starts the background
services (quota sampler, cloud-env projector, liveness publisher); the
library does not.

Methods for the caller:

    Node(paths, settings, probe=...)   build everything; nothing runs yet
    node.app                           the MonitorApp a MonitorServer serves
    node.start(background=..., liveness=...)
                                       the posture service (its first probe is
                                       under way at once), then the background
                                       services when asked for
    node.close_streams()               end every open stream (before the server closes)
    node.stop()                        stop all start() started, newest first
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, List, Mapping, Optional, Tuple, Union

from ..paths import Paths
from ..settings import DEFAULT_BIND, Settings
from ..vendors import DEFAULT_PROVIDER
from .app import MonitorApp
from .server import MonitorServer

log = logging.getLogger("svcposture.monitor")

CLOUD_ENV_INTERVAL_S = 600.0


def one_line(exc: BaseException) -> str:
    return ("%s: %s" % (type(exc).__name__, exc)).replace("\n", " ")[:300]


class CloudEnvProjector:
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
                from ..cluster import cloudenv
                report = cloudenv.project_cloud_env(self.paths)
                if isinstance(report, dict) and report.get("ok") is False:
                    log.warning("cloud env projection failed: %s", str(report.get("error"))[:300])
            except Exception as exc:  # never fatal: the core does not need the cloud token
                log.warning("cloud env projection failed: %s", one_line(exc))
            self._stop.wait(self.interval_s)


class Node:
    """A node's services over `paths` (whose environ its children get), built from `settings`:
    every service takes its knobs from that one object, never from the environment."""

    def __init__(self, paths: Paths, settings: Settings, *, probe: Optional[bool] = None) -> None:
        from ..config import node_name
        from ..events import EventLog
        from ..posture.latch import Latch, LatchError
        from ..posture.service import PostureService
        from ..posture.vendorservice import VendorPosture
        from ..vendors import others

        self.paths = paths
        self.environ: Mapping[str, str] = paths.environ
        self.settings = settings
        self.probe = settings.probe if probe is None else probe
        self.name = node_name(paths)
        self.event_log = EventLog.for_paths(paths)
        latch = Latch(paths.latch, self.event_log, self.name)
        try:
            latch.load()
        except (LatchError, OSError) as exc:
            log.warning("latch could not be loaded: %s", one_line(exc))
        self.service = PostureService(paths, node=self.name, log=self.event_log, latch=latch,
                                      environ=self.environ, probe_enabled=self.probe, settings=settings)
        # Every other vendor's accounts follow the same schedule, each in a child of its own
        # (docs/vendors.md); a node without a vendor's lines shows nothing of it.
        self.vendor_postures = {vendor.name: VendorPosture(vendor, self.service, node=self.name, latch=latch)
                                for vendor in others()}
        self.service.vendor_postures = self.vendor_postures
        self.trajectory = self._trajectory_service()
        self.service.trajectory = self.trajectory
        self.app = MonitorApp(self.service, node=self.name, settings=settings)
        self._started: List[Any] = []

    def _trajectory_service(self) -> Any:
        """History, forecasts, alerts and the notify hook, fed by every fresh probe result."""
        from ..trajectory.notify import Notifier
        from ..trajectory.service import TrajectoryService

        notifier = Notifier.from_environ(self.environ, self.settings)
        if notifier is not None:
            notifier.start()
        trajectory = TrajectoryService(self.paths, node=self.name, event_log=self.event_log, environ=self.environ,
                                       notifier=notifier, settings=self.settings)
        try:
            trajectory.load()
        except OSError as exc:
            log.warning("history could not be loaded: %s", one_line(exc))
        if not self.service.probe_enabled:
            trajectory.observe({"available": False, "node": self.name})
        self.service.observers.append(trajectory.observe)
        for name, posture in self.vendor_postures.items():
            posture.observers.append(trajectory.observer(name))
        # The advice after the forecasts of the same probe, before the result is cached or pushed.
        from ..steering.advisor import Advisor
        advisor = Advisor(trajectory, self.settings.advice_wait_s, str(self.paths.home))
        self.service.advisor = advisor
        self.service.observers.append(advisor.observer(DEFAULT_PROVIDER))
        for name, posture in self.vendor_postures.items():
            posture.observers.append(advisor.observer(name))
        return trajectory

    def start(self, *, background: bool = True, liveness: bool = True) -> None:
        """Start the posture service, then (with `background`) the quota sampler,
        the cloud-env projector and (with `liveness`: the demo node is no cluster
        member) the liveness publisher, each remembered as soon as it runs. With
        `background`, the steering watcher (svcposture.steering) starts first, so
        that the automatic switch judges every result."""
        if background:
            from ..steering.watcher import start as start_steering
            self._started.append(start_steering(self.paths, self.settings, self.name, self.service))
        self.service.start()  # the first probe is under way before /healthz can answer
        self._started.append(self.service)
        if background:
            self._start_background(liveness)

    def _start_background(self, liveness_on: bool) -> None:
        from ..cluster import liveness
        from ..cluster.usageowner import UsageOwner
        from ..claude.sampler import QuotaSampler

        paths, environ, node, settings = self.paths, self.environ, self.name, self.settings
        sampler = QuotaSampler(paths, node=node, log=self.event_log, environ=environ, settings=settings,
                               usage_owner=UsageOwner(paths, node, settings))
        sampler.start()
        self._started.append(sampler)
        self.app.login_source = sampler
        projector = CloudEnvProjector(paths)
        projector.start()
        self._started.append(projector)
        if not liveness_on:
            return
        # One poller per login across the fleet: each vendor's child is told the roster and live hosts.
        candidates = UsageOwner(paths, node, settings).codex_candidates
        for posture in self.vendor_postures.values():
            posture.candidates_source = candidates
        try:
            from ..cluster.heartbeat import account_source
            from ..cluster.hostaccounts import accounts_source
            account = account_source(self.service.current, self.trajectory.body, self.service.interval_s)
            # The heartbeat carries a `codex` block; another vendor has none, but every vendor's
            # accounts ride in its accounts list.
            codex_posture = self.vendor_postures.get("codex")
            codex = account_source(codex_posture.current, self.trajectory.body, self.service.interval_s, "codex") \
                if codex_posture is not None else None
            accounts = accounts_source([(DEFAULT_PROVIDER, self.service.current)]
                                       + [(name, posture.current) for name, posture in self.vendor_postures.items()],
                                       self.trajectory.body)
            self._started.append(liveness.start_publisher(
                paths, settings, node, self.service.account_status, self.event_log,
                account=account, polls_usage=lambda: sampler.polls_here, codex=codex, accounts=accounts))
        except Exception as exc:
            log.warning("liveness publisher not started: %s", one_line(exc))

    def close_streams(self) -> None:
        """Close the broadcasts, which wakes every stream so it can end."""
        self.service.broadcast.close()
        for posture in self.vendor_postures.values():
            posture.broadcast.close()
        self.trajectory.broadcast.close()

    def stop(self) -> None:
        """Stop everything start() started, newest first, then the trajectory service."""
        started, self._started = self._started, []
        for part in reversed(started):
            try:
                part.stop()
            except Exception as exc:
                log.warning("stopping %s failed: %s", type(part).__name__, one_line(exc))
        self.trajectory.stop()


# ------------------------------------------------------------------ library

class OwningServer(MonitorServer):
    """A MonitorServer that owns its node: closing it ends the streams and stops the node."""

    def __init__(self, address: Tuple[str, int], node: Node) -> None:
        self.node = node
        self.service = node.service
        super().__init__(address, node.app, node.settings)

    def server_close(self) -> None:
        self.stopping.set()
        self.node.close_streams()
        try:
            super().server_close()
        finally:
            self.node.stop()


def start_server(home: Union[str, "os.PathLike[str]", None] = None, *, bind: str = DEFAULT_BIND, port: int = 0,
                 environ: Optional[Mapping[str, str]] = None) -> Tuple[MonitorServer, threading.Thread]:
    """Serve a node's monitor HTTP surface from inside the calling process.

    Modelled on prometheus_client.start_http_server. `home` is the node's home
    directory, taken as by the other face functions (Paths.for_home: None is
    $HOME of `environ`, which defaults to os.environ; a given `home` is also
    the HOME its probe child sees, never the caller's). It builds the node's
    posture service as `svc-monitor` does (node name, event log, latch,
    probing unless SVC_ACCOUNTS_PROBE=0), starts it, binds `bind`:`port` (0
    picks a free port; see `server.server_port` or `server.url`) and serves
    every route of the monitor in a daemon thread.

    Returns (server, thread). `server.shutdown()` then `server.server_close()`
    stops serving, ends open streams and stops the posture service.

    Unlike `svc-monitor` it does not take the one-monitor-per-node lock,
    install signal handlers, configure logging, start the quota sampler, the
    cloud-env projector or the liveness publisher, nor write
    ~/svc/run/monitor.json. A bad SVC_MONITOR_* setting raises InvalidSetting
    (a SvcpostureError); a port that cannot be bound raises OSError.
    """
    paths = Paths.for_home(home, environ)
    node = Node(paths, Settings.from_environ(paths.environ))
    server = OwningServer((bind, port), node)
    try:
        node.start(background=False)
    except BaseException:
        server.server_close()
        raise
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.25},
                              name="svc-monitor-http", daemon=True)
    thread.start()
    return server, thread
