"""Every process a notify hook starts, found again: none outlives its timeout or the monitor.

A hook runs in a session of its own, so killing its process group ends what it
started in that group. A grandchild that calls setsid() leaves the group;
on Linux three mechanisms still find it:

- cgroup: a cgroup v2 directory below the monitor's own (when the cgroup2
  hierarchy is mounted and writable by the monitor, checked at run time by
  moving a throwaway shell into it). Each hook moves itself in before it runs
  the operator's command, so everything it starts stays inside whatever it
  does with sessions, and `cgroup.kill` (or SIGKILL to each listed pid) ends it all.
- subreaper: the monitor marks itself a child subreaper
  (prctl PR_SET_CHILD_SUBREAPER, through ctypes), so an orphaned descendant is
  re-parented to the monitor instead of init. Every child of the monitor that
  the monitor did not start (every child is started through _spawn.popen, which
  notes it) is such an orphan, and is killed and reaped after each hook and at
  stop, whatever it did to its session, its environment or its cgroup.
- the tag: each hook's environment carries this monitor's tag, and descendants
  still attached to a live parent are found by it in /proc/*/environ.

The subreaper is armed with the cgroup too: a descendant that moves itself out
of the hook cgroup (a process may write any cgroup.procs its user can write,
and the monitor's own cgroup is its user's) is orphaned when the cgroup is
killed, and then adopted and killed. What still escapes is in docs/defences.md.
Elsewhere only the process group is killed, and the start-up log says so.
SVC_ALERT_HOOK_CGROUP=0 (Settings.alert_hook_cgroup, handed in as use_cgroup=False) skips the
cgroup (the subreaper sweep is used).
Standard library only; nothing here raises.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from .._spawn import StartedChildren, run, start_time

log = logging.getLogger("svcposture.notify")

TAG_VAR = "SVC_ALERT_HOOK_OF"
PR_SET_CHILD_SUBREAPER = 36
# The shell that moves itself into the cgroup, then becomes the hook. The
# cgroup.procs path and the command are arguments, never part of the script.
_ENTER = '{ echo $$ > "$1"; } 2>/dev/null; shift; exec /bin/sh -c "$1"'
_KILL_WAIT_S = 2.0


class HookCage:
    """How this monitor confines its hooks: `wrap()` a hook's argv and env, `sweep()` after it."""

    def __init__(self, *, use_cgroup: bool = True) -> None:
        self.pid = os.getpid()
        self.tag = "%d.%d" % (self.pid, start_time(self.pid) or 0)
        self.cgroup: Optional[str] = None
        self.subreaper = False
        if not sys.platform.startswith("linux"):
            self.mode = "group"
            log.info("alert hooks: not Linux, so only a hook's process group is killed at its timeout "
                     "and at stop; a process it moves to a new session is not tracked")
            return
        reason = None if use_cgroup else "SVC_ALERT_HOOK_CGROUP=0"
        if reason is None:
            self.cgroup, reason = _make_cgroup(self.pid)
        self.subreaper = _set_subreaper()
        if self.cgroup is not None:
            self.mode = "cgroup"
            log.info("alert hooks run in cgroup %s: none of their processes outlives the hook%s", self.cgroup,
                     "; what leaves it is adopted by the monitor and killed" if self.subreaper else "")
            return
        self.mode = "subreaper" if self.subreaper else "group"
        log.info("alert hooks: no cgroup (%s); %s", reason,
                 "the monitor adopts their orphans (child subreaper) and kills every one it did not start"
                 if self.subreaper else "prctl failed too, so only a hook's process group is killed")

    def wrap(self, argv: List[str], env: Dict[str, str]) -> Tuple[List[str], Dict[str, str]]:
        env = dict(env, **{TAG_VAR: self.tag})
        if self.cgroup is None:
            return argv, env
        return ["/bin/sh", "-c", _ENTER, "svc-alert-hook", os.path.join(self.cgroup, "cgroup.procs")] + argv[2:], env

    def sweep(self, hook_pid: Optional[int] = None) -> int:
        """Kill every process the hooks left beyond the hook's own group (which the
        caller kills and reaps): the cgroup, the tagged descendants other than
        `hook_pid`, and every adopted orphan, until none is left or a short deadline
        passes. Returns how many processes were signalled."""
        killed = 0
        deadline = time.monotonic() + _KILL_WAIT_S
        while True:
            found = _kill_cgroup(self.cgroup) if self.cgroup is not None else 0
            if self.subreaper:
                found += self._kill_strays(hook_pid)
            killed += found
            if not found or time.monotonic() > deadline:
                return killed
            time.sleep(0.02)

    def _kill_strays(self, hook_pid: Optional[int]) -> int:
        """SIGKILL the tagged descendants and the children this process did not start;
        reap the adopted zombies. Held under the started-children lock, so a child being
        started right now is never taken for an orphan."""
        with StartedChildren() as children:
            table = _process_table()
            ours = {(pid, int(f[19])) for pid, f in table.items() if int(f[1]) == self.pid}
            strays = set(p for p in _tagged_descendants(table, self.pid, self.tag) if table[p][0] != "Z")
            for pid, start in ours:
                if pid != hook_pid and not children.started(pid, start):
                    if table[pid][0] == "Z":
                        _reap_quietly(pid)
                    else:
                        strays.add(pid)
            strays.discard(hook_pid or -1)
            for pid in strays:
                _signal(pid, signal.SIGKILL)
            children.forget_all_but(iter(ours))
        return len(strays)

    def close(self, hook_pid: Optional[int] = None) -> None:
        """Kill what the hooks left (the running hook `hook_pid` is the caller's to
        kill and reap), and remove the cgroup directory."""
        self.sweep(hook_pid)
        if self.cgroup is None:
            return
        deadline = time.monotonic() + _KILL_WAIT_S
        while True:
            try:
                os.rmdir(self.cgroup)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    log.warning("alert hooks: cgroup %s could not be removed", self.cgroup)
                    return
                _kill_cgroup(self.cgroup)
                time.sleep(0.02)


