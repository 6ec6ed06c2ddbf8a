"""The parent side of a probe: start the token-scoped child, bound it, read its answer.

The parent (the monitor, the doctor, the library) opens the accounts env
file once without reading it, checks that descriptor (fstat), and starts a
child through `/bin/sh` with it, which sources `/dev/fd/N` and `exec`s
`python -m svcposture.probe headers|usage|login|check --json --child --env-fd N`.
The child inherits no token variable, so only the file decides; it is killed
at the sweep deadline. What comes back is token-free JSON (docs/posture.md):
its last JSON line, and, for a header run given a `VendorLines`, each vendor's
own line handed on as soon as it arrives (`vendorlines`).

The child's half lives in `child` (the sweep) and each vendor's package
(`claude/`, `codex/`); `text` words a result for a person; `command` is the
command line. Run by hand, `python -m svcposture.probe headers --json` does the
parent half, so the result is exactly what the monitor would see.
"""
from __future__ import annotations

import errno
import os
import shlex
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from .._dirs import unsafe_dir_reason
from .._spawn import child_env, kill_group, module_command, popen
from ..envfile.entries import MAX_ENV_FILE_BYTES
from ..errors import MESSAGES, error
from ..paths import Paths
from .._text import is_int
from ..envfile.shellword import syntax_error_line
from ..settings import ACCOUNTS_ENV_ENV, DEADLINE_AT_ENV, DEADLINE_ENV, sweep_deadline_s
from .vendorlines import VendorLines

# What the parent keeps of the child's stdout; a runaway file cannot fill memory.
MAX_CHILD_OUTPUT = 4 * 1024 * 1024
# What it keeps of the shell's stderr, where only a syntax error's line number is looked for.
MAX_SHELL_STDERR = 64 * 1024


class Cancel(Protocol):
    """What stops a child early: `is_set()` is asked at every look at the running child (a
    threading.Event set when the monitor stops, or a probe batch that no one waits for any more)."""

    def is_set(self) -> bool:
        ...


def _state_of(st: os.stat_result) -> Tuple[str, Optional[Dict[str, Any]]]:
    """('empty'|'ready'|'error', error) of the accounts env file's stat."""
    if not stat.S_ISREG(st.st_mode):
        return "error", error("config", MESSAGES["config"].not_regular_file)
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "error", error("config", MESSAGES["config"].group_writable)
    # Whoever owns the file can run code as this user through it.
    if st.st_uid not in (os.geteuid(), 0):
        return "error", error("config", MESSAGES["config"].foreign_owner)
    if st.st_size == 0:
        return "empty", None
    if st.st_size > MAX_ENV_FILE_BYTES:
        return "error", error("config", MESSAGES["config"].too_large)
    return "ready", None


def _directory_problem(path: "os.PathLike[str] | str") -> Optional[Dict[str, Any]]:
    # Another user who may write the directory can swap the file for their own
    # at any moment; no check of the file itself helps then.
    if unsafe_dir_reason(os.path.dirname(os.path.abspath(str(path)))) is not None:
        return error("config", MESSAGES["config"].open_directory)
    return None


