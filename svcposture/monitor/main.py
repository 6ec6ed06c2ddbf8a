"""The monitor process (`svc-monitor`), and the monitor as a library (start_server).

main(argv) parses the monitor's own command line (cli.MONITOR_COMMANDS runs
the subcommands; `demo` is demo_main here), drops any token from its own
environment by re-executing itself, sets up logging and the stop signals, and
decides what it may expose (exposure.py: the main listener on the loopback
unless --allow-remote, the scrape listener of SVC_METRICS_BIND, exit 2 when
either must not start), and calls run_monitor: one monitor per node HOME (an
flock), the posture service, the quota sampler, the cloud-env projector, the
liveness publisher and the HTTP server (and the scrape listener beside it),
then ~/svc/run/monitor.json until told to stop.
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
import time
from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

from ..errors import SvcpostureError
from ..settings import InvalidSetting, parse_port
from .._dirs import ensure_dir
from .._files import open_nofollow, read_json, remove_stale_temps, write_json_atomic
from .._spawn import child_env, is_token_var, module_command
from .._text import printable
from ..firstrun import notes as firstrun
from ..paths import Paths
from ..settings import DEFAULT_PORT, Settings, monitor_address
from .bearer import BearerGate
from .exposure import Exposure, ExposureRefused, plan_exposure, remote_note, scrape_lines
from .node import Node, one_line, start_server
from .protocols import Application
from .scrape import ScrapeApp
from .server import MonitorServer

__all__ = ["main", "run_monitor", "start_server", "accounts_env_note", "configure_logging", "install_stop_signals"]

log = logging.getLogger("svcposture.monitor")


def run_monitor(paths: Paths, environ: Mapping[str, str], *, bind: str, port: int, probe_enabled: bool,
                stop_event: Optional[threading.Event] = None,
                on_ready: Optional[Callable[[MonitorServer], None]] = None, liveness: bool = True,
                settings: Optional[Settings] = None, fleet_source: Optional[Callable[[], Any]] = None,
                exposure: Optional[Exposure] = None) -> int:
    """The monitor process: posture service, HTTP server, sampler, publisher
    (unless `liveness` is False: the demo node is no cluster member).
    `settings` default to those of `environ`; `fleet_source` (the demo's simulated
    fleet) replaces the cluster read behind /api/fleet; `exposure` (plan_exposure's)
    puts the main listener behind the bearer token and opens the scrape listener
    (None: neither, as for the demo on the loopback).
    Returns when `stop_event` is set (the caller maps SIGTERM/SIGINT to it)."""
    stop_event = stop_event or threading.Event()
    settings = Settings.from_environ(environ) if settings is None else settings
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
        return _run_claimed(paths, settings, bind=bind, port=port, probe_enabled=probe_enabled,
                            stop_event=stop_event, on_ready=on_ready, liveness=liveness, fleet_source=fleet_source,
                            exposure=exposure)
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
    in every directory the package writes into (HOME, the cluster checkout and the
    accounts env file's directory only for the files it writes there). Runs under the one-monitor lock, once per start."""
    places: List[Tuple[Path, Optional[Sequence[str]]]] = [
        (paths.config_dir, None), (paths.svc_dir, None), (paths.run_dir, None),
        (paths.home, (paths.zshenv.name,)),
        # A switch killed mid-write leaves a copy of the tokens beside the env file, wherever it is.
        (paths.accounts_env.parent, (paths.accounts_env.name,))]
    try:
        from ..config import cluster_repo_path
        places.append((cluster_repo_path(paths), ("cluster.json",)))
    except Exception as exc:  # a corrupt config is reported by whoever reads it
        log.debug("cluster checkout not swept: %s", one_line(exc))
    removed = [path for directory, targets in places for path in remove_stale_temps(directory, targets=targets)]
    if removed:
        log.info("removed %d temp file(s) left by interrupted writes: %s", len(removed),
                 ", ".join(str(p) for p in removed)[:1000])


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


def _announce(paths: Paths, server: MonitorServer, node: Node, exposure: Optional[Exposure]) -> None:
    record = {"pid": os.getpid(), "url": server.url, "startedAt": node.app.started_at}
    try:
        write_json_atomic(paths.monitor_json, record)
    except OSError as exc:
        log.warning("cannot write %s: %s", paths.monitor_json, exc.strerror or exc)
    log.info("svc-monitor listening on %s (%s)%s", server.url, accounts_env_note(paths, node.probe),
             remote_note(exposure) if exposure is not None else "")


def _announce_scrape(exposure: Optional[Exposure], scrape: Optional[MonitorServer]) -> None:
    if exposure is None:
        return
    for note in exposure.notes:
        log.warning("%s", note)
    if scrape is not None:
        line, warning = scrape_lines(exposure, scrape.url)
        log.info("%s", line)
        if warning is not None:
            log.warning("%s", warning)


def _stop_all(paths: Paths, servers: Sequence[MonitorServer], node: Node, serving: bool) -> None:
    for server in servers:
        server.stopping.set()
    node.close_streams()
    for server in servers:
        if serving:
            server.shutdown()
        server.server_close()
    node.stop()
    _remove_monitor_json(paths.monitor_json)


class _CannotListen(SvcpostureError):
    """One of the listeners cannot bind; `where` names it, `error` says why."""

    def __init__(self, where: str, error: OSError) -> None:
        super().__init__(where)
        self.where = where
        self.error = error


def _listeners(node: Node, settings: Settings, bind: str, port: int,
               exposure: Optional[Exposure]) -> List[MonitorServer]:
    """The main listener (behind the bearer gate under --allow-remote) and the scrape listener, bound;
    _CannotListen names the one that cannot bind (the other is closed)."""
    app: Application = node.app
    if exposure is not None and exposure.gate is not None:
        app = BearerGate(node.app, exposure.gate)
    try:
        servers = [MonitorServer((bind, port), app, settings)]
    except OSError as exc:
        raise _CannotListen("%s:%s" % (bind, port), exc) from None
    plan = exposure.scrape if exposure is not None else None
    if plan is not None:
        try:
            scrape = ScrapeApp(node.app.get_metrics, settings, plan.check)
            servers.append(MonitorServer((plan.host, plan.port), scrape, tls=plan.tls))
        except OSError as exc:
            servers[0].server_close()
            raise _CannotListen("%s:%s (SVC_METRICS_BIND)" % (plan.host, plan.port), exc) from None
    return servers


def _run_claimed(paths: Paths, settings: Settings, *, bind: str, port: int, probe_enabled: bool,
                 stop_event: threading.Event, on_ready: Optional[Callable[[MonitorServer], None]],
                 liveness: bool, fleet_source: Optional[Callable[[], Any]] = None,
                 exposure: Optional[Exposure] = None) -> int:
    _remove_crash_leftovers(paths)
    node = Node(paths, settings, probe=probe_enabled, background=True, liveness=liveness, fleet_source=fleet_source)
    try:
        servers = _listeners(node, settings, bind, port, exposure)
    except _CannotListen as failed:
        exc = failed.error
        print("svc-monitor: cannot listen on %s: %s%s" % (failed.where, exc.strerror or exc,
                                                         firstrun.listen_hint(paths, exc)), file=sys.stderr)
        return 1
    serving = False
    try:
        node.start()
        for server, name in zip(servers, ("svc-monitor-http", "svc-monitor-scrape")):
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.25}, name=name,
                             daemon=True).start()
        serving = True
        _announce(paths, servers[0], node, exposure)
        _announce_scrape(exposure, servers[1] if len(servers) > 1 else None)
        firstrun.log_start_notes(paths, paths.environ, probe_enabled)
        if on_ready is not None:
            on_ready(servers[0])
        while not stop_event.wait(0.5):
            pass
    finally:
        _stop_all(paths, servers, node, serving)
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


