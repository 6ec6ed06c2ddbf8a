"""A third vendor goes through the fleet with no change outside its package (docs/fleet.md).

The stand-in vendor "acme" (tests/support/thirdvendor/) is registered only by
`SVC_VENDORS=tests.support.thirdvendor`. Its accounts go through a real
node's heartbeat (`accounts[]` and its own `acme` block, beside Claude's
`account`), a peer's status row (`svc-cluster status --json` and the
monitor's `/api/fleet`), the fleet by account (`/api/fleet/accounts` of a real
monitor reading the stand-in tracker) and the Prometheus read. A reader that
has not registered it keeps its accounts under the name the peer gave, and
reads no block of it: nothing is guessed.
"""
from __future__ import annotations

import hashlib
import json
import time

import pytest

from svcposture._time import iso_from_ms
from svcposture.cluster import liveness
from tests.support.cli import run_json
from tests.support.home import BEARER, FAST_TIMINGS, accounts_path, canary, make_node, node_env, write_accounts
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.thirdvendor.server import AcmeServer, quota_reply
from tests.support.tracker import TrackerServer
from tests.support.waiting import wait_until
from tests.monitor.test_metrics_openapi import _validate
from tests.cluster.test_promread import PromStub, vector

CLAUDE_TOKEN = canary("acmefleet")
KEY_ONE = "acme-key-CANARY-fleetone-" + "5" * 12
KEY_TWO = "acme-key-CANARY-fleettwo-" + "6" * 12
SECRETS = (CLAUDE_TOKEN, KEY_ONE, KEY_TWO)
REGISTRY_LINE = {"SVC_VENDORS": "tests.support.thirdvendor"}
ROSTER = ["a", "b", "c", "d", "e"]
ENTRY_FIELDS = {"key", "label", "provider", "status", "health", "five_hour_pct", "five_hour_resets_at", "seven_day_pct",
                "seven_day_resets_at", "wall_at", "probed_at", "active"}


def key(provider, email):
    return hashlib.sha256((provider + "\0" + email.lower()).encode("utf-8")).hexdigest()[:16]


def iso_ago(seconds):
    return iso_from_ms(int((time.time() - seconds) * 1000))


def peer_entry(label, email, provider, *, active=False, five=None, probed_s=None):
    return {"key": key(provider, email), "label": label, "provider": provider, "status": "ok",
            "five_hour_pct": five, "five_hour_resets_at": None, "seven_day_pct": None, "seven_day_resets_at": None,
            "wall_at": None, "probed_at": iso_ago(probed_s) if probed_s is not None else None, "active": active}


def peer_block(label, email, provider, *, five=None, probed_s=60):
    return {"key": key(provider, email), "label": label, "status": "ok", "five_hour_pct": five,
            "five_hour_resets_at": None, "seven_day_pct": None, "seven_day_resets_at": None, "wall_at": None,
            "probed_at": iso_ago(probed_s), "probe_interval_ms": 60000}


