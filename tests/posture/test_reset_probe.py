"""The probe at the reset (docs/posture.md): a rejected account clears within about a
minute of its window's reset, not up to a probe interval later.

The 60 s margin is shortened for tests: by the service's `reset_margin_s`
argument in-process, and by the test hook `reset_margin_s` (tests/support/hooks.py)
for a monitor subprocess.
"""
from __future__ import annotations

import json
import threading
import time

import pytest

from svcposture import _time
from svcposture.events import EventLog
from svcposture.posture.latch import Latch
from svcposture.paths import Paths
from svcposture.claude.summary import derive_summary
from svcposture.posture.resetschedule import ResetSchedule, reset_instants_ms
from tests.support.home import accounts_path, canary, monitor_env, status_events, write_accounts
from tests.support.hooks import hooked
from tests.support.monitor import SSEClient
from tests.support.waiting import wait_until
from tests.support.posture import posture_service

R1 = "2026-01-01T05:00:00.000Z"
R2 = "2026-01-07T00:00:00.000Z"
R3 = "2026-01-01T03:00:00.000Z"


def view(label, *, active=False, claim="five_hour", five=("allowed", R1), seven=("allowed", R2), overall=None):
    def w(spec):
        return None if spec is None else {"pct": 50.0, "status": spec[0], "resetsAt": spec[1]}
    return {"label": label, "email": None, "active": active, "overallStatus": overall or "allowed",
            "representativeClaim": claim, "fiveHour": w(five), "sevenDay": w(seven), "error": None}


def instants(*accounts):
    return reset_instants_ms(derive_summary({"available": True, "accounts": list(accounts)}, "n", 1))


def test_reset_instants_are_the_active_binding_window_and_every_rejected_one():
    ms = _time.parse_iso_ms
    assert instants(view("a", active=True)) == [ms(R1)]
    assert instants(view("a", active=True, claim="seven_day")) == [ms(R2)]
    # A rejected sibling counts with its own binding window; an allowed one does not.
    assert instants(view("a", active=True), view("b", claim="seven_day", seven=("rejected", R3)),
                    view("c", five=("allowed", "2026-02-01T00:00:00.000Z"))) == [ms(R3), ms(R1)]
    # Duplicates collapse; windows without a reset give nothing.
    assert instants(view("a", active=True), view("b", five=("rejected", R1))) == [ms(R1)]
    assert instants(view("a", active=True, five=("allowed", None))) == []
    assert instants(view("a", five=("allowed", R1))) == []  # no active account, nothing rejected
    # Overage: the worst window binds, and its reset is the one probed for.
    assert instants(view("a", active=True, claim="overage", five=("rejected", R3))) == [ms(R3)]


@pytest.mark.parametrize("summary", [None, {}, {"available": False, "node": "n"}, [],
                                     {"available": True, "error": {"kind": "transport"}, "accounts": []},
                                     {"available": True, "accounts": [None, 3, {"active": True,
                                                                             "bindingWindow": "five_hour",
                                                                             "fiveHour": {"resetsAt": "soon"}}]}])
def test_reset_instants_of_junk_are_none(summary):
    assert reset_instants_ms(summary) == []


def test_schedule_keeps_only_probes_ahead_and_is_replaced_whole():
    schedule = ResetSchedule(margin_s=60)
    schedule.replace([1_000, 500_000, 200_000], now_ms=100_000)
    assert schedule.snapshot() == [260_000, 560_000]   # 1_000 + 60 s is already past
    assert schedule.pop_due(300_000) is True and schedule.snapshot() == [560_000]
    # A probe taken a hair early by the wall clock is still taken, and never asked again.
    assert schedule.pop_due(559_990) is True and schedule.snapshot() == []
    schedule.replace([500_000, 900_000], now_ms=559_995)
    assert schedule.snapshot() == [960_000]
    assert schedule.pop_due(0) is True and schedule.pop_due(10 ** 12) is False
    schedule.replace([], now_ms=0)
    assert schedule.next_ms() is None


# ---------------------------------------------------------------- in-process service

def service_for(home, env, provider, floor_s="0.2", **kw):
    env.update({"SVC_PROVIDER_URL": provider.url, "SVC_PROBE_INTERVAL_S": "3600", "SVC_POSTURE_TTL_S": "3600",
                "SVC_REFRESH_FLOOR_S": floor_s, "SVC_PROBE_DEADLINE_S": "10"})
    paths = Paths(home, environ=env)
    log = EventLog.for_paths(paths)
    latch = Latch(paths.latch, log, "node-r")
    latch.load()
    return posture_service(paths, node="node-r", latch=latch, environ=env, **kw)


