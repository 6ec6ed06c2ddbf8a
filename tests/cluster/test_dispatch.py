"""Dispatch around the wall (docs/liveness.md, "Headroom"): `svc-cluster owner --headroom`, GET
/api/fleet/owner and the MCP tool skip the hosts whose accounts have no headroom, through the
real command, a real monitor and the stand-in tracker holding real heartbeats.

The fleet: hosts at the wall (5-hour, 7-day), refused, with only another vendor's account, one
whose active account is at the wall but a sibling has room (it would switch), roomy ones, one at
85 % (room without a reserve, none under a 20 % one), and a stale one that is no candidate."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional

import pytest

from svcposture._time import iso_from_ms
from svcposture.accountkey import account_key
from svcposture.cluster import liveness
from svcposture.hrw import candidates, hrw_score
from tests.support.cli import run_cluster, run_json
from tests.support.home import BEARER, make_node, node_env, write_json
from tests.support.monitor import start_monitor
from tests.support.tracker import TrackerServer
from tests.support.waiting import wait_until
from tests.monitor.test_metrics_openapi import _validate

HOUR_MS = 3600 * 1000
HOSTS = ("wall", "refused", "week", "elsewhere", "switcher", "roomy", "warm", "dead")


class Times(NamedTuple):
    """The instants the fleet's heartbeats name, read from the clock when the tracker is made."""
    now_ms: int
    wall_reset: str
    seven_reset: str
    soon_reset: str


def times_at(now_ms: int) -> Times:
    return Times(now_ms, iso_from_ms(now_ms + 2 * HOUR_MS), iso_from_ms(now_ms + 72 * HOUR_MS),
                 iso_from_ms(now_ms + 600 * 1000))


def entry(t: Times, label: str, email: str, *, active: bool = True, five: Optional[float] = 20.0,
          seven: float = 10.0, status: str = "ok", health: Optional[str] = "ok", five_reset: Optional[str] = None,
          provider: str = "claude") -> Dict[str, Any]:
    """One heartbeat `accounts[]` entry, as a publisher writes it."""
    five_reset = five_reset or t.wall_reset
    return {"key": account_key(provider, email), "label": label, "provider": provider, "status": status,
            "health": health, "five_hour_pct": five, "five_hour_resets_at": five_reset if five is not None else None,
            "seven_day_pct": seven if five is not None else None,
            "seven_day_resets_at": t.seven_reset if five is not None else None, "wall_at": None,
            "probed_at": iso_from_ms(t.now_ms - 5000), "active": active}


def fleet_of(t: Times) -> Dict[str, List[Dict[str, Any]]]:
    return {
        "wall": [entry(t, "acct1", "wall@example.com", five=100.0, status="rejected")],
        "refused": [entry(t, "acct1", "refused@example.com", five=None, status="error", health="refused")],
        "week": [entry(t, "acct1", "week@example.com", five=10.0, seven=100.0, status="rejected")],
        "elsewhere": [entry(t, "cx-1", "cx@example.com", provider="codex")],
        "switcher": [entry(t, "acct1", "sw1@example.com", five=100.0, status="rejected"),
                     entry(t, "acct2", "sw2@example.com", active=False, five=20.0)],
        "roomy": [entry(t, "acct1", "roomy@example.com", five=30.0)],
        "warm": [entry(t, "acct1", "warm@example.com", five=85.0, status="degraded")],
        # Stale (its heartbeat an hour old): no candidate while liveness is known, however soon it resets.
        "dead": [entry(t, "acct1", "dead@example.com", five=100.0, status="rejected", five_reset=t.soon_reset)],
    }


WALLED = ("wall", "refused", "week", "elsewhere")
REASONS = {"wall": "acct1 (active): 5h at 100%", "refused": "acct1 (active): token refused",
           "week": "acct1 (active): 7d at 100%", "elsewhere": "no claude account (only other vendors')",
           "warm": "acct1 (active): 5h at 85% (the line is 80%: the human reserve)"}


@pytest.fixture(scope="module")
def times() -> Times:
    return times_at(int(time.time() * 1000))


