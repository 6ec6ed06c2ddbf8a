"""The trajectory surface of a real monitor: /api/trajectory, /api/history, the trajectory
stream, alerts in the log and through the notify hook, /metrics and the OpenAPI document.

acct1 (active) has climbed 40 % -> 70 % of its 5-hour window over the last 30
minutes (seeded history) and the provider answers 72 %: a forecast whose wall
comes before the reset, within the hour. acct2's 7-day window is at 93 %.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.support.history import HOUR_MS, climb_rows, write_rows
from tests.support.home import canary, node_env
from tests.support.monitor import SSEClient, http_get, start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until
from tests.monitor.test_metrics_openapi import _resolve, _validate

TOK1 = canary("traj1")
TOK2 = canary("traj2")
CONTRACT_KEYS = {"available", "node", "generatedAt", "probedAt", "cached", "status", "active", "accounts",
                 "siblingWithHeadroom"}


def _events(home: Path, prefix: str = "account.quota."):
    out = []
    for path in sorted((home / "svc" / "events").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("attributes", {}).get("event.name", "").startswith(prefix):
                out.append(event)
    return out


@pytest.fixture(scope="module")
def provider():
    with ProviderServer() as server:
        yield server


@pytest.fixture(scope="module")
def node(tmp_path_factory, provider):
    home = tmp_path_factory.mktemp("traj") / "home"
    home.mkdir()
    now = int(time.time() * 1000)
    reset_5h = (now + HOUR_MS) // 1000 * 1000
    write_rows(home, climb_rows("acct1", now - 30 * 60_000, now - 60_000, step_ms=60_000, pct0=40.0, rate=60.0,
                                resets_ms=reset_5h))
    provider.set_account(TOK1, five_hour=(0.72, "allowed"), seven_day=(0.30, "allowed"), reset_5h=reset_5h / 1000,
                         reset_7d=now / 1000 + 3 * 86400)
    provider.set_account(TOK2, five_hour=(0.10, "allowed"), seven_day=(0.93, "allowed_warning"),
                         reset_5h=now / 1000 + 7200, reset_7d=now / 1000 + 2 * 86400)
    hook_out = home / "hook.jsonl"
    env = node_env(home, provider.url, [("ACCT1", TOK1, "ada@example.com"), ("ACCT2", TOK2, "bob@example.com")],
                   active="ACCT1", extra={"SVC_PROBE_INTERVAL_S": "0.3", "SVC_POSTURE_TTL_S": "0.3",
                                          "SVC_REFRESH_FLOOR_S": "0.05",
                                          "SVC_ALERT_CMD": 'cat >> "%s"; env >> "%s.env"' % (hook_out, hook_out)})
    state = {"mon": start_monitor(env), "home": home, "reset_5h": reset_5h, "hook": hook_out, "env": env}
    try:
        yield state
    finally:
        state["mon"].stop()


def _trajectory(mon):
    status, headers, body = mon.get("/api/trajectory")
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert headers["cache-control"] == "no-store"
    return json.loads(body)


def _account(body, label):
    return next(a for a in body["accounts"] if a["label"] == label)


def test_trajectory_body_forecasts_the_climb(node):
    mon = node["mon"]
    body = wait_until(lambda: (lambda b: b if b.get("probedAt") and b["accounts"] else None)(_trajectory(mon)),
                      message="a trajectory after the first probe")
    assert set(body) == {"node", "generatedAt", "probedAt", "accounts", "alerts", "reservePct"}
    assert body["reservePct"] == 0  # no human reserve configured
    acct1 = _account(body, "acct1")
    assert set(acct1) == {"label", "provider", "email", "active", "fiveHour", "sevenDay"}
    assert acct1["provider"] == "claude"
    assert acct1["active"] is True and acct1["email"] == "ada@example.com"
    five = acct1["fiveHour"]
    assert five["pct"] == 72.0 and set(five) == {"pct", "resetsAt", "forecast"}
    forecast = five["forecast"]
    assert set(forecast) == {"ratePctPerHour", "wallAt", "beforeReset", "pctAtReset", "samples"}
    assert 40.0 <= forecast["ratePctPerHour"] <= 80.0, forecast
    assert forecast["beforeReset"] is True and forecast["samples"] >= 3
    assert forecast["pctAtReset"] > 100.0
    # Only one point of the 7-day window so far: no forecast, not a made-up one.
    assert acct1["sevenDay"]["forecast"] is None
    assert "TRAJ" not in json.dumps(body)


def test_alerts_are_logged_once_and_listed_newest_first(node):
    mon, home = node["mon"], node["home"]
    wait_until(lambda: len(_events(home)) >= 2, message="the forecast and threshold alerts")
    # Two more probes after the alerts: none may repeat one.
    seen = {_trajectory(mon).get("probedAt")}
    wait_until(lambda: seen.add(_trajectory(mon).get("probedAt")) or len(seen) >= 3, message="two more probes")
    events = _events(home)
    kinds = sorted((e["attributes"]["event.name"], e["attributes"]["account.handle"]) for e in events)
    assert kinds == [("account.quota.forecast", "acct1"), ("account.quota.threshold", "acct2")], kinds
    threshold = next(e for e in events if e["attributes"]["event.name"] == "account.quota.threshold")
    assert threshold["attributes"]["ratelimit.threshold"] == 90
    assert threshold["attributes"]["ratelimit.window"] == "seven_day"
    body = _trajectory(mon)
    # Newest first: the reverse of the log's order.
    assert [a["id"] for a in body["alerts"]] == [e["id"] for e in reversed(events)]


def test_a_threshold_alert_arrives_live_on_the_trajectory_stream_and_the_hook(node, provider):
    mon, home = node["mon"], node["home"]
    wait_until(lambda: len(_events(home)) >= 2, message="the first alerts")
    with SSEClient(mon.port, "/api/trajectory/stream") as client:
        first = client.next_event()
        assert first["event"] == "trajectory" and client.retry == 5000
        assert client.headers["content-type"] == "text/event-stream"
        provider.set_account(TOK1, five_hour=(0.85, "allowed_warning"), seven_day=(0.30, "allowed"),
                             reset_5h=node["reset_5h"] / 1000)
        seen = []

        def alert():
            event = client.next_event()
            seen.append(event["event"])
            return event if event["event"] == "alert" else None
        got = wait_until(alert, timeout=20, message="an alert frame")
        data = json.loads(got["data"])
        assert data["attributes"]["event.name"] == "account.quota.threshold"
        assert data["attributes"]["ratelimit.threshold"] == 80 and data["attributes"]["account.handle"] == "acct1"
        # The trajectory frame that follows lists it first.
        nxt = client.next_event()
        assert nxt["event"] == "trajectory" and json.loads(nxt["data"])["alerts"][0]["id"] == data["id"]
        assert set(seen) <= {"trajectory", "alert"}
    hook = node["hook"]
    wait_until(lambda: hook.exists() and data["id"] in hook.read_text(), message="the hook got the alert")
    lines = [json.loads(line) for line in hook.read_text().splitlines()]
    assert len({e["id"] for e in lines}) == len(lines)  # one run per event
    env_text = Path(str(hook) + ".env").read_text()
    assert TOK1 not in env_text and TOK2 not in env_text and "MODEL_TOKEN" not in env_text


def test_the_contract_routes_do_not_change(node):
    mon = node["mon"]
    status, body = mon.get_json("/api/accounts")
    assert status == 200 and set(body) == CONTRACT_KEYS
    with SSEClient(mon.port) as client:
        events = client.read_for(1.5)
    assert events and {e["event"] for e in events} == {"account"}


@pytest.mark.parametrize("query", ["hours=0", "hours=193", "hours=-1", "hours=abc", "hours=1.5", "hours=",
                                   "hours=24&hours=24", "hours=" + "9" * 40, "hours=%2024", "hours=0x10",
                                   "hours=%EF%BC%91%EF%BC%92", "hours=%00", "hours=%ff"])
def test_history_hours_outside_1_to_192_is_a_400(node, query):
    status, body = node["mon"].get_json("/api/history?" + query)
    assert status == 400 and body["error"] == "bad_request" and "1 to 192" in body["message"]


def test_history_body(node):
    mon = node["mon"]
    wait_until(lambda: mon.get_json("/api/history")[1]["accounts"].get("acct2"), message="live rows")
    status, body = mon.get_json("/api/history")
    assert status == 200 and set(body) == {"node", "from", "to", "accounts"}
    assert body["to"] - body["from"] == 24 * HOUR_MS
    series = body["accounts"]["acct1"]["fiveHour"]
    times = [t for t, _ in series]
    assert times == sorted(times) and len(series) >= 30
    assert series[0][1] == 40.0 and max(p for _, p in series) >= 72.0
    one = mon.get_json("/api/history?hours=1")[1]
    assert one["to"] - one["from"] == HOUR_MS
    assert mon.get_json("/api/history?hours=192&other=x")[0] == 200
    assert mon.get_json("/api/history?hours=%32%34")[1]["to"] - one["to"] < 60_000  # percent-encoded 24


def test_hostile_history_files_are_skipped(node):
    mon, home = node["mon"], node["home"]
    history = home / "svc" / "history"
    today = sorted(history.glob("*.jsonl"))[-1]
    with open(str(today), "ab") as fh:
        fh.write(b'{"t": 1, "label": "acct1", "fiveHour": {"pct": 50, "resetsAt": null}, "sevenDay": null}\n')
        fh.write(b'{"t": "x"}\nnot json at all\n\xff\xfe\x00garbage\n')
        fh.write(b'{"t": %d, "label": "<script>", "fiveHour": {"pct": 1}, "sevenDay": null}\n' % int(time.time() * 1000))
        fh.write(b'{"t": %d, "label": "acct9", "fiveHour": {"pct": "NaN", "resetsAt": null}}\n' % int(time.time() * 1000))
        fh.write(b"[" * 100000 + b"\n")
        fh.write(b'{"t": 5, "label": "acct1", "fiveHour"')  # torn, no newline
    (history / "2099-01-01.jsonl").write_text(json.dumps({"t": 4070908800000, "label": "future",
                                                          "fiveHour": {"pct": 99.0, "resetsAt": None},
                                                          "sevenDay": None}) + "\n")
    (history / "notes.txt").write_text("not a day file")
    status, body = mon.get_json("/api/history?hours=192")
    assert status == 200
    assert set(body["accounts"]) <= {"acct1", "acct2"}
    # Probes go on appending after the torn line, whole rows only.
    before = len(mon.get_json("/api/history?hours=1")[1]["accounts"]["acct2"]["fiveHour"])
    wait_until(lambda: len(mon.get_json("/api/history?hours=1")[1]["accounts"]["acct2"]["fiveHour"]) > before,
               message="new rows after the damage")
    assert "Traceback" not in mon.stderr_text()


def test_metrics_carry_the_forecast(node):
    mon = node["mon"]
    wait_until(lambda: b"svc_account_forecast_wall_timestamp_seconds{" in mon.get("/metrics")[2], message="wall metric")
    text = mon.get("/metrics")[2].decode()
    # account_key (the login's key, docs/fleet.md) is checked in test_metrics_openapi; not here.
    text = re.sub(r',account_key="[0-9a-f]{16}"', '', text)
    assert 'svc_account_burn_rate_percent_per_hour{account="acct1",provider="claude",window="five_hour"}' in text
    assert 'svc_account_forecast_pct_at_reset{account="acct1",provider="claude",window="five_hour"}' in text
    assert 'svc_alerts_total{kind="threshold"}' in text and 'svc_alerts_total{kind="forecast"} 1' in text
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"svc_account_burn_rate_percent_per_hour", "svc_alerts"} <= names


def test_openapi_describes_the_trajectory_routes(node):
    mon = node["mon"]
    doc = json.loads(mon.get("/api/openapi.json")[2])
    ok = doc["paths"]["/api/trajectory"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    _validate(doc, ok, _trajectory(mon))
    _validate(doc, ok, {"available": False, "node": "n"})
    history = doc["paths"]["/api/history"]["get"]
    assert history["parameters"][0]["schema"] == {"type": "integer", "minimum": 1, "maximum": 192, "default": 24}
    assert "400" in history["responses"]
    _validate(doc, _resolve(doc, "#/components/schemas/History"), mon.get_json("/api/history")[1])
    _validate(doc, _resolve(doc, "#/components/schemas/Error"), mon.get_json("/api/history?hours=0")[1])
    events = doc["paths"]["/api/trajectory/stream"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    one_of = events["schema"]["oneOf"]
    assert {e["properties"]["event"]["const"] for e in one_of} == {"trajectory", "alert"}


def test_restart_and_kill9_fire_nothing_again(node, tmp_path, monitors):
    mon, home = node["mon"], node["home"]
    wait_until(lambda: len(_events(home)) >= 3, timeout=60, message="alerts so far")
    mon.kill9()
    count = len(_events(home))
    (home / "svc" / "alert-latch.json").unlink()  # as if killed before the latch write
    again = node["mon"] = monitors.start(node["env"])
    first = _trajectory(again)
    wait_until(lambda: (_trajectory(again).get("probedAt") or 0) > (first.get("probedAt") or 0) + 1000,
               message="probes after the restart")
    assert len(_events(home)) == count
    # The recent alerts survive the restart too.
    assert len(_trajectory(again)["alerts"]) == count


def test_disabled_node_has_the_disabled_trajectory(tmp_path, monitors):
    from tests.support.home import clean_env
    env = dict(clean_env(tmp_path), SVC_ALERT_THRESHOLDS="0,abc,80,80,,101")
    mon = monitors.start(env, ["--no-probe"])
    # Bad thresholds: one clear log line each, never a traceback.
    err = mon.stderr_text()
    for item in ("'0'", "'abc'", "'101'", "repeats 80", "empty item"):
        assert item in err, (item, err)
    assert "Traceback" not in err
    assert mon.get_json("/api/trajectory") == (200, {"available": False, "node": mon.get_json("/healthz")[1]["node"]})
    with SSEClient(mon.port, "/api/trajectory/stream") as client:
        event = client.next_event()
    assert event["event"] == "trajectory" and json.loads(event["data"])["available"] is False
    status, _, _ = http_get(mon.url, "/api/history?hours=2")
    assert status == 200


def test_the_wall_says_when_it_is_usable_again_and_the_reset_names_it_once(tmp_path, monitors):
    # acct1 is at 101 % of its 5-hour window, which resets a few seconds later (then the provider
    # answers 0 %, as it does after a reset): one wall alert saying when it is usable again, one
    # usable alert after the reset, and neither again after a kill -9 and a restart.
    token = canary("trajwall")
    home = tmp_path / "home"
    home.mkdir()
    reset = int(time.time()) + 6
    with ProviderServer() as provider:
        provider.set_account(token, status="rejected", five_hour=(1.01, "rejected"), seven_day=(0.30, "allowed"),
                             reset_5h=reset, rolls_over=True)
        env = node_env(home, provider.url, [("ACCT1", token, "ada@example.com")], active="ACCT1",
                       extra={"SVC_PROBE_INTERVAL_S": "0.3", "SVC_POSTURE_TTL_S": "0.3", "SVC_REFRESH_FLOOR_S": "0.05"})
        mon = monitors.start(env)
        walls = wait_until(lambda: [e for e in _events(home) if e["attributes"]["event.name"] == "account.quota.wall"],
                           message="the wall alert")
        attrs = walls[0]["attributes"]
        assert attrs["ratelimit.usable_at"] == attrs["ratelimit.resets_at"] == "%s.000Z" % time.strftime(
            "%Y-%m-%dT%H:%M:%S", time.gmtime(reset))
        assert attrs["ratelimit.pct"] == 101.0 and attrs["account.handle"] == "acct1"
        usable = wait_until(lambda: [e for e in _events(home) if e["attributes"]["event.name"] ==
                                     "account.quota.usable"], timeout=30, message="the usable alert after the reset")
        assert usable[0]["attributes"]["ratelimit.pct"] == 0.0 and usable[0]["attributes"]["ratelimit.window"] == \
            "five_hour"
        # Counted once the probe that emitted it is handled, which the log can be ahead of.
        wait_until(lambda: 'svc_alerts_total{kind="usable"} 1' in mon.get("/metrics")[2].decode(),
                   message="the usable alert counted")
        assert 'svc_alerts_total{kind="wall"} 1' in mon.get("/metrics")[2].decode()
        assert [a["attributes"]["event.name"] for a in _trajectory(mon)["alerts"]][:2] == [
            "account.quota.usable", "account.quota.wall"]
        mon.kill9()
        count = len(_events(home))
        (home / "svc" / "alert-latch.json").unlink()  # as if killed before the latch write
        again = monitors.start(env)
        first = _trajectory(again)
        wait_until(lambda: (_trajectory(again).get("probedAt") or 0) > (first.get("probedAt") or 0) + 1000,
                   message="probes after the restart")
        assert len(_events(home)) == count
        again.stop()
