"""The field samples (tests/fixtures/field/SOURCES.md) through the parsers: the windows each one is placed
as, exactly. One test per sample file; the end-to-end runs are in test_field_replies.py."""
from __future__ import annotations

import json
import os
from pathlib import Path

from svcposture.claude.usage import usage_extras, usage_values
from svcposture.codex.session import newest_session_sample
from svcposture.claude.provider import parse_unified_headers, reset_from_retry_after
from svcposture.codex.usage import header_limits, parse_usage_reply, usage_limit_window
from svcposture.probe.providerhttp import retry_after_s
from tests.support.codex import write_session
from tests.support.fieldsamples import FIELD, iso, lines, reply, stamp_s

def win(pct, reset_s, status="allowed"):
    return {"pct": pct, "resetsAt": iso(reset_s) if reset_s is not None else None, "status": status,
            "derived": True}


def extra(pct, reset_s, seconds, name, status="allowed"):
    return dict(win(pct, reset_s, status), seconds=seconds, name=name)


def claude_extra(pct, resets_at, name, status="allowed"):
    return {"pct": pct, "resetsAt": resets_at, "status": status, "derived": True, "seconds": 604800, "name": name}


# ---------------------------------------------------------------- Codex usage endpoint

def test_pro_account_with_the_spark_models_own_limits():
    body = reply("codex-usage-pro-spark-additional.json")
    got = parse_usage_reply(body, 1766940000.0)
    assert got["fiveHour"] == win(22.0, 1766948068) and got["sevenDay"] == win(43.0, 1767407914)
    assert got["extraWindows"] == [extra(30.0, 1766948068, 18000, "GPT-5.3-Codex-Spark"),
                                   extra(100.0, 1767407914, 604800, "GPT-5.3-Codex-Spark", "rejected")]
    assert got["planType"] == "pro"


def test_live_prolite_reply_with_every_key_seen():
    body = reply("codex-usage-prolite-live-spark.json")
    got = parse_usage_reply(body, 1776100000.0)
    assert got["fiveHour"] == win(12.0, 1776111121) and got["sevenDay"] == win(2.0, 1776672455)
    assert got["extraWindows"] == [extra(0.0, 1776120541, 18000, "GPT-5.3-Codex-Spark"),
                                   extra(0.0, 1776707341, 604800, "GPT-5.3-Codex-Spark")]
    assert got["planType"] == "prolite" and got["codeReview"] is None
    assert got["credits"] == {"hasCredits": False, "unlimited": False, "balance": 0.0}


def test_enterprise_credit_plan_is_a_credits_window():
    body = reply("codex-usage-enterprise-credit-plan.json")
    got = parse_usage_reply(body, 1782000000.0)
    assert got["fiveHour"] is None and got["sevenDay"] is None
    # 100 - remaining_percent (92.239), to one decimal.
    assert got["extraWindows"] == [extra(7.8, 1782864000, None, "credits")]
    assert got["planType"] == "enterprise"


def test_team_spend_cap_reached_is_a_rejected_credits_window():
    body = reply("codex-usage-team-spend-control.json")
    got = parse_usage_reply(body, 1785000000.0)
    # The weekly window comes as primary: placed by its length.
    assert got["fiveHour"] is None and got["sevenDay"] == win(18.0, 1785299212)
    assert got["extraWindows"] == [extra(100.0, 1785542400, None, "credits", "rejected")]


def test_banked_resets_of_a_prolite_and_a_limited_plus_account():
    got = parse_usage_reply(reply("codex-usage-prolite-reset-credits.json"), 1784500000.0)
    assert got["sevenDay"] == win(12.0, 1784961938) and got["fiveHour"] is None
    assert got["resetCredits"] == {"available": 1, "applicable": 0}
    got = parse_usage_reply(reply("codex-usage-plus-limited-reset-credits.json"), 1789000000.0)
    assert got["sevenDay"] == win(100.0, 1789457449, "rejected")
    assert got["resetCredits"] == {"available": 2, "applicable": 0}


def test_the_429_bodies_say_the_limit_is_reached_until_their_reset():
    for name, reset_s in (("codex-429-usage-limit-free.json", 1775317531),
                          ("codex-429-usage-limit-free-cliproxy.json", 1772180859)):
        sample = reply(name)
        assert sample["status"] == 429 and "retry-after" not in {k.lower() for k in sample["headers"]}
        assert usage_limit_window(sample["body"], reset_s - 3600.0) == extra(100.0, reset_s, None, "usage limit",
                                                                             "rejected")


def test_the_x_codex_headers_give_the_weekly_window():
    headers = {k.lower(): v for k, v in reply("codex-headers-usage-weekly.json")["headers"].items()}
    got = header_limits(headers, 1785900000.0)
    # The secondary slot has no length (and an empty reset): not a window.
    assert got["sevenDay"] == win(4.0, 1786501305) and got["fiveHour"] is None and got["extraWindows"] == []


