"""The monitor process (`svc-monitor`), and the monitor as a library (start_server).

main(argv) parses the command line (or dispatches `hud` and `demo`), drops
any token from its own environment by re-executing itself, sets up logging and
the stop signals, and calls run_monitor: one monitor per node HOME (an flock),
the posture service, the quota sampler, the cloud-env projector, the liveness
publisher and the HTTP server, then ~/svc/run/monitor.json until told to stop.
"""
from __future__ import annotations

import argparse
import fcntl
import logging
import os
import signal
import stat
import sys
import threading
from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, Union

from .._env import InvalidSetting, parse_port
from .._dirs import ensure_dir
from .._files import open_nofollow, read_json, remove_stale_temps, write_json_atomic
from .._spawn import child_env, is_token_var, module_command
from .._text import printable
from ..paths import Paths
from .server import DEFAULT_BIND, DEFAULT_PORT, MonitorServer

log = logging.getLogger("svcposture.monitor")

CLOUD_ENV_INTERVAL_S = 600.0


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
                from ..cluster import cloudenv
                report = cloudenv.project_cloud_env(self.paths)
                if isinstance(report, dict) and report.get("ok") is False:
                    log.warning("cloud env projection failed: %s", str(report.get("error"))[:300])
            except Exception as exc:  # never fatal: the core does not need the cloud token
                log.warning("cloud env projection failed: %s", _one_line(exc))
            self._stop.wait(self.interval_s)


def _one_line(exc: BaseException) -> str:
    return ("%s: %s" % (type(exc).__name__, exc)).replace("\n", " ")[:300]


def run_monitor(paths: Paths, environ: Mapping[str, str], *, bind: str, port: int, probe_enabled: bool,
                stop_event: Optional[threading.Event] = None,
                on_ready: Optional[Callable[[MonitorServer], None]] = None, liveness: bool = True) -> int:
    """The monitor process: posture service, HTTP server, sampler, publisher
    (unless `liveness` is False: the demo node is no cluster member).
    Returns when `stop_event` is set (the caller maps SIGTERM/SIGINT to it)."""
    stop_event = stop_event or threading.Event()
    lock_path = paths.run_dir / "monitor.instance.lock"
    try:
        instance_fd = _claim_node(lock_path)
    except OSError as exc:
        # Running unguarded would let a second monitor on this HOME log every edge twice.
        print("svc-monitor: cannot take the one-monitor-per-node lock %s: %s; not starting"
              % (lock_path, exc.strerror or exc), file=sys.stderr)
        return 1
    if instance_fd < 0:
        print("svc-monitor: another monitor is already running for %s (see %s); stop it first"
              % (paths.home, paths.monitor_json), file=sys.stderr)
        return 1
    try:
        return _run_claimed(paths, environ, bind=bind, port=port, probe_enabled=probe_enabled,
                            stop_event=stop_event, on_ready=on_ready, liveness=liveness)
    finally:
        os.close(instance_fd)


