"""Which host of the cluster polls a login's usage (docs/posture.md).

The provider's usage endpoint allows about 30 requests an hour per account,
shared by every machine that polls it, so a login shared by several hosts is
polled by one: the HRW owner of the ticket `usage:<email>` among the live
roster hosts, the whole roster when liveness is unknown (the anchor cannot be
read). A host that runs alone polls as it always did: no roster, a roster of
one, a host name absent from the roster, no anchor (and no Loki), or a login
without an email to tell it apart.

The monitor hands `UsageOwner(...)` to the quota sampler, which calls it once
per poll, on the sampler's thread; the header probe never waits on it.
"""
from __future__ import annotations

import logging
from typing import Callable, List, Optional, Tuple

from .. import config
from ..paths import Paths
from .. import hrw
from ..settings import Settings
from .liveness import collect_status

TICKET_PREFIX = "usage:"
log = logging.getLogger("svcposture.sampler")
NO_EMAIL = ("usage: cannot read the login's email (oauthAccount.emailAddress in %s), so this host "
            "cannot tell which host of the cluster polls the login: it polls it, as every host sharing "
            "the login then does")


def usage_ticket(email: str) -> str:
    """The HRW ticket of a login: the same on every host that shares it."""
    return TICKET_PREFIX + email.strip()


class UsageOwner:
    """`owner(login_email)`: the host that polls this login, or None when this host polls
    as a lone host. `login_email()` is only called when the host is in a cluster."""

    def __init__(self, paths: Paths, node: str, settings: Settings) -> None:
        self.paths = paths
        self.settings = settings
        self.node = node
        self.liveness_known: Optional[bool] = None
        self._said_no_email = False

    def _fleet(self) -> Optional[List[str]]:
        """The roster when this host shares logins with others; None when it runs alone."""
        try:
            hosts = config.roster(self.paths)
            anchor = config.liveness_anchor(self.paths)
        except config.ConfigError:
            return None
        if len(set(hosts)) <= 1 or self.node not in hosts:
            return None
        if anchor is None and self.settings.liveness_read_source == "tracker":
            return None
        return list(hosts)

    def candidates(self) -> Optional[Tuple[List[str], Optional[List[str]]]]:
        """(roster, live hosts or None when unknown) for a vendor's child, which scores its logins'
        tickets itself (an account id stays in the child); None: a lone host."""
        hosts = self._fleet()
        if hosts is None:
            return None
        return hosts, self._live_hosts()

    def __call__(self, login_email: Callable[[], Optional[str]]) -> Optional[str]:
        hosts = self._fleet()
        if hosts is None:
            return None
        email = login_email()
        if not email:
            if not self._said_no_email:
                log.warning(NO_EMAIL, self.paths.login_profile)
            self._said_no_email = True
            return None
        if self._said_no_email:
            log.info("usage: the login's email is readable again")
        self._said_no_email = False
        live = self._live_hosts()
        return hrw.owner(usage_ticket(email), hosts, live)

    def _live_hosts(self) -> Optional[List[str]]:
        """The live roster hosts, or None when liveness cannot be read (the whole roster then counts)."""
        try:
            report = collect_status(self.paths, self.settings)
        except config.ConfigError:
            report = {"error": "config"}
        if report.get("error"):
            self.liveness_known = False
            return None
        self.liveness_known = True
        return [row["host"] for row in report.get("hosts", []) if row.get("state") == "live"]
