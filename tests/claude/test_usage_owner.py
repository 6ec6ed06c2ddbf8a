"""Which host polls a shared login (docs/posture.md), read against the test tracker.

The HRW owner of `usage:<email>` among the live roster hosts; the whole roster
when the anchor is set but cannot be read; None (poll here, as a lone host) with
no roster, a roster of one, a host outside the roster, no anchor, or no email.
The login's email is asked for only when the host is in a cluster.
"""
from __future__ import annotations

import time

import pytest

import svcposture
from svcposture.settings import Settings
from svcposture._time import iso_from_ms
from svcposture.cluster import liveness
from svcposture.cluster.usageowner import UsageOwner, usage_ticket
from svcposture.paths import Paths
from tests.support.home import BEARER, make_node, node_env, write_json
from tests.support.tracker import TrackerServer

EMAIL = "shared@example.com"
HOSTS = ["a", "b", "c", "d"]
TICKET = usage_ticket(EMAIL)


@pytest.fixture
def srv():
    with TrackerServer(tokens=[BEARER]) as server:
        server.add_issue("OPS-1")
        yield server


def beat(srv, host, age_s):
    published = iso_from_ms(int((time.time() - age_s) * 1000))
    srv.put_attachment("OPS-1", liveness.heartbeat_url(host), subtitle=published,
                       metadata={"host": host, "publishedAt": published, "publishIntervalMs": 60000})


class Asked:
    """The login_email callable, counting how often the owner asked for it."""

    def __init__(self, email=EMAIL):
        self.email, self.count = email, 0

    def __call__(self):
        self.count += 1
        return self.email


def owner_of(home, env, node, email=EMAIL):
    asked = Asked(email)
    found = UsageOwner(Paths(home, environ=env), node, Settings.from_environ(env))(asked)
    return found, asked.count


def test_ticket_is_the_email():
    assert usage_ticket(" shared@example.com ") == "usage:shared@example.com"


def test_owner_among_live_hosts(tmp_path, srv):
    home = make_node(tmp_path, "a", HOSTS, anchor="OPS-1")
    env = node_env(home, tracker_url=srv.url)
    for host in HOSTS:
        beat(srv, host, 1)
    assert owner_of(home, env, "a") == (svcposture.owner(TICKET, HOSTS, HOSTS), 1)
    # The live owner's heartbeat goes stale: the next one among the live hosts.
    first = svcposture.owner(TICKET, HOSTS, HOSTS)
    beat(srv, first, 1000)
    rest = [h for h in HOSTS if h != first]
    assert owner_of(home, env, "a")[0] == svcposture.owner(TICKET, HOSTS, rest) != first


def test_whole_roster_when_the_anchor_cannot_be_read(tmp_path):
    home = make_node(tmp_path, "a", HOSTS, anchor="OPS-1")
    env = node_env(home, tracker_url="http://127.0.0.1:9/graphql")
    owner = UsageOwner(Paths(home, environ=env), "a", Settings.from_environ(env))
    assert owner(Asked()) == svcposture.owner(TICKET, HOSTS)
    assert owner.liveness_known is False


def test_no_live_host_is_the_whole_roster(tmp_path, srv):
    home = make_node(tmp_path, "a", HOSTS, anchor="OPS-1")
    env = node_env(home, tracker_url=srv.url)
    assert owner_of(home, env, "a")[0] == svcposture.owner(TICKET, HOSTS)


@pytest.mark.parametrize("roster,anchor,node,asked", [
    (None, "OPS-1", "a", 0),             # no roster file
    (["a"], "OPS-1", "a", 0),            # a roster of one
    (["b", "c"], "OPS-1", "a", 0),       # this host is not in the roster
    (HOSTS, None, "a", 0),               # no anchor: nobody publishes heartbeats
])
def test_a_lone_host_polls_without_asking_the_email(tmp_path, srv, roster, anchor, node, asked):
    home = make_node(tmp_path, node, roster, anchor=anchor)
    env = node_env(home, tracker_url=srv.url)
    assert owner_of(home, env, node) == (None, asked)
    assert srv.count() == 0


@pytest.mark.parametrize("email", [None, ""])
def test_a_login_without_email_polls_here(tmp_path, srv, email):
    home = make_node(tmp_path, "a", HOSTS, anchor="OPS-1")
    assert owner_of(home, node_env(home, tracker_url=srv.url), "a", email=email) == (None, 1)


@pytest.mark.parametrize("content", [b"{", b"[]", b'{"roster": "a"}', b"\xff" * 10])
def test_a_broken_roster_polls_here(tmp_path, srv, content):
    home = make_node(tmp_path, "a", HOSTS, anchor="OPS-1")
    (home / "svc" / "cluster" / "cluster.json").write_bytes(content)
    assert owner_of(home, node_env(home, tracker_url=srv.url), "a") == (None, 0)


def test_loki_without_an_anchor_still_decides(tmp_path):
    home = make_node(tmp_path, "a", HOSTS, anchor=None)
    write_json(home / "svc" / "cluster" / "cluster.json", {"roster": HOSTS}, 0o644)
    env = node_env(home, SVC_LIVENESS_READ_SOURCE="loki", SVC_LOKI_URL="http://127.0.0.1:9")
    # Loki unreachable: liveness unknown, the whole roster decides.
    assert owner_of(home, env, "a") == (svcposture.owner(TICKET, HOSTS), 1)
