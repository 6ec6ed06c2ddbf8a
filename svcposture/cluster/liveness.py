"""Cluster liveness: settings, the heartbeat publisher, peer status, and `set-anchor`/`status`.

Every host upserts one attachment `svc://heartbeat/<host>` onto the shared anchor
issue. The anchor is read once, when the publisher is armed at monitor start,
so a host that was not restarted after `svc-cluster set-anchor` keeps publishing
to the old issue; peers reading the new one then see it `missing`.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .. import config
from .._time import iso_from_ms, now_ms
from .._version import __version__
from ..events import EventLog
from ..paths import Paths
from ..vendors import DEFAULT_PROVIDER, block_keys
from . import budget, promread, tracker
from ._common import print_json, valid_ticket
from . import heartbeat
# host_of_heartbeat_url too: callers address heartbeats through this module.
from .heartbeat import heartbeat_url, host_of_heartbeat_url, peer_account, unlisted_rows  # noqa: F401
from .hostaccounts import peer_accounts
from .loki import LokiError, loki_live_hosts

# The liveness knobs live with the node's other settings; INTERVAL_ENV and publish_interval_ms
# are read from here too.
from ..settings import (INTERVAL_ENV, LOKI_URL_ENV, READ_SOURCE_ENV, Settings,  # noqa: F401
                        publish_interval_ms)

LOGGER_NAME = "svcposture.liveness"
# A vendor's active-account block for the heartbeat, None when the node has none of it.
BlockSource = Callable[[], Optional[Dict[str, Any]]]


# ---------------------------------------------------------------- publisher

class Publisher:
    """Upserts this host's heartbeat onto the anchor it was armed with, on a thread."""

    def __init__(self, paths: Paths, settings: Settings, node: str,
                 account_status: Callable[[], str], log: Optional[EventLog],
                 logger: Optional[logging.Logger] = None,
                 blocks: Sequence[Tuple[str, BlockSource]] = (),
                 polls_usage: Optional[Callable[[], bool]] = None,
                 accounts: Optional[Callable[[], List[Dict[str, Any]]]] = None) -> None:
        self.paths = paths
        self.settings = settings
        self.node = node
        # The configured interval, and the one in force: stretched to the tracker's budget.
        self.configured_interval_ms = self.settings.liveness_interval_ms
        self.interval_ms = self.configured_interval_ms
        self._budget = budget.NO_BUDGET
        self._roster_size = 0
        self._budget_asked = False
        self._claimed_ms = self.interval_ms
        self.anchor: Optional[str] = None
        self.armed = False
        self._arm_error: Optional[str] = None
        self._account_status = account_status
        # (metadata key, source) of each vendor's active-account block (docs/fleet.md): `account` for
        # the default vendor's, the vendor's name for every other's; a source answering None adds nothing.
        self._blocks = tuple(blocks)
        # Every account of the host, active or not (hostaccounts.py): the fleet read by account.
        self._accounts = accounts
        self._log = log
        # False while another host polls this login's usage: this heartbeat's quota is then null.
        self._polls_usage = polls_usage
        self._logger = logger or logging.getLogger(LOGGER_NAME)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._state_key: Optional[Tuple[str, ...]] = None
        self._backoff_until = 0.0
        self.state = "idle"
        self.detail = ""
        self.published = 0
        self.last_published_ms: Optional[int] = None

    def arm(self) -> None:
        """Read the anchor, once. Nothing re-reads it until the monitor restarts."""
        try:
            self.anchor = config.liveness_anchor(self.paths)
        except config.ConfigError as exc:
            self.anchor = None
            self._arm_error = str(exc)
        self.armed = True

    def start(self) -> None:
        if not self.armed:
            self.arm()
        self._thread = threading.Thread(target=self._run, name="svc-liveness", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # a bug must not kill heartbeats for the life of the monitor
                self._note(("internal",), "error", "liveness publisher: unexpected error; retrying next tick",
                           exc_info=True)
            self._stop.wait(self._next_wait_s())

    def _next_wait_s(self) -> float:
        """Until the next beat: never longer than the interval the last heartbeat claimed,
        so a stretch never leaves a peer looking stale; until the reset while rate-limited."""
        backoff = self._backoff_until - time.monotonic()
        if backoff > 0:
            return backoff
        return min(self.interval_ms, self._claimed_ms) / 1000.0

    def _apply_budget(self, stated: budget.RateBudget) -> None:
        self._budget = budget.merge(self._budget, stated)
        in_force = budget.interval_in_force_ms(self.configured_interval_ms, self._roster_size, self._budget,
                                               self.settings.tracker_window_ms, int(time.time() * 1000))
        with self._lock:
            self.interval_ms = in_force

    def snapshot(self) -> Dict[str, Any]:
        with self._lock:
            return {"state": self.state, "detail": self.detail, "anchor": self.anchor,
                    "published": self.published, "lastPublishedMs": self.last_published_ms,
                    "intervalMs": self.interval_ms, "configuredIntervalMs": self.configured_interval_ms}

    def _note(self, key: Tuple[str, ...], state: str, message: str, level: int = logging.WARNING,
              exc_info: bool = False) -> None:
        """Record the state; log only when it differs from the previous one."""
        with self._lock:
            changed = key != self._state_key
            self._state_key = key
            self.state = state
            self.detail = message
        if changed:
            self._logger.log(level, message, exc_info=exc_info)

    def _off_reason(self) -> Optional[Tuple[Tuple[str, ...], str]]:
        source = self.settings.liveness_read_source
        if source != "tracker":
            return (source,), "liveness publisher off: %s=%s, peers are read from %s" % (
                READ_SOURCE_ENV, source, source.capitalize())
        if self.anchor is None:
            if self._arm_error:
                return ("anchor-error",), "liveness publisher off: cannot read the liveness anchor: %s" % self._arm_error
            return ("no-anchor",), ("liveness publisher off: no liveness anchor configured "
                                    "(svc-cluster set-anchor <TICKET>, then svc-stack restart)")
        try:
            hosts = config.roster(self.paths)
        except config.ConfigError as exc:
            return ("roster-error", str(exc)), "liveness publisher off: cannot read the roster: %s" % exc
        if len(set(hosts)) <= 1:
            return ("roster-small", str(len(set(hosts)))), (
                "liveness publisher off: the roster has %d host(s), so there is no peer to be live for"
                % len(set(hosts)))
        self._roster_size = len(set(hosts))
        return None

    def tick(self) -> str:
        """One publish attempt; returns the resulting state."""
        off = self._off_reason()
        if off is not None:
            self._note(off[0], "off", off[1], logging.INFO)
            return self.state
        try:
            auth = tracker.resolve_auth(self.paths)
        except config.ConfigError as exc:
            self._note(("token-error", str(exc)), "off",
                       "liveness publisher off: cannot read the tracker token: %s" % exc, logging.INFO)
            return self.state
        if auth is None:
            self._note(("no-token",), "off",
                       "liveness publisher off: no tracker token (%s in cluster-secrets.json, "
                       "or tracker.apiKey in config-<teamKey>.json)" % tracker.BOT_TOKEN_KEY, logging.INFO)
            return self.state
        if time.monotonic() < self._backoff_until:
            return self.state
        anchor = self.anchor or ""
        client = None
        try:
            client = tracker.TrackerClient(self.settings.tracker_url, auth)
            self._learn_budget(client, anchor)
            published_ms = now_ms()
            published_at = iso_from_ms(published_ms)
            self._apply_budget(budget.NO_BUDGET)
            metadata = self._metadata(published_at)
            issue = client.upsert_attachment(anchor, heartbeat_url(self.node), "svc heartbeat %s" % self.node,
                                             published_at, metadata)
        except tracker.TrackerRateLimitedError as exc:
            self._apply_budget(client.budget if client is not None else budget.NO_BUDGET)
            self._backoff_until = time.monotonic() + exc.retry_after_s
            self._note(("rate-limited",), "backoff", "liveness publisher: %s on anchor %s; backing off %.0f s"
                       % (exc, anchor, exc.retry_after_s))
            return self.state
        except tracker.TrackerError as exc:
            self._apply_budget(client.budget if client is not None else budget.NO_BUDGET)
            self._note(("error", type(exc).__name__), "error",
                       "liveness publisher: heartbeat to anchor %s failed: %s; retrying every %d ms"
                       % (anchor, exc, self.interval_ms))
            return self.state
        self._apply_budget(client.budget)
        with self._lock:
            self.published += 1
            self.last_published_ms = published_ms
            self._claimed_ms = metadata["publishIntervalMs"]
        if issue.get("archivedAt") or issue.get("trashed") is True:
            self._note(("archived",), "error",
                       "liveness publisher: anchor %s is %s; peers may not see heartbeats. Restore it, or move "
                       "the anchor (svc-cluster set-anchor)" % (anchor, "trashed" if issue.get("trashed") else "archived"))
        else:
            self._note(("ok",), "publishing", "liveness publisher: heartbeat %s published to anchor %s every %d ms"
                       % (heartbeat_url(self.node), anchor, self.interval_ms), logging.INFO)
        return self.state


    def _learn_budget(self, client: tracker.TrackerClient, anchor: str) -> None:
        """Before the first heartbeat, read the anchor once (our own attachment only, one small
        page) for the tracker's budget: the first beat then states the interval really in force,
        not the configured one that the budget would stretch a moment later."""
        if self._budget.stated or self._budget_asked:
            return
        try:
            client.fetch_issue(anchor, prefix=heartbeat_url(self.node), max_pages=1)
        except tracker.TrackerPaginationError:
            pass  # hosts whose names start with ours fill more pages; the headers came all the same
        # Asked once: a tracker that states no budget is not asked again before every beat.
        self._budget_asked = True
        self._apply_budget(client.budget)

    def _metadata(self, published_at: str) -> Dict[str, Any]:
        """The heartbeat's metadata; a failing status or quota read degrades, it never skips a beat."""
        try:
            status = self._account_status()
        except Exception:
            status = None
        try:
            owned = self._polls_usage is None or self._polls_usage() is not False
            quota = heartbeat.newest_quota(self._log) if owned else None
        except OSError:
            quota = None
        blocks = {}
        for key, source in self._blocks:
            try:
                blocks[key] = source()
            except Exception:  # a broken account read must not cost the beat
                blocks[key] = None
        try:
            accounts = self._accounts() if self._accounts is not None else []
        except Exception:  # as for the blocks: never costs the beat
            accounts = []
        metadata = heartbeat.metadata(host=self.node, published_at=published_at,
                                      publish_interval_ms=self.interval_ms, version=__version__,
                                      account_status=status, quota=quota, account=blocks.pop("account", None),
                                      accounts=accounts)
        for key, block in blocks.items():
            if isinstance(block, dict):
                metadata[key] = block
        return metadata


def start_publisher(paths: Paths, settings: Settings, node: str,
                    account_status: Callable[[], str], log: Optional[EventLog],
                    blocks: Sequence[Tuple[str, BlockSource]] = (),
                    polls_usage: Optional[Callable[[], bool]] = None,
                    accounts: Optional[Callable[[], List[Dict[str, Any]]]] = None) -> Publisher:
    """Arm (read the anchor once) and start publishing; the first heartbeat goes out at once."""
    publisher = Publisher(paths, settings, node, account_status, log, blocks=blocks, polls_usage=polls_usage,
                          accounts=accounts)
    publisher.start()
    return publisher


# ---------------------------------------------------------------- peer status

def peer_states(roster: Sequence[str], heartbeats: Iterable[tracker.Heartbeat], now: int,
                local_interval_ms: int) -> List[Dict[str, Any]]:
    """Each roster host live (within 2 of its own intervals), stale, or missing. A heartbeat
    is judged by when it was published as far as `now` can believe it (heartbeat.published_ms):
    one whose only stamps lie in the future is stale, never fresh."""
    by_host = heartbeat.newest_by_host(heartbeats, now)
    blocks = block_keys()
    rows: List[Dict[str, Any]] = []
    for host in dict.fromkeys(roster):
        beat = by_host.get(host)
        if beat is None:
            rows.append({"host": host, "state": "missing", "ageS": None, "quota": None, "account": None,
                         "accounts": []})
            continue
        interval = heartbeat.peer_interval_ms(beat.metadata.get("publishIntervalMs"), local_interval_ms)
        published = heartbeat.published_ms(beat, now)
        quota = heartbeat.peer_quota(beat.metadata.get("quota"))
        if published is None:
            row = {"host": host, "state": "stale", "ageS": None, "quota": quota}
        else:
            age_ms = max(0, now - published)
            row = {"host": host, "state": "live" if age_ms <= 2 * interval else "stale",
                   "ageS": round(age_ms / 1000.0, 1), "quota": quota}
        row.update(peer_blocks(beat.metadata, interval, now, blocks))
        row["accounts"] = peer_accounts(beat.metadata.get("accounts"))
        rows.append(row)
    return rows


def peer_blocks(metadata: Mapping[str, Any], interval_ms: float, now: int,
                blocks: Sequence[Tuple[str, str]]) -> Dict[str, Any]:
    """A peer's active-account blocks, each of `blocks` ((provider, field) of the registered
    vendors, vendors.block_keys) under its field: the default vendor's always (null when it has
    none), every other's only where the peer published one, so a host without a vendor's accounts
    shows nothing of that vendor. A block of a vendor this node has not registered is not read:
    its accounts still are (`accounts`)."""
    out: Dict[str, Any] = {}
    for provider, field in blocks:
        block = peer_account(metadata.get(field), publish_interval_ms=interval_ms, now=now)
        if block is not None or provider == DEFAULT_PROVIDER:
            out[field] = block
    return out


# ---------------------------------------------------------------- status

def collect_status(paths: Paths, settings: Settings) -> Dict[str, Any]:
    """{"source", "anchor", "publishIntervalMs", "hosts": [...]} plus "error" when liveness is unknown.

    `publishIntervalMs` is the interval in force: under the tracker, the one
    its stated budget stretches the roster's heartbeats to. The knobs come
    from `settings` (a command builds them non-strict: it serves nothing, so
    a bad SVC_MONITOR_* value there is no error). ConfigError (a
    corrupt roster or config file) propagates: without a roster there is
    nothing to report on.
    """
    hosts = config.roster(paths)
    anchor = config.liveness_anchor(paths)
    interval = settings.liveness_interval_ms
    source = settings.liveness_read_source
    report: Dict[str, Any] = {"source": source, "anchor": anchor, "publishIntervalMs": interval, "hosts": []}

    def unknown(error: str) -> Dict[str, Any]:
        report["hosts"] = [{"host": h, "state": "unknown", "ageS": None, "quota": None, "account": None,
                            "accounts": []}
                           for h in dict.fromkeys(hosts)]
        report["error"] = error
        return report

    if source == "loki":
        base = settings.loki_url
        if not base:
            return unknown("%s=loki but %s is unset" % (READ_SOURCE_ENV, LOKI_URL_ENV))
        try:
            live = set(loki_live_hosts(base, interval))
        except LokiError as exc:
            return unknown(str(exc))
        report["hosts"] = [{"host": h, "state": "live" if h in live else "missing", "ageS": None, "quota": None,
                            "account": None, "accounts": []} for h in dict.fromkeys(hosts)]
        return report
    if source == "prometheus":
        try:
            report["hosts"] = promread.fleet_rows(settings.prometheus_url, hosts, interval)
        except promread.PrometheusError as exc:
            return unknown(str(exc))
        return report
    if anchor is None:
        return unknown("no liveness anchor configured (svc-cluster set-anchor <TICKET>)")
    client: Optional[tracker.TrackerClient] = None
    now = now_ms()
    try:
        client = tracker.TrackerClient.for_paths(paths, url=settings.tracker_url)
        issue = client.fetch_issue(anchor)
    except tracker.TrackerError as exc:
        return unknown("cannot read anchor %s: %s" % (anchor, exc))
    finally:
        stated = client.budget if client is not None else budget.NO_BUDGET
        report["publishIntervalMs"] = budget.interval_in_force_ms(interval, len(set(hosts)), stated,
                                                                  settings.tracker_window_ms, now)
    report["hosts"] = peer_states(hosts, issue.heartbeats, now, interval)
    by_host = heartbeat.newest_by_host(issue.heartbeats, now)
    report["unlisted"] = unlisted_rows(hosts, {h: heartbeat.published_ms(b, now) for h, b in by_host.items()}, now)
    if issue.archived_at or issue.trashed:
        report["warning"] = "anchor %s is %s" % (anchor, "trashed" if issue.trashed else "archived")
    return report


# ---------------------------------------------------------------- commands

def cmd_set_anchor(ns: argparse.Namespace) -> int:
    ticket = ns.ticket
    if not valid_ticket(ticket):
        print("svc-cluster set-anchor: %r is not a ticket identifier like ENG-123" % ns.ticket[:80],
              file=sys.stderr)
        return 2
    paths = Paths(environ=os.environ)
    previous = config.liveness_anchor(paths)
    config.write_layer(paths.cluster_secrets, {config.ANCHOR_KEY: ticket})
    print_json({"key": config.ANCHOR_KEY, "value": ticket, "previous": previous, "restartRequired": True},
               ensure_ascii=False)
    if previous != ticket:
        print("Restart the monitor (svc-stack restart) for the publisher to use %s." % ticket, file=sys.stderr)
    return 0


def add_commands(sub: Any) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "set-anchor", help="set the liveness anchor issue on this host (restart required)", formatter_class=raw,
        description="Write svc.cluster.livenessAnchorIssue into ~/.config/svc/cluster-secrets.json\n"
                    "and print {key, value, previous, restartRequired: true}.\n\n"
                    "The running heartbeat publisher keeps the anchor it was armed with until the\n"
                    "monitor restarts: run `svc-stack restart` afterwards, on every host.\n"
                    "Exit 2 when TICKET is not an identifier like ENG-123.")
    p.add_argument("ticket", metavar="TICKET", help="tracker ticket identifier, e.g. ENG-123")
    p.add_argument("--json", action="store_true", help="accepted for symmetry; the output is always JSON")
    p.set_defaults(func=cmd_set_anchor)
