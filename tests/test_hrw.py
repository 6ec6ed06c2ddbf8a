"""Highest-random-weight ownership: the score, minimal disruption, stability, candidates, `svc-cluster owner`."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.cli import run_cluster, run_inproc
from tests.support.home import BEARER, REPO, make_node, node_env
from svcposture import hrw
from svcposture.cluster import liveness
from svcposture._time import iso_from_ms
from tests.support.tracker import TrackerServer

hosts_st = st.lists(st.text(alphabet="abcdefgh-0123", min_size=1, max_size=6), min_size=1, max_size=8, unique=True)
tickets_st = st.lists(st.from_regex(r"[A-Z][A-Z0-9]{0,3}-[0-9]{1,5}", fullmatch=True), min_size=1, max_size=40)


def test_score_is_sha256_prefix_big_endian():
    digest = hashlib.sha256(b"OPS-1\x00node-a").digest()
    assert hrw.hrw_score("OPS-1", "node-a") == int.from_bytes(digest[:8], "big")
    assert hrw.hrw_score("OPS-1", "node-a") != hrw.hrw_score("OPS-1", "node-b")
    # NUL separates the parts: ("AB-1", "x") and ("AB-1x", "") must not collide by concatenation.
    assert hrw.hrw_score("AB-1", "2x") != hrw.hrw_score("AB-12", "x")


@settings(max_examples=60, deadline=None, database=None)
@given(hosts=hosts_st, extra=st.text(alphabet="xyz", min_size=1, max_size=4), tickets=tickets_st)
def test_adding_a_host_moves_only_keys_to_it(hosts, extra, tickets):
    if extra in hosts:
        return
    for ticket in tickets:
        before = hrw.owner(ticket, hosts)
        after = hrw.owner(ticket, hosts + [extra])
        assert after in (before, extra)


@settings(max_examples=60, deadline=None, database=None)
@given(hosts=hosts_st.filter(lambda h: len(h) >= 2), data=st.data(), tickets=tickets_st)
def test_removing_a_host_moves_only_its_keys(hosts, data, tickets):
    removed = data.draw(st.sampled_from(hosts))
    rest = [h for h in hosts if h != removed]
    for ticket in tickets:
        before = hrw.owner(ticket, hosts)
        after = hrw.owner(ticket, rest)
        if before != removed:
            assert after == before
        else:
            assert after in rest


@settings(max_examples=40, deadline=None, database=None)
@given(hosts=hosts_st, tickets=tickets_st, data=st.data())
def test_order_of_the_roster_does_not_matter(hosts, tickets, data):
    shuffled = data.draw(st.permutations(hosts))
    for ticket in tickets:
        assert hrw.owner(ticket, hosts) == hrw.owner(ticket, list(shuffled))


def test_ties_go_to_the_smaller_name(monkeypatch):
    monkeypatch.setattr(hrw, "hrw_score", lambda ticket, host: 7)
    assert hrw.owner("OPS-1", ["m", "b", "z"]) == "b"


def test_candidates_and_roster_membership():
    roster = ["a", "b", "c"]
    assert hrw.candidates(roster, None) == roster
    assert hrw.candidates(roster, ["c", "a", "zz"]) == ["a", "c"]
    assert hrw.candidates(roster, []) == roster            # nobody live: full roster
    assert hrw.candidates(roster, ["zz"]) == roster        # no roster host live: full roster
    assert hrw.owner("OPS-1", []) is None
    for n in range(50):
        ticket = "OPS-%d" % n
        owner = hrw.owner(ticket, roster + ["outsider"])
        if owner == "outsider":
            # Scores alone would pick it, but a host absent from the roster owns nothing.
            assert not hrw.owns(ticket, "outsider", roster)
            break
    else:
        pytest.fail("no ticket scored highest for the outsider")
    assert sum(hrw.owns("OPS-%d" % n, h, roster) for n in range(30) for h in roster) == 30
    live = ["b"]
    assert all(hrw.owner("OPS-%d" % n, roster, live) == "b" for n in range(20))


def test_assignment_is_stable_across_processes():
    roster = ["mac-mini-1", "mac-mini-2", "linux-box", "node-\u00e9"]
    tickets = ["OPS-%d" % n for n in range(300)]
    here = [hrw.owner(t, roster) for t in tickets]
    code = ("import json, sys; from svcposture.hrw import owner as hrw_owner; "
            "r, t = json.loads(sys.stdin.read()); print(json.dumps([hrw_owner(x, r) for x in t]))")
    for seed in ("0", "12345"):
        proc = subprocess.run([sys.executable, "-c", code], input=json.dumps([roster, tickets]), text=True,
                              capture_output=True, cwd=str(REPO), check=True,
                              env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        assert json.loads(proc.stdout) == here
    assert len(set(here)) == len(roster)  # every host gets some of 300 tickets


# ---------------------------------------------------------------- svc-cluster owner

def test_owner_with_liveness_known(tmp_path, monkeypatch, capsys):
    with TrackerServer(tokens=[BEARER]) as srv:
        srv.add_issue("OPS-1")
        now = iso_from_ms(int(time.time() * 1000))
        for host in ("b", "c"):
            srv.put_attachment("OPS-1", liveness.heartbeat_url(host), subtitle=now,
                               metadata={"publishedAt": now, "publishIntervalMs": 120000})
        home = make_node(tmp_path, "a", ["a", "b", "c"], anchor="OPS-1")
        code, out, err = run_inproc(monkeypatch, capsys, node_env(home, tracker_url=srv.url), "owner", "OPS-77",
                                    "--json")
        result = json.loads(out)
        assert code == 0
        assert result == {"ticket": "OPS-77", "owner": hrw.owner("OPS-77", ["b", "c"]),
                          "candidates": ["b", "c"], "livenessKnown": True}
        code, out, err = run_inproc(monkeypatch, capsys, node_env(home, tracker_url=srv.url), "owner", "OPS-77",
                                    "--json", "--no-liveness")
        assert json.loads(out)["candidates"] == ["a", "b", "c"] and json.loads(out)["livenessKnown"] is False


def test_owner_with_liveness_unknown_uses_the_full_roster(tmp_path, monkeypatch, capsys):
    home = make_node(tmp_path, "a", ["a", "b", "c"], anchor=None)
    code, out, err = run_inproc(monkeypatch, capsys, node_env(home), "owner", "OPS-5", "--json")
    result = json.loads(out)
    assert code == 0 and result["livenessKnown"] is False and result["candidates"] == ["a", "b", "c"]
    assert result["owner"] == hrw.owner("OPS-5", ["a", "b", "c"])
    assert "liveness unknown" in err


def test_owner_empty_roster_and_bad_ticket(tmp_path, monkeypatch, capsys):
    home = make_node(tmp_path, "a", None)
    code, out, err = run_inproc(monkeypatch, capsys, node_env(home), "owner", "OPS-5", "--json", "--no-liveness")
    assert code == 0 and json.loads(out)["owner"] is None
    for bad in ("OPS", "5-OPS", "OPS-5\n", "x" * 5000):
        code, out, err = run_inproc(monkeypatch, capsys, node_env(home), "owner", "--", bad)
        assert code == 2 and out == "" and len(err) < 400


def test_owner_as_a_real_command(tmp_path):
    home = make_node(tmp_path, "a", ["a", "b", "c"], anchor=None)
    proc = run_cluster(node_env(home), "owner", "OPS-5", "--no-liveness")
    assert proc.returncode == 0 and proc.stdout.strip() == hrw.owner("OPS-5", ["a", "b", "c"])
    assert "Traceback" not in proc.stderr
