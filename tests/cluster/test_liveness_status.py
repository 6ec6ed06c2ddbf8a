"""`svc-cluster status` as a real subprocess: tracker and Loki sources, unknown liveness, hostile replies."""
from __future__ import annotations

import time

import pytest

from tests.support.cli import run_cluster, run_inproc, run_json
from tests.support.home import CANARY, make_node, node_env
from tests.support.loki import LokiServer, first_query
from svcposture.cluster import liveness, loki
from svcposture._time import iso_from_ms


def beat(anchor_tracker, host, age_s, interval_ms=60000, quota=None, **kw):
    published = iso_from_ms(int((time.time() - age_s) * 1000))
    meta = {"host": host, "publishedAt": published, "publishIntervalMs": interval_ms, "version": "0.1.0",
            "accountStatus": "ok", "quota": quota}
    meta.update(kw)
    anchor_tracker.put_attachment("OPS-1", liveness.heartbeat_url(host), subtitle=published, metadata=meta)


def test_live_stale_missing_by_each_hosts_own_interval(tmp_path, anchor_tracker):
    home = make_node(tmp_path, "a", ["a", "b", "c", "d"], anchor="OPS-1")
    beat(anchor_tracker, "a", 5, quota={"five_hour_pct": 12.5, "seven_day_pct": 40})
    beat(anchor_tracker, "b", 200, interval_ms=60000)        # > 2 x 60 s: stale
    beat(anchor_tracker, "c", 200, interval_ms=120000)       # < 2 x 120 s: live by its own interval
    beat(anchor_tracker, "stranger", 1)                      # not in the roster: not listed
    code, report = run_json(node_env(home, tracker_url=anchor_tracker.url), "status", "--json")
    assert code == 3  # b is stale and d missing
    assert report["source"] == "tracker" and report["anchor"] == "OPS-1" and "error" not in report
    rows = {h["host"]: h for h in report["hosts"]}
    assert list(rows) == ["a", "b", "c", "d"]
    assert rows["a"]["state"] == "live" and 4 <= rows["a"]["ageS"] <= 30
    assert rows["a"]["quota"] == {"five_hour_pct": 12.5, "seven_day_pct": 40}
    assert rows["b"]["state"] == "stale" and rows["b"]["ageS"] >= 199
    assert rows["c"]["state"] == "live"
    assert rows["d"] == {"host": "d", "state": "missing", "ageS": None, "quota": None, "account": None,
                                    "accounts": []}


def test_missing_interval_falls_back_to_the_local_one(tmp_path, anchor_tracker):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    published = iso_from_ms(int((time.time() - 10) * 1000))
    anchor_tracker.put_attachment("OPS-1", "svc://heartbeat/a", subtitle=published, metadata={"publishedAt": published})
    anchor_tracker.put_attachment("OPS-1", "svc://heartbeat/b", subtitle="garbage", metadata={"publishIntervalMs": "x"})
    env = node_env(home, tracker_url=anchor_tracker.url, interval_ms=4000)
    code, report = run_json(env, "status", "--json")
    rows = {h["host"]: h for h in report["hosts"]}
    assert rows["a"]["state"] == "stale"      # 10 s > 2 x 4 s
    assert rows["b"]["state"] == "live"       # no publishedAt, no subtitle: updatedAt (just now)
    env = node_env(home, tracker_url=anchor_tracker.url, interval_ms=60000)
    assert {h["host"]: h["state"] for h in run_json(env, "status", "--json")[1]["hosts"]}["a"] == "live"


