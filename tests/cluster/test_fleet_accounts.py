"""The fleet by account (docs/fleet.md): every account in each heartbeat with its key, and
GET /api/fleet/accounts on real monitors reading the stand-in tracker and the demo's fleet."""
from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import time

import pytest

from svcposture._time import iso_from_ms
from svcposture.cluster import liveness
from tests.support.cli import run_json
from tests.support.firstlook import Demo, get_json
from tests.support.home import BEARER, CANARY, REPO, canary, clean_env, make_node, monitor_env, node_env
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.tracker import TrackerServer
from tests.support.waiting import wait_until
from tests.monitor.test_metrics_openapi import _validate


def key(provider, email):
    return hashlib.sha256((provider + "\0" + email.lower()).encode("utf-8")).hexdigest()[:16]


def iso_ago(seconds):
    return iso_from_ms(int((time.time() - seconds) * 1000))


def entry(label, email, *, active=False, status="ok", five=None, seven=None, probed_s=None, wall_in_s=None,
          provider="claude"):
    return {"key": key(provider, email) if email else None, "label": label, "provider": provider, "status": status,
            "five_hour_pct": five, "five_hour_resets_at": iso_ago(-7200) if five is not None else None,
            "seven_day_pct": seven, "seven_day_resets_at": iso_ago(-86400 * 3) if seven is not None else None,
            "wall_at": iso_ago(-wall_in_s) if wall_in_s is not None else None,
            "probed_at": iso_ago(probed_s) if probed_s is not None else None, "active": active}


def beat(srv, host, accounts=None, account=None, age_s=2.0):
    published = iso_ago(age_s)
    meta = {"host": host, "publishedAt": published, "publishIntervalMs": 120000, "accountStatus": "ok",
            "quota": None, "account": account}
    if accounts is not None:
        meta["accounts"] = accounts
    srv.put_attachment("OPS-1", liveness.heartbeat_url(host), subtitle=published, metadata=meta)


# ---------------------------------------------------------------- the publisher

def test_a_monitor_publishes_every_account_with_its_key(tmp_path, monitors):
    tokens = [canary("fa1"), canary("fa2")]
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    with TrackerServer(tokens=[BEARER]) as srv, ProviderServer() as provider:
        srv.add_issue("OPS-1")
        provider.set_account(tokens[0], five_hour=(0.42, "allowed"), seven_day=(0.10, "allowed"))
        provider.set_account(tokens[1], five_hour=(1.02, "rejected"), status="rejected")
        env = monitor_env(home, provider.url, accounts=[("ACCT1", tokens[0], "Ada@Example.com"),
                                                        ("ACCT2", tokens[1], None)], active="ACCT1",
                          SVC_TRACKER_URL=srv.url, EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS="300")
        mon = monitors.start(env)

        def published():
            meta = srv.attachments("OPS-1").get(liveness.heartbeat_url("a"), {}).get("metadata") or {}
            entries = meta.get("accounts") or []
            return meta if len(entries) == 2 and all(e["probed_at"] for e in entries) else None
        meta = wait_until(published, timeout=30, message="a heartbeat listing both accounts")
        one, two = meta["accounts"]
        assert one["key"] == key("claude", "ada@example.com") == meta["account"]["key"]
        assert (one["label"], one["provider"], one["active"], one["status"]) == ("acct1", "claude", True, "ok")
        assert one["five_hour_pct"] == 42.0 and one["seven_day_pct"] == 10.0
        # No email in the env file: no key; the account is told apart by host and label only.
        assert two["key"] is None and two["label"] == "acct2" and two["active"] is False
        assert two["status"] == "rejected" and two["five_hour_pct"] == 102.0
        assert set(one) == {"key", "label", "provider", "status", "health", "five_hour_pct", "five_hour_resets_at",
                            "seven_day_pct", "seven_day_resets_at", "wall_at", "probed_at", "active"}
        assert one["health"] == two["health"] == "ok"  # rejected is a reading: its figures were read
        assert not any(t in json.dumps(srv.attachments("OPS-1")) for t in tokens)
        # The same key on the monitor's own account series, for the Prometheus read.
        text = mon.get("/metrics")[2].decode()
        assert 'svc_account_active{account="acct1",provider="claude",account_key="%s"} 1' % one["key"] in text
        assert 'svc_account_active{account="acct2",provider="claude"} 0' in text


