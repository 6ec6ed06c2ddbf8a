"""The human reserve, `svc.posture.reservePct` (docs/steering.md), as a config key: classified
SHARED beside the contract's table, carried by the bundle, written by join (and refused
when it is not an integer 0-50), and what it does to siblingWithHeadroom: siblings below it
first, and with no reserve the contract's rule exactly."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from tests.support.cli import cli
from tests.support.home import clean_env, set_host_name, write_json

from svcposture.summary import sibling_with_headroom

KEY = "svc.posture.reservePct"


def _env(tmp_path: Path) -> Dict[str, str]:
    home = tmp_path / "home"
    (home / ".config" / "svc").mkdir(parents=True, mode=0o700)
    set_host_name(home, "node-a")
    return clean_env(home)


def test_classify_lists_the_reserve_as_a_shared_setting(tmp_path: Path) -> None:
    env = _env(tmp_path)
    done = cli(env, "cluster", "classify", "--json")
    data = json.loads(done.stdout)
    assert len(data["items"]) == 18  # the contract's table is unchanged
    [setting] = [s for s in data["settings"] if s["layer2Key"] == KEY]
    assert setting["class"] == "SHARED" and KEY in data["sharedLayer2Keys"]
    assert KEY in cli(env, "cluster", "classify").stdout


def test_the_bundle_carries_it_and_join_writes_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    home = Path(env["HOME"])
    write_json(home / ".config" / "svc" / "cluster-secrets.json", {"svc": {"posture": {"reservePct": 20}}})
    out = tmp_path / "bundle.json"
    assert cli(env, "cluster", "bundle", "export", "--out", str(out)).returncode == 0
    assert json.loads(out.read_text())["shared"] == {KEY: 20}
    other = tmp_path / "other"
    (other / ".config" / "svc").mkdir(parents=True, mode=0o700)
    env2 = clean_env(other)
    done = cli(env2, "cluster", "join", str(out), "--host-name", "node-b")
    assert done.returncode == 0, done.stderr
    secrets = json.loads((other / ".config" / "svc" / "cluster-secrets.json").read_text())
    assert secrets["svc"]["posture"]["reservePct"] == 20


def test_the_reserve_command_shows_and_sets_it_and_guard_holds_on_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    secrets = Path(env["HOME"]) / ".config" / "svc" / "cluster-secrets.json"
    done = cli(env, "monitor", "reserve")
    assert done.returncode == 0 and done.stdout == ("svc-monitor reserve: the human reserve is 0%% (%s is not set): "
                                                    "automation may use every account up to 100%%\n" % KEY), done
    done = cli(env, "monitor", "reserve", "30", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"key": KEY, "value": 30, "previous": 0, "file": str(secrets), "changed": True}
    assert json.loads(secrets.read_text())["svc"]["posture"]["reservePct"] == 30
    assert os.stat(str(secrets)).st_mode & 0o777 == 0o600
    done = cli(env, "monitor", "reserve")
    assert "is 30%% (%s in %s): automation holds once a window reaches 70%%, leaving 30%% for people" % (
        KEY, secrets) in done.stdout, done.stdout
    # The guard holds on it (its JSON says the reserve even when no monitor answers).
    guard = cli(env, "monitor", "guard", "--json", "--url", "http://127.0.0.1:9")
    assert json.loads(guard.stdout)["reservePct"] == 30
    assert cli(env, "monitor", "reserve", "30").stdout.strip().endswith("already 30%; nothing changed")
    # Kept beside what else the file holds; config.json's value comes second, as for every SHARED key.
    write_json(secrets, {"svc": {"cluster": {"livenessAnchorIssue": "OPS-1"}, "posture": {"reservePct": 30}}})
    assert cli(env, "monitor", "reserve", "12").returncode == 0
    assert json.loads(secrets.read_text())["svc"] == {"cluster": {"livenessAnchorIssue": "OPS-1"},
                                                        "posture": {"reservePct": 12}}
    # A PCT outside 0-50, and a corrupt file, are refused with the file left as it was.
    for bad in ("51", "-1", "ten", "1.5", ""):
        done = cli(env, "monitor", "reserve", bad)
        assert done.returncode == 2 and "0 to 50" in done.stderr and done.stdout == "", (bad, done.stderr)
    secrets.write_text("{corrupt")
    done = cli(env, "monitor", "reserve", "10")
    assert done.returncode == 2 and "cluster-secrets.json" in done.stderr and secrets.read_text() == "{corrupt"
    assert "Traceback" not in done.stderr
    assert "svc-monitor reserve" in cli(env, "monitor", "--help").stdout


def test_join_refuses_a_reserve_out_of_range(tmp_path: Path) -> None:
    env = _env(tmp_path)
    for bad in (51, -5, "20", 12.5, True, None, [10]):
        doc = {"kind": "svc.cluster.bundle", "version": 1, "createdAt": "2026-11-22T00:00:00.000Z",
               "createdBy": "node-a", "shared": {KEY: bad}}
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(doc))
        os.chmod(str(path), 0o600)
        done = cli(env, "cluster", "join", str(path), "--host-name", "node-a")
        assert done.returncode == 2 and "Traceback" not in done.stderr, (bad, done.stderr)
        assert not (Path(env["HOME"]) / ".config" / "svc" / "cluster-secrets.json").exists(), bad


# ---------------------------------------------------------------- siblingWithHeadroom

def _view(label: str, five: Optional[float], seven: Optional[float], status: str = "allowed",
          active: bool = False, error: Any = None) -> Dict[str, Any]:
    def window(pct: Optional[float]) -> Optional[Dict[str, Any]]:
        return None if pct is None else {"pct": pct, "resetsAt": None, "status": status}
    return {"label": label, "email": None, "active": active, "bindingStatus": status, "error": error,
            "fiveHour": window(five), "sevenDay": window(seven)}


def _contract_rule(accounts: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """docs/posture.md as written: lowest max pct (missing counts 100) among allowed siblings, file order."""
    best: Optional[Tuple[float, int]] = None
    chosen = None
    for order, a in enumerate(accounts):
        if a["active"] or a["error"] or a["bindingStatus"] != "allowed":
            continue
        used = max((a[f]["pct"] if a[f] and a[f]["pct"] is not None else 100.0) for f in ("fiveHour", "sevenDay"))
        if best is None or (used, order) < best:
            best, chosen = (used, order), a
    return {"label": chosen["label"], "email": None} if chosen else None


def test_no_reserve_is_the_contracts_rule_exactly() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        accounts = [_view("a%d" % i, rng.choice([None, rng.uniform(0, 130), 100.0, 50.0]),
                          rng.choice([None, rng.uniform(0, 130), 100.0, 50.0]),
                          rng.choice(["allowed", "allowed", "allowed_warning", "rejected"]),
                          active=(i == 0), error=rng.choice([None, None, None, {"kind": "auth"}]))
                    for i in range(rng.randint(1, 6))]
        assert sibling_with_headroom(accounts) == _contract_rule(accounts)
        assert sibling_with_headroom(accounts, 0) == _contract_rule(accounts)


def test_a_reserve_prefers_siblings_below_it() -> None:
    """Whenever some sibling is below 100 - reserve on both windows, the one named is.

    (Ordered by the fuller window, as the contract orders them, the lowest is below
    the reserve whenever any is: the preference never contradicts the contract.)"""
    rng = random.Random(11)
    for _ in range(2000):
        reserve = rng.randint(0, 50)
        accounts = [_view("a%d" % i, rng.uniform(0, 110), rng.uniform(0, 110), active=(i == 0))
                    for i in range(rng.randint(2, 6))]
        chosen = sibling_with_headroom(accounts, reserve)
        below = [a["label"] for a in accounts[1:]
                 if max(a["fiveHour"]["pct"], a["sevenDay"]["pct"]) < 100 - reserve]
        if below:
            assert chosen is not None and chosen["label"] in below
        assert chosen == _contract_rule(accounts)


def test_the_page_reads_the_reserve_from_the_trajectory_body(tmp_path: Path) -> None:
    from tests.support.home import monitor_env
    from tests.support.monitor import start_monitor
    from tests.support.provider import ProviderServer
    from tests.support.waiting import wait_until

    home = tmp_path / "node"
    home.mkdir(mode=0o700)
    with ProviderServer() as provider:
        provider.set_account("t1", status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.2, "allowed"))
        provider.set_account("t2", five_hour=(0.10, "allowed"), seven_day=(0.50, "allowed"))
        provider.set_account("t3", five_hour=(0.45, "allowed"), seven_day=(0.45, "allowed"))
        env = monitor_env(home, provider.url, accounts=[("ACCT1", "t1", None), ("ACCT2", "t2", None),
                                                        ("ACCT3", "t3", None)], active="ACCT1")
        mon = start_monitor(env)
        try:
            body = wait_until(lambda: (lambda b: b if b.get("siblingWithHeadroom") else None)(
                mon.get_json("/api/accounts")[1]), message="a sibling")
            assert body["siblingWithHeadroom"]["label"] == "acct3"  # 45 % beats 50 %
            assert set(body) == {"available", "node", "generatedAt", "probedAt", "cached", "status", "active",
                                 "accounts", "siblingWithHeadroom"}  # the contract's body, nothing added
            assert mon.get_json("/api/trajectory")[1]["reservePct"] == 0
            write_json(home / ".config" / "svc" / "cluster-secrets.json", {"svc": {"posture": {"reservePct": 50}}})
            wait_until(lambda: mon.get_json("/api/trajectory")[1]["reservePct"] == 50, message="the reserve, 50")
            # Below 50 %: acct3 (45) is, acct2 (50) is not; the sibling stays acct3.
            assert mon.get_json("/api/accounts")[1]["siblingWithHeadroom"]["label"] == "acct3"
            # A value the config cannot hold counts as no reserve on the page (guard refuses it).
            write_json(home / ".config" / "svc" / "cluster-secrets.json", {"svc": {"posture": {"reservePct": 77}}})
            wait_until(lambda: mon.get_json("/api/trajectory")[1]["reservePct"] == 0, message="the reserve, 0")
        finally:
            mon.stop()


def test_the_dashboard_marks_the_reserve_on_every_bar(tmp_path: Path) -> None:
    from tests.support.browser import chromium, wait_for
    from tests.support.home import monitor_env
    from tests.support.monitor import start_monitor
    from tests.support.provider import ProviderServer

    home = tmp_path / "node"
    home.mkdir(mode=0o700)
    write_json(home / ".config" / "svc" / "cluster-secrets.json", {"svc": {"posture": {"reservePct": 20}}})
    with ProviderServer() as provider:
        provider.set_account("t1", five_hour=(0.30, "allowed"), seven_day=(0.85, "allowed_warning"))
        provider.set_account("t2")
        env = monitor_env(home, provider.url, accounts=[("ACCT1", "t1", None), ("ACCT2", "t2", None)],
                          active="ACCT1", SVC_PROBE_INTERVAL_S="1", SVC_POSTURE_TTL_S="1")
        mon = start_monitor(env)
        try:
            with chromium() as driver:
                driver.get(mon.url + "/")
                # Two footer bars and two per account card, each with its mark at 80 %.
                # Read in one script: the page re-renders its cards on every frame.
                script = ("return Array.prototype.map.call(document.querySelectorAll('.bar .reserve-mark'),"
                          " function (m) { return m.style.left; });")
                lefts = wait_for(lambda: (lambda m: m if len(m) >= 6 else None)(driver.execute_script(script)),
                                 what="the reserve marks")
                assert set(lefts) == {"80%"}, lefts
                driver.save_screenshot(str(tmp_path / "dashboard.png"))
                write_json(home / ".config" / "svc" / "cluster-secrets.json", {"svc": {"posture": {"reservePct": 0}}})
                wait_for(lambda: not driver.execute_script(script), what="the marks gone with no reserve")
        finally:
            mon.stop()