# ---------------------------------------------------------------- cgroup v2

def _own_cgroup_dir() -> Tuple[Optional[str], str]:
    """(the directory of this process's cgroup v2, why not)."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            unified = [line.rstrip("\n")[3:] for line in fh if line.startswith("0::")]
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            mounts = [line.split() for line in fh]
    except OSError as exc:
        return None, "cannot read /proc: %s" % (exc.strerror or exc)
    if not unified:
        return None, "no cgroup v2 membership"
    for fields in mounts:
        if "-" in fields and fields[fields.index("-") + 1:fields.index("-") + 2] == ["cgroup2"]:
            root, mount_point = fields[3], fields[4]
            path = unified[0]
            if root != "/" and path.startswith(root):
                path = path[len(root):]
            return os.path.join(mount_point, path.lstrip("/")), ""
    return None, "no cgroup2 hierarchy mounted"


def _make_cgroup(pid: int) -> Tuple[Optional[str], str]:
    parent, why = _own_cgroup_dir()
    if parent is None:
        return None, why
    if not os.access(parent, os.W_OK):
        return None, "%s is not writable" % parent
    _remove_stale_cgroups(parent)
    path = os.path.join(parent, "svc-alert-hooks.%d" % pid)
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except OSError as exc:
        return None, "cannot create %s: %s" % (path, exc.strerror or exc)
    # Writable on paper is not enough (delegation, nsdelegate): move a throwaway shell in.
    try:
        code = run(["/bin/sh", "-c", 'echo $$ > "$1"', "svc-cgroup-check", os.path.join(path, "cgroup.procs")],
                   stdin=subprocess.DEVNULL, timeout=10).returncode
    except (OSError, subprocess.SubprocessError):
        code = -1
    if code != 0:
        _rmdir_quietly(path)
        return None, "cannot move a process into %s" % path
    return path, ""


def _remove_stale_cgroups(parent: str) -> None:
    """Empty hook cgroups of monitors that died without removing theirs."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith("svc-alert-hooks.")]
    except OSError:
        return
    for name in names:
        pid = name.rpartition(".")[2]
        if pid.isdigit() and not os.path.exists("/proc/%s" % pid):
            _rmdir_quietly(os.path.join(parent, name))  # fails, harmlessly, while it holds a process


def _rmdir_quietly(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def _kill_cgroup(path: str) -> int:
    procs = _cgroup_pids(path)
    if not procs:
        return 0
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as fh:
            fh.write("1")
    except OSError:  # before Linux 5.14: one pid at a time, until none is left
        deadline = time.monotonic() + _KILL_WAIT_S
        while procs and time.monotonic() < deadline:
            for pid in procs:
                _signal(pid, signal.SIGKILL)
            time.sleep(0.01)
            procs = _cgroup_pids(path)
    return len(procs)


def _cgroup_pids(path: str) -> List[int]:
    try:
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as fh:
            return [int(line) for line in fh if line.strip().isdigit()]
    except OSError:
        return []


# ---------------------------------------------------------------- subreaper and /proc

def _set_subreaper() -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, ImportError):
        return False


def _stat_fields(pid: int) -> Optional[List[str]]:
    """The fields of /proc/PID/stat after the command name (which may hold spaces):
    [0] state, [1] ppid, [2] process group, [3] session, [19] start time."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].decode("ascii", "replace").split()
    return fields if len(fields) > 19 else None


def _process_table() -> Dict[int, List[str]]:
    table: Dict[int, List[str]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            fields = _stat_fields(int(name))
            if fields is not None:
                table[int(name)] = fields
    return table


def _tagged_descendants(table: Dict[int, List[str]], root: int, tag: str) -> List[int]:
    """The descendants of `root` whose environment (as they were started) holds the tag."""
    children: Dict[int, List[int]] = {}
    for pid, fields in table.items():
        children.setdefault(int(fields[1]), []).append(pid)
    marker = ("%s=%s" % (TAG_VAR, tag)).encode()
    found: List[int] = []
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        try:
            with open("/proc/%d/environ" % pid, "rb") as fh:
                if marker in fh.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            pass
    return found


def _reap_quietly(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass

