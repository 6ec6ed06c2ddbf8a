"""svc-stack: process control of the monitor, and the svc-stack command line.

The monitor runs detached as `python -m <this package> monitor`, using the
package's own import path so a vendored copy starts itself. `~/svc/run/monitor.pid`
names it, and a sidecar keeps the arguments that `restart` reuses. The cloud-token
projection behind `sync-cloud-env` lives in cloudenv.
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from .._dirs import ensure_dir
from .._files import append_line, lock_file, open_nofollow, write_bytes_atomic, write_json_atomic
from .._spawn import PACKAGE, child_env, module_command
from .._time import iso_now
from ..config import ConfigError, load_layer
from ..errors import SvcpostureError
from ..paths import Paths
from ..settings import InvalidSetting, parse_port, stack_start_timeout_s, stack_stop_timeout_s
from .cloudenv import project_cloud_env

MAX_LOG_BYTES = 10 * 1024 * 1024


class StackError(SvcpostureError, RuntimeError):
    """The monitor could not be started or stopped as asked."""


# ---------------------------------------------------------------- process control

def _sidecar(paths: Paths) -> Path:
    return paths.run_dir / "monitor.stack.json"


def _proc_state(pid: int) -> Optional[str]:
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain ") ".
    return raw[raw.rfind(b")") + 2:][:1].decode("ascii", "replace")


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes; a container's PID 1 may never reap it.
    return _proc_state(pid) != "Z"


def _command_line(pid: int) -> Optional[List[str]]:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            raw = fh.read()
        return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None
    except OSError:
        return None
    try:
        out = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.split() if out.returncode == 0 and out.stdout.strip() else None


def is_our_monitor(pid: int) -> bool:
    """Alive, and running `-m <package> monitor` (so a recycled pid is not ours)."""
    if not pid_alive(pid):
        return False
    argv = _command_line(pid)
    if not argv:
        return False
    for i in range(len(argv) - 2):
        if argv[i] == "-m" and argv[i + 1] == PACKAGE and argv[i + 2] == "monitor":
            return True
    return False


def read_pidfile(paths: Paths) -> Optional[int]:
    try:
        with open(str(paths.monitor_pid), "rb") as fh:
            text = fh.read(64).decode("ascii", "replace").strip()
    except FileNotFoundError:
        return None
    except OSError:
        return -1
    try:
        pid = int(text)
    except ValueError:
        return -1
    return pid if pid > 0 else -1


def _remove(path: Path) -> None:
    try:
        os.unlink(str(path))
    except FileNotFoundError:
        pass


def _read_json_quietly(path: Path) -> Optional[Dict[str, Any]]:
    try:
        data = load_layer(path)
    except ConfigError:
        return None
    return data or None


def status(paths: Paths) -> Dict[str, Any]:
    pid = read_pidfile(paths)
    report: Dict[str, Any] = {
        "running": False, "pid": None, "stalePidfile": False,
        "pidfile": str(paths.monitor_pid), "log": str(paths.logs_dir / "monitor.log"),
        "url": None, "startedAt": None, "args": None,
    }
    if pid is None:
        return report
    if pid < 0 or not is_our_monitor(pid):
        report["stalePidfile"] = True
        return report
    report.update(running=True, pid=pid)
    sidecar = _read_json_quietly(_sidecar(paths))
    if sidecar and sidecar.get("pid") == pid:
        report["startedAt"] = sidecar.get("startedAt")
        report["args"] = sidecar.get("args")
    info = _read_json_quietly(paths.monitor_json)
    if info and info.get("pid") == pid and isinstance(info.get("url"), str):
        report["url"] = info["url"]
    return report


def _wait_gone(pid: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


def stop(paths: Paths, timeout: float) -> Dict[str, Any]:
    current = status(paths)
    if not current["running"]:
        if current["stalePidfile"]:
            _remove(paths.monitor_pid)
            _remove(_sidecar(paths))
        return {"stopped": False, "wasRunning": False, "stalePidfileRemoved": current["stalePidfile"]}
    pid = current["pid"]
    killed = False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    if not _wait_gone(pid, time.monotonic() + timeout):
        killed = True
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not _wait_gone(pid, time.monotonic() + 5.0):
            raise StackError("monitor pid %d did not exit after SIGKILL" % pid)
    _remove(paths.monitor_pid)
    _remove(_sidecar(paths))
    info = _read_json_quietly(paths.monitor_json)
    if info and info.get("pid") == pid:
        # Killed before it could clean up after itself.
        _remove(paths.monitor_json)
    return {"stopped": True, "wasRunning": True, "pid": pid, "killed": killed, "stalePidfileRemoved": False}


def monitor_command(args: Sequence[str]) -> List[str]:
    return module_command("", "monitor", *args)


def _tail(path: Path, since: int, limit: int = 2000) -> str:
    # Only what this start-up wrote: an older run's output would mislead.
    try:
        with open(str(path), "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(since, size - limit))
            return fh.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _rotate_log(path: Path) -> None:
    try:
        if path.stat().st_size > MAX_LOG_BYTES:
            os.replace(str(path), str(path) + ".1")
    except OSError:
        pass


def start(paths: Paths, monitor_args: Sequence[str], timeout: float) -> Dict[str, Any]:
    current = status(paths)
    if current["running"]:
        return {"started": False, "alreadyRunning": True, "pid": current["pid"], "url": current["url"],
                "log": current["log"]}
    if current["stalePidfile"]:
        _remove(paths.monitor_pid)
        _remove(_sidecar(paths))
    ensure_dir(paths.run_dir)
    ensure_dir(paths.logs_dir)
    log_path = paths.logs_dir / "monitor.log"
    _rotate_log(log_path)
    # The monitor never holds a token (its /proc environ would show one even after
    # it unset it), and the cloud token that login shells carry is not its business.
    env = child_env(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # The monitor's output is a stream into the log, which no write makes atomic; the
    # header, the one line written here, is a locked append (on a line of its own even
    # after a monitor that died mid-line).
    try:
        log_fd = open_nofollow(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StackError("cannot open %s: %s" % (log_path, exc.strerror or exc)) from None
    try:
        offset = os.fstat(log_fd).st_size
        append_line(log_path, "--- svc-stack start %s ---" % iso_now(), fsync=False)
        proc = subprocess.Popen(
            monitor_command(monitor_args), stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
            cwd=str(paths.home) if paths.home.is_dir() else "/", env=env, start_new_session=True,
        )
    except OSError as exc:
        raise StackError("cannot start the monitor: %s" % (exc.strerror or exc)) from None
    finally:
        os.close(log_fd)
    write_bytes_atomic(paths.monitor_pid, ("%d\n" % proc.pid).encode("ascii"), 0o600)
    write_json_atomic(_sidecar(paths), {"pid": proc.pid, "startedAt": iso_now(), "args": list(monitor_args)})
    # Ready when the monitor has published its monitor.json; gone early means it failed.
    deadline = time.monotonic() + timeout
    url = None
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            _remove(paths.monitor_pid)
            _remove(_sidecar(paths))
            tail = _tail(log_path, offset)
            raise StackError("the monitor exited with status %d during start-up; log %s%s"
                             % (code, log_path, (":\n" + tail) if tail else ""))
        info = _read_json_quietly(paths.monitor_json)
        if info and info.get("pid") == proc.pid and isinstance(info.get("url"), str):
            url = info["url"]
            break
        time.sleep(0.05)
    return {"started": True, "alreadyRunning": False, "pid": proc.pid, "url": url, "ready": url is not None,
            "log": str(log_path), "pidfile": str(paths.monitor_pid)}


# ---------------------------------------------------------------- CLI

def _port_arg(text: str) -> int:
    """argparse `type=` for --port: parse_port's rule, in the words svc-stack has always used."""
    try:
        return parse_port(text, "--port")
    except InvalidSetting:
        pass
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a port number: %r" % text) from None
    raise argparse.ArgumentTypeError("port out of range: %d" % value)