def test_a_claude_429_whose_window_has_no_reset_takes_the_retry_after():
    sample = reply("claude-429-5h-rejected-retry-after.json")
    view = parse_unified_headers(sample["headers"])
    assert view["fiveHour"] == {"pct": 108.0, "resetsAt": None, "status": "rejected"} and view["sevenDay"] is None
    got = reset_from_retry_after(view, retry_after_s(sample["headers"]["retry-after"]), 1790000000.0)
    assert got["fiveHour"] == {"pct": 108.0, "resetsAt": iso(1790000000 + 13262), "status": "rejected"}


# ---------------------------------------------------------------- Codex session logs

def _session(tmp_path: Path, name: str, split: bool = False):
    """The log written as the CLI would have (one file, or one file per line, oldest modified first),
    read one second after its newest line; (the sample, the time of the newest line with limits)."""
    raw = lines(name)
    text = [json.dumps(line) for line in raw]
    last = max(stamp_s(line["timestamp"]) for line in raw)
    limits_at = max(stamp_s(line["timestamp"]) for line in raw if "rate_limits" in line["payload"])
    if split:
        for i, line in enumerate(raw):
            at = stamp_s(line["timestamp"])
            write_session(tmp_path, at, [text[i]], name="f%d" % i, mtime=at)
    else:
        path = write_session(tmp_path, last, text)
        os.utime(str(path), (last, last))
    return newest_session_sample(str(tmp_path), None, int((last + 1) * 1000)), limits_at


def test_session_windows_of_299_and_10079_minutes(tmp_path):
    got, at = _session(tmp_path, "codex-session-299-10079.jsonl")
    assert got["fiveHour"] == win(0.0, at + 17388) and got["sevenDay"] == win(7.0, at + 491245)
    assert got["extraWindows"] == []


def test_session_prolite_account_line_is_not_hidden_by_the_newer_spark_line(tmp_path):
    got, at = _session(tmp_path, "codex-session-prolite-spark-interleaved.jsonl")
    # The account's 5 h window reset before the Spark line was logged; its week is 98 %.
    assert got["fiveHour"] is None
    assert got["sevenDay"] == win(98.0, 1783391609, "allowed_warning")
    assert got["extraWindows"] == [extra(0.0, 1783119899, 18000, "GPT-5.3-Codex-Spark"),
                                   extra(0.0, 1783565235, 604800, "GPT-5.3-Codex-Spark")]
    assert got["planType"] == "prolite" and got["sampledAt"] == int(at * 1000)


def test_session_pro_account_week_is_not_the_spark_week(tmp_path):
    got, _ = _session(tmp_path, "codex-session-pro-spark-weekly.jsonl")
    assert got["fiveHour"] is None and got["sevenDay"] == win(21.0, 1784452160)
    assert got["extraWindows"] == [extra(4.0, 1784504577, 604800, "GPT-5.3-Codex-Spark")]


def test_session_model_line_in_a_newer_file(tmp_path):
    got, _ = _session(tmp_path, "codex-session-model-file-newer.jsonl", split=True)
    assert got["fiveHour"] is None and got["sevenDay"] == win(80.0, 1781139747)
    # No limit_name: the window is named by its limit_id.
    assert got["extraWindows"] == [extra(0.0, 1781104076, 18000, "codex_bengalfox"),
                                   extra(0.0, 1781690876, 604800, "codex_bengalfox")]


def test_session_string_percent_and_299_minutes(tmp_path):
    got, at = _session(tmp_path, "codex-session-relative-string-299.jsonl")
    assert got["fiveHour"] == win(3.0, at + 3600) and got["sevenDay"] is None and got["extraWindows"] == []


def test_session_credit_plan(tmp_path):
    got, _ = _session(tmp_path, "codex-session-credit-plan.jsonl")
    assert got["fiveHour"] is None and got["sevenDay"] is None
    assert got["extraWindows"] == [extra(8.0, 1782864000, None, "credits")]
    assert got["planType"] == "enterprise"


# ---------------------------------------------------------------- Claude usage endpoint

def test_claude_scoped_weekly_limit_of_a_model():
    body = reply("claude-usage-limits-fable.json")
    assert usage_values(body, None, None) == {
        "ratelimit.five_hour_pct": 11.0, "ratelimit.five_hour_resets_at": "2026-07-03T00:30:00.282Z",
        "ratelimit.seven_day_pct": 9.0, "ratelimit.seven_day_resets_at": "2026-07-08T09:00:00.282Z"}
    assert usage_extras(body) == {"extraWindows": [claude_extra(5.0, "2026-07-08T09:00:00.283Z", "Fable")],
                                  "extraUsage": None}


