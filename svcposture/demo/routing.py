"""The demo's routed ticket: one ticket whose contract owner in the simulated fleet has no
headroom, and the host `svc-cluster owner --headroom` gives it to instead (docs/liveness.md).

The ticket is found by the rule itself (cluster/dispatch.py) over the simulated fleet the
demo's monitor serves, so what the demo prints is what the fleet page and the command say.
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple

from ..cluster.dispatch import headroom_found, owner_with_headroom
from ..cluster.fleetaccounts import accounts_view
from .fleet import moving_report

PREFIX = "DEMO"
MAX_TRIED = 200


def routed_ticket(report: Mapping[str, Any]) -> Optional[Tuple[str, str, str]]:
    """(ticket, the contract's owner it goes around, the host it goes to) of the first DEMO-n
    that is routed around a host without headroom; None when the fleet has no such ticket."""
    view = accounts_view(report)
    for number in range(1, MAX_TRIED + 1):
        ticket = "%s-%d" % (PREFIX, number)
        body = owner_with_headroom(ticket, report, view)
        if body["skipped"] and headroom_found(body):
            return ticket, body["skipped"][0]["host"], body["owner"]
    return None


def routing_lines(report: Mapping[str, Any], cluster_command: str, url: str) -> List[str]:
    """What the demo prints about its routed ticket: the fleet page that shows it, and the command."""
    found = routed_ticket(report)
    if found is None:
        return []
    ticket, around, owner = found
    return ["ticket %s skips %s (no headroom) for %s: %s/fleet?ticket=%s" % (ticket, around, owner, url, ticket),
            "which host takes a ticket: %s owner %s --headroom --url %s" % (cluster_command, ticket, url)]


def announce(provider: Any, cluster_command: str, url: str) -> None:
    """Print routing_lines() of the simulated fleet now, as the demo prints its other lines;
    `provider` is the demo's SimulatedProvider (its start and its clock)."""
    report = moving_report(provider.started, provider.clock())
    for line in routing_lines(report, cluster_command, url):
        print("svc-monitor demo: %s" % line, flush=True)