def open_env_file(path: "os.PathLike[str] | str") -> Tuple[str, Any]:
    """The accounts env file opened once for the child to source: ('ready', fd),
    ('missing'|'empty', None) or ('error', the error).

    Checking a path and then letting /bin/sh open the path again leaves a
    window in which the file can be swapped; so the descriptor itself is
    checked (fstat: regular file, owner, mode, size) and the child sources
    /dev/fd/N, never the path. The parent never reads from it. O_NOFOLLOW
    refuses a planted symlink; O_NONBLOCK keeps a FIFO from blocking the open.
    """
    problem = _directory_problem(path)
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return "missing", None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "error", error("config", MESSAGES["config"].symlink)
        return "error", error("config", MESSAGES["config"].unreadable)
    try:
        state, found = ("error", problem) if problem is not None else _state_of(os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    if state != "ready":
        os.close(fd)
        return state, found
    return "ready", fd


def child_command(subcommand: str, env_fd: Optional[int] = None, vendors: Sequence[str] = ()) -> List[str]:
    """The child's argv (`vendors`: only those vendors' accounts): through /bin/sh sourcing the
    accounts env file when `env_fd` (the descriptor open_env_file checked) is given.

    The shell sources /dev/fd/N, never the path, and the Python child reads
    the labels from that descriptor too. `--child`, `--env-fd` and `--vendor`
    are on the command line, where the sourced file cannot change them.
    """
    from ..vendors import vendor_named

    for name in vendors:
        if vendor_named(name) is None:
            raise ValueError("no vendor named %r is registered" % (name,))
    # Started as every child of the package is (module_command): nothing is imported from the
    # working directory, which is / here besides. A registered vendor name is lower-case letters,
    # digits and _.
    extra_args = [arg for name in vendors for arg in ("--vendor", name)]
    argv = module_command("probe", subcommand, *extra_args, "--json", "--child")
    if env_fd is not None:
        # The shell's own stderr reaches the parent (shell_syntax_line reads a line
        # number from it); the Python child's never does. What the sourced file prints
        # (its commands and their background jobs) goes to /dev/null: the pipe carries
        # the Python child's lines only.
        args = " ".join(shlex.quote(a) for a in argv[1:] + ["--env-fd", str(env_fd)])
        return ["/bin/sh", "-c",
                'set -a; . /dev/fd/%d >/dev/null; set +a; exec "$PYTHON" %s 2>/dev/null' % (env_fd, args)]
    return argv


# ---------------------------------------------------------------- one child

def _wait_exit(proc: "subprocess.Popen[bytes]", deadline: float, cancel: Optional[Cancel]) -> str:
    """'exited', 'timeout' or 'cancelled'. The child is not reaped, so its process
    group id stays valid (and cannot be reused) until the group has been killed."""
    waitid = getattr(os, "waitid", None)
    delay = 0.001
    while True:
        if waitid is not None:
            try:
                if waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return "exited"
            except ChildProcessError:
                return "exited"
        elif proc.poll() is not None:
            return "exited"
        if cancel is not None and cancel.is_set():
            return "cancelled"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.02)


def _drain(proc: "subprocess.Popen[bytes]", tail: bytearray, lines: Optional[VendorLines] = None) -> None:
    """Read the child's stdout to its end as it comes, keeping only the last MAX_CHILD_OUTPUT bytes:
    the result is the last line, and whatever came before it cannot fill memory. With `lines`, each
    vendor's line is handed on the moment it is read (VendorLines bounds a line the same way)."""
    assert proc.stdout is not None
    while True:
        block = proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else proc.stdout.read(65536)
        if not block:
            return
        if lines is not None:
            lines.feed(block)
        tail.extend(block)
        if len(tail) > MAX_CHILD_OUTPUT:
            del tail[:len(tail) - MAX_CHILD_OUTPUT]


def _drain_bounded(stream: Any, kept: bytearray) -> None:
    """Read `stream` to its end, keeping the first MAX_SHELL_STDERR bytes."""
    while True:
        block = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not block:
            return
        if len(kept) < MAX_SHELL_STDERR:
            kept.extend(block[:MAX_SHELL_STDERR - len(kept)])


def shell_syntax_line(stderr: bytes, env_fd: int) -> Optional[int]:
    """The line of the accounts env file at which the shell reported a syntax
    error, from its own message (dash: `sh: 2: /dev/fd/3: Syntax error: ...`;
    bash: `/dev/fd/3: line 2: syntax error ...`); None when it reported none.

    Only the number is kept: bash goes on to quote the offending line, which may
    hold a token, so nothing else of the message ever leaves this function.
    """
    return syntax_error_line(stderr, b"/dev/fd/%d" % env_fd)


def _last_json_object(out: bytes) -> Optional[Dict[str, Any]]:
    """The last stdout line that is a JSON object, or None."""
    import json

    for line in reversed(out.splitlines()):
        line = line.strip()
        if not line.startswith(b"{"):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            return obj
    return None


def run_child(subcommand: str, environ: Mapping[str, str], *, accounts_env: Optional[Path] = None,
              env_fd: Optional[int] = None, deadline_s: Optional[float] = None,
              cancel: Optional[Cancel] = None, vendors: Sequence[str] = (),
              lines: Optional[VendorLines] = None) -> Dict[str, Any]:
    """Run one probe child and return its JSON object (`vendors`: only those vendors' accounts;
    `lines`: each vendor's own line handed on as soon as it is read).

    With `env_fd` (from open_env_file; the caller closes it), the child is
    started through /bin/sh sourcing that descriptor; `accounts_env`, the
    file's path, is exported to it as $SVC_ACCOUNTS_ENV for information only.
    Always returns a dict: a child that crashes, times out or prints no JSON
    gives `{"error": {...}}` in the fixed vocabulary; a shell that stopped at
    a syntax error in the file gives the config error for it and `"line"`, the
    line the shell named. Of what was written to stderr only that number is
    read, and stdout is used only through its last JSON line (and, with
    `lines`, each asked-for vendor's line). Setting `cancel` kills the child
    early (the monitor is stopping).
    """
    if deadline_s is None:
        deadline_s = sweep_deadline_s(environ)
    proc = _start_child(subcommand, environ, accounts_env, env_fd, float(deadline_s), vendors)
    if proc is None:
        return {"error": error("internal", MESSAGES["internal"].not_started)}
    outcome, out, shell_err = _watch(proc, float(deadline_s), cancel, lines)
    result = _child_result(proc, outcome, out, shell_err, env_fd)
    if env_fd is not None and isinstance(result.get("error"), dict) \
            and result["error"].get("message") in (MESSAGES["config"].shell_syntax, MESSAGES["internal"].no_result):
        return _explained(result, environ, env_fd)
    return result