def plant(tracker, host, **fields):
    published = iso_ago(1)
    meta = {"host": host, "publishedAt": published, "publishIntervalMs": 120000, "accountStatus": "ok",
            "quota": None, "account": None}
    meta.update(fields)
    tracker.put_attachment("OPS-1", liveness.heartbeat_url(host), subtitle=published, metadata=meta)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Host a: a real monitor with Claude's acct1 and acme's acme-one (active, 42 %) and acme-two,
    publishing to the stand-in tracker and reading the fleet from it. b, d and e are planted
    heartbeats; c is missing."""
    root = tmp_path_factory.mktemp("third-vendor-fleet")
    home = make_node(root, "a", ROSTER, anchor="OPS-1")
    reset_5h, reset_7d = int(time.time()) + 3600, int(time.time()) + 4 * 86400
    extra = ('ACME_KEY_ONE="%s"  # one@acme.example\nACME_KEY_TWO="%s"  # two@acme.example\n'
             'export ACME_KEY="$ACME_KEY_ONE"\n' % (KEY_ONE, KEY_TWO))
    write_accounts(accounts_path(home), [("ACCT1", CLAUDE_TOKEN, "c@x.example")], active="ACCT1", extra=extra)
    with ProviderServer() as provider, AcmeServer() as acme, TrackerServer(tokens=[BEARER]) as tracker:
        tracker.add_issue("OPS-1")
        provider.set_account(CLAUDE_TOKEN, five_hour=(0.30, "allowed"), seven_day=(0.10, "allowed"))
        acme.set_reply(KEY_ONE, quota_reply(0.42, 0.20, reset_5h, reset_7d))
        acme.set_reply(KEY_TWO, quota_reply(0.60, 0.05, reset_5h, reset_7d))
        # b: a current publisher with acme's acme-one too, read earlier, under another label.
        plant(tracker, "b", account=peer_block("acct1", "b@x.example", "claude", five=5.0),
              accounts=[peer_entry("acct1", "b@x.example", "claude", active=True, five=5.0, probed_s=60),
                        peer_entry("acme-shared", "one@acme.example", "acme", five=10.0, probed_s=3600)])
        # d: an older publisher: its active blocks only, no `accounts`.
        plant(tracker, "d", account=peer_block("acct1", "d@x.example", "claude", five=7.0),
              acme=peer_block("acme-main", "one@acme.example", "acme", five=11.0, probed_s=7200))
        # e: a vendor no node of this fleet registers, with a block of its own.
        plant(tracker, "e", account=None, zeta=peer_block("zeta-x", "z@x.example", "zeta", five=9.0),
              accounts=[peer_entry("zeta-x", "z@x.example", "zeta", active=True, five=9.0, probed_s=30)])
        env = node_env(home, provider.url, extra=FAST_TIMINGS, tracker_url=tracker.url, interval_ms=300,
                       SVC_ACME_URL=acme.url, SVC_FLEET_TTL_S="0.5", **REGISTRY_LINE)
        mon = start_monitor(env)
        try:
            yield env, mon, tracker
        finally:
            mon.stop()
    assert not any(secret in mon.stderr_text() + mon.stdout_text() for secret in SECRETS)


def own_heartbeat(tracker):
    """Host a's heartbeat once it lists every account probed and carries its acme block."""
    meta = tracker.attachments("OPS-1").get(liveness.heartbeat_url("a"), {}).get("metadata") or {}
    entries = meta.get("accounts") or []
    if len(entries) == 3 and all(e["probed_at"] for e in entries) and (meta.get("acme") or {}).get("probed_at"):
        return meta
    return None


def test_the_heartbeat_carries_the_third_vendors_accounts_and_its_own_block(fleet):
    _env, _mon, tracker = fleet
    meta = wait_until(lambda: own_heartbeat(tracker), 30, message="a heartbeat with acme's accounts and block")
    assert [(e["label"], e["provider"], e["active"]) for e in meta["accounts"]] == [
        ("acct1", "claude", True), ("acme-one", "acme", True), ("acme-two", "acme", False)]
    one, two = meta["accounts"][1:]
    assert set(one) == ENTRY_FIELDS and one["health"] == two["health"] == "ok"
    assert one["key"] == key("acme", "one@acme.example") and two["key"] == key("acme", "two@acme.example")
    assert (one["five_hour_pct"], one["seven_day_pct"], two["five_hour_pct"]) == (42.0, 20.0, 60.0)
    # Claude's block stays `account`; acme's is the same block under the vendor's name.
    block = meta["acme"]
    assert set(block) == set(meta["account"]) and meta["account"]["label"] == "acct1"
    assert (block["label"], block["key"], block["five_hour_pct"]) == ("acme-one", one["key"], 42.0)
    assert "codex" not in meta  # no Codex line on this node: nothing of Codex
    assert not any(secret in json.dumps(meta) for secret in SECRETS)