@pytest.fixture(scope="module")
def tracker(times):
    with TrackerServer(tokens=[BEARER]) as srv:
        srv.add_issue("OPS-1")
        for host, accounts in fleet_of(times).items():
            age_s = 3600.0 if host == "dead" else 2.0
            published = iso_from_ms(int(times.now_ms - age_s * 1000))
            meta = {"host": host, "publishedAt": published, "publishIntervalMs": 120000, "accountStatus": "ok",
                    "quota": None, "account": None, "accounts": accounts}
            srv.put_attachment("OPS-1", liveness.heartbeat_url(host), subtitle=published, metadata=meta)
        yield srv


def reader(root: Path, roster: List[str], tracker: TrackerServer, reserve: Optional[int] = None) -> Dict[str, str]:
    """The environment of a node of `roster` reading the tracker's heartbeats."""
    home = make_node(root, "reader", roster, anchor="OPS-1")
    if reserve is not None:
        write_json(home / ".config" / "svc" / "config.json", {"svc": {"posture": {"reservePct": reserve}}})
    return node_env(home, tracker_url=tracker.url, interval_ms=120000)


def hrw_order(ticket: str, hosts: List[str]) -> List[str]:
    return sorted(hosts, key=lambda h: (-hrw_score(ticket, h), h))


def ticket_where(live: List[str], first_in: tuple, skipped_at_least: int, owner_in: tuple) -> str:
    """A ticket whose HRW order starts with `skipped_at_least` hosts of `first_in`, then one of `owner_in`."""
    for number in range(1, 5000):
        ticket = "ENG-%d" % number
        order = hrw_order(ticket, live)
        head = 0
        while order[head] in first_in:
            head += 1
        if head >= skipped_at_least and order[head] in owner_in:
            return ticket
    raise AssertionError("no such ticket")


LIVE = [h for h in HOSTS if h != "dead"]


# ---------------------------------------------------------------- the skip

def test_owner_skips_the_hosts_without_headroom_and_says_why(tmp_path, tracker):
    env = reader(tmp_path, list(HOSTS), tracker)
    ticket = ticket_where(LIVE, WALLED, 2, ("switcher", "roomy", "warm"))
    order = hrw_order(ticket, LIVE)
    code, plain = run_json(env, "owner", ticket, "--json")
    # Without --headroom: exactly the contract's owner, a walled host.
    assert code == 0 and plain == {"ticket": ticket, "owner": order[0], "candidates": candidates(list(HOSTS), LIVE),
                                   "livenessKnown": True}
    code, body = run_json(env, "owner", ticket, "--headroom", "--json")
    head = [h for h in order[:order.index(body["owner"])]]
    assert code == 0 and body["owner"] in ("switcher", "roomy", "warm"), body
    assert set(body) == {"ticket", "owner", "candidates", "livenessKnown", "headroom", "provider", "skipped",
                         "waitUntil"}
    assert body["headroom"] is True and body["provider"] == "claude" and body["waitUntil"] is None
    assert body["candidates"] == plain["candidates"] and body["livenessKnown"] is True
    assert [s["host"] for s in body["skipped"]] == head and len(head) >= 2 and set(head) <= set(WALLED)
    for skipped in body["skipped"]:
        assert skipped["reason"] == REASONS[skipped["host"]], skipped
    # The words, for a person.
    done = run_cluster(env, "owner", ticket, "--headroom")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[0] == body["owner"]
    assert lines[1:] == ["  skipped %s: %s" % (s["host"], s["reason"]) for s in body["skipped"]]


def test_a_host_whose_sibling_has_room_takes_the_ticket(tmp_path, tracker):
    env = reader(tmp_path, list(HOSTS), tracker)
    ticket = ticket_where(LIVE, (), 0, ("switcher",))
    code, body = run_json(env, "owner", ticket, "--headroom", "--json")
    assert code == 0 and body["owner"] == "switcher" and body["skipped"] == []