def test_a_refused_account_says_so_in_the_fleet(tmp_path, monitors):
    """Health in the heartbeat (docs/posture.md, "Health"): the monitor whose second token the provider
    refused publishes it, and /api/fleet/accounts and `svc-cluster status --json` say `refused`,
    never a reading of an account nobody read."""
    tokens = [canary("fh1"), canary("fh2")]
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    with TrackerServer(tokens=[BEARER]) as srv, ProviderServer() as provider:
        srv.add_issue("OPS-1")
        provider.set_account(tokens[0], five_hour=(0.42, "allowed"), seven_day=(0.10, "allowed"))
        provider.set_account(tokens[1], mode="auth")
        env = monitor_env(home, provider.url, accounts=[("ACCT1", tokens[0], "ada@example.com"),
                                                        ("ACCT2", tokens[1], "bob@example.com")], active="ACCT1",
                          SVC_TRACKER_URL=srv.url, EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS="300",
                          SVC_FLEET_TTL_S="1")
        mon = monitors.start(env)

        def refused():
            body = mon.get_json("/api/fleet/accounts")[1]
            found = {a["key"]: a for a in body.get("accounts") or []}
            bob = found.get(key("claude", "bob@example.com"))
            return body if bob is not None and bob["health"] == "refused" else None
        body = wait_until(refused, timeout=30, message="the fleet's accounts saying acct2 was refused")
        _validate(json.loads(mon.get("/api/openapi.json")[2]), {"$ref": "#/components/schemas/FleetAccounts"}, body)
        found = {a["key"]: a for a in body["accounts"]}
        ada, bob = found[key("claude", "ada@example.com")], found[key("claude", "bob@example.com")]
        assert ada["health"] == "ok" and ada["hosts"] == [{"host": "a", "active": True, "health": "ok"}]
        assert bob["hosts"] == [{"host": "a", "active": False, "health": "refused"}]
        assert bob["status"] == "error" and bob["fiveHour"]["pct"] is None  # nothing read is shown as read
        code, report = run_json(node_env(make_node(tmp_path / "reader", "b", ["a", "b"], anchor="OPS-1"),
                                         tracker_url=srv.url), "status", "--json")
        entries = {e["label"]: e for e in report["hosts"][0]["accounts"]}
        assert report["hosts"][0]["host"] == "a" and entries["acct2"]["health"] == "refused"
        assert entries["acct1"]["health"] == "ok" and entries["acct2"]["five_hour_pct"] is None
        assert not any(t in json.dumps(srv.attachments("OPS-1")) + json.dumps(report) for t in tokens)
        refused_on_the_page(mon)


def refused_on_the_page(mon):
    """/fleet's accounts table says the refusal beside the status, and on the host that has it."""
    from tests.support import pages
    from tests.support.browser import chromium, wait_for
    with chromium(1280, 900) as browser:
        pages.emulate(browser, "light", 1280)
        browser.get(mon.url + "/fleet")
        wait_for(lambda: browser.find_elements("css selector", "#account-rows tr[data-health=refused]"),
                 what="the refused account's row")
        row = browser.execute_script("""
            var r = document.querySelector('#account-rows tr[data-health=refused]');
            return {status: r.querySelector('td[data-label=Status]').innerText,
                    hosts: r.querySelector('.acct-hosts').textContent};""")
        assert "token refused" in row["status"].lower() and row["hosts"] == "a (token refused)"
        assert not pages.a11y_failures(browser) and not pages.contrast_failures(browser)


# ---------------------------------------------------------------- GET /api/fleet/accounts from the tracker

def fleet(tmp_path, srv, roster, **env):
    """A monitor on the roster's last host (it publishes its own heartbeat) reading the others'."""
    home = make_node(tmp_path, roster[-1], roster, anchor="OPS-1")
    return start_monitor(node_env(home, tracker_url=srv.url, interval_ms=120000, **env), ["--no-probe"])


