"""singleflight.SingleFlight: callers that need the read while one runs join it."""
from __future__ import annotations

import threading
from typing import List

from svcposture.posture.singleflight import SingleFlight


def test_callers_during_a_run_join_it_and_a_later_caller_starts_another():
    release = threading.Event()
    runs: List[str] = []

    def run() -> None:
        runs.append(threading.current_thread().name)
        assert release.wait(30)

    flight = SingleFlight(run, "svc-test-read")
    events = [flight.join() for _ in range(20)]
    assert all(e is events[0] for e in events) and flight.in_flight
    assert not events[0].wait(0.05)  # a caller may give up; the run goes on
    release.set()
    assert events[0].wait(30)
    assert runs == ["svc-test-read"] and not flight.in_flight
    assert flight.join().wait(30) and len(runs) == 2


def test_a_run_that_raises_ends_and_the_next_caller_starts_afresh():
    calls: List[int] = []

    def run() -> None:
        calls.append(1)
        raise RuntimeError("the tracker said no")

    flight = SingleFlight(run, "svc-test-read")
    assert flight.join().wait(30)
    assert flight.join().wait(30)
    assert calls == [1, 1] and not flight.in_flight