# The name of the stderr handler configure_logging adds, so that a second call adds none.
_LOG_HANDLER = "svc-monitor"


def configure_logging() -> None:
    root = logging.getLogger("svcposture")
    if not any(h.get_name() == _LOG_HANDLER for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_LogFormatter())
        handler.set_name(_LOG_HANDLER)
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False


def install_stop_signals(stop_event: threading.Event) -> None:
    def handler(signum: int, frame: Any) -> None:
        stop_event.set()
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _build_parser(commands: Sequence[Any]) -> argparse.ArgumentParser:
    """The parser of the monitor itself; its usage and epilog list `commands`, the rows of
    cli.MONITOR_COMMANDS."""
    import textwrap

    rows = []
    for command in commands:
        rows.extend(textwrap.wrap("svc-monitor %s %s" % (command.name, command.arguments), 100,
                                  initial_indent="  ", subsequent_indent="        ", break_on_hyphens=False))
        rows.extend(textwrap.wrap(command.summary, 100, initial_indent="      ", subsequent_indent="      ",
                                  break_on_hyphens=False))
    parser = argparse.ArgumentParser(
        prog="svc-monitor",
        usage=("svc-monitor [-h] [--bind BIND] [--port PORT] [--no-probe] [--allow-remote]\n"
               "       svc-monitor {%s} [-h] [ARGS...]" % ",".join(c.name for c in commands)),
        description=("Serve this node's model-provider account posture: the dashboard at /, "
                     "GET /api/accounts[?refresh=true], the SSE stream /api/accounts/stream, "
                     "/api/trajectory (forecasts and alerts), /api/trajectory/stream, /api/history?hours=H, "
                     "/metrics, /api/openapi.json and /healthz. Read-only and token-free."),
        epilog=("subcommands:\n" + "\n".join(rows) + "\nEach has its own --help.\n\n"
                "environment: SVC_MONITOR_BIND, SVC_MONITOR_PORT, SVC_MONITOR_READ_GUARD=1,\n"
                "  SVC_MONITOR_TRUSTED_HOSTS (name, name:port, name:*), SVC_MONITOR_TRUSTED_ORIGINS,\n"
                "  SVC_MONITOR_MAX_STREAMS (1024), SVC_SSE_KEEPALIVE_S (15), SVC_ACCOUNTS_PROBE=0,\n"
                "  SVC_MONITOR_REQUEST_TIMEOUT_S (10: a request must arrive in full within it),\n"
                "  SVC_MONITOR_MAX_CONNECTIONS (4096, at most the descriptor limit less 64),\n"
                "  SVC_ACCOUNTS_ENV, SVC_POSTURE_TTL_S, SVC_PROBE_INTERVAL_S, SVC_REFRESH_FLOOR_S,\n"
                "  SVC_HISTORY_DAYS (8), SVC_ALERT_THRESHOLDS (80,90), SVC_ALERT_CMD (notify hook),\n"
                "  SVC_AUTO_SWITCH_AT (percent: switch --best when the active account reaches it; off by default),\n"
                "  SVC_METRICS_BIND (HOST:PORT: a second listener serving /metrics and /healthz alone),\n"
                "  SVC_METRICS_TLS_CERT, SVC_METRICS_TLS_KEY (its TLS), SVC_METRICS_PLAIN_HTTP=1.\n"
                "Off the loopback, /metrics needs Authorization: Bearer and the token of\n"
                "~/.config/svc/metrics-token (svc-monitor init --metrics-token makes it).\n"
                "A forced refresh needs the X-Svc-Refresh header, a trusted Host and a trusted Origin\n"
                "(when one is sent); otherwise it gets 403 and spends no probe."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bind", default=None,
                        help="address to listen on (default $SVC_MONITOR_BIND or 127.0.0.1)")
    parser.add_argument("--port", default=None,
                        help="port to listen on; 0 picks a free one (default $SVC_MONITOR_PORT or %d)" % DEFAULT_PORT)
    parser.add_argument("--no-probe", action="store_true",
                        help="never probe the provider; the posture endpoints answer {available:false}")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a --bind off the loopback (a container): every route but /healthz then "
                             "needs the bearer token of ~/.config/svc/metrics-token")
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


