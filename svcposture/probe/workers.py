"""The child's exchange workers: a pool of daemon threads that never holds the exit.

    pool = Workers(max_workers)
    future = pool.submit(fn, *args)    a concurrent.futures.Future

The child abandons the exchanges still running at a deadline and exits at
once. concurrent.futures.ThreadPoolExecutor joins its threads when the
interpreter exits, so one exchange stuck on a slow provider would hold the
child (and its parent's read) until that exchange's own timeout. These
threads are daemons: the interpreter does not wait for them.
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, List


class Workers:
    """Up to `max_workers` daemon threads, started as work comes, taking calls in order.
    Submit from one thread (the sweep's)."""

    def __init__(self, max_workers: int) -> None:
        self._max = max(1, max_workers)
        self._calls: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._threads: List[threading.Thread] = []

    def submit(self, fn: Callable[..., Any], *args: Any) -> "Future[Any]":
        future: "Future[Any]" = Future()
        self._calls.put((future, fn, args))
        # One thread per call up to the limit (a sweep submits from one thread, a few calls).
        if len(self._threads) < self._max:
            thread = threading.Thread(target=self._work, name="probe-exchange", daemon=True)
            self._threads.append(thread)
            thread.start()
        return future

    def _work(self) -> None:
        while True:
            future, fn, args = self._calls.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # the exchange's failure is its future's, not the thread's
                    future.set_exception(exc)
