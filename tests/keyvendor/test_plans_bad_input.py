"""The key vendors' replies at their worst (docs/vendors.md): any JSON, wrong types, NaN and 1e999, huge
strings, a 10 MB body, a body trickled a byte at a time, a body that echoes the key. Each ends in one
account's error or in windows left out one by one: never a crash, a hang, a key in the row, or a go
from the guard on what could not be read."""
from __future__ import annotations

import copy
import json
import math
import socket
import time
from typing import Any, Dict, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcposture._names import WINDOW_STATUSES
from svcposture._text import MAX_PCT
from svcposture.keyvendor.sweep import probe_key
from svcposture.steering.headroom import GO, guard_decision
from svcposture.summary import reply as posture_reply
from svcposture.vendors import vendor_named
from tests.support.fieldsamples import reply
from tests.support.rawserver import RawServer, http_reply

KEY = "plan-CANARY-key-7f3a9c2e41d85b60"
# The keys each vendor's replies use, so that generated bodies reach the parsers' paths.
KEYS = {
    "copilot": ["quota_snapshots", "premium_interactions", "chat", "completions", "entitlement", "remaining",
                "percent_remaining", "unlimited", "has_quota", "monthly_quotas", "limited_user_quotas",
                "quota_reset_date_utc", "quota_reset_date", "limited_user_reset_date", "copilot_plan"],
    "zai": ["code", "success", "data", "limits", "type", "unit", "number", "usage", "currentValue", "remaining",
            "percentage", "nextResetTime", "level"],
    "kimi": ["usage", "limits", "usages", "window", "duration", "timeUnit", "detail", "limit", "used", "remaining",
             "resetTime", "used_ratio", "reset_time", "user", "membership", "level", "limit_5h", "limit_month_x"],
}
SAMPLES = {"copilot": ["copilot-user-individual-pro-unlimited.json", "copilot-user-free-zero-premium.json",
                       "copilot-user-free-limited-quotas.json"],
           "zai": ["zai-quota-pro-live.json", "zai-quota-tokens-exhausted.json"],
           "kimi": ["kimi-usages-paste.json", "kimi-usages-ratio-pools.json"]}
JUNK_TEXT = ["", "12", "-5", "1e999", "NaN", "Infinity", "0x10", "\x1b[2J", "x" * 100000, KEY, "TIME_UNIT_MINUTE",
             "2026-13-45T99:99:99Z", "2025-12-23T05:24:18.443553353Z", "300"]
LEAF = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10 ** 30, max_value=10 ** 30),
                 st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(JUNK_TEXT), st.text(max_size=12))


def any_json(vendor: str) -> Any:
    keys = st.one_of(st.sampled_from(KEYS[vendor]), st.text(max_size=6))
    return st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(keys, inner, max_size=6)), max_leaves=40)


