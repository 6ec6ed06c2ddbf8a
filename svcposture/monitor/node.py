"""A node's services: built, started and stopped in one place for both faces.

The `svc-monitor` command (main.py) and the library's start_server(home)
build the same node: its name, event log and latch, one posture service per
registered vendor, the trajectory service and the advisor they feed, and the
MonitorApp over them, handed one `services.Services` value. The command also
builds and starts the background services (each vendor's login sampler, the
cloud-env projector, the steering watcher, the liveness publisher); the
library does not.

Methods for the caller:

    Node(paths, settings, probe=..., background=..., liveness=..., fleet_source=...)
                                       build everything; nothing runs yet
    node.app                           the MonitorApp a MonitorServer serves
    node.postures                      the posture services, by vendor name
    node.start()                       every posture service (each first probe is
                                       under way at once, all in one probe child),
                                       then the background services
    node.close_streams()               end every open stream (before the server closes)
    node.stop()                        stop all start() started, newest first
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from ..paths import Paths
from ..settings import DEFAULT_BIND, Settings
from ..vendor import optional_member
from ..vendors import DEFAULT_PROVIDER, block_key, provider_names, registered
from .app import MonitorApp
from .server import MonitorServer
from .services import Services

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
    every service takes its knobs from that one object, never from the environment.

    `background` (the command) also builds what runs beside the posture: each
    vendor's login sampler, the cloud-env projector, the steering watcher and
    (with `liveness`; the demo node is no cluster member) the liveness publisher.
    `fleet_source` replaces the cluster's read behind /api/fleet (the demo's fleet).
    """

    def __init__(self, paths: Paths, settings: Settings, *, probe: Optional[bool] = None, background: bool = False,
                 liveness: bool = True, fleet_source: Optional[Callable[[], Dict[str, Any]]] = None) -> None:
        from ..config import node_name
        from ..events import EventLog

        self.paths = paths
        self.environ: Mapping[str, str] = paths.environ
        self.settings = settings
        self.probe = settings.probe if probe is None else probe
        self.name = node_name(paths)
        self.event_log = EventLog.for_paths(paths)
        self.background = background
        self.liveness = background and liveness
        self._started: List[Any] = []
        self.trajectory = self._trajectory_service()
        self.advisor = self._advisor()
        self.steering = self._steering() if background else None
        self.postures = self._postures()
        self.logins = self._login_samplers() if background else []
        self.app = MonitorApp(Services(node=self.name, paths=paths, settings=settings, postures=self.postures,
                                       trajectory=self.trajectory, advisor=self.advisor, logins=self.logins,
                                       fleet_source=fleet_source))

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
        if not self.probe:
            trajectory.observe({"available": False, "node": self.name})
        return trajectory

    def _advisor(self) -> Any:
        from ..steering.advisor import Advisor
        return Advisor(self.trajectory, self.settings.advice_wait_s, str(self.paths.home),
                       str(self.paths.accounts_env))

    def _steering(self) -> Any:
        from ..steering.watcher import Steering
        return Steering(self.paths, self.settings, self.name, trajectory=self.trajectory,
                        notifier=self.trajectory.notifier, providers=provider_names(), reprobe=self._reprobe_all,
                        probing=self.probe)

    def _reprobe_all(self) -> None:
        for posture in self.postures.values():
            posture.reprobe()

    def _postures(self) -> Dict[str, Any]:
        """One posture service per registered vendor, on a schedule of its own (docs/vendors.md). Each
        result goes to the latch, then the forecasts, the advice (which names siblingWithHeadroom)
        and the automatic switch, before it is cached or pushed. The services share one probe
        batcher: the probes that start together share one child, each vendor's block delivered as
        soon as it is done."""
        from ..posture.latch import Latch, LatchError
        from ..posture.service import PostureService
        from ..probe.batcher import ProbeBatcher

        latch = Latch(self.paths.latch, self.event_log, self.name)
        try:
            latch.load()
        except (LatchError, OSError) as exc:
            log.warning("latch could not be loaded: %s", one_line(exc))
        candidates = self._candidates()
        batcher = ProbeBatcher()
        postures: Dict[str, Any] = {}
        for vendor in registered():
            observers = [self.trajectory.observer(vendor.name), self.advisor.observer(vendor.name)]
            auto = self.steering.observer(vendor.name) if self.steering is not None else None
            if auto is not None:
                observers.append(auto)
            postures[vendor.name] = PostureService(
                vendor, self.paths, node=self.name, settings=self.settings, latch=latch, environ=self.environ,
                probe_enabled=self.probe, observers=observers, candidates=candidates,
                speaks_for_node=vendor.name == DEFAULT_PROVIDER, batcher=batcher)
        return postures

    def _candidates(self) -> Optional[Callable[[], Any]]:
        """The roster and live hosts, for one poller per login across the fleet (None: a lone host)."""
        if not self.liveness:
            return None
        from ..cluster.usageowner import UsageOwner
        return UsageOwner(self.paths, self.name, self.settings).candidates

    def _login_samplers(self) -> List[Any]:
        """Each vendor's sampler of this machine's interactive login, when the vendor has one."""
        from ..cluster.usageowner import UsageOwner
        owner = UsageOwner(self.paths, self.name, self.settings) if self.liveness else None
        samplers = []
        for vendor in registered():
            factory = optional_member(vendor, "login_sampler")
            if factory is not None:
                samplers.append(factory(self.paths, node=self.name, log=self.event_log, settings=self.settings,
                                        usage_owner=owner))
        return samplers

    def start(self) -> None:
        """Start the steering watcher (so that the automatic switch judges every result), every
        posture service (each first probe is under way when this returns), then the rest."""
        if self.steering is not None:
            self.steering.start()
            self._started.append(self.steering)
        for posture in self.postures.values():
            posture.start()  # the first probe is under way before /healthz can answer
            self._started.append(posture)
        if not self.background:
            return
        for sampler in self.logins:
            sampler.start()
            self._started.append(sampler)
        projector = CloudEnvProjector(self.paths)
        projector.start()
        self._started.append(projector)
        if self.liveness:
            self._start_publisher()

    def _start_publisher(self) -> None:
        from ..cluster import liveness
        from ..cluster.heartbeat import account_source
        from ..cluster.hostaccounts import accounts_source

        try:
            interval = self.settings.probe_interval_s
            # The default vendor's active account is the heartbeat's `account`; every other vendor's
            # is a block under its name, there only while the node has that vendor's accounts.
            blocks = [(block_key(name), account_source(posture.current, self.trajectory.body, interval, name))
                      for name, posture in self.postures.items()]
            accounts = accounts_source([(name, posture.current) for name, posture in self.postures.items()],
                                       self.trajectory.body)
            default = self.postures[DEFAULT_PROVIDER]
            self._started.append(liveness.start_publisher(
                self.paths, self.settings, self.name, default.account_status, self.event_log, blocks=blocks,
                polls_usage=self._polls_usage, accounts=accounts))
        except Exception as exc:
            log.warning("liveness publisher not started: %s", one_line(exc))

    def _polls_usage(self) -> bool:
        """False while another host of the cluster polls this machine's login: the heartbeat's quota is null."""
        return all(sampler.polls_here for sampler in self.logins)

    def close_streams(self) -> None:
        """Close the broadcasts, which wakes every stream so it can end."""
        for posture in self.postures.values():
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
        node.start()
    except BaseException:
        server.server_close()
        raise
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.25},
                              name="svc-monitor-http", daemon=True)
    thread.start()
    return server, thread