def test_text_output(tmp_path, anchor_tracker):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    beat(anchor_tracker, "a", 1, quota={"five_hour_pct": 12.5})
    proc = run_cluster(node_env(home, tracker_url=anchor_tracker.url), "status")
    assert proc.returncode == 3  # b has no heartbeat
    lines = proc.stdout.splitlines()
    assert lines[0] == "Fleet: heartbeats from the tracker (its issue OPS-1)", lines
    assert lines[1] == "2 hosts: 1 live, 1 missing"
    assert lines[2] == "A heartbeat every 2m; a host is live when seen within 4m."
    # Not live first; the heartbeat's age in the pages' words; the login's quota when no account block.
    assert lines[5].split()[:2] == ["missing", "b"] and lines[6].split()[:4] == ["live", "a", "1s", "ago"], lines
    assert "login 5h 12.5%" in lines[6]


@pytest.mark.parametrize("ages,expected", [((1, 5), 0), ((1, 500), 3), ((1, None), 3), ((None, None), 3)])
def test_exit_code_is_0_only_when_every_host_is_live(tmp_path, anchor_tracker, ages, expected):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    for host, age in zip(("a", "b"), ages):
        if age is not None:
            beat(anchor_tracker, host, age)
    for args in (("status", "--json"), ("status",)):
        proc = run_cluster(node_env(home, tracker_url=anchor_tracker.url), *args)
        assert proc.returncode == expected, (ages, args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_exit_code_under_loki_every_host_live_is_0(tmp_path):
    home = make_node(tmp_path, "a", ["a", "b"], anchor=None)
    with LokiServer() as loki:
        loki.set_counts({"a": 3, "b": 1})
        env = node_env(home, SVC_LIVENESS_READ_SOURCE="loki", SVC_LOKI_URL=loki.url)
        code, report = run_json(env, "status", "--json")
        assert code == 0 and {h["state"] for h in report["hosts"]} == {"live"}


def test_help_documents_the_exit_codes(tmp_path, anchor_tracker):
    home = make_node(tmp_path, "a", ["a"], anchor="OPS-1")
    proc = run_cluster(node_env(home, tracker_url=anchor_tracker.url), "status", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "0 when every host is live, 3 when any is stale or missing" in text and "1 when liveness is unknown" in text


@pytest.mark.parametrize("case", ["no-anchor", "not-found", "unreachable", "no-token", "refused"])
def test_unknown_liveness_is_exit_1_with_every_host_unknown(tmp_path, anchor_tracker, monkeypatch, capsys, case):
    home = make_node(tmp_path, "a", ["a", "b"], anchor=None if case == "no-anchor" else
                     "OPS-9" if case == "not-found" else "OPS-1",
                     token=None if case == "no-token" else CANARY + "-bad" if case == "refused" else CANARY)
    url = "http://127.0.0.1:9/graphql" if case == "unreachable" else anchor_tracker.url
    code, out, err = run_inproc(monkeypatch, capsys, node_env(home, tracker_url=url), "status", "--json")
    assert code == 1
    import json
    report = json.loads(out)
    assert report["error"]
    assert [h["state"] for h in report["hosts"]] == ["unknown", "unknown"]
    assert CANARY not in out + err
    code, out, err = run_inproc(monkeypatch, capsys, node_env(home, tracker_url=url), "status")
    assert code == 1 and "svc-cluster status:" in err and "unknown" in out


@pytest.mark.parametrize("mode", ["garbage", "huge", "wrong_shape", "errors_not_list", "html", "drop",
                                  "echo_token", "internal_error", "ratelimit", "empty"])
def test_hostile_tracker_replies_are_clear_errors(tmp_path, anchor_tracker, monkeypatch, capsys, mode):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    anchor_tracker.fail_next(mode, count=-1)
    for args in (("status", "--json"), ("status",)):
        code, out, err = run_inproc(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url), *args)
        assert code == 1, (mode, out, err)
        assert CANARY not in out + err and len(out + err) < 4000
        assert "unknown" in out


def test_hostile_reply_in_a_real_command(tmp_path, anchor_tracker):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    anchor_tracker.fail_next("echo_token", count=-1)
    proc = run_cluster(node_env(home, tracker_url=anchor_tracker.url), "status")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert CANARY not in proc.stdout + proc.stderr and "[redacted]" in proc.stderr


def test_corrupt_roster_is_a_config_error(tmp_path, anchor_tracker):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    (home / "svc" / "cluster" / "cluster.json").write_text('{"roster": [1, 2]')
    proc = run_cluster(node_env(home, tracker_url=anchor_tracker.url), "status", "--json")
    assert proc.returncode == 2 and "config error" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- Loki

def test_loki_source(tmp_path):
    home = make_node(tmp_path, "a", ["a", "b", "c"], anchor="OPS-1")
    with LokiServer() as loki:
        loki.set_counts({"a": 17, "b": 0, "zed": 3})
        env = node_env(home, interval_ms=120000, SVC_LIVENESS_READ_SOURCE="loki", SVC_LOKI_URL=loki.url + "/")
        code, report = run_json(env, "status", "--json")
        assert code == 3 and report["source"] == "loki"  # b and c are missing
        assert report["hosts"] == [{"host": "a", "state": "live", "ageS": None, "quota": None, "account": None,
                                    "accounts": []},
                                   {"host": "b", "state": "missing", "ageS": None, "quota": None, "account": None,
                                    "accounts": []},
                                   {"host": "c", "state": "missing", "ageS": None, "quota": None, "account": None,
                                    "accounts": []}]
        assert first_query(loki) == 'sum by (host) (count_over_time({host=~".+"}[240s]))'


def test_loki_window_follows_the_interval():
    assert loki.loki_query(120000) == 'sum by (host) (count_over_time({host=~".+"}[240s]))'
    assert loki.loki_query(1500) == 'sum by (host) (count_over_time({host=~".+"}[3s]))'
    assert loki.loki_query(100) == 'sum by (host) (count_over_time({host=~".+"}[1s]))'


@pytest.mark.parametrize("mode", ["error", "garbage", "http500", "wrong_shape", "bad_value", "matrix", "unset"])
def test_loki_failures_are_unknown_exit_1(tmp_path, monkeypatch, capsys, mode):
    home = make_node(tmp_path, "a", ["a", "b"], anchor=None)
    with LokiServer() as loki:
        if mode != "unset":
            loki.set_mode(mode)
        env = node_env(home, SVC_LIVENESS_READ_SOURCE="loki")
        if mode != "unset":
            env["SVC_LOKI_URL"] = loki.url
        code, out, err = run_inproc(monkeypatch, capsys, env, "status", "--json")
        assert code == 1
        import json
        report = json.loads(out)
        assert report["error"] and {h["state"] for h in report["hosts"]} == {"unknown"}


def test_peer_quota_is_whitelisted_and_names_are_printable(tmp_path, anchor_tracker, monkeypatch, capsys):
    home = make_node(tmp_path, "a", ["a", "evil\x1b[2Jname"], anchor="OPS-1")
    beat(anchor_tracker, "a", 1, quota={"five_hour_pct": 10, "seven_day_pct": "90", "subscription_type": "max",
                             "rate_limit_tier": "x" * 500, "token": CANARY, "five_hour_resets_at": "a\nb",
                             "seven_day_large_pct": 3})
    code, out, err = run_inproc(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url), "status", "--json")
    import json
    rows = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert rows["a"]["quota"] == {"five_hour_pct": 10, "seven_day_large_pct": 3, "subscription_type": "max"}
    code, out, err = run_inproc(monkeypatch, capsys, node_env(home, tracker_url=anchor_tracker.url), "status")
    assert "\x1b" not in out and "evil?[2Jname" in out


@pytest.mark.parametrize("url,kind", [("http://127.0.0.1:9", loki.LokiUnreachableError),
                                      ("file:///etc/passwd", loki.LokiConfigError)])
def test_loki_unreachable_and_bad_url(url, kind):
    with pytest.raises(kind):
        loki.loki_live_hosts(url, 120000, timeout=2)