def test_service_probes_at_the_reset_and_clears_rejected(home, env, provider):
    token = canary("a")
    write_accounts(accounts_path(home), [("A", token, "a@example.com")], active="A")
    reset = time.time() + 5
    provider.set_account(token, status="rejected", five_hour=(1.0, "rejected"), reset_5h=reset, rolls_over=True)
    service = service_for(home, env, provider, reset_margin_s=0.5)
    service.start()
    try:
        first = service.read()
        assert first["status"] == "rejected"
        assert service.resets.snapshot() == [int(reset) * 1000 + 500]
        got = wait_until(lambda: (service.current() or {}).get("status") == "ok" and service.current(), timeout=30,
                         message="the reset probe's ok")
        assert got["probedAt"] >= int(reset) * 1000 + 500
        assert service.reset_probes == 1 and provider.message_calls(token) == 2
        assert [e["attributes"]["account.status"] for e in status_events(home)] == ["rejected", "ok"]
    finally:
        service.stop()


def test_the_refresh_floor_still_gates_the_reset_probe(home, env, provider):
    token = canary("a")
    write_accounts(accounts_path(home), [("A", token, None)], active="A")
    reset = int(time.time()) + 4
    provider.set_account(token, status="rejected", five_hour=(1.0, "rejected"), reset_5h=reset, rolls_over=True)
    service = service_for(home, env, provider, floor_s="10", reset_margin_s=0.1)
    service.start()
    try:
        assert service.read()["status"] == "rejected"
        wait_until(lambda: (service.current() or {}).get("status") == "ok", timeout=30)
        first, second = [wall for _mono, wall, _tok, _status in provider.served_snapshot()]
        # Due 0.1 s after a reset 3 to 4 s away, the probe waited for the 10 s floor
        # (less the first child's slower start-up, at most).
        assert second - first >= 7.0, (first, second)
    finally:
        service.stop()


def test_stop_cancels_a_scheduled_reset_probe(home, env, provider):
    token = canary("a")
    write_accounts(accounts_path(home), [("A", token, None)], active="A")
    provider.set_account(token, reset_5h=time.time() + 3600)
    service = service_for(home, env, provider)
    service.start()
    assert service.read()["status"] == "ok"
    assert len(service.resets.snapshot()) == 1
    stopper = threading.Thread(target=service.stop)
    stopper.start()
    stopper.join(10)
    assert not stopper.is_alive() and not service._loop.is_alive()
    assert provider.message_calls(token) == 1


# ---------------------------------------------------------------- the monitor process

def test_monitor_pushes_the_ok_edge_at_the_reset_without_a_forced_refresh(home, provider, monitors):
    token = canary("a")
    env = hooked(monitor_env(home, provider.url, SVC_PROBE_INTERVAL_S="300", SVC_POSTURE_TTL_S="300",
                             SVC_REFRESH_FLOOR_S="1", SVC_PROBE_DEADLINE_S="10"), reset_margin_s=1)
    write_accounts(accounts_path(home), [("A", token, "a@example.com")], active="A")
    reset = time.time() + 12
    provider.set_account(token, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.3, "allowed"),
                         reset_5h=reset, rolls_over=True)
    mon = monitors.start(env)
    try:
        with SSEClient(mon.port) as stream:
            first = stream.next_account()
            assert first["status"] == "rejected", "the first probe came after the reset: %s" % first
            assert first["probedAt"] < reset * 1000
            frame = first
            while frame["status"] != "ok":
                frame = stream.next_account()
        assert frame["cached"] is False
        # The reset probe, not the periodic one (300 s) nor a refresh: two probes in all.
        assert int(reset) * 1000 + 1000 <= frame["probedAt"] < reset * 1000 + 150_000
        assert provider.message_calls(token) == 2
        events = status_events(home)
        assert [e["attributes"]["account.status"] for e in events] == ["rejected", "ok"]
        status, body = mon.get_json("/api/accounts")
        assert body["status"] == "ok" and body["probedAt"] == frame["probedAt"]
        assert json.loads(json.dumps(body))["active"]["fiveHour"]["status"] == "allowed"
    finally:
        assert mon.stop() == 0
