"""Posture: pure derivation, then the service (cache, single flight, floor, latch edges) against
the real probe child and the provider test server."""
from __future__ import annotations

import json
import logging
import os
import threading

import pytest

from tests.support.home import assert_no_canary, canary, files_text, write_accounts
from tests.support.waiting import wait_until
from svcposture import _time
from svcposture.posture import service as posture
from svcposture.claude.errors import MESSAGES
from svcposture.events import STATUS_CHANGED, EventLog, event_name
from svcposture.posture.latch import Latch
from svcposture.paths import Paths
from svcposture.broadcast import Broadcast
from svcposture.claude.summary import derive_summary
from tests.support.posture import posture_service

NODE = "node-a"
BODY_KEYS = ["available", "node", "generatedAt", "probedAt", "cached", "status", "active", "accounts",
             "siblingWithHeadroom"]
ACCOUNT_KEYS = {"label", "email", "active", "overallStatus", "representativeClaim", "bindingWindow",
                "bindingStatus", "fiveHour", "sevenDay", "error", "envLine"}


# ---------------------------------------------------------------- pure derivation

def acct(label, *, active=False, claim=None, overall="allowed", five=None, seven=None, error=None, email=None):
    def w(spec):
        if spec is None:
            return None
        pct, status = spec
        return {"pct": pct, "resetsAt": "2026-01-01T00:00:00.000Z", "status": status}
    return {"label": label, "email": email, "active": active, "overallStatus": overall,
            "representativeClaim": claim, "fiveHour": w(five), "sevenDay": w(seven), "error": error}


def summary_of(*accounts):
    return derive_summary({"available": True, "accounts": list(accounts)}, NODE, 1000)


@pytest.mark.parametrize("claim,five,seven,expect", [
    ("seven_day", (10.0, "allowed"), (50.0, "rejected"), ("seven_day", "rejected")),
    ("five_hour", (10.0, "allowed"), (50.0, "rejected"), ("five_hour", "allowed")),
    (None, (10.0, "allowed"), (50.0, "allowed_warning"), ("seven_day", "allowed_warning")),
    (None, (99.0, "rejected"), (50.0, "allowed_warning"), ("five_hour", "rejected")),
    (None, (10.0, "allowed"), (50.0, "allowed"), ("seven_day", "allowed")),   # tie -> higher pct
    (None, (50.0, "allowed"), (50.0, "allowed"), ("five_hour", "allowed")),   # tie -> five_hour
    (None, (None, "allowed"), (3.0, "allowed"), ("seven_day", "allowed")),
    # A claim that is not a window (docs/posture.md): the worst window, and overallStatus as its status.
    ("seven_day_opus", (10.0, "allowed_warning"), None, ("five_hour", "allowed")),
    ("overage", (100.0, "rejected"), (40.0, "allowed"), ("five_hour", "allowed")),
    (None, None, None, (None, "allowed")),                                       # -> overallStatus
    ("seven_day", (10.0, "allowed"), None, ("seven_day", "allowed")),            # claim window missing
])
def test_binding_window(claim, five, seven, expect):
    s = summary_of(acct("a", active=True, claim=claim, five=five, seven=seven))
    assert (s["active"]["bindingWindow"], s["active"]["bindingStatus"]) == expect


@pytest.mark.parametrize("binding,status", [
    ("allowed", "ok"), ("allowed_warning", "degraded"), ("rejected", "rejected"), ("surprise", "unknown")])
def test_node_status_maps_binding_status(binding, status):
    s = summary_of(acct("a", active=True, claim="five_hour", five=(1.0, binding)))
    assert s["status"] == status


def test_node_status_unknown_without_active_and_error_with_active_error():
    assert summary_of(acct("a"))["status"] == "unknown"
    assert summary_of(acct("a"))["active"] is None
    s = summary_of(acct("a", active=True, error={"kind": "timeout", "message": "x", "httpStatus": None}))
    assert s["status"] == "error"
    assert s["active"]["error"]["kind"] == "timeout"


def test_sibling_with_headroom():
    s = summary_of(
        acct("a1", active=True, claim="seven_day", seven=(100.0, "rejected")),
        acct("a2", five=(10.0, "allowed"), seven=(60.0, "allowed"), email="two@example.com"),
        acct("a3", five=(30.0, "allowed"), seven=(20.0, "allowed")),          # max 30: best
        acct("a4", five=(1.0, "allowed"), seven=(2.0, "allowed_warning")),   # binding warning
        acct("a5", five=(1.0, "allowed"), error={"kind": "auth"}),
        acct("a6", five=(30.0, "allowed"), seven=(5.0, "allowed")),          # tie with a3, later
        acct("a7", five=(1.0, "allowed"), seven=None),                        # missing pct = 100
    )
    assert s["siblingWithHeadroom"] == {"label": "a3", "email": None}
    none = summary_of(acct("a1", active=True, five=(1.0, "allowed")), acct("a2", five=(1.0, "rejected")))
    assert none["siblingWithHeadroom"] is None