def test_a_peers_status_row_carries_its_third_vendor_block(fleet):
    env, mon, tracker = fleet
    wait_until(lambda: own_heartbeat(tracker), 30, message="a heartbeat with acme's block")
    code, report = run_json(env, "status", "--json")
    rows = {r["host"]: r for r in report["hosts"]}
    assert code == 3 and rows["c"]["state"] == "missing"
    assert rows["a"]["acme"]["label"] == "acme-one" and rows["a"]["acme"]["five_hour_pct"] == 42.0
    assert rows["a"]["account"]["label"] == "acct1"
    # The same keys in the same order as a Codex block's: after Claude's `account`, before `accounts`.
    assert list(rows["a"]) == ["host", "state", "ageS", "quota", "account", "acme", "accounts"]
    assert rows["d"]["acme"]["label"] == "acme-main" and rows["d"]["acme"]["stale"] is True
    # A host without the vendor shows nothing of it; a vendor no one registered gets no block.
    assert "acme" not in rows["b"] and "zeta" not in rows["e"]
    assert [(e["label"], e["provider"]) for e in rows["e"]["accounts"]] == [("zeta-x", "zeta")]

    def fleet_row():
        row = {r["host"]: r for r in mon.get_json("/api/fleet")[1]["hosts"]}.get("a") or {}
        return row if (row.get("acme") or {}).get("label") else None
    row = wait_until(fleet_row, 20, message="/api/fleet reading a's acme block")
    assert row["acme"]["key"] == key("acme", "one@acme.example")


def test_a_reader_that_does_not_register_the_vendor_keeps_its_accounts_and_reads_no_block(fleet):
    env, _mon, tracker = fleet
    wait_until(lambda: own_heartbeat(tracker), 30, message="a heartbeat with acme's block")
    plain = {k: v for k, v in env.items() if k != "SVC_VENDORS"}
    code, report = run_json(plain, "status", "--json")
    row = {r["host"]: r for r in report["hosts"]}["a"]
    assert code == 3 and "acme" not in row and row["account"]["label"] == "acct1"
    assert [(e["label"], e["provider"]) for e in row["accounts"]] == [
        ("acct1", "claude"), ("acme-one", "acme"), ("acme-two", "acme")]


def test_the_fleet_by_account_merges_the_third_vendors_login_across_hosts(fleet):
    _env, mon, tracker = fleet
    wait_until(lambda: own_heartbeat(tracker), 30, message="a heartbeat with acme's accounts")
    one = key("acme", "one@acme.example")

    def shared():
        body = mon.get_json("/api/fleet/accounts")[1]
        found = {a["key"]: a for a in body["accounts"]}.get(one)
        return (body, found) if found and len(found["hosts"]) == 3 else None
    body, account = wait_until(shared, 20, message="acme-one on hosts a, b and d")
    _validate(mon.get_json("/api/openapi.json")[1], {"$ref": "#/components/schemas/FleetAccounts"}, body)
    assert account["provider"] == "acme" and account["labels"] == ["acme-one", "acme-shared", "acme-main"]
    # d's older heartbeat gives its active acme block: an active host of the login.
    # a's heartbeat says its health; b's entry and d's block come from publishers that predate it.
    assert account["hosts"] == [{"host": "a", "active": True, "health": "ok"},
                                {"host": "b", "active": False, "health": None},
                                {"host": "d", "active": True, "health": None}]
    assert account["health"] == "ok"
    assert account["fiveHour"]["pct"] == 42.0 and account["fiveHour"]["host"] == "a"
    by_key = {a["key"]: a for a in body["accounts"]}
    assert by_key[key("acme", "two@acme.example")]["provider"] == "acme"
    # A vendor this node has not registered keeps its name; a default-vendor login stays the default's.
    assert by_key[key("zeta", "z@x.example")]["provider"] == "zeta"
    assert by_key[key("claude", "d@x.example")]["provider"] == "claude"
    assert not any(secret in json.dumps(body) for secret in SECRETS)


# ---------------------------------------------------------------- the Prometheus read

ONE = key("acme", "one@acme.example")