def _claim_node(lock_path: Path) -> int:
    """One monitor per node HOME: two would each emit the same status edge.

    Returns the fd holding the lock, or -1 when another process holds it;
    raises OSError when the lock cannot be taken at all. The lock file is
    opened without following a symlink (open_nofollow), so a link planted
    there cannot make the monitor create a file elsewhere. The kernel drops the lock when the
    process dies, even by SIGKILL.
    """
    ensure_dir(lock_path.parent)
    fd = open_nofollow(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return -1
    except OSError:
        os.close(fd)
        raise
    return fd


def _remove_crash_leftovers(paths: Paths) -> None:
    """Temp files of atomic writes killed before their rename, older than an hour,
    in every directory the package writes into (HOME and the cluster checkout only
    for the files it writes there). Runs under the one-monitor lock, once per start."""
    places: List[Tuple[Path, Optional[Sequence[str]]]] = [
        (paths.config_dir, None), (paths.svc_dir, None), (paths.run_dir, None),
        (paths.home, (paths.zshenv.name,))]
    try:
        from ..config import cluster_repo_path
        places.append((cluster_repo_path(paths), ("cluster.json",)))
    except Exception as exc:  # a corrupt config is reported by whoever reads it
        log.debug("cluster checkout not swept: %s", _one_line(exc))
    removed = [path for directory, targets in places for path in remove_stale_temps(directory, targets=targets)]
    if removed:
        log.info("removed %d temp file(s) left by interrupted writes: %s", len(removed),
                 ", ".join(str(p) for p in removed)[:1000])


def _posture_service(paths: Paths, environ: Mapping[str, str], probe_enabled: bool,
                     cluster: bool = False) -> Tuple[str, Any, Any]:
    """(node name, event log, posture service) of a node, its latch loaded; nothing started."""
    from ..config import node_name
    from ..events import EventLog
    from ..latch import Latch, LatchError
    from ..posture import PostureService

    node = node_name(paths)
    event_log = EventLog.for_paths(paths)
    latch = Latch(paths.latch, event_log, node)
    try:
        latch.load()
    except (LatchError, OSError) as exc:
        log.warning("latch could not be loaded: %s", _one_line(exc))
    service = PostureService(paths, node=node, log=event_log, latch=latch, environ=environ,
                             probe_enabled=probe_enabled)
    service.codex = _codex_posture(paths, environ, node, latch, service, cluster)
    service.trajectory = _trajectory_service(paths, environ, node, event_log, service)
    return node, event_log, service


def _codex_posture(paths: Paths, environ: Mapping[str, str], node: str, latch: Any, service: Any,
                   cluster: bool) -> Any:
    """The Codex accounts' posture, riding on the Claude service's child runs (DESIGN §17).

    `cluster`: one poller per Codex login across the fleet, so the child is told
    the roster and live hosts (the library's start_server polls as a lone host).
    """
    from ..codexposture import CodexPosture

    candidates = None
    if cluster:
        from ..cluster.usageowner import UsageOwner
        candidates = getattr(UsageOwner(paths, environ, node), "codex_candidates", None)
    return CodexPosture(service, node=node, latch=latch, candidates=candidates)


def _trajectory_service(paths: Paths, environ: Mapping[str, str], node: str, event_log: Any, service: Any) -> Any:
    """History, forecasts, alerts and the notify hook, fed by every fresh probe result."""
    from ..notify import Notifier
    from ..trajectory import TrajectoryService

    notifier = Notifier.from_environ(environ)
    if notifier is not None:
        notifier.start()
    trajectory = TrajectoryService(paths, node=node, event_log=event_log, environ=environ, notifier=notifier)
    try:
        trajectory.load()
    except OSError as exc:
        log.warning("history could not be loaded: %s", _one_line(exc))
    if not service.probe_enabled:
        trajectory.observe({"available": False, "node": node})
    service.observers.append(trajectory.observe)
    service.codex.observers.append(trajectory.observer("codex"))
    return trajectory


def _start_parts(paths: Paths, environ: Mapping[str, str], node: str, event_log: Any, service: Any,
                 started: List[Any], liveness_on: bool = True) -> None:
    """Start the posture service, sampler, cloud-env projector and liveness
    publisher, appending each to `started` as soon as it runs."""
    from ..cluster import liveness
    from ..cluster.usageowner import UsageOwner
    from ..sampler import QuotaSampler

    service.start()  # the first probe is under way before /healthz can answer
    started.append(service)
    sampler = QuotaSampler(paths, node=node, log=event_log, environ=environ,
                           usage_owner=UsageOwner(paths, environ, node))
    sampler.start()
    started.append(sampler)
    projector = _CloudEnvProjector(paths)
    projector.start()
    started.append(projector)
    if not liveness_on:
        return
    try:
        from ..cluster.heartbeat_account import account_source
        account = account_source(paths, service.current, service.interval_s)
        codex = account_source(paths, service.codex.current, service.interval_s)
        started.append(liveness.start_publisher(paths, environ, node, service.account_status, event_log,
                                                account=account, polls_usage=lambda: sampler.polls_here,
                                                codex=codex))
    except Exception as exc:
        log.warning("liveness publisher not started: %s", _one_line(exc))


def accounts_env_note(paths: Paths, probe_enabled: bool) -> str:
    """What the start-up line says of the accounts env file: its path and, from
    `stat` alone (the monitor never reads it), why the posture will be unavailable."""
    path = printable(paths.accounts_env)
    if not probe_enabled:
        return "probe off (--no-probe or SVC_ACCOUNTS_PROBE=0); accounts env file %s not used" % path
    try:
        st = os.stat(str(paths.accounts_env))
    except FileNotFoundError:
        return ("accounts env file %s: missing, so the posture is unavailable; "
                "svc-monitor init creates it" % path)
    except OSError as exc:
        return "accounts env file %s: cannot be examined (%s)" % (path, exc.strerror or exc)
    if not stat.S_ISREG(st.st_mode):
        return "accounts env file %s: not a regular file, refused" % path
    if st.st_mode & 0o022:
        return ("accounts env file %s: mode %04o, group or others can write it, refused; chmod 600 it"
                % (path, stat.S_IMODE(st.st_mode)))
    if st.st_size == 0:
        return "accounts env file %s: empty, so the posture is unavailable" % path
    return "accounts env file %s" % path


def _announce(paths: Paths, server: MonitorServer, probe_enabled: bool) -> None:
    record = {"pid": os.getpid(), "url": server.url, "startedAt": server.started_at}
    try:
        write_json_atomic(paths.monitor_json, record)
    except OSError as exc:
        log.warning("cannot write %s: %s", paths.monitor_json, exc.strerror or exc)
    log.info("svc-monitor listening on %s (%s)", server.url, accounts_env_note(paths, probe_enabled))


def _stop_all(paths: Paths, server: MonitorServer, service: Any, serving: bool, started: List[Any]) -> None:
    server.stopping.set()
    service.broadcast.close()  # wakes every stream so it can end
    service.codex.broadcast.close()
    service.trajectory.broadcast.close()
    if serving:
        server.shutdown()
    server.server_close()
    for part in reversed(started):
        try:
            part.stop()
        except Exception as exc:
            log.warning("stopping %s failed: %s", type(part).__name__, _one_line(exc))
    service.trajectory.stop()
    _remove_monitor_json(paths.monitor_json)


def _run_claimed(paths: Paths, environ: Mapping[str, str], *, bind: str, port: int, probe_enabled: bool,
                 stop_event: threading.Event, on_ready: Optional[Callable[[MonitorServer], None]],
                 liveness: bool) -> int:
    _remove_crash_leftovers(paths)
    node, event_log, service = _posture_service(paths, environ, probe_enabled, cluster=liveness)
    try:
        server = MonitorServer((bind, port), service, node=node, environ=environ)
    except OSError as exc:
        print("svc-monitor: cannot listen on %s:%s: %s" % (bind, port, exc.strerror or exc), file=sys.stderr)
        return 1
    started: List[Any] = []
    serving = False
    try:
        _start_parts(paths, environ, node, event_log, service, started, liveness)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.25},
                                  name="svc-monitor-http", daemon=True)
        thread.start()
        serving = True
        _announce(paths, server, probe_enabled)
        if on_ready is not None:
            on_ready(server)
        while not stop_event.wait(0.5):
            pass
    finally:
        _stop_all(paths, server, service, serving, started)
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
        usage=("svc-monitor [-h] [--bind BIND] [--port PORT] [--no-probe]\n"
               "       svc-monitor {init,hud,statusline,demo} [-h] [ARGS...]"),
        description=("Serve this node's model-provider account posture: the dashboard at /, "
                     "GET /api/accounts[?refresh=true], the SSE stream /api/accounts/stream, "
                     "/api/trajectory (forecasts and alerts), /api/trajectory/stream, /api/history?hours=H, "
                     "/metrics, /api/openapi.json and /healthz. Read-only and token-free."),
        epilog=("subcommands:\n"
                "  svc-monitor init [--host-name NAME] [--accounts N] [--json]   make this host a node\n"
                "  svc-monitor hud [--url URL] [--once]   one-line terminal HUD fed by the stream\n"
                "  svc-monitor statusline [--url URL] [--no-color]   one status line for the coding agent\n"
                "  svc-monitor demo [--port PORT]         simulated provider + 3 demo accounts + a real monitor\n"
                "Each has its own --help.\n\n"
                "environment: SVC_MONITOR_BIND, SVC_MONITOR_PORT, SVC_MONITOR_READ_GUARD=1,\n"
                "  SVC_MONITOR_TRUSTED_HOSTS (name, name:port, name:*), SVC_MONITOR_TRUSTED_ORIGINS,\n"
                "  SVC_MONITOR_MAX_STREAMS (1024), SVC_SSE_KEEPALIVE_S (15), SVC_ACCOUNTS_PROBE=0,\n"
                "  SVC_MONITOR_REQUEST_TIMEOUT_S (10: a request must arrive in full within it),\n"
                "  SVC_MONITOR_MAX_CONNECTIONS (4096, at most the descriptor limit less 64),\n"
                "  SVC_ACCOUNTS_ENV, SVC_POSTURE_TTL_S, SVC_PROBE_INTERVAL_S, SVC_REFRESH_FLOOR_S,\n"
                "  SVC_HISTORY_DAYS (8), SVC_ALERT_THRESHOLDS (80,90), SVC_ALERT_CMD (notify hook).\n"
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
    if args_list and args_list[0] == "init":
        from . import nodeinit
        return nodeinit.main(args_list[1:])
    if args_list and args_list[0] == "statusline":
        from . import statusline
        return statusline.main(args_list[1:])
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
    except InvalidSetting as exc:
        print("svc-monitor: %s" % exc, file=sys.stderr)
        return 2


# ------------------------------------------------------------------ library

class _OwningServer(MonitorServer):
    """A MonitorServer that owns its posture service: closing it stops the service."""

    def server_close(self) -> None:
        self.stopping.set()
        self.service.broadcast.close()  # wakes every stream so it can end
        self.service.codex.broadcast.close()
        self.service.trajectory.broadcast.close()
        try:
            super().server_close()
        finally:
            self.service.stop()
            self.service.trajectory.stop()


def start_server(home: Union[str, "os.PathLike[str]", None] = None, *, bind: str = DEFAULT_BIND, port: int = 0,
                 environ: Optional[Mapping[str, str]] = None) -> Tuple[MonitorServer, threading.Thread]:
    """Serve a node's monitor HTTP surface from inside the calling process.

    Modelled on prometheus_client.start_http_server. `home` is the node's home
    directory (None: $HOME from `environ`, which defaults to os.environ). It
    builds the node's posture service as `svc-monitor` does (node name, event
    log, latch, probing unless SVC_ACCOUNTS_PROBE=0), starts it, binds
    `bind`:`port` (0 picks a free port; see `server.server_port` or
    `server.url`) and serves every route of the monitor in a daemon thread.

    Returns (server, thread). `server.shutdown()` then `server.server_close()`
    stops serving, ends open streams and stops the posture service.

    Unlike `svc-monitor` it does not take the one-monitor-per-node lock,
    install signal handlers, configure logging, start the quota sampler, the
    cloud-env projector or the liveness publisher, nor write
    ~/svc/run/monitor.json. A bad SVC_MONITOR_* setting raises InvalidSetting
    (a SvcpostureError); a port that cannot be bound raises OSError.
    """
    environ = os.environ if environ is None else environ
    paths = Paths(home, environ=environ)
    probe_enabled = environ.get("SVC_ACCOUNTS_PROBE", "").strip() != "0"
    node, _event_log, service = _posture_service(paths, environ, probe_enabled)
    server = _OwningServer((bind, port), service, node=node, environ=environ)
    try:
        service.start()
    except BaseException:
        server.server_close()
        raise
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.25},
                              name="svc-monitor-http", daemon=True)
    thread.start()
    return server, thread