def test_whitelist_at_every_depth_and_sanitising():
    raw = acct("a", active=True, claim="five_hour", five=(10.0, "allowed"), email="<b>x</b>@evil")
    raw["token"] = "sk-secret"
    raw["fiveHour"]["raw"] = "sk-secret"
    raw["fiveHour"]["resetsAt"] = "sk-secret"
    raw["overallStatus"] = "sk-secret!"
    raw["error"] = None
    bad_err = acct("b", error={"kind": "auth", "message": "Bearer sk-secret", "httpStatus": 401, "stderr": "x"})
    weird = [acct("A B"), "nope", None, acct("a")]  # bad label, junk, duplicate label
    report = {"available": True, "accounts": [raw, bad_err] + weird, "tokens": ["sk-secret"], "extra": 1}
    s = derive_summary(report, NODE, 5)
    assert "sk-secret" not in json.dumps(s)
    assert [a["label"] for a in s["accounts"]] == ["a", "b"]
    for a in s["accounts"]:
        assert set(a) == ACCOUNT_KEYS
    assert set(s["accounts"][0]["fiveHour"]) == {"pct", "resetsAt", "status"}
    assert s["accounts"][0]["email"] is None and s["accounts"][0]["fiveHour"]["resetsAt"] is None
    assert s["accounts"][1]["error"] == {"kind": "auth", "message": "The provider refused the token.",
                                         "httpStatus": 401}
    body = posture.reply(s, cached=False)
    assert list(body) == BODY_KEYS


def test_node_level_error_and_disabled_bodies():
    for report in ({"error": {"kind": "config", "message": "rm -rf", "httpStatus": 9}}, "junk", None,
                   {"available": True, "accounts": "x"}):
        s = derive_summary(report, NODE, 7)
        body = posture.reply(s, cached=True)
        assert list(body) == BODY_KEYS + ["error"]
        assert body["status"] == "error" and body["active"] is None and body["accounts"] == []
        assert set(body["error"]) == {"kind", "message"}
        assert body["error"]["message"] in MESSAGES[body["error"]["kind"]]
    assert derive_summary({"available": False, "x": 1}, NODE, 1) == {"available": False, "node": NODE}
    assert posture.reply(posture.disabled_body(NODE), cached=True) == {"available": False, "node": NODE}


def test_broadcast_semantics():
    b = Broadcast()
    assert b.latest() == (0, None)
    assert b.wait(0, timeout=0.01) is None
    got = []
    t = threading.Thread(target=lambda: got.append(b.wait(0, timeout=10)))
    t.start()
    seq = b.publish({"n": 1})
    t.join(5)
    assert got == [(seq, {"n": 1})] and seq == 1
    b.publish({"n": 2})
    b.publish({"n": 3})
    assert b.wait(1, timeout=1) == (3, {"n": 3})  # a slow reader skips to the newest
    assert b.wait(3, timeout=0.01) is None
    closer = []
    t = threading.Thread(target=lambda: closer.append(b.wait(3, timeout=10)))
    t.start()
    b.close()
    t.join(5)
    assert closer == [None] and b.closed


# ---------------------------------------------------------------- the service

class Node:
    """One node: paths, event log, latch and posture service against the provider."""

    def __init__(self, home, env, provider, **settings):
        env["SVC_PROVIDER_URL"] = provider.url
        env["SVC_ACCOUNTS_ENV"] = str(home / ".config" / "svc" / "model-accounts.env")
        env.setdefault("SVC_PROBE_INTERVAL_S", "3600")
        env.update({k: str(v) for k, v in settings.items()})
        self.home, self.env = home, env
        self.paths = Paths(home, environ=env)
        self.log = EventLog.for_paths(self.paths)
        self.services = []
        self.service = self.new_service()

    def new_service(self, **kw):
        latch = Latch(self.paths.latch, self.log, NODE)
        latch.load()
        svc = posture_service(self.paths, node=NODE, latch=latch, environ=self.env, **kw)
        self.services.append(svc)
        return svc

    def status_events(self):
        return [e for e in self.log.iter_newest_first() if event_name(e) == STATUS_CHANGED][::-1]

    def stop(self):
        for s in self.services:
            s.stop()


