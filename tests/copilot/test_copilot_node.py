"""GitHub Copilot accounts end to end (docs/copilot.md): a real monitor and the stand-in endpoint, replying
with captured bodies (tests/fixtures/field/SOURCES.md), through /api/accounts, /api/advice, guard, switch
and /metrics. One monitor serves every account of the module: a Pro plan (the active one), a Business
seat, the free plan in both its shapes, premium requests spent, and a token the endpoint refuses."""
from __future__ import annotations

import json

from tests.support.keyservers import CopilotServer
from tests.support.plannode import events_of, node_fixture, windows_of

node = node_fixture(CopilotServer, "PRO", PRO="copilot-user-individual-pro-unlimited.json",
                    BIZ="copilot-user-business-seat.json", FREE="copilot-user-free-zero-premium.json",
                    OLDFREE="copilot-user-free-limited-quotas.json", SPENT="copilot-user-premium-exhausted.json",
                    GONE=None)


def _extras(account):
    return windows_of(account)[1]


def test_each_account_shows_its_monthly_quotas_as_named_windows(node):
    body = node.posture()
    assert (body["status"], body["active"]["label"]) == ("ok", "copilot-pro") and node.posture_fits_the_document()
    accounts = {a["label"]: a for a in body["accounts"]}
    month = 43200  # minutes
    assert _extras(accounts["copilot-pro"]) == [("premium_interactions", 68.5, "allowed", month)]
    assert _extras(accounts["copilot-biz"]) == [("premium_interactions", 95.6, "allowed_warning", month)]
    # The free plan's zero premium entitlement is no window; its chat and completions are.
    assert _extras(accounts["copilot-free"]) == [("chat", 9.0, "allowed", month),
                                                 ("completions", 0.5, "allowed", month)]
    assert _extras(accounts["copilot-oldfree"]) == [("chat", 48.0, "allowed", month),
                                                    ("completions", 16.8, "allowed", month)]
    assert _extras(accounts["copilot-spent"]) == [("premium_interactions", 100.3, "rejected", month)]
    assert {w["seconds"] for a in accounts.values() for w in a["extraWindows"]} == {2592000}
    for account in accounts.values():
        assert account["fiveHour"] is None and account["sevenDay"] is None and account["provider"] == "copilot"
    assert (accounts["copilot-spent"]["bindingStatus"], accounts["copilot-biz"]["bindingStatus"]) == \
        ("rejected", "allowed_warning")
    assert accounts["copilot-pro"]["planType"] == "individual_pro" and accounts["copilot-biz"]["planType"] == "business"
    # A reset given as a date alone is its midnight UTC.
    assert accounts["copilot-biz"]["extraWindows"][0]["resetsAt"].endswith("T00:00:00.000Z")


def test_a_refused_token_is_the_vendors_refusal_with_its_fix(node):
    gone = node.accounts()["copilot-gone"]
    assert gone["extraWindows"] == [] and gone["bindingStatus"] is None
    assert gone["error"] == {"kind": "unauthorized", "httpStatus": 401, "retryAt": None,
                             "message": "The GitHub token was refused: it has expired, was revoked, or is not a "
                                        "GitHub token.",
                             "fix": "run `gh auth token` signed in as the account's GitHub user and paste it "
                                    "into its COPILOT_TOKEN_ line"}
    from svcposture.vendors import vendor_named
    assert vendor_named("copilot").error_health(gone["error"]) == "refused"


def test_the_endpoint_got_githubs_token_scheme_and_nothing_else(node):
    assert node.auths_are("token")


def test_the_advice_stays_and_ranks_the_free_accounts(node):
    status, advice = node.mon.get_json("/api/advice?provider=copilot")
    assert status == 200 and advice["provider"] == "copilot" and advice["active"]["label"] == "copilot-pro"
    assert advice["advice"] == "stay"
    # Every other account is ranked with its health; the free plans are the candidates.
    assert [r["label"] for r in advice["ranked"] if r["candidate"]] == ["copilot-free", "copilot-oldfree"]
    assert {r["label"]: r["health"] for r in advice["ranked"]}["copilot-gone"] == "refused"


def test_guard_goes_on_room_holds_on_a_spent_quota_and_is_unavailable_on_a_refusal(node):
    code, decision = node.guard()
    assert code == 0 and (decision["account"], decision["window"], decision["pct"]) == \
        ("copilot-pro", "premium_interactions", 68.5)
    assert [node.guard("copilot-spent")[0], node.guard("copilot-biz", reserve=10)[0], node.guard("copilot-gone")[0]] \
        == [1, 1, 69]


def test_switch_rewrites_the_copilot_export_line_and_best_picks_the_most_room(node):
    assert node.best() == "copilot-free"
    assert node.switch_to("copilot-oldfree")["from"] == "copilot-pro"
    switched = [json.loads(line) for line in events_of(node.home) if "account.switched" in line]
    assert switched and '"account.provider": "copilot"' in json.dumps(switched[-1])
    node.switch_to("copilot-pro")


def test_metrics_carry_each_account_under_the_copilot_provider(node):
    # The monthly quotas are extra windows, which /metrics does not carry; the statuses say them.
    assert node.series("svc_posture_available") == [1.0]
    assert node.series("svc_node_active_account", node="plans-node", account="copilot-pro") == [1.0]
    expected = (("copilot-spent", "rejected"), ("copilot-biz", "degraded"), ("copilot-gone", "error"))
    assert [node.series("svc_account_status", account=label, status=status) for label, status in expected] == \
        [[1.0]] * 3
    assert node.series("svc_account_utilization_percent") == []


def test_no_token_leaves_the_accounts_env_file(node):
    assert node.texts_without_keys()
