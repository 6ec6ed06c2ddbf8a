"""Codex's usage reply and session limits as windows: the pure parsers, over the corpus and fuzzed."""
from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcposture._names import WINDOW_STATUSES
from svcposture._text import read_number
from svcposture.codex.usage import derived_status, parse_session_limits, parse_usage_reply
from tests.support.codex import CORPUS

NOW_S = 1764000000.0


def test_derived_status_edges():
    assert [derived_status(p) for p in (0, 89.9, 90, 99.9, 100, 250)] == \
        ["allowed", "allowed", "allowed_warning", "allowed_warning", "rejected", "rejected"]


def test_read_number_accepts_string_numbers_only():
    assert [read_number(v) for v in (3, 2.5, "7", " 8.25 ", "1e3")] == [3.0, 2.5, 7.0, 8.25, 1000.0]
    for bad in (None, True, "NaN", "inf", "ten", "", "1,5", [1], {"a": 1}, float("nan"), 10 ** 400, "9" * 50):
        assert read_number(bad) is None, bad


def test_corpus_bodies_parse_as_the_child_reads_them():
    """Every JSON-object body of the corpus, straight through the parser (the child test covers the wire)."""
    checked = 0
    for name, body, status, expected in CORPUS:
        if not isinstance(body, dict) or status != 200:
            continue
        parsed = parse_usage_reply(body, NOW_S)
        windows = [parsed["fiveHour"], parsed["sevenDay"]]
        if expected.get("error") == "parse":
            assert windows == [None, None] and not parsed["extraWindows"], name
            continue
        for field in ("fiveHour", "sevenDay"):
            want = expected.get(field)
            assert (parsed[field] is None) == (want is None), (name, field)
            if want is not None:
                assert parsed[field]["pct"] == want[0], name
        checked += 1
    assert checked >= 20


def test_windows_go_by_length_never_by_position():
    five = {"used_percent": 1, "limit_window_seconds": 18000}
    seven = {"used_percent": 2, "limit_window_seconds": 604800}
    a = parse_usage_reply({"rate_limit": {"primary_window": five, "secondary_window": seven}}, NOW_S)
    b = parse_usage_reply({"rate_limit": {"primary_window": seven, "secondary_window": five}}, NOW_S)
    assert a == b and a["fiveHour"]["pct"] == 1.0 and a["sevenDay"]["pct"] == 2.0


def test_session_limits_map_minutes():
    parsed = parse_session_limits({"primary": {"used_percent": "12", "window_minutes": "300", "resets_at": 1767225600},
                                   "secondary": {"used_percent": 3, "window_minutes": 10080,
                                                 "resets_in_seconds": 60}}, NOW_S)
    assert parsed["fiveHour"] == {"pct": 12.0, "resetsAt": "2026-01-01T00:00:00.000Z", "status": "allowed",
                                  "derived": True}
    assert parsed["sevenDay"]["resetsAt"] == "2025-11-24T16:01:00.000Z"
    assert parse_session_limits({"primary": None, "secondary": {"used_percent": 1}}, NOW_S) is None
    assert parse_session_limits("junk", NOW_S) is None


_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 20, 10 ** 20),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                    st.sampled_from(["18000", "604800", "95.5", "-1", "1e400", "NaN"]))
_window = st.one_of(_scalar, st.fixed_dictionaries({}, optional={
    "used_percent": _scalar, "limit_window_seconds": st.one_of(_scalar, st.sampled_from([18000, 604800, 3600])),
    "reset_at": _scalar, "reset_after_seconds": _scalar}))
_body = st.one_of(_scalar, st.lists(_scalar, max_size=3), st.fixed_dictionaries({}, optional={
    "plan_type": _scalar, "rate_limit": st.one_of(_scalar, st.fixed_dictionaries(
        {}, optional={"primary_window": _window, "secondary_window": _window})),
    "credits": st.one_of(_scalar, st.fixed_dictionaries({}, optional={"has_credits": _scalar, "balance": _scalar})),
    "additional_rate_limits": st.one_of(_scalar, st.lists(st.fixed_dictionaries(
        {}, optional={"limit_name": _scalar, "rate_limit": st.fixed_dictionaries(
            {}, optional={"primary_window": _window})}), max_size=3)),
    "code_review_rate_limit": st.one_of(_scalar, st.fixed_dictionaries({}, optional={"primary_window": _window})),
}))


def _assert_window(window, extra=False):
    assert set(window) == ({"pct", "resetsAt", "status", "derived", "seconds", "name"} if extra
                           else {"pct", "resetsAt", "status", "derived"})
    assert isinstance(window["pct"], float) and math.isfinite(window["pct"]) and window["pct"] >= 0
    assert window["status"] in WINDOW_STATUSES and window["derived"] is True
    assert window["resetsAt"] is None or (isinstance(window["resetsAt"], str) and window["resetsAt"].endswith("Z"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_body)
def test_fuzzed_replies_never_raise_and_give_only_valid_windows(body):
    try:
        parsed = parse_usage_reply(body, NOW_S)
    except ValueError:
        assert not isinstance(body, dict)
        return
    json.dumps(parsed, allow_nan=False)
    for field in ("fiveHour", "sevenDay"):
        if parsed[field] is not None:
            _assert_window(parsed[field])
    for window in parsed["extraWindows"] + (parsed["codeReview"] or []):
        _assert_window(window, extra=True)
        assert isinstance(window["seconds"], int) and window["seconds"] > 0
