"""z.ai accounts end to end (docs/zai.md): a real monitor and the stand-in quota endpoint, replying with
captured bodies (tests/fixtures/field/SOURCES.md), through /api/accounts, /api/advice, guard, switch and
/metrics. One monitor serves every account of the module: a Pro plan (the active one), the renamed
`CREDIT_LIMIT` with a 5-hour window not yet started, a reply with percentages only, the 5 hours spent,
a key refused in a 200 reply's envelope, and a key refused with a 401."""
from __future__ import annotations

from svcposture.vendors import vendor_named
from tests.support.keyservers import ZaiServer
from tests.support.plannode import node_fixture, windows_of

node = node_fixture(ZaiServer, "ONE", ONE="zai-quota-pro-live.json", CREDIT="zai-quota-credit-limit-no-reset.json",
                    LITE="zai-quota-bigmodel-lite.json", SPENT="zai-quota-tokens-exhausted.json",
                    ENVELOPE="zai-body-401.json", GONE=None)


def test_windows_are_read_by_unit_and_length_whatever_the_type_is_called(node):
    accounts = node.accounts()
    assert node.posture()["status"] == "ok" and node.active() == "zai-one"
    assert node.posture_fits_the_document()  # every account and window as the OpenAPI document says
    assert windows_of(accounts["zai-one"]) == ([(17.0, "allowed"), (3.0, "allowed")],
                                               [("time_limit", 0.0, "allowed", 43200)])
    assert windows_of(accounts["zai-credit"]) == ([(0.0, "allowed"), (98.6, "allowed_warning")], [])
    assert accounts["zai-credit"]["fiveHour"]["resetsAt"] is None and accounts["zai-credit"]["sevenDay"]["resetsAt"]
    assert windows_of(accounts["zai-lite"]) == ([(1.0, "allowed"), None], [("time_limit", 28.0, "allowed", 43200)])
    assert windows_of(accounts["zai-spent"]) == ([(100.1, "rejected"), None], [("time_limit", 1.9, "allowed", 43200)])
    spent = accounts["zai-spent"]
    assert (spent["bindingWindow"], spent["bindingStatus"]) == ("five_hour", "rejected")
    assert [accounts[label]["planType"] for label in ("zai-one", "zai-credit", "zai-lite")] == ["pro", "lite", "lite"]


def test_a_key_refused_in_the_envelope_or_with_a_401_is_refused(node):
    accounts = node.accounts()
    for label in ("zai-envelope", "zai-gone"):
        error = accounts[label]["error"]
        assert (error["kind"], error["httpStatus"]) == ("unauthorized", 401), label
        assert error["fix"].startswith("create a key at https://z.ai/manage-apikey/apikey-list")
        assert vendor_named("zai").error_health(error) == "refused"


def test_the_endpoint_got_a_bearer_key_and_nothing_else(node):
    assert node.auths_are("Bearer")


def test_the_advice_stays_on_the_account_with_the_most_room(node):
    status, advice = node.mon.get_json("/api/advice?provider=zai")
    assert status == 200 and advice["advice"] == "stay"
    # Every other account is ranked with its health; none has more room than the active one.
    assert [r["label"] for r in advice["ranked"] if r["candidate"]] == []
    assert {r["label"] for r in advice["ranked"]} >= {"zai-spent", "zai-credit"}
    assert (advice["active"]["label"], advice["active"]["email"], advice["active"]["health"]) == \
        ("zai-one", "one@x.example", "ok")


def test_guard_reads_every_window_and_holds_on_the_spent_five_hours(node):
    code, decision = node.guard()
    assert code == 0 and (decision["window"], decision["pct"]) == ("five_hour", 17.0)
    code, decision = node.guard("zai-spent")
    assert code == 1 and decision["window"] == "five_hour" and decision["retryAfterS"] > 0
    assert (node.guard("zai-credit", reserve=5)[0], node.guard("zai-envelope")[0]) == (1, 69)


def test_switch_rewrites_the_zai_export_line(node):
    assert node.best() == "zai-one"  # no sibling has more room than zai-one: --best stays
    assert node.switch_to("zai-lite")["to"] == "zai-lite"
    node.switch_to("zai-one")


def test_metrics_carry_the_windows_under_the_zai_provider(node):
    utilization = {(label, window): node.series("svc_account_utilization_percent", account=label, window=window)
                   for label in ("zai-one", "zai-spent") for window in ("five_hour", "seven_day")}
    assert utilization == {("zai-one", "five_hour"): [17.0], ("zai-one", "seven_day"): [3.0],
                           ("zai-spent", "five_hour"): [100.1], ("zai-spent", "seven_day"): []}
    assert node.series("svc_account_status", account="zai-envelope", status="error") == [1.0]


def test_no_key_leaves_the_accounts_env_file(node):
    assert node.texts_without_keys()