def _start_child(subcommand: str, environ: Mapping[str, str], accounts_env: Optional[Path], env_fd: Optional[int],
                 deadline_s: float, vendors: Sequence[str]) -> "Optional[subprocess.Popen[bytes]]":
    """The child started in a session of its own, or None when it could not be."""
    extra = {"PYTHON": sys.executable or "python3",
             DEADLINE_ENV: repr(deadline_s),
             # Wall-clock instant of the kill, so that the child's budget includes its own start-up.
             DEADLINE_AT_ENV: repr(time.time() + deadline_s)}
    if accounts_env is not None:
        extra[ACCOUNTS_ENV_ENV] = str(accounts_env)
    try:
        return popen(child_command(subcommand, env_fd, vendors), env=child_env(environ, **extra),
                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE if env_fd is not None else subprocess.DEVNULL,
                     cwd="/", close_fds=True, pass_fds=(env_fd,) if env_fd is not None else (),
                     start_new_session=True)
    except OSError:
        return None


def _watch(proc: "subprocess.Popen[bytes]", deadline_s: float, cancel: Optional[Cancel],
           lines: Optional[VendorLines]) -> Tuple[str, bytes, bytes]:
    """(outcome, the tail of its stdout, the head of the shell's stderr) of a started child: read as
    it runs, killed with its whole session when it exits, at the deadline or on `cancel`."""
    tail, shell_err = bytearray(), bytearray()
    readers = [threading.Thread(target=_drain, args=(proc, tail, lines), name="probe-child-reader", daemon=True)]
    if proc.stderr is not None:
        readers.append(threading.Thread(target=_drain_bounded, args=(proc.stderr, shell_err),
                                        name="probe-shell-stderr", daemon=True))
    for reader in readers:
        reader.start()
    outcome = _wait_exit(proc, time.monotonic() + deadline_s, cancel)
    # The env file may have started background jobs; the whole session goes.
    kill_group(proc.pid)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for reader in readers:
        reader.join(2)
    for stream in (proc.stdout, proc.stderr):
        try:
            if stream is not None:
                stream.close()
        except (OSError, ValueError):
            pass
    return outcome, bytes(tail), bytes(shell_err)


# The text-only child reads a file of at most 1 MiB; it has no network to wait for.
LINES_TIMEOUT_S = 20.0


