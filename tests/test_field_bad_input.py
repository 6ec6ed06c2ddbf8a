"""Every field the field replies added may be missing, null, a string number, negative, huge, NaN or of the
wrong type: that window is left out on its own, the rest is still read, nothing raises (docs/posture.md)."""
from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from svcposture._text import MAX_PCT
from svcposture.claude.usage import usage_extras, usage_values
from svcposture.codex import session
from svcposture.codex.usage import parse_session_limits, parse_usage_reply
from svcposture.trajectory.history import MAX_ROW_LINE, history_body, parse_row
from svcposture.windows import field_of_length

NOW_S = 1_790_000_000.0
JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10**30, max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "12", "-5", "1e999", "NaN", "Infinity", "7761", "92.239", "x", "\x1b[2J", "0x10"]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
GOOD_5H = {"used_percent": 10, "limit_window_seconds": 18000, "reset_at": 1_790_003_600}


def _finite_windows(placed):
    windows = [placed.get("fiveHour"), placed.get("sevenDay")] + list(placed.get("extraWindows") or [])
    for window in windows:
        if window is not None:
            assert math.isfinite(window["pct"]) and 0 <= window["pct"] <= MAX_PCT
    json.dumps(placed, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-10**7, max_value=10**8))
def test_window_length_tolerance(seconds):
    field = field_of_length(seconds)
    assert (field == "fiveHour") == (17640 <= seconds <= 18360)
    assert (field == "sevenDay") == (592704 <= seconds <= 616896)


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({}, optional={"limit": JUNK, "used": JUNK, "remaining_percent": JUNK,
                                           "resets_at": JUNK, "reset_at": JUNK, "reset_after_seconds": JUNK}),
       st.sampled_from(["rate_limit", "spend_control"]))
def test_a_credit_limit_of_any_shape_leaves_the_rest_read(limit, where):
    body = {"plan_type": "enterprise", "rate_limit": {"primary_window": GOOD_5H, "secondary_window": None}}
    body.setdefault(where, {})["individual_limit"] = limit
    placed = parse_usage_reply(body, NOW_S)
    assert placed["fiveHour"]["pct"] == 10.0
    _finite_windows(placed)
    credits = [w for w in placed["extraWindows"] if w["name"] == "credits"]
    assert len(credits) <= 1
    remaining = limit.get("remaining_percent")
    if isinstance(remaining, (int, float)) and not isinstance(remaining, bool) and math.isfinite(remaining) \
            and 0 <= remaining <= 100:
        assert credits and credits[0]["pct"] == round(100.0 - remaining, 1)
    if credits:
        assert credits[0]["seconds"] is None and credits[0]["derived"] is True


@settings(max_examples=300, deadline=None)
@given(st.one_of(JUNK, st.none()), st.one_of(JUNK, st.text(max_size=80)),
       st.fixed_dictionaries({}, optional={"used_percent": JUNK, "window_minutes": JUNK, "resets_at": JUNK}))
def test_a_model_line_of_any_shape_never_takes_the_accounts_place(limit_id, limit_name, window):
    account = {"limit_id": "codex", "primary": {"used_percent": 63, "window_minutes": 299, "resets_at": 1_790_003_600},
               "secondary": {"used_percent": 98, "window_minutes": 10079, "resets_at": 1_790_300_000}}
    model = {"limit_id": limit_id, "limit_name": limit_name, "primary": window, "secondary": window}

    def line(at, limits):
        stamp = "2026-09-21T%02d:00:00.000Z" % at
        return json.dumps({"timestamp": stamp, "type": "event_msg",
                           "payload": {"type": "token_count", "rate_limits": limits}}).encode()
    now_ms = 1_790_000_000_000
    sample = session.newest_in_log(line(10, account) + b"\n" + line(11, model) + b"\n", None, now_ms)
    if limit_id is None or limit_id == "codex":
        return  # the newer line is itself an account line (or has no window at all)
    assert sample is not None and sample["fiveHour"]["pct"] == 63.0 and sample["sevenDay"]["pct"] == 98.0
    _finite_windows(sample)
    for extra in sample["extraWindows"]:
        assert extra["name"] is None or (isinstance(extra["name"], str) and extra["name"].isprintable())


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional={"primary": JUNK, "secondary": JUNK, "individual_limit": JUNK,
                                           "limit_id": JUNK, "credits": JUNK, "plan_type": JUNK}))
