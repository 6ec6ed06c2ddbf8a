"""`svc-cluster doctor`: every check's PASS/INFO/WARN/FAIL, the JSON shape and the exit code."""
from __future__ import annotations

import json
import os
import time

import pytest

from tests.support.cli import run_cluster, run_inproc
from tests.support.home import CANARY, canary, make_node, node_env, write_accounts
from svcposture.cluster import doctor as cluster_doctor, liveness
from svcposture._time import iso_from_ms

CHECKS = ["liveness-anchor", "host-name", "roster", "legacy-roster", "cloud-env", "accounts-env", "event-log",
          "latch", "directories", "metrics-token", "scrape-tls", "tracker-budget", "account-health"]


def beat_all(anchor_tracker, hosts, issue="OPS-1"):
    now = iso_from_ms(int(time.time() * 1000))
    for host in hosts:
        anchor_tracker.put_attachment(issue, liveness.heartbeat_url(host), subtitle=now,
                           metadata={"host": host, "publishedAt": now, "publishIntervalMs": 120000})


def doctor(monkeypatch, capsys, env):
    code, out, err = run_inproc(monkeypatch, capsys, env, "doctor", "--json")
    report = json.loads(out)
    assert [c["name"] for c in report["checks"]] == CHECKS
    assert all(set(c) == {"name", "status", "detail"} for c in report["checks"])
    assert all(c["status"] in ("PASS", "INFO", "WARN", "FAIL") for c in report["checks"])
    assert report["ok"] is (code == 0) and report["ok"] is not any(c["status"] == "FAIL" for c in report["checks"])
    assert CANARY not in out + err
    return code, {c["name"]: c for c in report["checks"]}


def test_healthy_node_passes(tmp_path, anchor_tracker, monkeypatch, capsys):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    beat_all(anchor_tracker, ["a", "b"])
    code, checks = doctor(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url))
    assert code == 0
    assert checks["liveness-anchor"]["status"] == "PASS" and "OPS-1" in checks["liveness-anchor"]["detail"]
    assert checks["host-name"]["status"] == "PASS" and checks["roster"]["status"] == "PASS"
    assert checks["event-log"]["status"] == "PASS" and checks["latch"]["status"] == "PASS"
    assert checks["cloud-env"]["status"] == "INFO" and checks["accounts-env"]["status"] == "INFO"


@pytest.mark.parametrize("case,status,words", [
    ("unset", "FAIL", "unset"),
    ("missing", "FAIL", "does not exist"),
    ("archived", "FAIL", "archived"),
    ("trashed", "FAIL", "trash"),
    ("closed", "WARN", "closed"),
    ("canceled", "WARN", "closed"),
    ("unreachable", "WARN", "unreachable"),
    ("ratelimited", "WARN", "rate limit"),
    ("no-token", "WARN", "no tracker token"),
    ("refused", "WARN", "refused"),
    ("loki", "INFO", "Loki"),
    ("no-own-heartbeat", "WARN", "svc-stack restart"),
])
def test_liveness_anchor_check(tmp_path, anchor_tracker, monkeypatch, capsys, case, status, words):
    anchor = None if case == "unset" else "OPS-404" if case == "missing" else "OPS-1"
    token = None if case == "no-token" else CANARY + "x" if case == "refused" else CANARY
    home = make_node(tmp_path, "a", ["a", "b"], anchor=anchor, token=token)
    if case != "no-own-heartbeat":
        beat_all(anchor_tracker, ["a"])
    if case == "archived":
        anchor_tracker.set_issue("OPS-1", archived=True)
    if case == "trashed":
        anchor_tracker.set_issue("OPS-1", trashed=True)
    if case == "closed":
        anchor_tracker.set_issue("OPS-1", state="completed")
    if case == "canceled":
        anchor_tracker.set_issue("OPS-1", state="canceled")
    if case == "ratelimited":
        anchor_tracker.fail_next("ratelimit", count=-1)
    url = "http://127.0.0.1:9/graphql" if case == "unreachable" else anchor_tracker.url
    extra = {"SVC_LIVENESS_READ_SOURCE": "loki"} if case == "loki" else {}
    code, checks = doctor(monkeypatch, capsys, node_env(home, tracker_url=url, **extra))
    check = checks["liveness-anchor"]
    assert check["status"] == status and words in check["detail"], check
    assert code == (1 if status == "FAIL" else 0)