def _lines_report(environ: Mapping[str, str], env_fd: int) -> Optional[Dict[str, Any]]:
    """The `lines` child's report on the file at `env_fd`: run without the shell, so the
    text is read, never sourced (the shell has just stopped in it)."""
    try:
        proc = popen(child_command("lines") + ["--env-fd", str(env_fd)], env=child_env(environ),
                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                     cwd="/", close_fds=True, pass_fds=(env_fd,), start_new_session=True)
    except OSError:
        return None
    with proc:
        try:
            out, _ = proc.communicate(timeout=LINES_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.communicate()
            return None
    return _last_json_object(out[-MAX_CHILD_OUTPUT:])


def _explained(result: Dict[str, Any], environ: Mapping[str, str], env_fd: int) -> Dict[str, Any]:
    """A shell that stopped in the file, explained from its text: the line where a quote
    that never closes began (the shell names the end of the file) and the lines it takes
    wrongly (`export NAME =value` stops it with no syntax error to name)."""
    report = _lines_report(environ, env_fd)
    if report is None:
        return result
    out = dict(result)
    problems = report.get("lineProblems")
    if isinstance(problems, list) and problems:
        out["lineProblems"] = problems
        if result["error"].get("message") == MESSAGES["internal"].no_result:
            out["error"] = error("config", MESSAGES["config"].shell_syntax)
    line, quote, count = result.get("line"), report.get("quoteLine"), report.get("lineCount")
    if is_int(line) and is_int(quote) and is_int(count) and quote < line and line >= count:
        out.update(line=quote, unclosedQuote=True)
    return out


def _child_result(proc: "subprocess.Popen[bytes]", outcome: str, out: bytes, shell_err: bytes,
                  env_fd: Optional[int]) -> Dict[str, Any]:
    if outcome == "timeout":
        return {"error": error("timeout", MESSAGES["timeout"].sweep_deadline)}
    if outcome == "cancelled":
        return {"error": error("internal", MESSAGES["internal"].stopping)}
    obj = _last_json_object(out)
    if obj is not None:
        return obj
    line = shell_syntax_line(shell_err, env_fd) if env_fd is not None and proc.returncode != 0 else None
    if line is not None:
        return {"error": error("config", MESSAGES["config"].shell_syntax), "line": line}
    if proc.returncode != 0:
        return {"error": error("internal", MESSAGES["internal"].no_result)}
    return {"error": error("internal", MESSAGES["internal"].bad_result)}


# ---------------------------------------------------------------- the three probes

def _sweep(subcommand: str, paths: Paths, environ: Mapping[str, str], deadline_s: Optional[float],
           cancel: Optional[Cancel], vendors: Sequence[str] = (),
           lines: Optional[VendorLines] = None) -> Tuple[str, Dict[str, Any]]:
    """(state, result) of one child over the node's accounts env file: the
    file's state ('missing', 'empty', 'error' or 'ready') and, when ready, the child's report."""
    path = paths.accounts_env
    state, found = open_env_file(path)
    if state == "error":
        return state, {"error": found}
    if state != "ready":
        return state, {}
    try:
        return state, run_child(subcommand, environ, accounts_env=Path(os.path.abspath(str(path))), env_fd=found,
                                deadline_s=deadline_s, cancel=cancel, vendors=vendors, lines=lines)
    finally:
        os.close(found)


def run_headers(paths: Paths, environ: Optional[Mapping[str, str]] = None,
                deadline_s: Optional[float] = None, cancel: Optional[Cancel] = None,
                vendors: Optional[Sequence[str]] = None, lines: Optional[VendorLines] = None) -> Dict[str, Any]:
    """The header sweep as the monitor runs it; `vendors` (registered names): those vendors' accounts
    only (None: every vendor's), in one child (docs/vendors.md).

    Returns `{"available": False}` (disabled), `{"error": {...}}` (node-level
    error) or the child's report `{"available": True, "<vendor>": {...}, ...}`,
    each vendor's block under its name. With `lines` (probe.vendorlines), each
    vendor's own report is handed on as soon as the child prints it, before
    the run ends, so that no vendor waits for another's endpoint; a vendor
    whose line never came is answered from what this returns.
    """
    environ = paths.environ if environ is None else environ
    state, result = _sweep("headers", paths, environ, deadline_s, cancel, vendors or (), lines)
    return result if state in ("ready", "error") else {"available": False}


def run_check(paths: Paths, environ: Optional[Mapping[str, str]] = None,
              deadline_s: Optional[float] = None) -> Dict[str, Any]:
    """The doctor's view, no network: per vendor, its usable entries, active label, duplicate active
    tokens; and the lines the shell takes wrongly."""
    environ = paths.environ if environ is None else environ
    state, result = _sweep("check", paths, environ, deadline_s, None)
    if state in ("ready", "error"):
        return result
    return {"available": False, "file": state}


def run_lines(paths: Paths, environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The lines of the accounts env file the shell takes wrongly, read by a child that does not
    source it: `{"lineProblems", "quoteLine", "lineCount"}`, or `{"error"}`."""
    environ = paths.environ if environ is None else environ
    state, found = open_env_file(paths.accounts_env)
    if state == "error":
        return {"error": found}
    if state != "ready":
        return {"lineProblems": [], "quoteLine": None, "lineCount": 0}
    try:
        report = _lines_report(environ, found)
    finally:
        os.close(found)
    return report if report is not None else {"error": error("internal", MESSAGES["internal"].no_result)}


def run_login(paths: Paths, environ: Optional[Mapping[str, str]] = None,
              deadline_s: Optional[float] = None, cancel: Optional[threading.Event] = None) -> Dict[str, Any]:
    """The interactive login's email (no network), in a token-free child."""
    environ = paths.environ if environ is None else environ
    return run_child("login", environ, deadline_s=deadline_s, cancel=cancel)


def run_usage(paths: Paths, environ: Optional[Mapping[str, str]] = None,
              deadline_s: Optional[float] = None, cancel: Optional[threading.Event] = None) -> Dict[str, Any]:
    """The interactive-login usage probe, in a token-free child."""
    environ = paths.environ if environ is None else environ
    return run_child("usage", environ, deadline_s=deadline_s, cancel=cancel)
