"""A node's services as the application sees them: one value, typed, built once by the node.

`node.Node` builds the services (a posture service per registered vendor, the
trajectory service, the advisor, the login samplers, where /api/fleet reads
from) and hands them to `app.MonitorApp` as one `Services` value. Nothing is
looked up by name on a service, nor assigned onto one after it is built; each
protocol below is the whole of what the application may ask of a service.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Protocol, Sequence, Tuple

from ..broadcast import Broadcast
from ..paths import Paths
from ..settings import Settings


class PostureSource(Protocol):
    """One vendor's posture service (posture.service.PostureService), as the routes read it."""

    provider: str
    interval_s: float
    broadcast: Broadcast

    def read(self, refresh: bool = False) -> Dict[str, Any]:
        """The posture body (a forced refresh when `refresh`, the guard having passed)."""

    def fresh_summary(self) -> Optional[Dict[str, Any]]:
        """The summary a plain read would serve from cache now, else None."""

    def current(self) -> Optional[Dict[str, Any]]:
        """The newest result as a cached reply, without probing; None before the first."""

    def shows(self) -> bool:
        """Whether the node has this vendor's accounts to show."""

    def metrics(self) -> Dict[str, Any]:
        """probeRuns, probeErrors, lastSuccessMs and the last body, for /metrics."""


class TrajectorySource(Protocol):
    """The trajectory service (trajectory.service.TrajectoryService), as the routes read it."""

    broadcast: Broadcast

    def body(self) -> Dict[str, Any]:
        """The /api/trajectory body of the last probe."""

    def metrics(self) -> Dict[str, Any]:
        """The forecasts' and alerts' figures, for /metrics."""


class AdviceSource(Protocol):
    """The advisor (steering.advisor.Advisor): each vendor's advice, computed once per probe."""

    def advice_for(self, summary: Mapping[str, Any], provider: str) -> Tuple[Dict[str, Any], int]:
        """(the advice, the reserve it used) for one summary of `provider`'s posture."""


class LoginSource(Protocol):
    """A vendor's view of this machine's interactive login (GET /api/login), when it has one."""

    # False while another host of the cluster polls this login (the heartbeat's quota is then null).
    polls_here: bool

    def login_body(self) -> Dict[str, Any]:
        """The /api/login body from the newest sample."""

    def login_key(self) -> Any:
        """What the body depends on (the newest sample and why there is none): it changes when the body does."""


class Services(NamedTuple):
    """Everything the application serves from, built by the node."""

    node: str
    paths: Paths
    settings: Settings
    # One posture service per registered vendor, by vendor name, in registration order.
    postures: Mapping[str, PostureSource]
    trajectory: TrajectorySource
    advisor: AdviceSource
    # The interactive logins this process samples (none in a library start_server).
    logins: Sequence[LoginSource] = ()
    # Where /api/fleet reads from: a callable returning the status report (the demo's simulated
    # fleet), else None for the cluster's own read.
    fleet_source: Optional[Callable[[], Dict[str, Any]]] = None
