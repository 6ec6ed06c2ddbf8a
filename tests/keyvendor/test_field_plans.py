"""The key vendors' field samples (tests/fixtures/field/SOURCES.md) through their parsers: the windows each
captured reply is placed as, exactly (docs/copilot.md, docs/zai.md, docs/kimi.md). The same replies go
through real monitors in test_copilot_node.py, test_zai_node.py and test_kimi_node.py."""
from __future__ import annotations

import pytest

from svcposture.copilot.reply import parse_reply as copilot
from svcposture.keyvendor.exchange import BodyError
from svcposture.kimi.reply import parse_reply as kimi
from svcposture.zai.reply import parse_reply as zai
from tests.support.fieldsamples import reply

MONTH = (2592000, 43200)


def win(pct, resets_at, status="allowed"):
    return {"pct": pct, "resetsAt": resets_at, "status": status, "derived": True}


def extra(pct, resets_at, name, status="allowed", length=MONTH):
    return dict(win(pct, resets_at, status), seconds=length[0], windowMinutes=length[1], name=name)


def placed(five, seven, extras, plan):
    return {"fiveHour": five, "sevenDay": seven, "extraWindows": extras, "planType": plan}


# ---------------------------------------------------------------- Copilot: GET /copilot_internal/user

def test_copilot_pro_with_unlimited_chat_and_completions():
    # Unlimited chat and completions are no window; premium requests from 1500 - 473 left.
    assert copilot(reply("copilot-user-individual-pro-unlimited.json"), 0) == placed(None, None, [
        extra(68.5, "2026-03-01T00:00:00.000Z", "premium_interactions")], "individual_pro")


def test_copilot_business_seat():
    assert copilot(reply("copilot-user-business-seat.json"), 0) == placed(None, None, [
        extra(95.6, "2026-03-01T00:00:00.000Z", "premium_interactions", "allowed_warning")], "business")


def test_copilot_free_plans_zero_premium_entitlement_is_no_window():
    assert copilot(reply("copilot-user-free-zero-premium.json"), 0) == placed(None, None, [
        extra(9.0, "2099-07-01T00:00:00.000Z", "chat"), extra(0.5, "2099-07-01T00:00:00.000Z", "completions")],
        "individual")


def test_copilot_free_plans_older_monthly_and_limited_quotas():
    assert copilot(reply("copilot-user-free-limited-quotas.json"), 0) == placed(None, None, [
        extra(48.0, "2026-04-24T00:00:00.000Z", "chat"), extra(16.8, "2026-04-24T00:00:00.000Z", "completions")],
        "individual")


def test_copilot_premium_requests_spent_past_the_entitlement():
    assert copilot(reply("copilot-user-premium-exhausted.json"), 0) == placed(None, None, [
        extra(100.3, "2026-04-01T00:00:00.000Z", "premium_interactions", "rejected")], None)


def test_copilots_refusal_body_is_not_a_reply():
    with pytest.raises(ValueError):
        copilot(reply("copilot-401-bad-credentials.json"), 0)


# ---------------------------------------------------------------- z.ai: GET /api/monitor/usage/quota/limit

def test_zai_pro_live_reply_five_hours_week_and_monthly_tool_calls():
    assert zai(reply("zai-quota-pro-live.json"), 0) == placed(
        win(17.0, "2026-06-29T09:22:51.179Z"), win(3.0, "2026-07-06T02:38:06.997Z"),
        [extra(0.0, "2026-07-29T02:38:06.976Z", "time_limit")], "pro")


def test_zai_renamed_credit_limit_and_a_five_hour_window_with_no_reset():
    assert zai(reply("zai-quota-credit-limit-no-reset.json"), 0) == placed(
        win(0.0, None), win(98.6, "2026-08-14T05:34:39.998Z", "allowed_warning"), [], "lite")


def test_zai_five_hour_tokens_spent():
    assert zai(reply("zai-quota-tokens-exhausted.json"), 0) == placed(
        win(100.1, "2026-02-06T17:19:45.482Z", "rejected"), None, [extra(1.9, None, "time_limit")], None)


def test_zai_bigmodel_tokens_with_a_percentage_only():
    assert zai(reply("zai-quota-bigmodel-lite.json"), 0) == placed(
        win(1.0, "2026-02-14T12:55:38.808Z"), None, [extra(28.0, "2026-03-04T09:16:05.983Z", "time_limit")], "lite")


def test_zai_credit_limits_with_counts():
    assert zai(reply("zai-quota-credit-pro-paste.json"), 0) == placed(
        win(3.4, "2026-09-18T18:57:34.621Z"), win(2.0, "2026-09-25T07:40:46.980Z"), [], "pro")


def test_zai_refused_key_under_http_200_is_a_refusal():
    with pytest.raises(BodyError) as caught:
        zai(reply("zai-body-401.json"), 0)
    assert caught.value.status == 401


# ---------------------------------------------------------------- Kimi: GET /coding/v1/usages

def test_kimi_week_and_five_hours_with_string_counts():
    assert kimi(reply("kimi-usages-paste.json"), 0) == placed(
        win(27.0, "2026-08-08T14:53:05.519Z"), win(26.0, "2026-08-11T15:53:05.519Z"), [], "TYPE_PURCHASE")


def test_kimi_membership_level_is_the_plan():
    assert kimi(reply("kimi-usages-membership.json"), 0) == placed(
        win(0.0, "2026-07-14T16:13:41.000Z"), win(66.0, "2026-07-15T07:13:41.897Z"), [], "LEVEL_INTERMEDIATE")


def test_kimi_without_a_top_level_usage_reads_its_ratio_pools():
    # The 5-hour pool repeats limits[0]; the monthly pools are extra windows.
    assert kimi(reply("kimi-usages-ratio-pools.json"), 0) == placed(
        win(0.0, "2026-09-15T12:49:10.897Z"), None,
        [extra(3.4, "2026-10-15T07:49:10.000Z", "limit_month_total"),
         extra(0.0, "2026-10-15T07:49:10.000Z", "limit_month_code")], None)


def test_kimi_zero_limit_is_no_window_and_the_pool_takes_its_place():
    assert kimi(reply("kimi-usages-zeroed-pools.json"), 0) == placed(
        win(0.0, "2026-09-16T20:11:32.000Z"), None,
        [extra(0.0, "2026-10-16T00:00:00.000Z", "limit_month_total"),
         extra(0.0, "2026-10-16T00:00:00.000Z", "limit_month_code")], None)


def test_kimi_resets_with_nine_fractional_digits():
    assert kimi(reply("kimi-usages-nanos-constructed.json"), 0) == placed(
        win(27.0, "2025-12-18T04:24:18.443Z"), win(26.0, "2025-12-23T05:24:18.443Z"), [], None)


def test_kimi_five_hours_spent():
    assert kimi(reply("kimi-usages-exhausted-constructed.json"), 0) == placed(
        win(100.0, "2026-08-08T14:53:05.519Z", "rejected"), win(58.0, "2026-08-11T15:53:05.519Z"), [], None)
