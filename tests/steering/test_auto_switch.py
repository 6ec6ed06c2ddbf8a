"""The automatic switch (docs/steering.md, SVC_AUTO_SWITCH_AT), through a real monitor and its
real switch child against the stand-in provider.

- It switches once when the active account reaches the threshold, and no more
  than once per 10 min per host, also across a restart;
- it never goes back to an account before that account's binding window
  resets, also across a restart (the gap shortened by the test knob);
- a fleet of 100 simulated hosts leaving one exhausted account spreads over
  the siblings within 10 points of the best, none taking more than its fair
  share + 10 %;
- kill -9 at random points, and right after the rename or the intent: the
  log's account.switched events form one unbroken chain from the first active
  account to the file's last, so no switch is recorded twice or lost.
"""
from __future__ import annotations

import collections
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from tests.support.home import accounts_path, canary, monitor_env, set_host_name, write_accounts
from tests.support.hooks import hooked
from tests.support.monitor import Monitor, start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

from svcposture.steering.headroom import choose, ranked
from svcposture.envfile.exportline import active_label

TA, TB, TC = canary("autoa"), canary("autob"), canary("autoc")
ACCOUNTS = [("A", TA, "a@example.com"), ("B", TB, "b@example.com"), ("C", TC, "c@example.com")]


def switched(home: Path) -> List[Dict[str, Any]]:
    out = []
    for path in sorted((home / "svc" / "events").glob("*.jsonl")) if (home / "svc" / "events").is_dir() else []:
        for raw in path.read_bytes().splitlines():
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if event.get("attributes", {}).get("event.name") == "account.switched":
                out.append(event["attributes"])
    return out


def file_active(home: Path) -> Optional[str]:
    return active_label(accounts_path(home).read_bytes(), "claude")


def probes(mon: Monitor, count: int) -> None:
    """Wait until the monitor has handled `count` more probes (each a new probedAt)."""
    seen = set()

    def more() -> bool:
        status, body = mon.get_json("/api/accounts")
        if status == 200 and body.get("probedAt"):
            seen.add(body["probedAt"])
        return len(seen) > count
    wait_until(more, 30, interval=0.05, message="%d more probes" % count)


