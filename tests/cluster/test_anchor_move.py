"""The anchor move of contract §8, end to end: three hosts, three real monitors, one tracker.

1. every host publishes to OLD-1;  2. `set-anchor NEW-2` everywhere;  3. restart
a and b only: c keeps publishing to OLD-1, so on NEW-2 it is `missing` and its
doctor warns;  4. restart c: every host sees every peer live, doctor PASS;
5. closing the old anchor afterwards changes nothing.

Hosts a and b run `svc-monitor` under tests/support/monitor.py; host c is driven
exactly as the procedure says, with `svc-stack start` and `svc-stack restart`.
"""
from __future__ import annotations

import subprocess
import sys

from tests.support.cli import run_json
from tests.support.home import BEARER, CANARY, REPO, make_node, node_env
from tests.support.tracker import TrackerServer
from tests.support.waiting import wait_until

HOSTS = ("a", "b", "c")
INTERVAL_MS = 1000


def stack(env, *args):
    proc = subprocess.run([sys.executable, "-m", "svcposture", "stack", *args], env=env, cwd=str(REPO),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    return proc


def states(env):
    code, report = run_json(env, "status", "--json")
    found = {h["host"]: h["state"] for h in report["hosts"]}
    assert code == (0 if set(found.values()) == {"live"} else 3), report
    return found, report


def anchor_check(env):
    code, report = run_json(env, "doctor", "--json")
    check = next(c for c in report["checks"] if c["name"] == "liveness-anchor")
    return code, report, check


def test_anchor_move_with_three_hosts(tmp_path, monitors):
    with TrackerServer(tokens=[BEARER]) as srv:
        srv.add_issue("OLD-1")
        srv.add_issue("NEW-2")
        envs = {}
        for host in HOSTS:
            home = make_node(tmp_path, host, HOSTS, anchor="OLD-1")
            envs[host] = node_env(home, tracker_url=srv.url, interval_ms=INTERVAL_MS, SVC_ACCOUNTS_PROBE="0")
        by_host = {h: monitors.start(envs[h], args=("--no-probe",)) for h in ("a", "b")}
        every_monitor = list(by_host.values())
        stack(envs["c"], "start", "--port", "0", "--no-probe")

        def restart(host):
            if host == "c":
                stack(envs["c"], "restart")
                return
            by_host[host].stop()
            by_host[host] = monitors.start(envs[host], args=("--no-probe",))
            every_monitor.append(by_host[host])
        try:
            # Before the move: every host live on the old anchor, doctor PASS.
            wait_until(lambda: states(envs["a"])[0] == {h: "live" for h in HOSTS}, timeout=30)
            assert anchor_check(envs["b"])[2]["status"] == "PASS"

            # Step 2: set-anchor on every host; nothing moves until a restart.
            for host in HOSTS:
                code, out = run_json(envs[host], "set-anchor", "NEW-2")
                assert code == 0
                assert out == {"key": "svc.cluster.livenessAnchorIssue", "value": "NEW-2",
                               "previous": "OLD-1", "restartRequired": True}
            seen = {h: srv.attachments("OLD-1")["svc://heartbeat/%s" % h]["updatedAt"] for h in HOSTS}
            wait_until(lambda: all(srv.attachments("OLD-1")["svc://heartbeat/%s" % h]["updatedAt"] != seen[h]
                                 for h in HOSTS), timeout=30)
            assert srv.attachments("NEW-2") == {}

            # Step 3, done wrong on purpose: c is not restarted.
            for host in ("a", "b"):
                restart(host)
            wait_until(lambda: states(envs["b"])[0] == {"a": "live", "b": "live", "c": "missing"}, timeout=30)
            assert states(envs["c"])[0]["c"] == "missing"
            assert "svc://heartbeat/c" not in srv.attachments("NEW-2")
            before = srv.attachments("OLD-1")["svc://heartbeat/c"]["updatedAt"]
            wait_until(lambda: srv.attachments("OLD-1")["svc://heartbeat/c"]["updatedAt"] != before, timeout=30)
            code, _, check = anchor_check(envs["c"])
            assert check["status"] == "WARN" and "no heartbeat from c" in check["detail"]
            assert "svc-stack restart" in check["detail"]
            assert anchor_check(envs["a"])[2]["status"] == "PASS"

            # Step 3 finished: c restarts and every host sees every peer live.
            restart("c")
            for host in HOSTS:
                got, report = wait_until(lambda: (lambda s: s if s[0] == {h: "live" for h in HOSTS} else None)(
                    states(envs[host])), timeout=30)
                assert report["anchor"] == "NEW-2"
                assert all(row["ageS"] <= 2 * INTERVAL_MS / 1000.0 for row in report["hosts"])

            # Step 4: doctor PASS on every host.
            for host in HOSTS:
                code, report, check = anchor_check(envs[host])
                assert check["status"] == "PASS", check
                assert code == 0 and report["ok"] is True

            # Step 5: the old anchor may now be closed; nothing depends on it.
            srv.set_issue("OLD-1", state="completed")
            assert states(envs["a"])[0] == {h: "live" for h in HOSTS}
            assert anchor_check(envs["a"])[2]["status"] == "PASS"
            for host in HOSTS:
                meta = srv.attachments("NEW-2")["svc://heartbeat/%s" % host]["metadata"]
                assert meta["host"] == host and meta["publishIntervalMs"] == INTERVAL_MS
                assert meta["accountStatus"] == "unavailable"  # probe disabled
        finally:
            logs = ""
            for mon in every_monitor:
                mon.stop()
                logs += mon.stderr_text()
            stack(envs["c"], "stop")
            log_dir = tmp_path / "c" / "svc" / "logs"
            logs += "".join(p.read_text(errors="replace") for p in sorted(log_dir.glob("*")) if p.is_file())
        assert "heartbeat svc://heartbeat/a published to anchor NEW-2" in logs
        assert "heartbeat svc://heartbeat/c published to anchor OLD-1" in logs
        assert CANARY not in logs and "Traceback" not in logs


def test_monitor_publisher_off_then_on_without_restart(tmp_path, monitors):
    import time

    with TrackerServer(tokens=[BEARER]) as srv:
        srv.add_issue("OPS-1")
        home = make_node(tmp_path, "a", ["a"], anchor="OPS-1")
        mon = monitors.start(node_env(home, tracker_url=srv.url, interval_ms=100, SVC_ACCOUNTS_PROBE="0"),
                            args=("--no-probe",))
        try:
            wait_until(lambda: "liveness publisher off" in mon.stderr_text())
            time.sleep(0.5)  # five more ticks: room for the line to repeat, which it must not
            assert mon.stderr_text().count("publisher off") == 1 and srv.count() == 0
            # The roster is read live: growing it turns the publisher on without a restart.
            (home / "svc" / "cluster" / "cluster.json").write_text('{"roster": ["a", "b"]}')
            wait_until(lambda: "published to anchor OPS-1" in mon.stderr_text())
            assert "svc://heartbeat/a" in srv.attachments("OPS-1")
        finally:
            mon.stop()
        assert CANARY not in mon.stderr_text() and "Traceback" not in mon.stderr_text()
