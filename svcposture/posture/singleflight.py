"""SingleFlight: at most one run of a slow read at a time, in a thread of its own.

Every caller that needs the read while one runs joins that run instead of
starting another, and waits for it only as long as it chooses: the run goes
on in its own thread, so a caller that gives up leaves it to finish for the
next one. /api/fleet reads the tracker (or Loki) this way (fleet.FleetCache).
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Optional

log = logging.getLogger("svcposture.posture")


class SingleFlight:
    """Runs `run()` in a daemon thread named `name`, one run at a time.

    `run` stores its own result (under its owner's lock) before the run counts
    as done; an exception it raises is logged and ends the run.
    """

    def __init__(self, run: Callable[[], None], name: str) -> None:
        self._run = run
        self._name = name
        self._lock = threading.Lock()
        self._done: Optional[threading.Event] = None

    def join(self) -> threading.Event:
        """The Event set when the run in flight ends, starting a run when none is in flight."""
        with self._lock:
            done = self._done
            if done is None:
                done = self._done = threading.Event()
                threading.Thread(target=self._fly, args=(done,), name=self._name, daemon=True).start()
            return done

    @property
    def in_flight(self) -> bool:
        return self._done is not None

    def _fly(self, done: threading.Event) -> None:
        try:
            self._run()
        except Exception as exc:  # the owner's read failed past its own handling: never kill the thread silently
            log.warning("%s failed: %s: %s", self._name, type(exc).__name__, exc)
        finally:
            with self._lock:
                self._done = None
            done.set()