def windows(placed: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [w for w in (placed["fiveHour"], placed["sevenDay"]) if w] + list(placed["extraWindows"])


def sound(placed: Dict[str, Any]) -> None:
    """Windows every surface can take: finite percents in range, known statuses, JSON without NaN."""
    for window in windows(placed):
        assert math.isfinite(window["pct"]) and 0 <= window["pct"] <= MAX_PCT
        assert window["status"] in WINDOW_STATUSES and window["derived"] is True
    json.dumps(placed, allow_nan=False)


# ---------------------------------------------------------------- the parsers, on anything

@pytest.mark.parametrize("provider", ["copilot", "zai", "kimi"])
def test_any_json_is_windows_or_a_parse_error(provider):
    parse = vendor_named(provider).parse_reply

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(any_json(provider))
    def check(body):
        try:
            placed = parse(body, 1_790_000_000.0)
        except ValueError:
            return
        sound(placed)
    check()


def _leaves(obj: Any, path: tuple = ()) -> List[tuple]:
    if isinstance(obj, dict):
        return [leaf for key, value in obj.items() for leaf in _leaves(value, path + (key,))] or [path]
    if isinstance(obj, list):
        return [leaf for i, value in enumerate(obj) for leaf in _leaves(value, path + (i,))] or [path]
    return [path]


def _set(obj: Any, path: tuple, value: Any) -> Any:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value
    return obj


@pytest.mark.parametrize("provider, sample", [(p, s) for p, files in SAMPLES.items() for s in files])
def test_junk_in_one_field_leaves_every_other_window_as_it_was(provider, sample):
    """A field replaced by junk changes at most the one window it belongs to (or spoils the reply
    whole when it is the envelope's): the windows of the reply without that quota all stay."""
    parse = vendor_named(provider).parse_reply
    body = reply(sample)
    leaves = [p for p in _leaves(body) if p]

    @settings(max_examples=150, deadline=None)
    @given(st.sampled_from(leaves), LEAF)
    def check(path, junk):
        mutated = _set(copy.deepcopy(body), path, junk)
        try:
            got = windows(parse(mutated, 1_790_000_000.0))
        except ValueError:
            return
        holder = next((path[:i + 1] for i in range(len(path) - 1, -1, -1)
                       if isinstance(path[i], int) or path[i] in ("premium_interactions", "chat", "completions",
                                                                    "usage", "limit_5h", "limit_month_total",
                                                                    "limit_month_code")), None)
        if holder is None:
            return
        without = copy.deepcopy(body)
        _set(without, holder, None)
        try:
            kept = windows(parse(without, 1_790_000_000.0))
        except ValueError:
            return
        assert all(window in got for window in kept), (path, junk)
    check()


# ---------------------------------------------------------------- one exchange, against a hostile endpoint

def _trickle(body: bytes):
    def send(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
        for byte in body:
            conn.sendall(bytes([byte]))
            time.sleep(0.05)
    return send


@pytest.fixture(scope="module")
def endpoint():
    with RawServer() as server:
        yield server


def _exchange(endpoint, provider: str, answer: Any, timeout_s: float = 2.0) -> Dict[str, Any]:
    vendor = vendor_named(provider)
    endpoint.routes[vendor.path] = answer
    entry = {"label": provider + "-one", "email": None, "active": True, "key": KEY}
    started = time.monotonic()
    row = probe_key(vendor, entry, {vendor.url.name: endpoint.url}, timeout_s, [KEY])
    assert time.monotonic() - started < vendor.exchange_deadline_s({}) + timeout_s
    assert KEY not in json.dumps(row) and KEY[8:24] not in json.dumps(row)
    return row


def _guard_goes(provider: str, row: Dict[str, Any]) -> bool:
    vendor = vendor_named(provider)
    block = vendor.clean_block({"available": True, "probedAt": 1_790_000_000_000, "active": row["label"],
                                "accounts": [row]})
    summary, _memory = vendor.summarize(block, "n", 1_790_000_000_000, {})
    body = posture_reply(summary, cached=False, generated_ms=1_790_000_000_000)
    decision = guard_decision(body, provider=provider, account=None, reserve=0, now_ms=1_790_000_000_000,
                              stale_ms=600_000)
    return decision["decision"] == GO


@pytest.mark.parametrize("provider", ["copilot", "zai", "kimi"])
def test_a_ten_megabyte_reply_is_a_parse_error_read_no_further(provider, endpoint):
    row = _exchange(endpoint, provider, http_reply(200, b"[" + b"1," * (5 * 1024 * 1024) + b"1]"))
    assert row["error"]["kind"] == "parse" and not _guard_goes(provider, row)


@pytest.mark.parametrize("provider", ["copilot", "zai", "kimi"])
def test_a_trickled_reply_is_a_timeout_at_the_deadline(provider, endpoint):
    row = _exchange(endpoint, provider, _trickle(json.dumps(reply(SAMPLES[provider][0])).encode()), timeout_s=1.0)
    assert row["error"]["kind"] == "timeout" and not _guard_goes(provider, row)


ECHOES = {
    "copilot": {"copilot_plan": KEY, "quota_snapshots": {KEY: {"entitlement": 10, "remaining": 5},
                                                         "x" + KEY[4:16]: {"entitlement": 10, "remaining": 1}}},
    "zai": {"code": 200, "success": True, "data": {"level": KEY[:12], "limits": [
        {"type": KEY, "unit": 9, "number": 1, "percentage": 5}, {"type": "z" + KEY[3:20], "percentage": 7}]}},
    "kimi": {"usage": {"limit": 10, "used": 1}, "subType": KEY, "usages": {KEY[2:18]: {"used_ratio": 0.5}},
             "limits": [{"detail": {"limit": 10, "used": 2, "name": KEY}}]},
}


@pytest.mark.parametrize("provider", ["copilot", "zai", "kimi"])
def test_a_reply_echoing_the_key_keeps_its_windows_and_loses_the_key(provider, endpoint):
    row = _exchange(endpoint, provider, http_reply(200, ECHOES[provider]))
    assert row["error"] is None and windows(row)
    assert row["planType"] is None and all(w["name"] is None for w in row["extraWindows"])


@pytest.mark.parametrize("provider, status, headers, kind", [
    ("copilot", 403, {"x-ratelimit-remaining": "0"}, "rate_limited"), ("zai", 429, {"retry-after": "30"},
                                                                       "rate_limited"),
    ("kimi", 500, {}, "http"), ("copilot", 302, {"location": "http://127.0.0.1:9/steal"}, "http"),
    ("kimi", 403, {}, "unauthorized")])
def test_a_status_is_one_accounts_error(provider, status, headers, kind, endpoint):
    row = _exchange(endpoint, provider, http_reply(status, {"error": KEY}, headers))
    assert row["error"]["kind"] == kind and row["error"]["httpStatus"] == status and not _guard_goes(provider, row)
    # A 429 keeps its reset when the reply carries one.
    assert (row["error"]["retryAt"] is not None) == ("retry-after" in headers)


@pytest.mark.parametrize("provider", ["copilot", "zai", "kimi"])
def test_any_reply_is_one_accounts_row_and_the_guard_never_goes_on_doubt(provider, endpoint):
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.one_of(any_json(provider), st.sampled_from([reply(s) for s in SAMPLES[provider]])))
    def check(body):
        raw = json.dumps(body, allow_nan=True).encode()
        row = _exchange(endpoint, provider, http_reply(200, raw))
        sound(row)
        readable = windows(row)
        if _guard_goes(provider, row):
            assert row["error"] is None and readable
            assert all(w["pct"] < 100 and w["status"] != "rejected" for w in readable)
    check()