def _monitor_args(ns: argparse.Namespace) -> Optional[List[str]]:
    out: List[str] = []
    if ns.bind is not None:
        out += ["--bind", ns.bind]
    if ns.port is not None:
        out += ["--port", str(ns.port)]
    if ns.no_probe:
        out.append("--no-probe")
    return out or None


def _emit(as_json: bool, report: Dict[str, Any], text: str) -> None:
    if as_json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(text)


def _previous_args(paths: Paths) -> Optional[List[str]]:
    # Read even when the monitor died: restarting a crashed monitor keeps its options.
    sidecar = _read_json_quietly(_sidecar(paths))
    args = sidecar.get("args") if sidecar else None
    if isinstance(args, list) and all(isinstance(a, str) for a in args):
        return list(args)
    return None


def _start(ns: argparse.Namespace, restart: bool) -> int:
    paths = Paths()
    with lock_file(paths.run_dir / "monitor.lock"):  # two starts must not launch two monitors
        args = _monitor_args(ns)
        stopped: Dict[str, Any] = {}
        if restart:
            if args is None:
                args = _previous_args(paths)
            stopped = stop(paths, stack_stop_timeout_s(os.environ))
        result = start(paths, args or [], stack_start_timeout_s(os.environ))
        if restart:
            result["previous"] = stopped
        if result["alreadyRunning"]:
            text = "svc-stack: monitor already running (pid %d)%s" % (
                result["pid"], " at %s" % result["url"] if result["url"] else "")
        else:
            text = "svc-stack: monitor %s (pid %d)%s; log %s" % (
                "restarted" if restart else "started", result["pid"],
                " at %s" % result["url"] if result["url"] else " (not yet serving; see the log)", result["log"])
        _emit(ns.json, result, text)
    return 0


def cmd_start(ns: argparse.Namespace) -> int:
    return _start(ns, restart=False)


def cmd_restart(ns: argparse.Namespace) -> int:
    return _start(ns, restart=True)


def cmd_stop(ns: argparse.Namespace) -> int:
    paths = Paths()
    with lock_file(paths.run_dir / "monitor.lock"):
        result = stop(paths, ns.timeout if ns.timeout else stack_stop_timeout_s(os.environ))
    if result["stopped"]:
        text = "svc-stack: monitor stopped (pid %d%s)" % (result["pid"], ", after SIGKILL" if result["killed"] else "")
    elif result["stalePidfileRemoved"]:
        text = "svc-stack: monitor not running (stale pidfile removed)"
    else:
        text = "svc-stack: monitor not running"
    _emit(ns.json, result, text)
    return 0


def cmd_status(ns: argparse.Namespace) -> int:
    result = status(Paths())
    if result["running"]:
        text = "svc-stack: monitor running (pid %d)%s since %s; log %s" % (
            result["pid"], " at %s" % result["url"] if result["url"] else "",
            result["startedAt"] or "unknown", result["log"])
    else:
        text = "svc-stack: monitor not running%s" % (" (stale pidfile)" if result["stalePidfile"] else "")
    _emit(ns.json, result, text)
    # LSB convention: 3 = not running.
    return 0 if result["running"] else 3


def cmd_sync_cloud_env(ns: argparse.Namespace) -> int:
    report = project_cloud_env(Paths())
    if report["ok"]:
        text = "svc-stack: cloud token %s; %s %s; ~/.zshenv guard %s" % (
            report["token"], report["envFile"], report["envFileAction"], report["guardAction"])
    else:
        text = "svc-stack: cloud env not projected: %s" % report["error"]
    if ns.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    elif report["ok"]:
        print(text)
    else:
        print(text, file=sys.stderr)
    return 0 if report["ok"] else 1


def _monitor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bind", help="address for the monitor to listen on (passed to svc-monitor)")
    p.add_argument("--port", type=_port_arg, help="port for the monitor (passed to svc-monitor; 0 = any free port)")
    p.add_argument("--no-probe", action="store_true", help="start the monitor with the account probe disabled")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def add_commands(sub: Any) -> None:
    p = sub.add_parser("start", help="start the monitor detached unless it is already running",
                       description="Start the monitor detached. A pidfile whose process is gone or is not "
                                   "our monitor is replaced. Waits until the monitor serves "
                                   "($SVC_STACK_START_TIMEOUT_S, default 20 s).")
    _monitor_options(p)
    p.set_defaults(func=cmd_start)

    p = sub.add_parser("restart", help="stop the monitor, wait for it to exit, start it again",
                       description="Stop (SIGTERM, then SIGKILL after the stop timeout), wait for the old "
                                   "process to exit, then start. Without --bind/--port/--no-probe the "
                                   "previous start's options are reused. Re-arms the liveness publisher.")
    _monitor_options(p)
    p.set_defaults(func=cmd_restart)

    p = sub.add_parser("stop", help="stop the monitor (SIGTERM, SIGKILL after a timeout)",
                       description="Send SIGTERM and wait for the monitor to exit; SIGKILL after --timeout "
                                   "seconds ($SVC_STACK_STOP_TIMEOUT_S, default 10). Not running is not an error.")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait before SIGKILL")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("status", help="is the monitor running? (exit 0 running, 3 not running)",
                       description="Report pid, URL, start time and log of the monitor. Exit status 0 when "
                                   "it runs, 3 when it does not (LSB convention).")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("sync-cloud-env", help="project the cloud token into ~/.config/svc/cluster.env",
                       description="Write SVC_CLOUD_TOKEN from ~/.config/svc/cluster-cloud.json into "
                                   "~/.config/svc/cluster.env (mode 0600, atomic) and make sure ~/.zshenv has "
                                   "exactly one guard line sourcing it. Without a token the env file is "
                                   "removed. The report never contains the token.")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_sync_cloud_env)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="svc-stack",
        description="Run this node's monitor in the background and project the cloud token. "
                    "The monitor runs detached as `python -m %s monitor`, with its pid in "
                    "~/svc/run/monitor.pid and its output in ~/svc/logs/monitor.log." % PACKAGE,
    )
    add_commands(parser.add_subparsers(dest="command", metavar="COMMAND"))
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if not getattr(ns, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(ns.func(ns))
    except StackError as exc:
        print("svc-stack: %s" % exc, file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise
        print("svc-stack: %s: %s" % (exc.filename or "I/O error", exc.strerror or exc), file=sys.stderr)
        return 1
