"""The probe batcher: one token-scoped child for the vendors whose probes start together.

A node runs one posture service per vendor, each with its own cache, single
flight and schedule. When a service's probe starts it asks the node's one
batcher for its vendor's report (`ProbeBatcher.report`) instead of starting
a child of its own. The batcher waits COALESCE_WINDOW_S for other vendors'
requests, then starts ONE child for all of them (`--vendor a --vendor b`),
with the union of their environments. The child prints each vendor's report
as its own line the moment that vendor's exchanges are done or cut by its own
exchange deadline (probe.vendorlines), and the batcher hands each line to its
waiting service at once: no vendor's rows wait for another's endpoint. A
node-level error (the env file refused, the shell stopped in it, the child
crashed or timed out) is every unanswered vendor's answer.

Requests are put in one child only when they agree on what a child is run
with: the accounts env file, the sweep deadline, and every environment
variable both set (a vendor's service adds its own, such as Codex's poll
memory, SVC_CODEX_STATE; two that set one variable differently get a child
each). A service that stops (its `cancel` set) is answered at once; the child
is killed when no request of it is waiting any more, at its deadline at the
latest. The batcher holds no token and reads no file: the runner does what it
did for one vendor's child, for several.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from ..errors import MESSAGES, error
from .vendorlines import VendorLines, one_vendor_report

if TYPE_CHECKING:  # pragma: no cover - types only
    from ..paths import Paths
    from .runner import Cancel

# How long a probe's request waits for other vendors' before their one child starts. A node's
# services start their probes together (all at start(), each periodic tick on the same cadence,
# every service's re-probe after the accounts env file changed), a few milliseconds apart, or tens
# of them on a loaded machine; 50 ms gathers those, and is small beside what it saves (a child's
# start-up is about 100 ms of CPU) and beside the probe itself (a provider's round trip).
COALESCE_WINDOW_S = 0.05


class _Request:
    """One service's wait for its vendor's report."""

    def __init__(self, vendor: str, environ: Mapping[str, str], cancel: Optional["Cancel"]) -> None:
        self.vendor = vendor
        self.environ = environ
        self.cancel = cancel
        self.answered = threading.Event()
        self.report: Optional[Dict[str, Any]] = None


class _Batch:
    """The requests of one child: gathered during the window, answered as the child's lines come."""

    def __init__(self, paths: "Paths", deadline_s: float, window_s: float) -> None:
        self.paths = paths
        self.deadline_s = deadline_s
        self.window_s = window_s
        self.environ: Dict[str, str] = {}
        self.requests: Dict[str, _Request] = {}
        self._lock = threading.Lock()

    def takes(self, paths: "Paths", deadline_s: float, request: _Request) -> bool:
        """Whether `request` can share this child: same file, same deadline, a vendor not yet in
        it, and no environment variable that the two set differently."""
        if str(paths.accounts_env) != str(self.paths.accounts_env) or deadline_s != self.deadline_s \
                or request.vendor in self.requests:
            return False
        merged = self.environ
        return all(merged.get(name, value) == value for name, value in request.environ.items())

    def add(self, request: _Request) -> None:
        self.environ.update(request.environ)
        self.requests[request.vendor] = request

    def run(self) -> None:
        """Start the child (unless no one waits any more) and answer every request from it."""
        from . import runner

        if self.is_set():
            return
        names = list(self.requests)
        lines = VendorLines(names, self.answer)
        result = runner.run_headers(self.paths, self.environ, deadline_s=self.deadline_s, cancel=self,
                                    vendors=names, lines=lines)
        for name in names:
            self.answer(name, one_vendor_report(result, name))

    def answer(self, vendor: str, report: Dict[str, Any]) -> None:
        """Hand `report` to the vendor's waiting service; the first answer of a request is its answer."""
        with self._lock:
            request = self.requests.get(vendor)
            if request is None or request.answered.is_set():
                return
            request.report = report
            request.answered.set()

    def is_set(self) -> bool:
        """The runner's `cancel`, asked at every look at the child: True once no request waits any more.
        A request whose own cancel is set (its service is stopping) is answered here, at once."""
        waiting = False
        for request in list(self.requests.values()):
            if request.answered.is_set():
                continue
            if request.cancel is not None and request.cancel.is_set():
                self.answer(request.vendor, {"error": error("internal", MESSAGES["internal"].stopping)})
            else:
                waiting = True
        return not waiting


class ProbeBatcher:
    """The node's one batcher, handed to every posture service when it is built.

    `window_s` is how long the first request of a child waits for others (COALESCE_WINDOW_S; a
    service built alone, with no node, has a batcher of its own with no window).
    """

    def __init__(self, window_s: float = COALESCE_WINDOW_S) -> None:
        self._window_s = window_s
        self._lock = threading.Lock()
        self._gathering: List[_Batch] = []

    def report(self, paths: "Paths", vendor: str, environ: Mapping[str, str], *, deadline_s: float,
               cancel: Optional["Cancel"] = None, alone: bool = False) -> Dict[str, Any]:
        """`vendor`'s report from a header child over `paths`' accounts env file (what
        `runner.run_headers(vendors=[vendor])` answers), run with `environ`, killed after
        `deadline_s`; answered early, as stopping, once `cancel` is set. Blocks until answered.
        `alone`: a probe someone is waiting for (a forced refresh, a read past the cache, a reset)
        starts its child at once, in no window and in no other vendor's child."""
        request = _Request(vendor, environ, cancel)
        with self._lock:
            batch = None if alone else next((b for b in self._gathering if b.takes(paths, deadline_s, request)), None)
            if batch is None:
                batch = _Batch(paths, deadline_s, 0.0 if alone else self._window_s)
                if not alone:
                    self._gathering.append(batch)
                threading.Thread(target=self._run, args=(batch,), name="probe-batch", daemon=True).start()
            batch.add(request)
        request.answered.wait()
        assert request.report is not None
        return request.report

    def _run(self, batch: _Batch) -> None:
        if batch.window_s > 0:
            time.sleep(batch.window_s)
        with self._lock:
            if batch in self._gathering:
                self._gathering.remove(batch)
        try:
            batch.run()
        finally:
            # Whatever happened, no service is left waiting.
            for name in list(batch.requests):
                batch.answer(name, {"error": error("internal")})