def test_accounts_are_merged_by_key_and_each_window_is_the_newest_probe(tmp_path, anchor_tracker):
    srv = anchor_tracker
    # One login on three hosts under two labels; host b probed it last.
    beat(srv, "a", [entry("work", "Ada@example.com", active=True, five=40.0, seven=10.0, probed_s=60),
                    entry("spare", "bob@example.com", five=5.0, seven=1.0, probed_s=60)])
    beat(srv, "b", [entry("acct1", "ada@EXAMPLE.com", five=70.0, seven=12.0, probed_s=5, wall_in_s=3000,
                          status="degraded"),
                    entry("scratch", None, active=True, five=1.0, seven=2.0, probed_s=5)])
    beat(srv, "c", [entry("acct1", "ada@example.com", active=True, five=None, seven=11.0, probed_s=1)])
    beat(srv, "d", [entry("tight", "cy@example.com", active=True, five=60.0, seven=30.0, probed_s=10,
                          wall_in_s=600)])
    beat(srv, "e", [entry("gone", "dee@example.com", active=True, status="rejected", five=100.0, seven=50.0,
                          probed_s=20)])
    # An older publisher: only the active block, no `accounts`.
    beat(srv, "f", account={"label": "acct1", "status": "ok", "five_hour_pct": 3.0, "probed_at": iso_ago(30)})
    mon = fleet(tmp_path, srv, ["a", "b", "c", "d", "e", "f", "g"])
    try:
        status, headers, raw = mon.get("/api/fleet/accounts")
        assert status == 200 and headers["content-type"] == "application/json"
        body = json.loads(raw)
        doc = json.loads(mon.get("/api/openapi.json")[2])
        _validate(doc, {"$ref": "#/components/schemas/FleetAccounts"}, body)
        assert body["source"] == "tracker" and body["readAt"] and "error" not in body
        # Most urgent first: rejected, then the soonest wall, then the fullest window.
        order = [(a["key"], a["labels"]) for a in body["accounts"]]
        ada = key("claude", "ada@example.com")
        assert order[:3] == [(key("claude", "dee@example.com"), ["gone"]), (key("claude", "cy@example.com"), ["tight"]),
                             (ada, ["work", "acct1"])]
        shared = body["accounts"][2]
        # These publishers predate health: each host's is null, and so is the account's.
        assert shared["hosts"] == [{"host": "a", "active": True, "health": None},
                                   {"host": "b", "active": False, "health": None},
                                   {"host": "c", "active": True, "health": None}]
        assert shared["health"] is None
        # c probed last but has no 5-hour figure: that window comes from b, the 7-day one from c.
        assert shared["fiveHour"]["pct"] == 70.0 and shared["fiveHour"]["host"] == "b"
        assert shared["sevenDay"] == {"pct": 11.0, "resetsAt": shared["sevenDay"]["resetsAt"],
                                      "probedAt": shared["sevenDay"]["probedAt"], "host": "c", "suspect": False}
        assert shared["status"] == "ok" and shared["wallAt"] is None  # c's reading: the newest
        # Without an email (or from an older publisher) an account stands alone, by host and label.
        alone = [a for a in body["accounts"] if a["key"] is None]
        assert sorted((a["labels"][0], a["hosts"][0]["host"]) for a in alone) == [("acct1", "f"), ("scratch", "b")]
        assert len(body["accounts"]) == 6
        assert CANARY not in raw.decode()
        # One read serves both routes.
        before = srv.count("issue")
        assert mon.get("/api/fleet")[0] == 200 and mon.get("/api/fleet/accounts")[2] == raw
        assert srv.count("issue") == before
    finally:
        mon.stop()


YEAR_S = 365 * 86400