@pytest.fixture
def make_node(home, env, provider):
    nodes = []

    def make(**settings):
        n = Node(home, env, provider, **settings)
        nodes.append(n)
        return n
    yield make
    for n in nodes:
        n.stop()


def test_thousand_reads_inside_ttl_spend_one_probe(make_node, provider):
    a, b = canary("a"), canary("b")
    provider.set_account(a)
    provider.set_account(b)
    node = make_node()
    write_accounts(node.paths.accounts_env, [("A", a, "a@example.com"), ("B", b, None)], active="A")
    first = node.service.read()
    assert first["cached"] is False and first["status"] == "ok"
    bodies = [node.service.read() for _ in range(1000)]
    assert provider.message_calls(a) == 1 and provider.message_calls(b) == 1
    assert {x["probedAt"] for x in bodies} == {first["probedAt"]}
    assert all(x["cached"] is True for x in bodies)
    assert wait_until(lambda: _time.now_ms() > _time.parse_iso_ms(first["generatedAt"]))
    assert node.service.read()["generatedAt"] != first["generatedAt"]
    assert node.service.metrics()["probeRuns"] == 1


def test_hundred_concurrent_forced_refreshes_spend_one_probe(make_node, provider):
    a = canary("a")
    provider.set_account(a, delay=0.3)
    node = make_node()
    write_accounts(node.paths.accounts_env, [("A", a, None)], active="A")
    barrier = threading.Barrier(100)
    results = []

    def hit():
        barrier.wait()
        results.append(node.service.read(refresh=True))
    threads = [threading.Thread(target=hit) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 100
    assert provider.message_calls(a) == 1
    assert len({r["probedAt"] for r in results}) == 1


def test_forced_refresh_mid_probe_joins_it_and_floor_gates_starts(make_node, provider):
    a = canary("a")
    provider.set_account(a, delay=0.3)
    node = make_node(SVC_REFRESH_FLOOR_S="30")
    write_accounts(node.paths.accounts_env, [("A", a, None)], active="A")
    node.service.start()  # the first probe is in flight when start() returns
    joined = node.service.read(refresh=True)
    assert joined["cached"] is False and provider.message_calls(a) == 1
    again = node.service.read(refresh=True)  # inside the floor: replay
    assert again["cached"] is True and again["probedAt"] == joined["probedAt"]
    assert provider.message_calls(a) == 1


def test_refresh_after_floor_and_read_after_ttl_probe_again(make_node, provider):
    a = canary("a")
    provider.set_account(a)
    node = make_node(SVC_REFRESH_FLOOR_S="0", SVC_POSTURE_TTL_S="0.3")
    write_accounts(node.paths.accounts_env, [("A", a, None)], active="A")
    one = node.service.read()
    two = node.service.read(refresh=True)
    assert two["cached"] is False and two["probedAt"] >= one["probedAt"]
    assert provider.message_calls(a) == 2
    assert wait_until(lambda: node.service.read()["cached"] is False, timeout=5, interval=0.1)
    assert provider.message_calls(a) == 3


def test_error_posture_is_cached_for_the_floor_only(make_node, provider):
    node = make_node(SVC_REFRESH_FLOOR_S="1.0", SVC_POSTURE_TTL_S="300")
    write_accounts(node.paths.accounts_env, [("A", canary("a"), None)], mode=0o666)
    body = node.service.read()
    assert body["status"] == "error" and body["error"]["kind"] == "config"
    assert body["accounts"] == [] and body["active"] is None
    for _ in range(20):
        assert node.service.read()["cached"] is True
    assert node.service.metrics()["probeRuns"] == 1
    assert wait_until(lambda: node.service.read()["cached"] is False, timeout=5, interval=0.05)
    assert node.service.metrics()["probeRuns"] == 2
    assert node.service.metrics()["probeErrors"] == 2
    assert node.service.account_status() == "error"


def test_episode_with_restart_gives_exactly_two_events(make_node, provider):
    a, b = canary("a"), canary("b")
    provider.set_account(a)
    provider.set_account(b)
    node = make_node(SVC_REFRESH_FLOOR_S="0")
    write_accounts(node.paths.accounts_env, [("A", a, "a@example.com"), ("B", b, None)], active="A")
    assert node.service.read(refresh=True)["status"] == "ok"
    provider.set_account(a, status="rejected", seven_day=(1.02, "rejected"), representative_claim="seven_day")
    body = node.service.read(refresh=True)
    assert body["status"] == "rejected"
    assert body["siblingWithHeadroom"] == {"label": "b", "email": None}
    # Fully handled before the reply: the event is already durable.
    events = node.status_events()
    assert len(events) == 1
    attrs = events[0]["attributes"]
    assert attrs["account.status"] == "rejected" and attrs["account.handle"] == "a"
    assert attrs["account.email"] == "a@example.com" and attrs["account.binding_window"] == "seven_day"
    assert attrs["node.name"] == NODE
    assert node.service.broadcast.latest()[1]["status"] == "rejected"
    node.service.stop()

    node.service = node.new_service()  # restart mid-episode
    assert node.service.read(refresh=True)["status"] == "rejected"
    assert len(node.status_events()) == 1
    provider.set_account(a, status="allowed", seven_day=(0.5, "allowed"), representative_claim="seven_day")
    assert node.service.read(refresh=True)["status"] == "ok"
    assert node.service.read(refresh=True)["status"] == "ok"
    events = node.status_events()
    assert [e["attributes"]["account.status"] for e in events] == ["rejected", "ok"]


def test_switch_away_from_rejected_account_gives_no_false_ok(make_node, provider):
    a, b = canary("a"), canary("b")
    provider.set_account(a, status="rejected", five_hour=(1.0, "rejected"), representative_claim="five_hour")
    provider.set_account(b)
    node = make_node(SVC_REFRESH_FLOOR_S="0")
    write_accounts(node.paths.accounts_env, [("A", a, None), ("B", b, None)], active="A")
    assert node.service.read(refresh=True)["status"] == "rejected"
    write_accounts(node.paths.accounts_env, [("A", a, None), ("B", b, None)], active="B")
    body = node.service.read(refresh=True)
    assert body["status"] == "ok" and body["active"]["label"] == "b"
    assert [e["attributes"]["account.status"] for e in node.status_events()] == ["rejected"]
    assert node.service.latch.is_latched("a")


def test_transport_error_and_degraded_do_not_trip_the_latch(make_node, provider):
    a = canary("a")
    provider.set_account(a, mode="drop")
    node = make_node(SVC_REFRESH_FLOOR_S="0")
    write_accounts(node.paths.accounts_env, [("A", a, None)], active="A")
    body = node.service.read(refresh=True)
    assert body["status"] == "error" and body["active"]["error"]["kind"] == "transport"
    assert node.service.metrics()["probeErrors"] == 1 and node.service.metrics()["lastSuccessMs"] is None
    provider.set_account(a, status="allowed_warning", five_hour=(0.9, "allowed_warning"))
    assert node.service.read(refresh=True)["status"] == "degraded"
    assert node.status_events() == []
    assert node.service.latch.snapshot() == {}


def test_no_active_account_is_unknown(make_node, provider):
    a = canary("a")
    provider.set_account(a)
    node = make_node()
    write_accounts(node.paths.accounts_env, [("A", a, None)])
    body = node.service.read()
    assert body["status"] == "unknown" and body["active"] is None and len(body["accounts"]) == 1
    assert body["siblingWithHeadroom"] == {"label": "a", "email": None}


def test_disabled_bodies_are_exact(make_node, provider):
    node = make_node()
    assert node.service.read() == {"available": False, "node": NODE}  # no file
    assert node.service.account_status() == "unavailable"
    write_accounts(node.paths.accounts_env, [("A", "PASTE_TOKEN_HERE", "a@x.io")], active="A")
    assert node.service.read(refresh=True) == {"available": False, "node": NODE}
    off = node.new_service(probe_enabled=False)
    off.start()
    assert off.read(refresh=True) == {"available": False, "node": NODE}
    assert off.broadcast.latest()[1] == {"available": False, "node": NODE}
    assert off.account_status() == "unavailable"
    node.env["SVC_ACCOUNTS_PROBE"] = "0"
    write_accounts(node.paths.accounts_env, [("A", canary("a"), None)], active="A")
    assert node.new_service().read(refresh=True) == {"available": False, "node": NODE}
    assert provider.message_calls() == 0


def test_periodic_loop_pushes_fresh_frames(make_node, provider):
    a = canary("a")
    provider.set_account(a)
    node = make_node(SVC_PROBE_INTERVAL_S="0.2", SVC_REFRESH_FLOOR_S="0")
    write_accounts(node.paths.accounts_env, [("A", a, None)], active="A")
    node.service.start()
    seen = []
    seq = 0
    while len(seen) < 3:
        got = node.service.broadcast.wait(seq, timeout=10)
        assert got is not None
        seq, body = got
        seen.append(body)
    assert all(b["cached"] is False and b["status"] == "ok" for b in seen)
    assert len({b["probedAt"] for b in seen}) == 3
    node.service.stop()
    assert node.service.broadcast.closed
    calls = provider.message_calls(a)
    assert calls >= 3
    m = node.service.metrics()
    assert m["probeRuns"] >= 3 and m["probeErrors"] == 0 and m["lastSuccessMs"] == m["last"]["probedAt"]


def test_canaries_appear_nowhere(make_node, provider, caplog):
    caplog.set_level(logging.DEBUG)
    toks = {n: canary(n) for n in ("act", "auth", "garb", "drop")}
    provider.set_account(toks["act"], status="rejected", five_hour=(1.0, "rejected"))
    provider.set_account(toks["auth"], mode="auth")
    provider.set_account(toks["garb"], mode="garbage")
    provider.set_account(toks["drop"], mode="drop")
    node = make_node(SVC_REFRESH_FLOOR_S="0")
    hostile = 'echo "$MODEL_TOKEN_ACT"; echo "$MODEL_TOKEN_AUTH" >&2\n'
    write_accounts(node.paths.accounts_env, [(n.upper(), t, None) for n, t in toks.items()], active="ACT",
                   extra=hostile)
    node.service.start()
    bodies = [node.service.read(refresh=True), node.service.read()]
    provider.set_account(toks["act"])
    bodies.append(node.service.read(refresh=True))
    frames = [node.service.broadcast.latest()[1]]
    texts = [json.dumps(x) for x in bodies + frames]
    texts.append(json.dumps(node.service.metrics()))
    texts.append(files_text(node.home / "svc"))
    texts.append("\n".join(r.getMessage() for r in caplog.records))
    assert_no_canary(texts, toks.values())
    assert [e["attributes"]["account.status"] for e in node.status_events()] == ["rejected", "ok"]


def test_monitor_process_opens_the_env_file_only_as_a_descriptor_for_the_child(home, env, provider):
    """The parent opens the file once, read-only and without following a link, as a
    raw descriptor handed to the child (never a file object it could read from);
    an audit hook in a real process sees every open of it."""
    import subprocess
    import sys

    a = canary("a")
    provider.set_account(a)
    env["SVC_PROVIDER_URL"] = provider.url
    env["SVC_ACCOUNTS_ENV"] = str(home / "acc.env")
    env["SVC_QUOTA_SAMPLER"] = "0"
    write_accounts(home / "acc.env", [("A", a, "a@example.com")], active="A")
    code = """
import json, os, sys
target = os.environ["SVC_ACCOUNTS_ENV"]
opened = []
def hook(event, args):
    if event == "open" and args and str(args[0]) == target:
        opened.append([args[1], args[2]])
sys.addaudithook(hook)
from svcposture.events import EventLog
from svcposture.posture.latch import Latch
from svcposture.paths import Paths
from svcposture.posture.service import PostureService
from svcposture.settings import Settings
from svcposture.vendors import default_vendor
paths = Paths(environ=os.environ)
log = EventLog.for_paths(paths)
latch = Latch(paths.latch, log, "n")
latch.load()
svc = PostureService(default_vendor(), paths, node="n", settings=Settings.from_environ(os.environ), latch=latch,
                     environ=os.environ, speaks_for_node=True)
svc.start()
body = svc.read(refresh=True)
svc.stop()
print(json.dumps({"opened": opened, "status": body["status"], "active": body["active"]["label"]}))
"""
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok" and result["active"] == "a"
    assert len(result["opened"]) >= 1
    for mode, flags in result["opened"]:
        # os.open (no file-object mode), read-only, no symlink followed.
        assert mode is None and flags & os.O_ACCMODE == os.O_RDONLY and flags & os.O_NOFOLLOW
    assert_no_canary([out.stdout, out.stderr], [a])


def test_stop_kills_a_probe_in_flight_instead_of_waiting_for_the_deadline(make_node, provider):
    import time

    a = canary("a")
    provider.set_account(a, mode="slow", delay=20)
    node = make_node(SVC_PROBE_TIMEOUT_S="25", SVC_PROBE_DEADLINE_S="30")
    write_accounts(node.paths.accounts_env, [("A", a, None)], active="A")
    node.service.start()
    assert wait_until(lambda: provider.message_calls(a) == 1, timeout=15)
    waiter = []
    t = threading.Thread(target=lambda: waiter.append(node.service.read()))
    t.start()
    t0 = time.monotonic()
    node.service.stop()
    t.join(15)
    assert time.monotonic() - t0 < 15  # far below the 30 s sweep deadline
    assert waiter and waiter[0]["status"] == "error" and waiter[0]["error"]["kind"] == "internal"
    assert node.status_events() == []
    assert node.service.broadcast.latest() == (0, None)  # shutdown is not pushed as an error frame