def node(tmp_path: Path, provider: ProviderServer, gap_s: Optional[float] = None, **extra: str) -> Dict[str, Any]:
    """A node that switches automatically at 90 %; `gap_s` shortens the 10 min between two
    automatic switches (the test hook, tests/support/hooks.py)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    set_host_name(home, "auto-node")
    write_accounts(accounts_path(home), ACCOUNTS, active="A")
    env = monitor_env(home, provider.url, **dict({"SVC_AUTO_SWITCH_AT": "90"}, **extra))
    if gap_s is not None:
        env = hooked(env, auto_switch_gap_s=gap_s)
    return {"home": home, "env": env}


def test_switches_once_then_waits_ten_minutes_also_after_a_restart(tmp_path: Path) -> None:
    with ProviderServer() as provider:
        provider.set_account(TA, five_hour=(0.95, "allowed_warning"), seven_day=(0.30, "allowed"))
        provider.set_account(TB, five_hour=(0.10, "allowed"), seven_day=(0.10, "allowed"))
        provider.set_account(TC, five_hour=(0.40, "allowed"), seven_day=(0.10, "allowed"))
        n = node(tmp_path, provider)
        mon = start_monitor(n["env"])
        try:
            wait_until(lambda: file_active(n["home"]) == "b", 30, message="the automatic switch to b")
            wait_until(lambda: mon.get_json("/api/accounts")[1]["active"]["label"] == "b", message="b shown")
            probes(mon, 5)
            assert [(e["account.from"], e["account.to"], e["switch.reason"]) for e in switched(n["home"])] \
                == [("a", "b", "auto")]
            # b is exhausted now, c has headroom: but one switch per 10 min per host.
            provider.set_account(TB, status="rejected", five_hour=(1.02, "rejected"), seven_day=(0.10, "allowed"))
            probes(mon, 5)
            assert "at most one switch per 600 s" in mon.stderr_text()
        finally:
            mon.stop()
        mon = start_monitor(n["env"])
        try:
            probes(mon, 5)
        finally:
            mon.stop()
        assert file_active(n["home"]) == "b" and len(switched(n["home"])) == 1


def test_never_back_before_the_window_resets_also_after_a_restart(tmp_path: Path) -> None:
    reset_a = time.time() + 3600
    with ProviderServer() as provider:
        provider.set_account(TA, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.3, "allowed"),
                             reset_5h=reset_a)
        provider.set_account(TB, five_hour=(0.10, "allowed"), seven_day=(0.10, "allowed"))
        provider.set_account(TC, five_hour=(0.60, "allowed"), seven_day=(0.10, "allowed"))
        n = node(tmp_path, provider, gap_s=0)
        mon = start_monitor(n["env"])
        try:
            wait_until(lambda: file_active(n["home"]) == "b", 30, message="a -> b")
            # a recovers within the same window (same reset), b is exhausted: c, never a.
            provider.set_account(TA, five_hour=(0.05, "allowed"), seven_day=(0.3, "allowed"), reset_5h=reset_a)
            provider.set_account(TB, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.1, "allowed"))
            wait_until(lambda: file_active(n["home"]) == "c", 30, message="b -> c")
            wait_until(lambda: mon.get_json("/api/accounts")[1]["active"]["label"] == "c", message="c shown")
        finally:
            mon.stop()
        # c is exhausted too; a has the most headroom but was left in this window, b as well.
        provider.set_account(TC, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.1, "allowed"))
        mon = start_monitor(n["env"])
        try:
            probes(mon, 8)
            assert "no other account has headroom" in mon.stderr_text()
        finally:
            mon.stop()
        chain = [(e["account.from"], e["account.to"]) for e in switched(n["home"])]
        assert chain == [("a", "b"), ("b", "c")] and file_active(n["home"]) == "c"


def test_back_to_an_account_once_its_window_has_reset(tmp_path: Path) -> None:
    with ProviderServer() as provider:
        provider.set_account(TA, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.3, "allowed"),
                             reset_5h=time.time() + 3)
        provider.set_account(TB, five_hour=(0.10, "allowed"), seven_day=(0.10, "allowed"))
        provider.set_account(TC, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.1, "allowed"))
        # A window that resets within SVC_ADVICE_WAIT_S is waited for rather than left: 0 here, so a leaves.
        n = node(tmp_path, provider, gap_s=0, SVC_ADVICE_WAIT_S="0")
        mon = start_monitor(n["env"])
        try:
            wait_until(lambda: file_active(n["home"]) == "b", 30, message="a -> b")
            provider.set_account(TA, five_hour=(0.0, "allowed"), seven_day=(0.3, "allowed"))
            provider.set_account(TB, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.1, "allowed"))
            wait_until(lambda: file_active(n["home"]) == "a", 30, message="b -> a after a's reset")
        finally:
            mon.stop()
        assert [(e["account.from"], e["account.to"]) for e in switched(n["home"])] == [("a", "b"), ("b", "a")]


def test_never_onto_a_fuller_account_and_says_so_once(tmp_path: Path) -> None:
    # SVC_AUTO_SWITCH_AT=80: a at 85 %, its only sibling b at 95 %. b is no target: it stays on a.
    with ProviderServer() as provider:
        provider.set_account(TA, five_hour=(0.85, "allowed"), seven_day=(0.30, "allowed"))
        provider.set_account(TB, five_hour=(0.95, "allowed_warning"), seven_day=(0.30, "allowed"))
        n = node(tmp_path, provider, gap_s=0, SVC_AUTO_SWITCH_AT="80")
        write_accounts(accounts_path(n["home"]), ACCOUNTS[:2], active="A")
        mon = start_monitor(n["env"])
        try:
            probes(mon, 6)
            assert file_active(n["home"]) == "a" and switched(n["home"]) == []
            said = [line for line in mon.stderr_text().splitlines() if "auto switch: a stays" in line]
            assert len(said) == 1 and "no other account has headroom below 80%" in said[0], said
            status, advice = mon.get_json("/api/advice")
            assert status == 200 and advice["active"]["label"] == "a" and advice["advice"] == "stay"
            # Below the threshold, b is a target.
            provider.set_account(TB, five_hour=(0.40, "allowed"), seven_day=(0.30, "allowed"))
            wait_until(lambda: file_active(n["home"]) == "b", 30, message="a -> b once b is below 80 %")
        finally:
            mon.stop()
        assert [(e["account.from"], e["account.to"]) for e in switched(n["home"])] == [("a", "b")]


def test_a_refused_active_token_is_left_for_a_healthy_sibling(tmp_path: Path) -> None:
    """A refused credential does not come back by waiting: the monitor switches to the healthiest sibling
    with headroom, never onto another refused one, and once only."""
    with ProviderServer() as provider:
        provider.set_account(TA, mode="auth")
        provider.set_account(TB, mode="auth")
        provider.set_account(TC, five_hour=(0.40, "allowed"), seven_day=(0.10, "allowed"))
        n = node(tmp_path, provider)
        mon = start_monitor(n["env"])
        try:
            wait_until(lambda: file_active(n["home"]) == "c", 30, message="the automatic switch to c")
            wait_until(lambda: mon.get_json("/api/accounts")[1]["active"]["label"] == "c", message="c shown")
            probes(mon, 3)
        finally:
            mon.stop()
        assert [(e["account.from"], e["account.to"], e["switch.reason"]) for e in switched(n["home"])] \
            == [("a", "c", "auto")]


def test_an_extra_window_at_the_threshold_is_due(tmp_path: Path) -> None:
    from svcposture.steering.watcher import AutoSwitcher
    from svcposture.paths import Paths
    window = {"pct": 10.0, "resetsAt": None, "status": "allowed"}
    active = {"label": "codex-a", "active": True, "error": None, "bindingStatus": "allowed",
              "bindingWindow": "five_hour", "fiveHour": window, "sevenDay": window,
              "extraWindows": [{"pct": 100.0, "resetsAt": None, "status": "rejected", "seconds": 17940, "name": None}]}
    switcher = AutoSwitcher(Paths(environ={"HOME": str(tmp_path)}), {}, "n", 90.0, provider="codex")
    assert switcher.due({"available": True, "active": active}) is active
    assert switcher.due({"available": True, "active": dict(active, extraWindows=[])}) is None


# ---------------------------------------------------------------- fleet spread

def _view(label: str, pct: float, status: str = "allowed", active: bool = False) -> Dict[str, Any]:
    window = {"pct": pct, "resetsAt": "2030-01-01T00:00:00.000Z", "status": status}
    return {"label": label, "email": None, "active": active, "overallStatus": status, "representativeClaim": "five_hour",
            "bindingWindow": "five_hour", "bindingStatus": status, "fiveHour": window,
            "sevenDay": dict(window, pct=5.0, status="allowed"), "error": None}


FLEET_ACCOUNTS = [_view("spent", 100.0, "rejected", active=True), _view("s1", 20.0), _view("s2", 22.0),
                  _view("s3", 25.0), _view("s4", 29.0), _view("far", 60.0)]


def test_a_fleet_of_100_hosts_spreads_over_the_siblings_near_the_best() -> None:
    hosts = ["host-%03d" % i for i in range(100)]
    candidates = ranked(FLEET_ACCOUNTS, 0, exclude=["spent"])
    near = ["s1", "s2", "s3", "s4"]  # within 10 points of the best (s1, 80 points of headroom)
    fair = 100 / len(near)
    for roster in (hosts, list(reversed(hosts))):  # the roster's order does not matter
        picks = collections.Counter(choose(candidates, host=h, roster=roster) for h in hosts)
        assert set(picks) == set(near) and sum(picks.values()) == 100, picks
        assert all(picks[label] <= fair * 1.1 for label in near), picks
    # One host more or less moves few picks: the order is HRW, not the roster's.
    before = {h: choose(candidates, host=h, roster=hosts) for h in hosts}
    after = {h: choose(candidates, host=h, roster=hosts[1:]) for h in hosts[1:]}
    assert sum(before[h] != after[h] for h in hosts[1:]) < 100
    # A host outside any roster still spreads (its own HRW first), over every near sibling.
    alone = collections.Counter(choose(candidates, host=h) for h in hosts)
    assert set(alone) == set(near), alone
    # Without a host (a person's --best): the most headroom, every time.
    assert choose(candidates) == "s1"


def test_the_switch_child_takes_its_hosts_hrw_pick(tmp_path: Path) -> None:
    body = {"available": True, "node": "x", "generatedAt": "2030-01-01T00:00:00.000Z",
            "probedAt": int(time.time() * 1000), "cached": True, "status": "rejected",
            "active": FLEET_ACCOUNTS[0], "accounts": FLEET_ACCOUNTS, "siblingWithHeadroom": None}
    candidates = ranked(FLEET_ACCOUNTS, 0, exclude=["spent"])
    for host in ("host-007", "host-042", "host-099"):
        home = tmp_path / host
        home.mkdir()
        set_host_name(home, host)
        write_accounts(accounts_path(home), [(v["label"].upper(), "tok-" + v["label"], None) for v in FLEET_ACCOUNTS],
                       active="SPENT")
        proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "switch", "--best", "--reason", "auto",
                               "--posture-stdin", "--dry-run", "--json"], env=monitor_env(home, "http://127.0.0.1:9"),
                              input=json.dumps(body).encode(), capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["to"] == choose(candidates, host=host)
    # With the cluster's roster the child takes the roster-wide pick.
    roster = ["host-%03d" % i for i in range(100)]
    home = tmp_path / "host-042"
    cluster = home / "svc" / "cluster"
    cluster.mkdir(parents=True)
    (cluster / "cluster.json").write_text(json.dumps({"roster": roster}))
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "switch", "--best", "--reason", "auto",
                           "--posture-stdin", "--dry-run", "--json"], env=monitor_env(home, "http://127.0.0.1:9"),
                          input=json.dumps(body).encode(), capture_output=True, timeout=60)
    assert json.loads(proc.stdout)["to"] == choose(candidates, host="host-042", roster=roster)


# ---------------------------------------------------------------- kill -9

def test_kill9_anywhere_keeps_one_event_per_switch(tmp_path: Path) -> None:
    kills = int(os.environ.get("SVC_AUTO_SWITCH_KILLS", "8"))
    seed = int(os.environ.get("SVC_CRASH_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    rounds: List[Any] = []  # (step, active before, active after the kill, events after the kill)
    with ProviderServer() as provider:
        # Each exhausted window resets in half a second: leave it rather than wait (SVC_ADVICE_WAIT_S=0).
        n = node(tmp_path, provider, gap_s=0, SVC_ADVICE_WAIT_S="0")
        write_accounts(accounts_path(n["home"]), ACCOUNTS[:2], active="A")
        state_path = n["home"] / "svc" / "switch-state.json"
        for index in range(kills + 1):
            # Whichever account the file names is exhausted, with a reset a moment away
            # (so the hysteresis lets the next round go back); the other has headroom.
            now_active = file_active(n["home"])
            for label, token in (("a", TA), ("b", TB)):
                if label == now_active:
                    provider.set_account(token, status="rejected", five_hour=(1.0, "rejected"),
                                         seven_day=(0.1, "allowed"), reset_5h=time.time() + 0.5)
                else:
                    provider.set_account(token, five_hour=(0.1, "allowed"), seven_day=(0.1, "allowed"))
            env = dict(n["env"])
            step = ("random", "intent", "rename", "append")[index % 4] if index < kills else "clean"
            if step not in ("random", "clean"):
                # The switch child holds still right after this step: the kill lands exactly there.
                env = hooked(env, switch_pause=step + ":5")
            events_before = len(switched(n["home"]))
            mon = Monitor(env).start(tmp_path / ("monitor-%02d.log" % index), wait=False)
            if step == "clean":
                mon.wait_ready()
                wait_until(lambda: file_active(n["home"]) != now_active and not json.loads(
                    state_path.read_text())["providers"]["claude"]["pending"], 60, message="a clean last switch")
                assert mon.stop() == 0
                break
            if step == "random":
                time.sleep(rng.uniform(0.0, 2.0))
            elif step == "intent":
                wait_until(lambda: state_path.exists() and json.loads(state_path.read_text())["providers"]
                           ["claude"]["pending"], 30, interval=0.005, message="the intent")
            elif step == "rename":
                wait_until(lambda: file_active(n["home"]) != now_active, 30, interval=0.005, message="the rename")
            else:
                # This round's own event (a reconcile may append the last round's first).
                wait_until(lambda: [e for e in switched(n["home"])[events_before:]
                                    if e["account.from"] == now_active], 30, interval=0.005, message="the append")
            mon.kill9()
            rounds.append((step, now_active, file_active(n["home"]), len(switched(n["home"]))))
    chain = [(e["account.from"], e["account.to"]) for e in switched(n["home"])]
    summary = "seed %d: %r %r" % (seed, chain, rounds)
    # Every round killed after its rename switched, and so did the last one.
    assert len(chain) >= kills // 4 * 2 + 1, summary
    previous = "a"
    for from_label, to_label in chain:
        assert from_label == previous and to_label != from_label, summary
        previous = to_label
    assert previous == file_active(n["home"]), summary


def test_a_junk_threshold_leaves_the_automatic_switch_off_with_one_line(tmp_path: Path) -> None:
    with ProviderServer() as provider:
        provider.set_account(TA, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.3, "allowed"))
        provider.set_account(TB)
        provider.set_account(TC)
        for junk in ("ninety", "0", "101", "nan", "-5"):
            (tmp_path / junk).mkdir()
            n = node(tmp_path / junk, provider)
            mon = start_monitor(dict(n["env"], SVC_AUTO_SWITCH_AT=junk))
            try:
                probes(mon, 3)
            finally:
                mon.stop()
            assert "auto switch off: SVC_AUTO_SWITCH_AT must be a percentage" in mon.stderr_text(), junk
            assert file_active(n["home"]) == "a" and switched(n["home"]) == [], junk