def test_a_reading_from_the_future_is_suspect_and_never_the_newest(tmp_path, anchor_tracker):
    srv = anchor_tracker

    def host(name, *entries):
        # Each host's heartbeat as a publisher writes it: every account, and the active one's block.
        block = {k: v for k, v in entries[0].items() if k not in ("provider", "active")}
        beat(srv, name, list(entries), account=block)
    # Host a's clock runs a year fast: its reading of ada's login says "ok"; two fresh ones say the
    # login is exhausted. Taken at its word, the one from the future would win forever.
    host("a", entry("work", "ada@example.com", active=True, five=10.0, seven=5.0, probed_s=-YEAR_S))
    host("b", entry("acct1", "ada@example.com", active=True, status="rejected", five=100.0, seven=60.0, probed_s=5))
    host("c", entry("acct1", "ada@example.com", active=True, status="rejected", five=100.0, seven=61.0, probed_s=20))
    host("d", entry("tight", "cy@example.com", active=True, status="degraded", five=85.0, seven=30.0, probed_s=10,
                    wall_in_s=600))
    # Only a fast clock has read this one: it is shown, marked.
    host("e", entry("ahead", "dee@example.com", active=True, five=40.0, seven=20.0, probed_s=-3600))
    # Within a minute ahead is a clock's ordinary drift.
    host("f", entry("drift", "eve@example.com", active=True, five=30.0, seven=20.0, probed_s=-30))
    mon = fleet(tmp_path, srv, ["a", "b", "c", "d", "e", "f", "g"])
    try:
        body = mon.get_json("/api/fleet/accounts")[1]
        _validate(json.loads(mon.get("/api/openapi.json")[2]), {"$ref": "#/components/schemas/FleetAccounts"}, body)
        ada = body["accounts"][0]
        assert ada["key"] == key("claude", "ada@example.com"), [a["labels"] for a in body["accounts"]]
        assert ada["status"] == "rejected" and ada["labels"] == ["work", "acct1"]
        assert ada["fiveHour"]["pct"] == 100.0 and ada["fiveHour"]["host"] == "b"
        assert ada["fiveHour"]["suspect"] is False and ada["sevenDay"] == dict(ada["sevenDay"], pct=60.0, host="b")
        by_key = {a["key"]: a for a in body["accounts"]}
        ahead = by_key[key("claude", "dee@example.com")]
        assert ahead["fiveHour"]["pct"] == 40.0 and ahead["fiveHour"]["suspect"] is True
        assert ahead["sevenDay"]["suspect"] is True
        assert by_key[key("claude", "eve@example.com")]["fiveHour"]["suspect"] is False
        # The host rows say it too: the block of a reading from the future has no age and is not current.
        rows = {r["host"]: r for r in mon.get_json("/api/fleet")[1]["hosts"]}
        assert rows["a"]["account"]["suspect"] is True and rows["a"]["account"]["age_s"] is None
        assert rows["a"]["account"]["stale"] is True
        assert rows["b"]["account"]["suspect"] is False and rows["b"]["account"]["stale"] is False
        assert rows["f"]["account"]["suspect"] is False and rows["f"]["account"]["age_s"] is not None
        suspect_on_the_page(mon)
    finally:
        mon.stop()
    code, report = run_json(node_env(make_node(tmp_path / "reader", "g", list("abcdefg"), anchor="OPS-1"),
                                     tracker_url=srv.url), "status", "--json")
    rows = {r["host"]: r for r in report["hosts"]}
    assert rows["a"]["state"] == "live" and rows["a"]["account"]["suspect"] is True
    assert rows["e"]["account"]["suspect"] is True and rows["c"]["account"]["suspect"] is False


def suspect_on_the_page(mon):
    """/fleet greys a reading from the future and says why, in both tables, and stays accessible."""
    from tests.support import pages
    from tests.support.browser import chromium, wait_for
    with chromium(1280, 900) as browser:
        for scheme in ("light", "dark"):
            pages.emulate(browser, scheme, 1280)
            browser.get(mon.url + "/fleet")
            wait_for(lambda: len(browser.find_elements("css selector", "#account-rows tr")) == 4
                     and len(browser.find_elements("css selector", "#rows .row")) == 7, what="both tables")
            page = browser.execute_script("""
                function text(r) { return r.innerText; }
                return {accounts: Array.from(document.querySelectorAll('#account-rows tr')).map(function (r) {
                            return {label: r.querySelector('th .label').textContent, text: r.innerText,
                                    greyed: r.querySelectorAll('td .win.stale').length}; }),
                        hosts: Array.from(document.querySelectorAll('#rows .row')).map(function (r) {
                            return {host: r.querySelector('.host').textContent, text: r.innerText,
                                    greyed: r.querySelectorAll('.win.stale').length}; })};""")
            accounts = {a["label"]: a for a in page["accounts"]}
            assert page["accounts"][0]["label"] == "work \u00b7 acct1"
            assert "dated in the future" not in accounts["work \u00b7 acct1"]["text"]
            assert "read on e, dated in the future" in accounts["ahead"]["text"] and accounts["ahead"]["greyed"] == 2
            hosts = {h["host"]: h for h in page["hosts"]}
            assert "dated in the future" in hosts["a"]["text"] and "last reading" not in hosts["a"]["text"]
            assert hosts["a"]["greyed"] == 2 and hosts["b"]["greyed"] == 0
            assert "dated in the future" not in hosts["b"]["text"] + hosts["f"]["text"]
            assert not pages.a11y_failures(browser) and not pages.contrast_failures(browser)