def test_a_session_rate_limits_object_of_any_shape(rate_limits):
    placed = parse_session_limits(rate_limits, NOW_S)
    if placed is not None:
        _finite_windows(placed)


JUNK_BUCKET = st.one_of(JUNK, st.fixed_dictionaries({}, optional={"utilization": JUNK, "resets_at": JUNK}))
JUNK_LIMIT = st.one_of(JUNK, st.fixed_dictionaries({}, optional={
    "kind": st.one_of(JUNK, st.sampled_from(["session", "weekly_all", "weekly_scoped", "monthly"])),
    "percent": JUNK, "resets_at": JUNK,
    "scope": st.one_of(JUNK, st.fixed_dictionaries({"model": st.one_of(JUNK, st.fixed_dictionaries(
        {"display_name": st.one_of(JUNK, st.text(max_size=80))}))}))}))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(["seven_day_cowork", "seven_day_omelette", "seven_day_", "seven_day_x" * 20,
                                        "seven_day_\x1b", "seven_day_oauth_apps"]), JUNK_BUCKET, max_size=4),
       st.one_of(JUNK, st.lists(JUNK_LIMIT, max_size=5)),
       st.one_of(JUNK, st.fixed_dictionaries({}, optional={
           "is_enabled": JUNK, "monthly_limit": JUNK, "used_credits": JUNK, "utilization": JUNK, "currency": JUNK})))
def test_claude_extras_of_any_shape_leave_the_contract_windows_alone(buckets, limits, extra_usage):
    body = dict(buckets, five_hour={"utilization": 42.0, "resets_at": "2026-09-21T10:00:00Z"},
                limits=limits, extra_usage=extra_usage)
    assert usage_values(body, None, None)["ratelimit.five_hour_pct"] == 42.0
    extras = usage_extras(body)
    json.dumps(extras, allow_nan=False)
    names = [w["name"] for w in extras["extraWindows"]]
    assert len(names) == len(set(names))
    for window in extras["extraWindows"]:
        assert math.isfinite(window["pct"]) and 0 <= window["pct"] <= MAX_PCT
        assert isinstance(window["name"], str) and window["name"].isprintable() and len(window["name"]) <= 64
    usage = extras["extraUsage"]
    if usage is not None:
        for key in ("monthlyLimit", "usedCredits", "utilization"):
            assert usage[key] is None or (math.isfinite(usage[key]) and usage[key] >= 0)
        assert usage["enabled"] in (True, False, None)


JUNK_EXTRA = st.one_of(JUNK, st.fixed_dictionaries({}, optional={
    "pct": JUNK, "resetsAt": JUNK, "name": st.one_of(JUNK, st.text(max_size=80)), "seconds": JUNK}))


@settings(max_examples=300, deadline=None)
@given(st.one_of(JUNK, st.lists(JUNK_EXTRA, max_size=20)))
def test_a_history_row_with_any_extra_keeps_its_5h_and_7d(extra):
    line = json.dumps({"t": 1_790_000_000_000, "label": "codex-work", "fiveHour": {"pct": 12.0, "resetsAt": None},
                       "sevenDay": None, "extra": extra}, allow_nan=True).encode()
    row = parse_row(line)
    if len(line) > MAX_ROW_LINE:
        assert row is None
        return
    assert row is not None and row["fiveHour"] == {"pct": 12.0, "resetsAt": None}
    for window in row.get("extra", []):
        assert math.isfinite(window["pct"]) and window["pct"] >= 0
        assert window["name"] is None or (isinstance(window["name"], str) and window["name"].isprintable())
        assert window["seconds"] is None or (isinstance(window["seconds"], int) and window["seconds"] > 0)
    body = history_body([row], node="n", now_ms=1_790_000_000_000, hours=1)
    json.dumps(body, allow_nan=False)
