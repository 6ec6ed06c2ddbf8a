"""Kimi Code accounts end to end (docs/kimi.md): a real monitor and the stand-in usages endpoint, replying
with captured bodies (tests/fixtures/field/SOURCES.md), through /api/accounts, /api/advice, guard, switch
and /metrics. One monitor serves every account of the module: a plan with its week and 5 hours (the
active one), a membership plan, the newer shape with ratio pools and no top-level `usage`, resets with
nine fractional digits, the 5 hours spent, and a key the endpoint refuses."""
from __future__ import annotations

from svcposture.vendors import vendor_named
from tests.support.keyservers import KimiServer
from tests.support.plannode import node_fixture, windows_of

# The nine-digit resets and the spent 5 hours are constructed replies (SOURCES.md says of what).
node = node_fixture(KimiServer, "ONE", ONE="kimi-usages-paste.json", MEMBER="kimi-usages-membership.json",
                    POOLS="kimi-usages-ratio-pools.json", NANOS="kimi-usages-nanos-constructed.json",
                    SPENT="kimi-usages-exhausted-constructed.json", GONE=None)


def test_the_week_the_five_hours_and_the_ratio_pools_are_placed_by_length(node):
    posture = node.posture()
    accounts = {a["label"]: a for a in posture["accounts"]}
    assert posture["status"] == "ok" and posture["active"]["label"] == "kimi-one"
    assert node.posture_fits_the_document()
    assert windows_of(accounts["kimi-one"]) == ([(27.0, "allowed"), (26.0, "allowed")], [])
    assert windows_of(accounts["kimi-member"]) == ([(0.0, "allowed"), (66.0, "allowed")], [])
    assert windows_of(accounts["kimi-pools"]) == ([(0.0, "allowed"), None], [
        ("limit_month_total", 3.4, "allowed", 43200), ("limit_month_code", 0.0, "allowed", 43200)])
    assert windows_of(accounts["kimi-spent"]) == ([(100.0, "rejected"), (58.0, "allowed")], [])
    # Nine fractional digits, truncated to the millisecond.
    assert accounts["kimi-nanos"]["fiveHour"]["resetsAt"].endswith(".443Z")
    assert accounts["kimi-member"]["planType"] == "LEVEL_INTERMEDIATE"


def test_a_refused_key_is_refused(node):
    error = node.accounts()["kimi-gone"]["error"]
    assert (error["kind"], error["httpStatus"]) == ("unauthorized", 401)
    assert "Kimi Code console" in error["fix"] and vendor_named("kimi").error_health(error) == "refused"


def test_the_endpoint_got_a_bearer_key_and_nothing_else(node):
    assert node.auths_are("Bearer")


def test_the_advice_ranks_the_account_with_the_most_room(node):
    status, advice = node.mon.get_json("/api/advice?provider=kimi")
    assert status == 200 and advice["advice"] == "stay"
    assert [r["label"] for r in advice["ranked"] if r["candidate"]] == ["kimi-pools"]
    assert {r["label"]: r["health"] for r in advice["ranked"]}["kimi-gone"] == "refused"


def test_guard_goes_holds_and_is_unavailable_as_the_windows_say(node):
    code, decision = node.guard()
    assert code == 0 and (decision["account"], decision["pct"]) == ("kimi-one", 27.0)
    code, decision = node.guard("kimi-spent")
    assert code == 1 and decision["window"] == "five_hour"
    assert (node.guard("kimi-member", reserve=40)[0], node.guard("kimi-gone")[0]) == (1, 69)


def test_switch_best_picks_the_pools_and_to_rewrites_the_kimi_export_line(node):
    assert node.best() == "kimi-pools"
    assert node.switch_to("kimi-member")["from"] == "kimi-one"
    node.switch_to("kimi-one")


def test_metrics_carry_the_windows_under_the_kimi_provider(node):
    statuses = {label: [status for status in ("ok", "rejected", "error")
                        if node.series("svc_account_status", account=label, status=status) == [1.0]]
                for label in ("kimi-one", "kimi-spent", "kimi-gone")}
    assert statuses == {"kimi-one": ["ok"], "kimi-spent": ["rejected"], "kimi-gone": ["error"]}
    assert node.series("svc_account_utilization_percent", account="kimi-pools", window="five_hour") == [0.0]


def test_no_key_leaves_the_accounts_env_file(node):
    assert node.texts_without_keys()