def test_the_human_reserve_draws_the_line(tmp_path, tracker):
    ticket = ticket_where(LIVE, (), 0, ("warm",))
    code, body = run_json(reader(tmp_path / "none", list(HOSTS), tracker), "owner", ticket, "--headroom", "--json")
    assert code == 0 and body["owner"] == "warm"
    code, body = run_json(reader(tmp_path / "twenty", list(HOSTS), tracker, reserve=20), "owner", ticket,
                          "--headroom", "--json")
    assert code == 0 and body["owner"] != "warm"
    assert body["skipped"][0] == {"host": "warm", "reason": REASONS["warm"]}


# ---------------------------------------------------------------- every host at the wall

def test_with_no_host_with_headroom_the_contracts_owner_is_named_exit_1(tmp_path, tracker, times):
    roster = ["wall", "refused", "week", "elsewhere", "dead"]
    live = roster[:4]
    env = reader(tmp_path, roster, tracker)
    ticket = "OPS-7"
    code, plain = run_json(env, "owner", ticket, "--json")
    done = run_cluster(env, "owner", ticket, "--headroom", "--json")
    body = json.loads(done.stdout)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert code == 0 and body["owner"] == plain["owner"] == hrw_order(ticket, live)[0]
    assert body["candidates"] == plain["candidates"] == live
    assert body["skipped"] == [{"host": h, "reason": REASONS[h]} for h in hrw_order(ticket, live)]
    # The earliest reset of a candidate's holding window: the 5-hour wall's. The stale host's,
    # sooner, is no candidate's; a refused token never resets.
    assert body["waitUntil"] == times.wall_reset
    assert "no candidate has headroom for claude" in done.stderr and times.wall_reset in done.stderr
    done = run_cluster(env, "owner", ticket, "--headroom")
    assert done.returncode == 1 and done.stdout.splitlines()[0] == plain["owner"]


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("args, words", [
    (["ENG 1", "--headroom"], "is not a ticket identifier"),
    (["eng-1\n", "--headroom"], "is not a ticket identifier"),
    (["ENG-1", "--headroom", "--provider", "nobody"], "unknown provider 'nobody'; the vendors are"),
    (["ENG-1", "--headroom", "--no-liveness"], "--no-liveness"),
    (["ENG-1", "--provider", "claude"], "add --headroom"),
])
def test_bad_input_is_refused_with_a_sentence_and_exit_2(tmp_path, tracker, args, words):
    done = run_cluster(reader(tmp_path, list(HOSTS), tracker), "owner", *args)
    assert done.returncode == 2 and words in done.stderr and done.stdout == "", (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr


def test_a_bad_reserve_is_refused(tmp_path, tracker):
    env = reader(tmp_path, list(HOSTS), tracker, reserve=90)
    done = run_cluster(env, "owner", "ENG-1", "--headroom")
    assert done.returncode == 2 and "svc.posture.reservePct must be an integer from 0 to 50" in done.stderr


# ---------------------------------------------------------------- the route

def test_the_route_answers_what_the_command_does(tmp_path, tracker):
    env = reader(tmp_path, list(HOSTS), tracker)
    ticket = ticket_where(LIVE, WALLED, 1, ("switcher", "roomy", "warm"))
    _, expected = run_json(env, "owner", ticket, "--headroom", "--json")
    mon = start_monitor(env, ["--no-probe"])
    try:
        status, headers, raw = mon.get("/api/fleet/owner?ticket=%s" % ticket)
        body = json.loads(raw)
        assert status == 200 and headers["content-type"] == "application/json"
        assert body == expected and body["skipped"]
        doc = json.loads(mon.get("/api/openapi.json")[2])
        _validate(doc, {"$ref": "#/components/schemas/FleetOwner"}, body)
        # Another vendor's accounts: only the host that has one of them could take it.
        other = mon.get_json("/api/fleet/owner?ticket=%s&provider=codex" % ticket)[1]
        assert other["provider"] == "codex" and other["owner"] == "elsewhere"
        assert all(s["reason"] == "no codex account (only other vendors')" for s in other["skipped"])
        for query, words in (("", "ticket is required"), ("?ticket=ENG%201", "is not a tracker ticket identifier"),
                             ("?ticket=ENG-1&ticket=ENG-2", "one ticket"),
                             ("?ticket=ENG-1&provider=nobody", "provider")):
            status, _, raw = mon.get("/api/fleet/owner" + query)
            answer = json.loads(raw)
            assert status == 400 and answer["error"] == "bad_request" and words in answer["message"], (query, raw)
            _validate(doc, {"$ref": "#/components/schemas/Error"}, answer)
        # One fleet read serves /api/fleet and every owner asked.
        # The node's own first heartbeat reads the anchor too; its next is two minutes away.
        wait_until(lambda: tracker.count("attachmentCreate") >= 1, timeout=30, message="the node's first heartbeat")
        before = tracker.count("issue")
        for number in range(5):
            assert mon.get("/api/fleet/owner?ticket=ENG-%d" % number)[0] == 200
        assert mon.get("/api/fleet")[0] == 200 and tracker.count("issue") == before
    finally:
        mon.stop()


# ---------------------------------------------------------------- the demo: the page, the printed command, --url

def test_the_demo_routes_a_ticket_around_its_rejected_host(tmp_path):
    import re
    import shlex
    import subprocess

    from tests.support import pages
    from tests.support.browser import chromium, wait_for
    from tests.support.firstlook import Demo, get_json
    from tests.support.home import REPO, clean_env

    demo = Demo(tmp_path / "home", ["--port", "0"]).wait_ready()
    try:
        text = demo.text()
        ticket, around, owner, page = re.search(r"ticket (\S+) skips (\S+) \(no headroom\) for (\S+): (\S+)",
                                                text).groups()
        command = re.search(r"which host takes a ticket: (.+)", text).group(1)
        assert page == "%s/fleet?ticket=%s" % (demo.url, ticket)
        assert command.endswith("owner %s --headroom --url %s" % (ticket, demo.url))
        # The command runs as printed, in the way the demo was started.
        done = subprocess.run(shlex.split(command), cwd=str(REPO), env=clean_env(tmp_path), capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert done.stdout.splitlines()[0] == owner and "  skipped %s: " % around in done.stdout
        # Without --headroom the demo's fleet gives the ticket to the contract's owner, the rejected host.
        plain = subprocess.run(shlex.split(command.replace(" --headroom", "")) + ["--json"], cwd=str(REPO),
                               env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
        assert plain.returncode == 0 and json.loads(plain.stdout)["owner"] == around
        routed = get_json(demo.url + "/api/fleet/owner?ticket=" + ticket)
        assert routed["owner"] == owner and routed["skipped"][0]["host"] == around
        with chromium(1280, 900) as browser:
            for scheme, width in (("light", 1280), ("dark", 360)):
                pages.emulate(browser, scheme, width)
                browser.get(page)
                wait_for(lambda: browser.execute_script(
                    "return document.getElementById('owner-result').dataset.owner || ''") == owner,
                         what="the routed ticket on the fleet page")
                said = browser.execute_script("""
                    var box = document.getElementById('owner-result');
                    return {text: box.innerText, found: box.dataset.found,
                            ticket: document.getElementById('owner-ticket').value,
                            wide: document.documentElement.scrollWidth > document.documentElement.clientWidth};""")
                assert said["ticket"] == ticket and said["found"] == "true" and not said["wide"]
                assert "%s goes to %s" % (ticket, owner) in said["text"] and around in said["text"]
                assert routed["skipped"][0]["reason"] in said["text"]
                assert not pages.a11y_failures(browser) and not pages.contrast_failures(browser)
            # Asking for another ticket on the page: the answer and the page's address follow.
            field = browser.find_element("css selector", "#owner-ticket")
            field.clear()
            field.send_keys("OPS-42")
            browser.find_element("css selector", "#owner-form button").click()
            other = get_json(demo.url + "/api/fleet/owner?ticket=OPS-42")
            wait_for(lambda: "OPS-42 goes to %s" % other["owner"] in browser.execute_script(
                "return document.getElementById('owner-result').innerText"), what="the second ticket's owner")
            assert browser.execute_script("return location.search") == "?ticket=OPS-42"
    finally:
        assert demo.stop() == 0