HOSTILE = [
    "not a list", {"key": "x"}, [None, 3, "acct1", {"label": 5}],
    [{"label": "<img src=x onerror=alert(1)>", "key": "ZZZZ", "provider": "Claude\n", "status": "<b>",
      "five_hour_pct": float("1e400") if False else 1e300, "wall_at": "soon", "active": "yes"}],
    [{"label": "acct%d" % i, "key": "%016x" % i} for i in range(500)],
]


@pytest.mark.parametrize("junk", range(len(HOSTILE)))
def test_hostile_accounts_lists_are_whitelisted(tmp_path, anchor_tracker, monkeypatch, capsys, junk):
    beat(anchor_tracker, "a", HOSTILE[junk])
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    code, report = run_json(node_env(home, tracker_url=anchor_tracker.url), "status", "--json")
    entries = report["hosts"][0]["accounts"]
    assert code == 3 and len(entries) <= 16
    for e in entries:
        assert set(e) == {"key", "label", "provider", "status", "health", "five_hour_pct", "five_hour_resets_at",
                          "seven_day_pct", "seven_day_resets_at", "wall_at", "probed_at", "active"}
        assert e["health"] is None  # none of the words: never guessed
        assert e["key"] is None or len(e["key"]) == 16
        assert e["provider"] == "claude" and e["status"] in (None, "ok") and e["active"] is False
        assert e["five_hour_pct"] is None and e["wall_at"] is None
    if junk == 4:
        assert [e["label"] for e in entries] == ["acct%d" % i for i in range(16)]


def test_without_a_fleet_the_view_is_empty_and_says_why(tmp_path, monitors):
    home = make_node(tmp_path, "solo", ["solo"], token=None)
    mon = monitors.start(node_env(home), ["--no-probe"])
    body = mon.get_json("/api/fleet/accounts")[1]
    assert body["accounts"] == [] and body["source"] == "tracker" and body["readAt"]
    assert body["error"].startswith("no liveness anchor configured")


# ---------------------------------------------------------------- the demo

def test_the_demo_shows_its_fleet_by_account_and_its_status_command_reads_it(tmp_path):
    started = Demo(tmp_path / "home", ["--port", "0"]).wait_ready()
    try:
        body = get_json(started.url + "/api/fleet/accounts")
        assert body["source"] == "demo" and "error" not in body
        first = body["accounts"][0]
        assert first["status"] == "rejected" and first["hosts"] == [{"host": "staging-1", "active": True, "health": None}]
        by_key = {a["key"]: a for a in body["accounts"]}
        grace = by_key[key("claude", "grace@demo.invalid")]
        # The stale gpu-box read it 410 s ago: build-02's newer reading wins.
        assert [h["host"] for h in grace["hosts"]] == ["build-02", "gpu-box"] and grace["fiveHour"]["host"] == "build-02"
        # Two logins called "acct1": two keys.
        assert [a["labels"] for a in body["accounts"]].count(["acct1"]) == 2
        assert by_key[None]["labels"] == ["scratch"]
        # The demo prints the terminal command for its fleet; it runs as printed.
        line = [l for l in started.lines if "fleet in a terminal: " in l][0].split("fleet in a terminal: ", 1)[1]
        assert line.endswith("status --url " + started.url)
        done = subprocess.run(shlex.split(line), cwd=str(REPO), env=clean_env(tmp_path), capture_output=True,
                              text=True, timeout=60)
        # 3: the demo's fleet has a stale and a missing host; never 1 ("the roster is empty").
        assert done.returncode == 3, (done.stdout, done.stderr)
        assert "staging-1" in done.stdout and "roster is empty" not in done.stdout + done.stderr
        done = subprocess.run(shlex.split(line) + ["--json"], cwd=str(REPO), env=clean_env(tmp_path),
                              capture_output=True, text=True, timeout=60)
        report = json.loads(done.stdout)
        assert done.returncode == 3 and report["source"] == "demo" and len(report["hosts"]) == 6
    finally:
        assert started.stop() == 0


