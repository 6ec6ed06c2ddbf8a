"""How the package starts Python children of itself, vendored or not.

A vendored copy is imported as e.g. `hostpkg._vendor.svcposture`; its children
must run that copy (`python -m hostpkg._vendor.svcposture.probe`), found through
PYTHONPATH, and must never inherit a token from the caller's environment.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any, Dict, Iterator, List, Mapping, Optional, Set, Tuple

from .vendors import registered

CLOUD_TOKEN_VAR = "SVC_CLOUD_TOKEN"

# This module sits at the package's top level, so its parent is the package.
PACKAGE = __name__.rpartition(".")[0]


def import_root() -> str:
    """The directory to put on sys.path so that PACKAGE imports: one level up per dotted part."""
    root = os.path.dirname(os.path.abspath(__file__))
    for _ in PACKAGE.split("."):
        root = os.path.dirname(root)
    return root


def is_token_var(name: str) -> bool:
    """The cloud token, or any registered vendor's account or active variable (MODEL_TOKEN_*, CODEX_HOME, ...)."""
    return name == CLOUD_TOKEN_VAR or any(vendor.lines.owns_var(name) for vendor in registered())


def without_tokens(environ: Mapping[str, str]) -> Dict[str, str]:
    """A copy of `environ` with no cloud token and no variable of any vendor's lines: which
    accounts a child probes, and which one is active, is the accounts env file's say alone."""
    return {k: v for k, v in environ.items() if not is_token_var(k)}


def child_env(environ: Mapping[str, str], **extra: str) -> Dict[str, str]:
    """`environ` without tokens, with this copy of the package importable, plus `extra`.

    `extra` is set last, so a caller's own variables (PYTHON, SVC_ACCOUNTS_ENV
    for the probe child) win over anything inherited.
    """
    env = without_tokens(environ)
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = import_root() + (os.pathsep + existing if existing else "")
    env.update(extra)
    return env


# `python -m` puts the working directory first on sys.path, so a child started from a directory
# another user can write would import a `svcposture/` planted there, as the operator. Children run
# this instead: every relative entry (the working directory among them) leaves sys.path before
# anything is imported, then the module runs as `-m` runs it. Only `os` and `sys`, loaded by the
# interpreter before it looks at sys.path, are imported first. `-m <module>` stays on the command
# line (as arguments), so ps, svc-stack and pkill patterns still recognise the command.
ISOLATED_MAIN = ("import os, sys; sys.path[:] = [p for p in sys.path if p and os.path.isabs(p)]; "
                 "module = sys.argv[2]; del sys.argv[1:3]; import runpy; "
                 "runpy.run_module(module, run_name='__main__', alter_sys=True)")


def module_command(submodule: str = "", *args: str) -> List[str]:
    """The argv that runs `python -m <PACKAGE>[.submodule] args...` with the running interpreter,
    importing nothing from the working directory: every child of the package starts this way."""
    module = PACKAGE + ("." + submodule if submodule else "")
    return [sys.executable or "python3", "-c", ISOLATED_MAIN, "-m", module] + list(args)


# ---------------------------------------------------------------- the children this process started

# (pid, start time) of every child started through popen(). A process that marks itself a child
# subreaper (the hook cage) adopts the orphans of its descendants; these tell its own children
# from the adopted. The lock is held from fork to registration, and by whoever judges.
_started: Set[Tuple[int, int]] = set()
_started_lock = threading.RLock()


def start_time(pid: int) -> Optional[int]:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22), or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def popen(argv: List[str], **kwargs: Any) -> "subprocess.Popen[bytes]":
    """subprocess.Popen, noting the child as one this process started. Every child of a
    long-running process of the package starts here, or a subreaper sweep takes it for an orphan."""
    with _started_lock:
        proc = subprocess.Popen(argv, **kwargs)
        _started.add((proc.pid, start_time(proc.pid) or 0))
    return proc


def run(argv: List[str], *, input: Optional[bytes] = None, timeout: float,  # noqa: A002
        **kwargs: Any) -> "subprocess.CompletedProcess[bytes]":
    """subprocess.run(capture_output=True) through popen(); the child is killed at the timeout."""
    stdin = kwargs.pop("stdin", None)
    if input is not None:
        stdin = subprocess.PIPE
    proc = popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
    with proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


class StartedChildren:
    """While held (a context manager), no child is being started: `started(pid, start)` says
    whether a process is one this process started; entries of processes gone are dropped."""

    def __enter__(self) -> "StartedChildren":
        _started_lock.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        _started_lock.release()

    @staticmethod
    def started(pid: int, start: int) -> bool:
        return (pid, start) in _started

    @staticmethod
    def forget_all_but(alive: Iterator[Tuple[int, int]]) -> None:
        keep = set(alive)
        _started.intersection_update(keep)


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (a child started with
    start_new_session=True), so that whatever it started dies with it.

    A group already gone, or one we may no longer signal, is left alone: the
    caller reaps the child either way.
    """
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