def demo_main(argv: Sequence[str]) -> int:
    """`svc-monitor demo ARGS`: the demo node, on this process's monitor, logging and signals."""
    _reexec_without_tokens(["demo", *argv])
    from ..demo import main as demo
    return demo.main(list(argv), run_monitor=run_monitor, configure_logging=configure_logging,
                     install_stop_signals=install_stop_signals)


def main(argv: Optional[Sequence[str]] = None, commands: Sequence[Any] = ()) -> int:
    """`svc-monitor [--bind B] [--port P] [--no-probe] [--allow-remote]`: the monitor until a stop signal.

    cli.monitor_main runs the subcommands; `commands` are its table's rows, which the help
    lists and which a word that is not an option is told apart from."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and not args_list[0].startswith("-"):
        return firstrun.unknown_subcommand("svc-monitor", args_list[0], [c.name for c in commands],
                                           _build_parser(commands))
    _reexec_without_tokens(args_list)
    args = _build_parser(commands).parse_args(args_list)
    environ = os.environ
    try:
        bind, port = monitor_address(environ)
        source = "--bind %s" % args.bind if args.bind is not None else "SVC_MONITOR_BIND=%s" % bind
        bind = args.bind if args.bind is not None else bind
        port = parse_port(args.port, "--port") if args.port is not None else port
        paths = Paths(environ=environ)
        settings = Settings.from_environ(environ)
        exposure = plan_exposure(paths, settings, bind=bind, bind_source=source, allow_remote=args.allow_remote,
                                 now=time.time())
        probe_enabled = not args.no_probe and settings.probe
        configure_logging()
        stop_event = threading.Event()
        install_stop_signals(stop_event)
        return run_monitor(paths, environ, bind=bind, port=port, probe_enabled=probe_enabled,
                           stop_event=stop_event, settings=settings, exposure=exposure)
    except (InvalidSetting, ExposureRefused) as exc:
        print("svc-monitor: %s" % exc, file=sys.stderr)
        return 2