def test_claude_live_reply_with_limits_and_extra_usage_off():
    body = reply("claude-usage-live-limits-extra-disabled.json")
    assert usage_values(body, None, None) == {
        "ratelimit.five_hour_pct": 53.0, "ratelimit.five_hour_resets_at": "2026-07-08T00:49:59.940Z",
        "ratelimit.seven_day_pct": 8.0, "ratelimit.seven_day_resets_at": "2026-07-13T06:00:00.000Z"}
    assert usage_extras(body) == {
        "extraWindows": [claude_extra(6.0, "2026-07-13T06:00:00.000Z", "Fable")],
        "extraUsage": {"enabled": False, "monthlyLimit": None, "usedCredits": None, "utilization": None,
                       "currency": None}}


def test_claude_sonnet_bucket_and_extra_usage_on():
    body = reply("claude-usage-sonnet-extra-enabled.json")
    assert usage_values(body, None, None) == {
        "ratelimit.five_hour_pct": 30.0, "ratelimit.five_hour_resets_at": "2026-06-14T02:59:59.160Z",
        "ratelimit.seven_day_pct": 15.0, "ratelimit.seven_day_resets_at": "2026-06-17T20:59:59.160Z",
        "ratelimit.seven_day_medium_pct": 3.0}
    assert usage_extras(body) == {
        "extraWindows": [],
        "extraUsage": {"enabled": True, "monthlyLimit": 5000, "usedCredits": 3462.0, "utilization": 69.24,
                       "currency": "USD"}}


def test_claude_newer_seven_day_buckets():
    body = reply("claude-usage-seven-day-buckets.json")
    assert usage_values(body, None, None) == {"ratelimit.five_hour_pct": 9,
                                              "ratelimit.five_hour_resets_at": "2025-12-23T16:00:00.000Z"}
    assert usage_extras(body) == {"extraWindows": [
        claude_extra(26.0, "2025-12-30T23:00:00.000Z", "seven_day_omelette"),
        claude_extra(11.0, "2025-12-31T23:00:00.000Z", "seven_day_cowork")], "extraUsage": None}


def test_claude_two_scoped_limits_and_a_bucket():
    body = reply("claude-usage-scoped-opus-fable.json")
    # The contract's Opus field still comes from the scoped Opus entry, unchanged.
    assert usage_values(body, None, None) == {
        "ratelimit.five_hour_pct": 9, "ratelimit.five_hour_resets_at": "2026-07-03T00:30:00.440Z",
        "ratelimit.seven_day_pct": 20, "ratelimit.seven_day_resets_at": "2026-07-08T09:00:00.440Z",
        "ratelimit.seven_day_large_pct": 12}
    assert usage_extras(body) == {"extraWindows": [
        claude_extra(12.0, "2026-07-08T09:00:00.441Z", "Opus"),
        claude_extra(29.0, "2026-07-08T09:00:00.441Z", "Fable"),
        claude_extra(11.0, "2026-07-08T09:00:00.440Z", "seven_day_cowork")], "extraUsage": None}


def codename(pct, resets_at, name):
    return {"pct": pct, "resetsAt": resets_at, "status": "allowed", "derived": True, "seconds": None, "name": name}


def test_claude_codename_buckets_are_named_extra_windows():
    body = reply("claude-usage-codename-credits.json")
    assert usage_values(body, None, None) == {
        "ratelimit.five_hour_pct": 59.0, "ratelimit.five_hour_resets_at": "2026-09-24T10:20:00.684Z",
        "ratelimit.seven_day_pct": 35.0, "ratelimit.seven_day_resets_at": "2026-09-28T00:00:00.684Z"}
    # Their length is not known; the cloud credits under `iguana_necktie` reset in November.
    assert usage_extras(body)["extraWindows"] == [codename(35.5, "2026-11-05T07:59:00.000Z", "iguana_necktie"),
                                                  codename(0.0, None, "nimbus_quill")]


def test_claude_live_reply_with_every_codename_null_but_one():
    body = reply("claude-usage-live-codenames-null.json")
    assert usage_values(body, None, None)["ratelimit.seven_day_pct"] == 83.0
    # Null codenames are no windows; `extra_usage` and `spend` are no buckets whatever they hold.
    assert usage_extras(body)["extraWindows"] == [claude_extra(36.0, "2026-09-04T12:00:00.134Z", "Fable"),
                                                  codename(0.0, None, "nimbus_quill")]


def test_claude_enterprise_spend_only_has_no_window_but_its_extra_usage():
    body = reply("claude-usage-enterprise-spend-only.json")
    assert usage_values(body, None, None) == {}
    assert usage_extras(body) == {"extraWindows": [], "extraUsage": {
        "enabled": True, "monthlyLimit": 2000, "usedCredits": 763, "utilization": 38.15, "currency": "EUR"}}


def test_every_sample_file_is_tested_and_named_in_sources():
    on_disk = {p.name for p in FIELD.iterdir() if p.suffix in (".json", ".jsonl")}
    source = Path(__file__).read_text() + (Path(__file__).parent / "keyvendor" / "test_field_plans.py").read_text()
    named = (FIELD / "SOURCES.md").read_text()
    assert on_disk and [n for n in sorted(on_disk) if '"%s"' % n not in source] == []
    assert [n for n in sorted(on_disk) if "`%s`" % n not in named] == []