@pytest.mark.parametrize("url, reason", [
    ("ftp://127.0.0.1:1", "http(s) URL"), ("http://127.0.0.1:9", "cannot read http://127.0.0.1:9/api/fleet")])
def test_status_url_that_cannot_be_read_exits_1_saying_which(tmp_path, url, reason):
    done = subprocess.run(shlex.split("python3 -m svcposture cluster status --url") + [url], cwd=str(REPO),
                          env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and reason in done.stderr, (done.stdout, done.stderr)


def test_status_url_of_a_server_that_is_no_monitor_exits_1(tmp_path, anchor_tracker):
    done = subprocess.run(["python3", "-m", "svcposture", "cluster", "status", "--url", anchor_tracker.url],
                          cwd=str(REPO), env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "did not answer with a fleet report" in done.stderr, done


# ---------------------------------------------------------------- the page

def test_the_fleet_page_opens_with_the_accounts_table_most_urgent_first(tmp_path):
    from tests.support import pages
    from tests.support.browser import chromium, wait_for
    started = Demo(tmp_path / "home", ["--port", "0"]).wait_ready()
    try:
        with chromium(1280, 900) as browser:
            for width in (1280, 360):
                pages.emulate(browser, "light", width)
                browser.get(started.url + "/fleet")
                wait_for(lambda: len(browser.find_elements("css selector", "#account-rows tr")) == 5
                         and len(browser.find_elements("css selector", "#rows .row")) == 6, what="both tables")
                page = browser.execute_script("""
                    var table = document.querySelector('main table');
                    return {first: table.id, caption: table.caption.textContent,
                            cols: Array.from(table.querySelectorAll('thead th[scope=col]')).map(function (t) {
                                return t.textContent; }),
                            rowHeads: Array.from(table.querySelectorAll('tbody th[scope=row] .label')).map(function (t) {
                                return t.textContent; }),
                            statuses: Array.from(table.querySelectorAll('tbody tr')).map(function (r) {
                                return r.dataset.status; }),
                            hosts: Array.from(document.querySelectorAll('#rows .host')).map(function (h) {
                                return h.textContent; }),
                            wide: document.documentElement.scrollWidth > document.documentElement.clientWidth};""")
                assert page["first"] == "accounts" and "most urgent first" in page["caption"]
                assert page["cols"] == ["Account", "Status", "5-hour window", "7-day window", "Reaches 100\u00a0%",
                                        "Hosts"]
                # Rejected first, then the soonest wall (acct2 on build-02 in under an hour).
                assert page["statuses"][:2] == ["rejected", "degraded"] and page["rowHeads"][1] == "acct2"
                assert page["hosts"][:2] == ["staging-1", "build-02"] and not page["wide"]
                # The stacked layout of a narrow screen is still a table to assistive technology.
                doc = browser.execute_cdp_cmd("DOM.getDocument", {})
                node = browser.execute_cdp_cmd("DOM.querySelector", {"nodeId": doc["root"]["nodeId"],
                                                                     "selector": "#accounts"})
                tree = browser.execute_cdp_cmd("Accessibility.getPartialAXTree",
                                               {"nodeId": node["nodeId"], "fetchRelatives": False})
                assert tree["nodes"][0]["role"]["value"] == "table", (width, tree["nodes"][0])
                assert not pages.a11y_failures(browser) and not pages.contrast_failures(browser)
    finally:
        assert started.stop() == 0