def acme_prometheus(text):
    """alpha: Claude's acct1 (the default vendor's series, no `provider`), acme's acme-one, both
    active, and zeta's zeta-x of a vendor no reader registers; bravo: Claude's only."""
    now = time.time()
    if text.startswith("max by (node) (max_over_time"):
        return 200, vector([({"node": "alpha"}, 1), ({"node": "bravo"}, 1)])
    if text.startswith("max by (node, provider, account, account_key) (svc_account_probed_at_seconds"):
        return 200, vector([
            ({"node": "alpha", "account": "acct1", "account_key": key("claude", "c@x.example")}, now - 30),
            ({"node": "alpha", "account": "acme-one", "account_key": ONE, "provider": "acme"}, now - 5),
            ({"node": "alpha", "account": "zeta-x", "account_key": key("zeta", "z@x.example"), "provider": "zeta"},
             now - 5),
            ({"node": "bravo", "account": "acct1", "account_key": key("claude", "b@x.example"),
              "provider": "claude"}, now - 10)])
    if text.startswith("max by (node, provider, account) (timestamp(svc_node_active_account))"):
        return 200, vector([({"node": "alpha", "account": "acct1", "provider": "claude"}, now - 2),
                            ({"node": "alpha", "account": "acme-one", "provider": "acme"}, now - 2),
                            ({"node": "alpha", "account": "zeta-x", "provider": "zeta"}, now - 2),
                            ({"node": "bravo", "account": "acct1", "provider": "claude"}, now - 2)])
    return 200, vector([
        ({"__name__": "svc_account_utilization_percent", "node": "alpha", "account": "acme-one", "provider": "acme",
          "window": "five_hour"}, 42),
        ({"node": "alpha", "account": "acme-one", "provider": "acme", "status": "degraded"}, 1),
        ({"__name__": "svc_account_utilization_percent", "node": "alpha", "account": "acct1",
          "window": "five_hour"}, 30)])


def prometheus_env(tmp_path, url, registered):
    home = make_node(tmp_path, "alpha", ["alpha", "bravo"], token=None)
    env = node_env(home, EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS="60000", SVC_LIVENESS_READ_SOURCE="prometheus",
                   SVC_TRACKER_URL="http://127.0.0.1:9/graphql", SVC_PROMETHEUS_URL=url)
    if registered:
        env.update(REGISTRY_LINE)
    return env


def test_the_prometheus_read_gives_the_third_vendors_block(tmp_path):
    with PromStub(acme_prometheus) as prom:
        code, report = run_json(prometheus_env(tmp_path, prom.url, True), "status", "--json")
        assert len(prom.queries) == 4
    rows = {r["host"]: r for r in report["hosts"]}
    alpha = rows["alpha"]
    assert code == 0 and list(alpha) == ["host", "state", "ageS", "quota", "account", "acme", "accounts"]
    assert (alpha["acme"]["label"], alpha["acme"]["key"], alpha["acme"]["five_hour_pct"],
            alpha["acme"]["status"]) == ("acme-one", ONE, 42, "degraded")
    # The row's quota is the default vendor's block's, never another vendor's.
    assert alpha["account"]["label"] == "acct1" and alpha["quota"] == {"five_hour_pct": 30}
    assert [(e["label"], e["provider"], e["active"]) for e in alpha["accounts"]] == [
        ("acct1", "claude", True), ("acme-one", "acme", True), ("zeta-x", "zeta", True)]
    assert "acme" not in rows["bravo"] and "zeta" not in alpha


def test_the_prometheus_read_without_the_vendor_registered_keeps_its_accounts_only(tmp_path):
    with PromStub(acme_prometheus) as prom:
        code, report = run_json(prometheus_env(tmp_path, prom.url, False), "status", "--json")
    alpha = {r["host"]: r for r in report["hosts"]}["alpha"]
    assert code == 0 and "acme" not in alpha and alpha["account"]["label"] == "acct1"
    assert [(e["label"], e["provider"]) for e in alpha["accounts"]] == [
        ("acct1", "claude"), ("acme-one", "acme"), ("zeta-x", "zeta")]