def test_stale_own_heartbeat_warns(tmp_path, anchor_tracker, monkeypatch, capsys):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    old = iso_from_ms(int((time.time() - 600) * 1000))
    anchor_tracker.put_attachment("OPS-1", liveness.heartbeat_url("a"), subtitle=old,
                       metadata={"host": "a", "publishedAt": old, "publishIntervalMs": 120000})
    check = doctor(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url))[1]["liveness-anchor"]
    assert check["status"] == "WARN" and "stale" in check["detail"] and "svc-stack status" in check["detail"]


def test_single_host_roster_needs_no_own_heartbeat(tmp_path, anchor_tracker, monkeypatch, capsys):
    home = make_node(tmp_path, "a", ["a"], anchor="OPS-1")
    assert doctor(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url))[1]["liveness-anchor"]["status"] == "PASS"


@pytest.mark.parametrize("case,check,status", [
    ("host-unset", "host-name", "FAIL"),
    ("host-not-in-roster", "host-name", "FAIL"),
    ("roster-duplicate", "roster", "FAIL"),
    ("roster-missing", "roster", "WARN"),
    ("roster-empty", "roster", "WARN"),
    ("roster-corrupt", "roster", "FAIL"),
])
def test_host_name_and_roster(tmp_path, anchor_tracker, monkeypatch, capsys, case, check, status):
    roster = {"host-not-in-roster": ["b", "c"], "roster-duplicate": ["a", "b", "a"], "roster-missing": None,
              "roster-empty": []}.get(case, ["a", "b"])
    home = make_node(tmp_path, None if case == "host-unset" else "a", roster, anchor="OPS-1")
    if case == "roster-corrupt":
        (home / "svc" / "cluster" / "cluster.json").write_bytes(b"\x00\x01garbage")
    beat_all(anchor_tracker, ["a"])
    code, checks = doctor(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url))
    assert checks[check]["status"] == status, checks[check]
    if case == "host-not-in-roster":
        assert "owns zero tickets" in checks[check]["detail"]
    if case == "roster-corrupt":
        assert checks["host-name"]["status"] == "FAIL"


def test_legacy_roster(tmp_path, anchor_tracker, monkeypatch, capsys):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    beat_all(anchor_tracker, ["a"])
    repo = tmp_path / "project"
    (repo / ".svc").mkdir(parents=True)
    env = node_env(home, tracker_url=anchor_tracker.url, SVC_REPO_ROOT=str(repo))
    assert doctor(monkeypatch, capsys, env)[1]["legacy-roster"]["status"] == "PASS"
    (repo / ".svc" / "hosts.json").write_text('{"hosts": ["a"]}')
    check = doctor(monkeypatch, capsys, env)[1]["legacy-roster"]
    assert check["status"] == "WARN" and "retired" in check["detail"]
    assert doctor(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url))[1]["legacy-roster"]["status"] == "INFO"


@pytest.mark.parametrize("mode,status", [(0o600, "PASS"), (0o644, "FAIL"), (0o640, "FAIL"), (0o400, "FAIL")])
def test_cloud_env_mode(tmp_path, anchor_tracker, monkeypatch, capsys, mode, status):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    beat_all(anchor_tracker, ["a"])
    path = home / ".config" / "svc" / "cluster.env"
    path.write_text("export SVC_CLOUD_TOKEN='x'\n")
    os.chmod(str(path), mode)
    code, checks = doctor(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url))
    assert checks["cloud-env"]["status"] == status
    if status == "FAIL":
        assert "0600" in checks["cloud-env"]["detail"] and code == 1


def test_cloud_env_not_a_file(tmp_path, anchor_tracker, monkeypatch, capsys):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    (home / ".config" / "svc" / "cluster.env").mkdir()
    assert doctor(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url))[1]["cloud-env"]["status"] == "FAIL"


