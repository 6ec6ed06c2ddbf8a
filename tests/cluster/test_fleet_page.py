"""GET /api/fleet and GET /fleet on a real monitor process, the page in real headless chromium."""
from __future__ import annotations

import json
import threading

import pytest

from svcposture._time import parse_iso_ms
from svcposture.cluster import liveness
from tests.support.browser import chromium, wait_for
from tests.support.fleet import populate
from tests.support.home import CANARY, make_node, node_env
from tests.support.loki import LokiServer
from tests.support.monitor import start_monitor
from tests.support.waiting import wait_until
from tests.monitor.test_metrics_openapi import _validate

EVIL = "<script>alert(1)</script>"


def fleet_monitor(tmp_path, anchor_tracker, count, *, extra_roster=(), anchor="OPS-1", **env):
    names = populate(anchor_tracker, "OPS-1", count)
    roster = names + list(extra_roster)
    home = make_node(tmp_path, roster[0], roster, anchor=anchor)
    environ = node_env(home, tracker_url=anchor_tracker.url, interval_ms=120000, **env)
    return start_monitor(environ, ["--no-probe"]), roster


def test_api_fleet_is_cached_single_flight_and_never_writes(tmp_path, anchor_tracker):
    anchor_tracker.latency_s = 0.3  # readers arriving together overlap one slow read
    mon, roster = fleet_monitor(tmp_path, anchor_tracker, 150, SVC_FLEET_TTL_S="60")
    try:
        # The publisher reads the anchor once before its first heartbeat (for the tracker's budget):
        # counted from after that heartbeat, every issue read below is the fleet's.
        own = liveness.heartbeat_url(roster[0])
        wait_until(lambda: any(c["op"] == "attachmentCreate" and c["variables"]["input"]["url"] == own
                               for c in list(anchor_tracker.calls)), 60, message="the monitor's own heartbeat")
        before = anchor_tracker.count("issue")
        bodies = []
        def read():
            bodies.append(mon.get("/api/fleet"))
        threads = [threading.Thread(target=read) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(bodies) == 12 and all(b[0] == 200 for b in bodies)
        assert len({b[2] for b in bodies}) == 1            # one read, one body
        assert anchor_tracker.count("issue") - before == 2            # 150 hosts: two pages, read once
        status, headers, raw = mon.get("/api/fleet")
        assert raw == bodies[0][2] and anchor_tracker.count("issue") - before == 2
        assert headers["cache-control"] == "no-store" and headers["content-type"] == "application/json"
        body = json.loads(raw)
        assert [h["host"] for h in body["hosts"]] == roster
        assert {h["state"] for h in body["hosts"]} == {"live", "stale", "missing"}
        assert body["hosts"][3]["account"]["label"] == "acct1"
        doc = json.loads(mon.get("/api/openapi.json")[2])
        _validate(doc, {"$ref": "#/components/schemas/FleetReport"}, body)
        # The only write is the monitor's own heartbeat.
        own = liveness.heartbeat_url(roster[0])
        writes = [c["variables"]["input"]["url"] for c in anchor_tracker.calls if c["op"] == "attachmentCreate"]
        assert set(writes) <= {own}
        assert CANARY not in raw.decode()
    finally:
        mon.stop()


def test_api_fleet_rereads_after_the_ttl(tmp_path, anchor_tracker):
    mon, _ = fleet_monitor(tmp_path, anchor_tracker, 5, SVC_FLEET_TTL_S="0.2")
    try:
        first = mon.get_json("/api/fleet")[1]["generatedAt"]
        wait_until(lambda: mon.get_json("/api/fleet")[1]["generatedAt"] != first, timeout=10,
                   message="a fresh read after the TTL")
        assert anchor_tracker.count("issue") >= 2
    finally:
        mon.stop()


def test_unset_anchor_says_so_and_every_host_is_unknown(tmp_path, anchor_tracker):
    mon, roster = fleet_monitor(tmp_path, anchor_tracker, 4, anchor=None)
    try:
        body = mon.get_json("/api/fleet")[1]
        assert "no liveness anchor" in body["error"]
        assert [h["state"] for h in body["hosts"]] == ["unknown"] * 4
        with chromium() as browser:
            browser.get(mon.url + "/fleet")
            notice = wait_for(lambda: browser.find_element("id", "notice").is_displayed()
                              and browser.find_element("id", "notice").text, what="the notice")
            assert "every host shows unknown" in notice and "no liveness anchor" in notice
            pills = browser.find_elements("css selector", "#rows .row .pill")
            assert [p.text.lower() for p in pills] == ["unknown"] * 4
    finally:
        mon.stop()


def test_unreachable_tracker_is_plain_on_the_page(tmp_path, anchor_tracker):
    mon, _ = fleet_monitor(tmp_path, anchor_tracker, 3)
    anchor_tracker.fail_next("http500", count=-1, op="issue")
    try:
        body = mon.get_json("/api/fleet")[1]
        assert body["error"].startswith("cannot read anchor OPS-1") and "hosts" in body
        assert {h["state"] for h in body["hosts"]} == {"unknown"}
    finally:
        mon.stop()


def test_loki_hosts_are_live_or_missing_without_accounts(tmp_path, anchor_tracker):
    with LokiServer() as loki:
        loki.set_counts({"host-000": 3, "host-002": 1})
        mon, _ = fleet_monitor(tmp_path, anchor_tracker, 3, SVC_LIVENESS_READ_SOURCE="loki", SVC_LOKI_URL=loki.url)
        try:
            body = mon.get_json("/api/fleet")[1]
            assert body["source"] == "loki"
            assert [(h["host"], h["state"], h["account"]) for h in body["hosts"]] == [
                ("host-000", "live", None), ("host-001", "missing", None), ("host-002", "live", None)]
        finally:
            mon.stop()


def test_fleet_page_headers_and_head(tmp_path, anchor_tracker):
    mon, _ = fleet_monitor(tmp_path, anchor_tracker, 2)
    try:
        status, headers, body = mon.get("/fleet")
        assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
        assert "script-src 'self'" in headers["content-security-policy"] and b"/static/fleet.js" in body
        for route in ("/static/fleet.js", "/static/fleet.css"):
            assert mon.get(route)[0] == 200
        from tests.support.monitor import get_request, raw_http
        status, headers, raw = raw_http(mon.port, get_request("/api/fleet", "127.0.0.1", method="HEAD"))
        assert status == 200 and raw == b"" and int(headers["content-length"]) > 50
    finally:
        mon.stop()


def test_500_hosts_on_one_page_with_hostile_names_shown_as_text(tmp_path, anchor_tracker):
    evil_host = EVIL
    anchor_tracker.put_attachment("OPS-1", liveness.heartbeat_url(evil_host), subtitle=None, metadata={
        "publishedAt": "2999-01-01T00:00:00.000Z", "publishIntervalMs": 120000,
        "account": {"label": "<img src=x onerror=alert(2)>", "status": "ok", "five_hour_pct": 50.0}})
    mon, roster = fleet_monitor(tmp_path, anchor_tracker, 500, extra_roster=[evil_host])
    try:
        with chromium(360, 800) as browser:
            browser.get(mon.url + "/fleet")
            wait_for(lambda: len(browser.find_elements("css selector", "#rows .row")) == 501, what="501 rows")
            # One read of every row in one script: the page re-renders every 30 s, and 501
            # WebDriver round trips on a loaded machine could straddle a re-render.
            rows = browser.execute_script(
                "return Array.from(document.querySelectorAll('#rows .row')).map(function (r) {"
                "  var label = r.querySelector('.label');"
                "  return {state: r.dataset.state, host: r.querySelector('.host').textContent,"
                "          label: label ? label.textContent : null, text: r.innerText}; });")
            # Most urgent first: an exhausted account, then the soonest wall; then by state, then name.
            report = mon.get_json("/api/fleet")[1]
            order = {"missing": 0, "stale": 1, "unknown": 2, "live": 3}

            def urgency(host):
                account = host["account"] or {}
                wall = parse_iso_ms(account["wall_at"]) if account.get("wall_at") else float("inf")
                return (0 if account.get("status") == "rejected" else 1, wall, order[host["state"]], host["host"])
            expected = [h["host"] for h in sorted(report["hosts"], key=urgency)]
            assert [r["host"] for r in rows] == expected
            assert rows[0]["text"].count("REJECTED") and sum(1 for r in rows if "REJECTED" in r["text"]) > 10
            stale_names = [r["host"] for r in rows if r["state"] == "stale"]
            assert len(stale_names) == 40
            evil = [r for r in rows if r["host"] == evil_host]
            assert len(evil) == 1 and evil[0]["label"] == "<img src=x onerror=alert(2)>"
            assert browser.execute_script("return document.querySelectorAll('#rows script, #rows img').length") == 0
            from selenium.common.exceptions import NoAlertPresentException
            with pytest.raises(NoAlertPresentException):
                browser.switch_to.alert.text
            counts = browser.find_element("id", "counts").text
            assert "501 hosts" in counts and "20 missing" in counts
            # host-005 published a probe an hour old: its values are greyed with their age.
            stale = [r for r in rows if r["host"] == "host-005"][0]
            assert "last reading 1h ago" in stale["text"]
            assert browser.execute_script(
                "return document.documentElement.scrollWidth <= document.documentElement.clientWidth")
            assert CANARY not in browser.page_source
    finally:
        mon.stop()


def test_a_monitor_publishes_its_active_account_in_the_heartbeat(tmp_path, anchor_tracker, monitors):
    from tests.support.home import canary, monitor_env
    from tests.support.provider import ProviderServer

    token = canary("fleet1")
    with ProviderServer() as provider:
        provider.set_account(token, five_hour=(0.42, "allowed"), seven_day=(0.10, "allowed"))
        home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
        env = monitor_env(home, provider.url, accounts=[("ACCT1", token, "a@example.com")], active="ACCT1",
                          SVC_TRACKER_URL=anchor_tracker.url, EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS="300")
        mon = monitors.start(env)
        try:
            def account():
                meta = anchor_tracker.attachments("OPS-1").get(liveness.heartbeat_url("a"), {}).get("metadata") or {}
                return meta.get("account")
            block = wait_until(account, timeout=30, message="a heartbeat with the account block")
            assert block["label"] == "acct1" and block["status"] == "ok"
            assert block["five_hour_pct"] == 42.0 and block["seven_day_pct"] == 10.0
            assert block["probed_at"] and block["five_hour_resets_at"] and "wall_at" in block
            row = mon.get_json("/api/fleet")[1]["hosts"][0]
            assert row["host"] == "a" and row["state"] == "live" and row["account"]["label"] == "acct1"
            assert token not in json.dumps(anchor_tracker.attachments("OPS-1"))
        finally:
            mon.stop()


def test_fleet_assets_ship_inside_the_package_and_never_parse_html():
    import re
    from svcposture.monitor.assets import STATIC_DIR
    for name in ("fleet.html", "fleet.css", "fleet.js"):
        text = (STATIC_DIR / name).read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text.lower()), name
    js = (STATIC_DIR / "fleet.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in js, sink
    assert "/api/fleet" in js and "textContent" in js
