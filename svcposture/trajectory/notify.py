"""The operator's notify hook, $SVC_ALERT_CMD (docs/trajectory.md).

Each alert (and each account.status.changed edge) is queued; one worker
thread runs `/bin/sh -c "$SVC_ALERT_CMD"` per event, one at a time, with the
event as one JSON line on stdin and the token-free environment of the probe
child. A hook gets 10 s; then its whole process group is killed, and so is
every process it started in a session of its own (hookcage: a cgroup, or the
monitor as child subreaper and a sweep of its descendants). Stopping the
notifier (the monitor stopping) kills the running hook the same way. Its output
goes to /dev/null (a hook that floods stdout cannot fill
memory or block). The queue holds 100 events; beyond that the oldest is
dropped with one log line. Nothing here ever blocks a probe or a reply.
"""
from __future__ import annotations

import collections
import json
import logging
import threading
import time
from typing import Any, Deque, Dict, Mapping, Optional

from .._spawn import child_env, kill_group, popen
from ..settings import Settings

log = logging.getLogger("svcposture.notify")

DEFAULT_TIMEOUT_S = 10.0
QUEUE_LIMIT = 100


class Notifier:
    """Runs the hook for each submitted event, in order, off the caller's thread."""

    def __init__(self, command: str, environ: Mapping[str, str], *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 limit: int = QUEUE_LIMIT, settings: Optional[Settings] = None) -> None:
        self.command = command
        self.env = child_env(environ)
        self.use_cgroup = (Settings.from_environ(environ) if settings is None else settings).alert_hook_cgroup
        self.timeout_s = timeout_s
        self.limit = limit
        self._queue: Deque[Dict[str, Any]] = collections.deque()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: Optional[threading.Thread] = None
        self._cage: Any = None
        self._running: Any = None  # the hook's Popen while one runs
        self.runs = 0
        self.failures = 0
        self.dropped = 0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], settings: Optional[Settings] = None) -> Optional["Notifier"]:
        """The hook of `settings` (default: those of `environ`), or None when there is none;
        it runs with the token-free copy of `environ`."""
        command = (Settings.from_environ(environ) if settings is None else settings).alert_cmd
        return cls(command, environ, settings=settings) if command.strip() else None

    def start(self) -> None:
        if self._thread is None:
            from .hookcage import HookCage
            self._cage = HookCage(use_cgroup=self.use_cgroup)
            self._thread = threading.Thread(target=self._run, name="svc-alert-hook", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop taking events and kill the running hook with everything it started."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            running = self._running
        if running is not None:
            kill_group(running.pid)
        if self._cage is not None:
            self._cage.close(running.pid if running is not None else None)

    def submit(self, event: Mapping[str, Any]) -> None:
        """Queue one event; never blocks. Overflow drops the oldest queued event."""
        with self._cond:
            if len(self._queue) >= self.limit:
                self._queue.popleft()
                self.dropped += 1
                log.warning("alert hook queue full (%d); dropped the oldest event", self.limit)
            self._queue.append(dict(event))
            self._cond.notify()

    def idle(self) -> bool:
        with self._cond:
            return not self._queue and not self._busy

    _busy = False

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopped or bool(self._queue))
                if self._stopped:
                    return
                event = self._queue.popleft()
                self._busy = True
            try:
                self._run_one(event)
            except Exception as exc:  # noqa: BLE001 - the worker must survive anything
                self.failures += 1
                log.warning("alert hook failed: %s", type(exc).__name__)
            finally:
                with self._cond:
                    self._busy = False

    def _run_one(self, event: Mapping[str, Any]) -> None:
        import subprocess

        name = str(event.get("attributes", {}).get("event.name", "event"))
        data = (json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
        self.runs += 1
        argv, env = self._cage.wrap(["/bin/sh", "-c", self.command], self.env)
        with self._cond:
            if self._stopped:
                return
            try:
                proc = popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env, start_new_session=True, close_fds=True)
            except OSError as exc:
                self.failures += 1
                log.warning("alert hook could not start for %s: %s", name, exc.strerror or exc)
                return
            self._running = proc
        feeder = threading.Thread(target=_feed, args=(proc, data), daemon=True)
        feeder.start()
        try:
            code = self._wait(proc, time.monotonic() + self.timeout_s)
        finally:
            # A hook that left children behind, in its group or a session of their own, does not keep them.
            kill_group(proc.pid)
            self._cage.sweep(proc.pid)
            proc.wait()
            with self._cond:
                self._running = None
            feeder.join(1.0)
        if code is None:
            self.failures += 1
            log.warning("alert hook for %s ran over %.0f s; its processes were killed", name, self.timeout_s)
        elif code != 0 and not self._stopped:
            self.failures += 1
            log.warning("alert hook for %s exited with status %d", name, code)

    def _wait(self, proc: Any, deadline: float) -> Optional[int]:
        """The hook's exit status, or None when it ran past `deadline`."""
        import subprocess

        try:
            return proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None


def _feed(proc: Any, data: bytes) -> None:
    # A hook that reads nothing closes its stdin (or never reads): a broken pipe
    # or a full pipe must not hold the worker, so the write is its own thread.
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except OSError:
        pass

