"""svc-stack: the cloud-token projection and process control of the monitor.

The projection turns `~/.config/svc/cluster-cloud.json` into a sourceable
`~/.config/svc/cluster.env` (0600) plus one guard line in `~/.zshenv`, so login
shells inherit SVC_CLOUD_TOKEN. Nothing in the package reads that variable.

Process control runs the monitor detached as `python -m <this package> monitor`,
using the package's own import path so a vendored copy starts itself, and keeps
`~/svc/run/monitor.pid` plus a sidecar with the arguments that `restart` reuses.
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

from .._files import ensure_dir, lock_file, write_bytes_atomic, write_json_atomic
from .._spawn import PACKAGE, child_env, module_command
from .._time import iso_now
from ..config import CLOUD_TOKEN_KEY, ConfigError, flatten, load_layer
from ..paths import Paths

# The marker identifies our line in ~/.zshenv; everything else there is the user's.
GUARD_MARKER = b"# svc-cloud-env (managed by svc-stack; holds no secret)"
_ENV_HEADER = "# Written by svc-stack sync-cloud-env from cluster-cloud.json. Do not edit; mode 0600.\n"
_MAX_ZSHENV_BYTES = 1024 * 1024


class ProjectionError(RuntimeError):
    """The cloud env could not be projected; nothing was half-written."""


class StackError(RuntimeError):
    """The monitor could not be started or stopped as asked."""


# ---------------------------------------------------------------- projection

def sh_single_quote(value: str) -> str:
    # Inside single quotes sh interprets nothing, so only ' itself needs care:
    # close the quote, emit an escaped quote, reopen.
    return "'" + value.replace("'", "'\\''") + "'"


def env_file_text(token: str) -> str:
    return _ENV_HEADER + "export SVC_CLOUD_TOKEN=%s\n" % sh_single_quote(token)


def guard_line(paths: Paths) -> bytes:
    target = paths.cluster_env
    try:
        rel = target.relative_to(paths.home)
        where = '"$HOME/%s"' % rel.as_posix()
    except ValueError:
        where = sh_single_quote(str(target))
    line = "if [ -r %s ]; then . %s; fi  " % (where, where)
    return line.encode("utf-8") + GUARD_MARKER


def _read_cloud_token(paths: Paths) -> Optional[str]:
    data = load_layer(paths.cluster_cloud)
    value = flatten(data).get(CLOUD_TOKEN_KEY)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProjectionError("%s: %s must be a string" % (paths.cluster_cloud, CLOUD_TOKEN_KEY))
    if "\x00" in value:
        raise ProjectionError("%s: %s contains a NUL byte and cannot live in the environment"
                              % (paths.cluster_cloud, CLOUD_TOKEN_KEY))
    return value or None


def _project_env_file(paths: Paths, token: Optional[str]) -> str:
    target = paths.cluster_env
    if token is None:
        try:
            os.unlink(str(target))
        except FileNotFoundError:
            return "absent"
        return "removed"
    wanted = env_file_text(token).encode("utf-8")
    try:
        with open(str(target), "rb") as fh:
            current = fh.read(len(wanted) + 1)
        mode = os.stat(str(target)).st_mode & 0o7777
    except FileNotFoundError:
        current, mode = None, None
    if current == wanted and mode == 0o600 and not target.is_symlink():
        return "unchanged"
    write_bytes_atomic(target, wanted, 0o600)
    return "written" if current is None else "updated"


def _ensure_guard(paths: Paths) -> str:
    # Follow a symlinked ~/.zshenv (dotfile managers) so the link itself survives.
    real = Path(os.path.realpath(str(paths.zshenv)))
    line = guard_line(paths)
    try:
        st = os.stat(str(real))
    except FileNotFoundError:
        write_bytes_atomic(real, line + b"\n", 0o644)
        return "added"
    if st.st_size > _MAX_ZSHENV_BYTES:
        raise ProjectionError("%s is larger than %d bytes; not editing it" % (paths.zshenv, _MAX_ZSHENV_BYTES))
    with open(str(real), "rb") as fh:
        original = fh.read(_MAX_ZSHENV_BYTES + 1)
    lines = original.split(b"\n")
    ours = [i for i, text in enumerate(lines) if GUARD_MARKER in text]
    if len(ours) == 1 and lines[ours[0]] == line:
        return "unchanged"
    if ours:
        # Keep the first position, drop duplicates; every other line stays byte for byte.
        lines[ours[0]] = line
        for i in reversed(ours[1:]):
            del lines[i]
        updated = b"\n".join(lines)
        action = "updated"
    else:
        updated = original
        if updated and not updated.endswith(b"\n"):
            updated += b"\n"
        updated += line + b"\n"
        action = "added"
    write_bytes_atomic(real, updated, st.st_mode & 0o7777)
    return action


def project_cloud_env(paths: Paths) -> Dict[str, Any]:
    """Project the cloud token into cluster.env and the ~/.zshenv guard.

    Returns a token-free report; never raises for bad input or I/O trouble
    (the monitor calls this on a timer), it reports `ok: false` with `error`.
    """
    report: Dict[str, Any] = {
        "ok": True,
        "token": "absent",
        "source": str(paths.cluster_cloud),
        "envFile": str(paths.cluster_env),
        "envFileAction": "unchanged",
        "zshenv": str(paths.zshenv),
        "guardAction": "not-needed",
        "changed": False,
    }
    try:
        # The monitor projects every few minutes while an operator may run the CLI.
        with lock_file(paths.config_dir / ".cluster-env.lock"):
            token = _read_cloud_token(paths)
            report["token"] = "present" if token is not None else "absent"
            report["envFileAction"] = _project_env_file(paths, token)
            if token is not None:
                report["envFileMode"] = "0600"
                report["guardAction"] = _ensure_guard(paths)
    except (ConfigError, ProjectionError) as exc:
        report.update(ok=False, error=str(exc))
    except OSError as exc:
        report.update(ok=False, error="%s: %s" % (exc.filename or "I/O", exc.strerror or exc))
    report["changed"] = report["envFileAction"] in ("written", "updated", "removed") or \
        report["guardAction"] in ("added", "updated")
    return report


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


MAX_LOG_BYTES = 10 * 1024 * 1024


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
    log_fd = os.open(str(log_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        offset = os.fstat(log_fd).st_size
        os.write(log_fd, ("--- svc-stack start %s ---\n" % iso_now()).encode("utf-8"))
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

def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def _monitor_args(ns: argparse.Namespace) -> Optional[List[str]]:
    out: List[str] = []
    if ns.bind is not None:
        out += ["--bind", ns.bind]
    if ns.port is not None:
        out += ["--port", str(ns.port)]
    if ns.no_probe:
        out.append("--no-probe")
    return out or None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a port number: %r" % text) from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("port out of range: %d" % value)
    return value


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


def _cmd_start(paths: Paths, ns: argparse.Namespace, restart: bool) -> int:
    with lock_file(paths.run_dir / "monitor.lock"):  # two starts must not launch two monitors
        return _cmd_start_locked(paths, ns, restart)


def _cmd_start_locked(paths: Paths, ns: argparse.Namespace, restart: bool) -> int:
    args = _monitor_args(ns)
    stopped: Dict[str, Any] = {}
    if restart:
        if args is None:
            args = _previous_args(paths)
        stopped = stop(paths, _env_float("SVC_STACK_STOP_TIMEOUT_S", 10.0))
    result = start(paths, args or [], _env_float("SVC_STACK_START_TIMEOUT_S", 20.0))
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


def _cmd_stop(paths: Paths, ns: argparse.Namespace) -> int:
    with lock_file(paths.run_dir / "monitor.lock"):
        result = stop(paths, ns.timeout if ns.timeout else _env_float("SVC_STACK_STOP_TIMEOUT_S", 10.0))
    if result["stopped"]:
        text = "svc-stack: monitor stopped (pid %d%s)" % (result["pid"], ", after SIGKILL" if result["killed"] else "")
    elif result["stalePidfileRemoved"]:
        text = "svc-stack: monitor not running (stale pidfile removed)"
    else:
        text = "svc-stack: monitor not running"
    _emit(ns.json, result, text)
    return 0


def _cmd_status(paths: Paths, ns: argparse.Namespace) -> int:
    result = status(paths)
    if result["running"]:
        text = "svc-stack: monitor running (pid %d)%s since %s; log %s" % (
            result["pid"], " at %s" % result["url"] if result["url"] else "",
            result["startedAt"] or "unknown", result["log"])
    else:
        text = "svc-stack: monitor not running%s" % (" (stale pidfile)" if result["stalePidfile"] else "")
    _emit(ns.json, result, text)
    # LSB convention: 3 = not running.
    return 0 if result["running"] else 3


def _cmd_sync_cloud_env(paths: Paths, ns: argparse.Namespace) -> int:
    report = project_cloud_env(paths)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="svc-stack",
        description="Run this node's monitor in the background and project the cloud token. "
                    "The monitor runs detached as `python -m %s monitor`, with its pid in "
                    "~/svc/run/monitor.pid and its output in ~/svc/logs/monitor.log." % PACKAGE,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def monitor_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bind", help="address for the monitor to listen on (passed to svc-monitor)")
        p.add_argument("--port", type=_port, help="port for the monitor (passed to svc-monitor; 0 = any free port)")
        p.add_argument("--no-probe", action="store_true", help="start the monitor with the account probe disabled")
        p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = sub.add_parser("start", help="start the monitor detached unless it is already running",
                       description="Start the monitor detached. A pidfile whose process is gone or is not "
                                   "our monitor is replaced. Waits until the monitor serves "
                                   "($SVC_STACK_START_TIMEOUT_S, default 20 s).")
    monitor_options(p)
    p.set_defaults(func=lambda paths, ns: _cmd_start(paths, ns, restart=False))

    p = sub.add_parser("restart", help="stop the monitor, wait for it to exit, start it again",
                       description="Stop (SIGTERM, then SIGKILL after the stop timeout), wait for the old "
                                   "process to exit, then start. Without --bind/--port/--no-probe the "
                                   "previous start's options are reused. Re-arms the liveness publisher.")
    monitor_options(p)
    p.set_defaults(func=lambda paths, ns: _cmd_start(paths, ns, restart=True))

    p = sub.add_parser("stop", help="stop the monitor (SIGTERM, SIGKILL after a timeout)",
                       description="Send SIGTERM and wait for the monitor to exit; SIGKILL after --timeout "
                                   "seconds ($SVC_STACK_STOP_TIMEOUT_S, default 10). Not running is not an error.")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait before SIGKILL")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_cmd_stop)

    p = sub.add_parser("status", help="is the monitor running? (exit 0 running, 3 not running)",
                       description="Report pid, URL, start time and log of the monitor. Exit status 0 when "
                                   "it runs, 3 when it does not (LSB convention).")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_cmd_status)

    p = sub.add_parser("sync-cloud-env", help="project the cloud token into ~/.config/svc/cluster.env",
                       description="Write SVC_CLOUD_TOKEN from ~/.config/svc/cluster-cloud.json into "
                                   "~/.config/svc/cluster.env (mode 0600, atomic) and make sure ~/.zshenv has "
                                   "exactly one guard line sourcing it. Without a token the env file is "
                                   "removed. The report never contains the token.")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_sync_cloud_env)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if not getattr(ns, "func", None):
        parser.print_help(sys.stderr)
        return 2
    paths = Paths()
    try:
        return int(ns.func(paths, ns))
    except StackError as exc:
        print("svc-stack: %s" % exc, file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise
        print("svc-stack: %s: %s" % (exc.filename or "I/O error", exc.strerror or exc), file=sys.stderr)
        return 1
