"""The usage endpoint's budget (docs/posture.md): one poller per login across the cluster.

Three real monitors share one login, one test provider and one test tracker.
The HRW owner of `usage:<email>` among the live hosts polls; the others skip
with one log line and publish a null heartbeat quota. When the owner's
heartbeat goes stale, another host takes over within two heartbeat intervals.

The poll interval is shortened with the test hook `quota_poll_s`
(tests/support/hooks.py; the public floor is 180 s).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import svcposture
from svcposture import _time
from svcposture.cluster.usageowner import usage_ticket
from svcposture.events import RATELIMIT_SAMPLED, EventLog, event_name
from svcposture.paths import Paths
from tests.support.home import BEARER, canary, make_node, node_env
from tests.support.hooks import hooked
from tests.support.monitor import Monitor
from tests.support.provider import ANY, ProviderServer
from tests.support.tracker import TrackerServer
from tests.support.waiting import wait_until

HOSTS = ("a", "b", "c")
HEARTBEAT_MS = 2000
EMAIL = "shared@example.com"
USAGE = {"five_hour": {"utilization": 42.0, "resets_at": "2026-01-01T05:00:00+00:00"},
         "seven_day": {"utilization": 17.0, "resets_at": "2026-01-07T00:00:00+00:00"}}


def give_login(home: Path, token: str) -> None:
    paths = Paths(home, environ={"HOME": str(home)})
    paths.login_credentials.parent.mkdir(parents=True, exist_ok=True)
    paths.login_credentials.write_text(json.dumps({"claudeAiOauth": {"accessToken": token}}))
    paths.login_profile.write_text(json.dumps({"oauthAccount": {"emailAddress": EMAIL}}))


def sample_times(home: Path) -> List[int]:
    log = EventLog.for_paths(Paths(home, environ={"HOME": str(home)}))
    return sorted(_time.parse_iso_ms(e["ts"]) for e in log.iter_newest_first() if event_name(e) == RATELIMIT_SAMPLED)


def skip_lines(mon: Monitor, owner: str) -> int:
    return mon.stderr_text().count("usage: host %s polls this login's usage; this host skips" % owner)


def heartbeat(srv: TrackerServer, host: str) -> Dict:
    return srv.attachments("OPS-1").get("svc://heartbeat/%s" % host) or {}


def test_one_host_polls_a_shared_login_and_another_takes_over(tmp_path, monitors):
    token = canary("login")
    owner = svcposture.owner(usage_ticket(EMAIL), HOSTS, live=HOSTS)
    others = [h for h in HOSTS if h != owner]
    successor = svcposture.owner(usage_ticket(EMAIL), HOSTS, live=others)
    bystander = next(h for h in others if h != successor)
    with ProviderServer() as provider, TrackerServer(tokens=[BEARER]) as srv:
        provider.set_usage(ANY, USAGE)
        srv.add_issue("OPS-1")
        homes = {}
        by_host: Dict[str, Monitor] = {}
        try:
            for host in HOSTS:
                homes[host] = make_node(tmp_path, host, HOSTS, anchor="OPS-1")
                give_login(homes[host], token)
                env = hooked(node_env(homes[host], provider.url, tracker_url=srv.url, interval_ms=HEARTBEAT_MS,
                                      SVC_QUOTA_SAMPLER="1", SVC_ACCOUNTS_PROBE="0"), quota_poll_s=0.5)
                by_host[host] = monitors.start(env, args=("--no-probe",))

            # Once every heartbeat is on the anchor, the two others skip, each with one line.
            wait_until(lambda: all(heartbeat(srv, h) for h in HOSTS), timeout=30, message="three heartbeats")
            wait_until(lambda: all(skip_lines(by_host[h], owner) for h in others), timeout=30,
                       message="the others to skip")
            before = {h: len(sample_times(homes[h])) for h in HOSTS}
            calls = provider.usage_calls()
            wait_until(lambda: len(sample_times(homes[owner])) >= before[owner] + 4, timeout=30,
                       message="four more polls by the owner")
            polled = len(sample_times(homes[owner])) - before[owner]
            assert {h: len(sample_times(homes[h])) for h in others} == {h: before[h] for h in others}
            # Every usage request the provider saw came from the owner's polls.
            assert abs((provider.usage_calls() - calls) - polled) <= 1
            assert all(skip_lines(by_host[h], owner) == 1 for h in others)
            assert skip_lines(by_host[owner], owner) == 0

            # The heartbeat quota is the owner's; the others publish null.
            wait_until(lambda: all(heartbeat(srv, h)["metadata"].get("quota") is None for h in others),
                       timeout=30, message="null quota from the others")
            quota = wait_until(lambda: heartbeat(srv, owner)["metadata"].get("quota"), timeout=30)
            assert quota["five_hour_pct"] == 42.0 and quota["seven_day_pct"] == 17.0

            # The owner dies; once its heartbeat is stale, the successor polls.
            by_host[owner].kill9()
            last_beat = _time.parse_iso_ms(heartbeat(srv, owner)["metadata"]["publishedAt"])
            stale_at = last_beat + 2 * HEARTBEAT_MS
            successor_before = len(sample_times(homes[successor]))
            wait_until(lambda: len(sample_times(homes[successor])) > successor_before, timeout=60,
                       message="the successor's first poll")
            first = [t for t in sample_times(homes[successor]) if t > stale_at]
            assert first and first[0] <= stale_at + 2 * HEARTBEAT_MS, (first[:1], stale_at)
            wait_until(lambda: skip_lines(by_host[bystander], successor) == 1, timeout=30,
                       message="the bystander to name the successor")
            bystander_count = len(sample_times(homes[bystander]))
            wait_until(lambda: len(sample_times(homes[successor])) >= successor_before + 3, timeout=30)
            assert len(sample_times(homes[bystander])) == bystander_count
        finally:
            for mon in by_host.values():
                mon.stop(check=False)
    for host in others:
        assert "Traceback" not in by_host[host].stderr_text()