def test_accounts_env_checks(tmp_path, anchor_tracker, monkeypatch, capsys):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    beat_all(anchor_tracker, ["a"])
    env_file = home / ".config" / "svc" / "model-accounts.env"
    tok1, tok2 = canary("one"), canary("two")
    write_accounts(env_file, [("ACCT1", tok1, "one@example.com"), ("ACCT2", tok2, "two@example.com")],
                   active="ACCT2")
    env = node_env(home, tracker_url=anchor_tracker.url)
    check = doctor(monkeypatch, capsys, env)[1]["accounts-env"]
    assert check["status"] == "PASS" and "active acct2" in check["detail"] and "2 usable" in check["detail"]
    write_accounts(env_file, [("ACCT1", tok1, None), ("ACCT2", tok1, None)], active="ACCT1")
    check = doctor(monkeypatch, capsys, env)[1]["accounts-env"]
    assert check["status"] == "WARN" and "several Claude lines are the active one" in check["detail"]
    write_accounts(env_file, [("ACCT1", "PASTE_TOKEN_HERE", None)])
    check = doctor(monkeypatch, capsys, env)[1]["accounts-env"]
    assert check["status"] == "INFO" and "disabled" in check["detail"]
    write_accounts(env_file, [("ACCT1", tok1, None)], mode=0o666)
    code, checks = doctor(monkeypatch, capsys, env)
    assert checks["accounts-env"]["status"] == "FAIL" and "writable by group or others" in checks["accounts-env"]["detail"]
    assert code == 1
    out = capsys.readouterr()
    assert tok1 not in out.out + out.err


def test_accounts_env_report_mapping():
    path = cluster_doctor.Path("/x/model-accounts.env")
    f = cluster_doctor._accounts_check_from_report
    assert f(path, {"error": {"kind": "config", "message": "unsafe"}}, 1)["status"] == "FAIL"
    assert f(path, {"error": {"kind": "internal", "message": "boom"}}, 1)["status"] == "WARN"
    assert f(path, {"claude": {"usable": ["acct1"], "active": None, "duplicateActive": []}}, 0)["status"] == "WARN"
    assert f(path, {"claude": {"usable": "junk", "active": 5}}, 0)["status"] == "INFO"
    assert f(path, {"usable": ["acct1"], "active": "acct1"}, 0)["status"] == "INFO"  # no vendor's block: no account


def test_event_log_and_latch(tmp_path, anchor_tracker, monkeypatch, capsys):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    beat_all(anchor_tracker, ["a"])
    env = node_env(home, tracker_url=anchor_tracker.url)
    (home / "svc" / "events").write_text("not a directory")
    (home / "svc" / "account-status-latch.json").write_text('{"version": 1, "accounts": {"acct1": ')
    code, checks = doctor(monkeypatch, capsys, env)
    assert code == 1
    assert checks["event-log"]["status"] == "FAIL"
    assert checks["latch"]["status"] == "FAIL" and "account-status-latch.json" in checks["latch"]["detail"]
    (home / "svc" / "account-status-latch.json").write_text(json.dumps(
        {"version": 1, "accounts": {"acct1": {"latched": True}, "acct2": {"latched": False}}}))
    check = doctor(monkeypatch, capsys, env)[1]["latch"]
    assert check["status"] == "PASS" and "latched: acct1" in check["detail"]


def test_text_output_and_exit_code_as_a_real_command(tmp_path, anchor_tracker):
    home = make_node(tmp_path, "a", ["b"], anchor="OPS-1")
    proc = run_cluster(node_env(home, tracker_url=anchor_tracker.url), "doctor")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("PASS  liveness-anchor") or lines[0].startswith("WARN  liveness-anchor")
    assert any(line.startswith("FAIL  host-name") for line in lines)
    assert CANARY not in proc.stdout + proc.stderr
    assert run_cluster(node_env(home), "doctor", "--help").returncode == 0


def test_accounts_env_check_runs_the_vendored_copy(tmp_path, anchor_tracker):
    import shutil
    import subprocess
    import sys
    from tests.support.home import REPO, clean_env

    vendor = tmp_path / "proj" / "_vendor"
    shutil.copytree(str(REPO / "svcposture"), str(vendor / "svcposture"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "proj" / "__init__.py").write_text("")
    (vendor / "__init__.py").write_text("")
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    beat_all(anchor_tracker, ["a"])
    write_accounts(home / ".config" / "svc" / "model-accounts.env", [("ACCT1", canary("v"), None)], active="ACCT1")
    env = clean_env(home)
    env["PYTHONPATH"] = str(tmp_path)  # the original package is not importable here
    env["SVC_TRACKER_URL"] = anchor_tracker.url
    code = ("import sys; from proj._vendor.svcposture.cli import cluster_main; "
            "sys.exit(cluster_main(['doctor', '--json']))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["accounts-env"]["status"] == "PASS", checks["accounts-env"]
    assert checks["liveness-anchor"]["status"] == "PASS"
