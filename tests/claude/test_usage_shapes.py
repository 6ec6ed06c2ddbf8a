"""The usage reply as the provider really sends it (docs/posture.md): a corpus of shapes,
each polled by the real sampler through the real usage child from the test provider.

Every bucket is judged on its own; a reply with no readable window appends
nothing and logs `usage: no windows in the reply` once per change of state.
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from svcposture.events import QUOTA_KEYS, RATELIMIT_SAMPLED, EventLog, event_name
from svcposture.paths import Paths
from svcposture.claude.provider import MAX_USAGE_BODY
from svcposture.claude.sampler import QuotaSampler
from svcposture.claude.usage import read_reset, usage_values
from tests.support.home import canary
from tests.support.provider import ProviderServer

OBJ_5H = {"utilization": 12.5, "resets_at": "2026-01-01T04:59:59.600956+00:00"}
OBJ_7D = {"utilization": 40, "resets_at": "2026-01-07T00:00:00+00:00"}
KEYS_5H = {"ratelimit.five_hour_pct": 12.5, "ratelimit.five_hour_resets_at": "2026-01-01T04:59:59.600Z"}
KEYS_7D = {"ratelimit.seven_day_pct": 40, "ratelimit.seven_day_resets_at": "2026-01-07T00:00:00.000Z"}
NO_WINDOWS = "usage: no windows in the reply"


def limit(kind, percent, resets_at=None, model=None):
    entry = {"kind": kind, "percent": percent, "resets_at": resets_at}
    if model is not None:
        entry["scope"] = {"model": {"display_name": model}}
    return entry


# (id, reply body, the contract keys expected in the sample; None: nothing appended)
CORPUS = [
    ("objects", {"five_hour": OBJ_5H, "seven_day": OBJ_7D, "seven_day_opus": {"utilization": 81.0},
                 "seven_day_sonnet": {"utilization": 0, "resets_at": None}},
     dict(KEYS_5H, **KEYS_7D, **{"ratelimit.seven_day_large_pct": 81.0, "ratelimit.seven_day_medium_pct": 0})),
    ("bare numbers", {"five_hour": 12.5, "seven_day": OBJ_7D, "seven_day_sonnet": 7},
     dict(KEYS_7D, **{"ratelimit.five_hour_pct": 12.5, "ratelimit.seven_day_medium_pct": 7})),
    ("bare number sonnet does not spoil the rest", {"five_hour": OBJ_5H, "seven_day": OBJ_7D, "seven_day_sonnet": 3.5},
     dict(KEYS_5H, **KEYS_7D, **{"ratelimit.seven_day_medium_pct": 3.5})),
    ("nulls", {"five_hour": None, "seven_day": OBJ_7D, "seven_day_opus": None, "seven_day_sonnet": None}, KEYS_7D),
    ("every bucket null", {"five_hour": None, "seven_day": None, "seven_day_opus": None,
                           "seven_day_sonnet": None}, None),
    ("empty object", {}, None),
    ("strings", {"five_hour": "12%", "seven_day": {"utilization": "40", "resets_at": "soon"},
                 "seven_day_opus": "", "seven_day_sonnet": {"utilization": 5, "resets_at": "tomorrow"}},
     {"ratelimit.seven_day_medium_pct": 5}),
    ("negative", {"five_hour": {"utilization": -1, "resets_at": OBJ_5H["resets_at"]}, "seven_day": OBJ_7D}, KEYS_7D),
    ("booleans", {"five_hour": True, "seven_day": {"utilization": False}, "seven_day_opus": OBJ_7D},
     {"ratelimit.seven_day_large_pct": 40}),
    ("over 100 is kept", {"five_hour": {"utilization": 104.2}}, {"ratelimit.five_hour_pct": 104.2}),
    ("absurd percent", {"five_hour": {"utilization": 1e300}, "seven_day": 10 ** 400}, None),
    ("limits only", {"limits": [
        limit("session", 33.3, "2026-01-01T05:00:00.123456+00:00"),
        limit("weekly_all", 55, 1767830400),
        limit("weekly_scoped", 70.5, model="Claude Opus 4.5"),
        limit("weekly_scoped", 9, model="Sonnet 4.5"),
        limit("monthly_future_kind", 99)]},
     {"ratelimit.five_hour_pct": 33.3, "ratelimit.five_hour_resets_at": "2026-01-01T05:00:00.123Z",
      "ratelimit.seven_day_pct": 55, "ratelimit.seven_day_resets_at": "2026-01-08T00:00:00.000Z",
      "ratelimit.seven_day_large_pct": 70.5, "ratelimit.seven_day_medium_pct": 9}),
    ("limits junk entries", {"limits": [None, 7, "session", {"kind": "session"}, {"kind": "session", "percent": "1"},
                                        limit("weekly_scoped", 3, model=None), limit("weekly_scoped", 4, model="Haiku"),
                                        {"kind": "weekly_scoped", "percent": 4, "scope": {"model": "Opus"}},
                                        limit("session", 21)]},
     {"ratelimit.five_hour_pct": 21}),
    ("limits not a list", {"limits": {"session": 5}, "seven_day": OBJ_7D}, KEYS_7D),
    ("both shapes, named win", {"five_hour": OBJ_5H, "seven_day": None, "limits": [
        limit("session", 99.0, "2030-01-01T00:00:00Z"), limit("weekly_all", 61, "2026-01-07T00:00:00Z")]},
     dict(KEYS_5H, **{"ratelimit.seven_day_pct": 61, "ratelimit.seven_day_resets_at": "2026-01-07T00:00:00.000Z"})),
    ("microsecond ISO with +00:00", {"five_hour": {"utilization": 1, "resets_at": "2026-03-01T10:00:59.999999+00:00"},
                                     "seven_day": {"utilization": 2, "resets_at": "2026-03-01T12:00:00.5-02:00"}},
     {"ratelimit.five_hour_pct": 1, "ratelimit.five_hour_resets_at": "2026-03-01T10:00:59.999Z",
      "ratelimit.seven_day_pct": 2, "ratelimit.seven_day_resets_at": "2026-03-01T14:00:00.500Z"}),
    ("epoch seconds", {"five_hour": {"utilization": 1, "resets_at": 1767243599.9996},
                       "seven_day": {"utilization": 2, "resets_at": -5},
                       "seven_day_opus": {"utilization": 3, "resets_at": 1e30}},
     {"ratelimit.five_hour_pct": 1, "ratelimit.five_hour_resets_at": "2026-01-01T04:59:59.999Z",
      "ratelimit.seven_day_pct": 2, "ratelimit.seven_day_large_pct": 3}),
    ("unknown keys", {"five_hour": dict(OBJ_5H, window_kind="rolling"), "extra_usage": {"is_enabled": True},
                      "seven_day_oauth_apps": {"utilization": 50}, "iguana_necktie": None}, KEYS_5H),
    ("nested junk in a bucket", {"five_hour": OBJ_5H, "seven_day": [[[[{"utilization": 1}]]]] * 3,
                                 "seven_day_opus": {"utilization": {"value": 3}}}, KEYS_5H),
]


@pytest.fixture
def provider():
    with ProviderServer() as server:
        yield server


@pytest.fixture
def node(home, env, provider, caplog):
    token = canary("login")
    env["SVC_PROVIDER_URL"] = provider.url
    paths = Paths(home, environ=env)
    paths.login_credentials.parent.mkdir(parents=True, exist_ok=True)
    paths.login_credentials.write_text(json.dumps({"claudeAiOauth": {"accessToken": token}}))
    paths.login_profile.write_text(json.dumps({"oauthAccount": {"emailAddress": "me@example.com"}}))
    log = EventLog.for_paths(paths)
    caplog.set_level(logging.INFO, logger="svcposture")

    class Node:
        sampler = QuotaSampler(paths, node="node-u", log=log, environ=env)

        @staticmethod
        def samples():
            return [e for e in log.iter_newest_first() if event_name(e) == RATELIMIT_SAMPLED][::-1]

        @staticmethod
        def quota(event):
            return {k: v for k, v in event["attributes"].items() if k in QUOTA_KEYS}

        @staticmethod
        def lines(text):
            return [r for r in caplog.records if r.getMessage() == text]

    Node.token, Node.paths = token, paths
    return Node


@pytest.mark.parametrize("body,expected", [c[1:] for c in CORPUS], ids=[c[0] for c in CORPUS])
def test_each_reply_shape_through_the_usage_child(node, provider, body, expected):
    provider.set_usage(node.token, body)
    node.sampler.poll_once()
    assert provider.usage_calls() == 1
    if expected is None:
        assert node.samples() == []
        assert len(node.lines(NO_WINDOWS)) == 1
        return
    [event] = node.samples()
    assert node.quota(event) == expected
    assert node.lines(NO_WINDOWS) == []


def test_nan_and_infinity_are_left_out_bucket_by_bucket(node, provider):
    # The provider's JSON encoder writes NaN and Infinity as bare words; Python's decoder reads them.
    provider.set_usage(node.token, {"five_hour": {"utilization": float("nan")}, "seven_day": float("inf"),
                                    "seven_day_opus": {"utilization": float("-inf")}, "seven_day_sonnet": 2.5})
    node.sampler.poll_once()
    [event] = node.samples()
    assert node.quota(event) == {"ratelimit.seven_day_medium_pct": 2.5}


def _padded(body, size):
    raw = json.dumps(dict(body, pad="")).encode()
    return json.dumps(dict(body, pad="x" * (size - len(raw)))).encode()


def test_a_reply_of_exactly_1_mib_is_read_and_one_byte_more_is_refused(node, provider):
    body = {"five_hour": OBJ_5H, "seven_day": OBJ_7D}
    raw = _padded(body, MAX_USAGE_BODY)
    assert len(raw) == MAX_USAGE_BODY
    provider.set_usage(node.token, raw)
    node.sampler.poll_once()
    assert [node.quota(e) for e in node.samples()] == [dict(KEYS_5H, **KEYS_7D)]
    provider.set_usage(node.token, _padded(body, MAX_USAGE_BODY + 1))
    node.sampler.poll_once()
    assert len(node.samples()) == 1  # refused whole: nothing appended


@pytest.mark.parametrize("raw", [
    b'{"five_hour": ' + b"[" * 100000 + b"]" * 100000 + b"}",          # deeper than any decoder goes
    b'{"five_hour": {"utilization": 12.5}, "seven_day": {"utiliz',     # truncated
    b"", b"\xff\xfe{}", b"null", b"[]", b"42", b'"five_hour"',
], ids=["deep", "truncated", "empty", "not utf-8", "null", "array", "number", "string"])
def test_replies_that_are_not_an_object_append_nothing(node, provider, raw):
    provider.set_usage(node.token, raw)
    node.sampler.poll_once()
    assert node.samples() == [] and provider.usage_calls() == 1


def test_no_windows_is_logged_once_per_change_of_state(node, provider):
    provider.set_usage(node.token, {"five_hour": None, "seven_day": "n/a"})
    for _ in range(3):
        node.sampler.poll_once()
    assert len(node.lines(NO_WINDOWS)) == 1 and node.samples() == []
    provider.set_usage(node.token, {"five_hour": OBJ_5H})
    node.sampler.poll_once()
    assert len(node.samples()) == 1
    provider.set_usage(node.token, {"limits": []})
    node.sampler.poll_once()
    node.sampler.poll_once()
    assert len(node.lines(NO_WINDOWS)) == 2 and len(node.samples()) == 1


def test_named_bucket_wins_whole_over_limits():
    # The named bucket's percent comes with its own reset, never with the limits entry's.
    values = usage_values({"five_hour": {"utilization": 10}, "limits": [limit("session", 90, "2026-01-01T00:00:00Z")]},
                          None, None)
    assert values == {"ratelimit.five_hour_pct": 10}


@pytest.mark.parametrize("raw,expected", [
    ("2026-01-01T04:59:59.600956+00:00", "2026-01-01T04:59:59.600Z"),
    ("2026-01-01T04:59:59Z", "2026-01-01T04:59:59.000Z"),
    (1767243599, "2026-01-01T04:59:59.000Z"),
    (1767243599.6009, "2026-01-01T04:59:59.600Z"),
    (0, "1970-01-01T00:00:00.000Z"),
    (-1, None), (1e12, None), (True, None), ("", None), ("1767243599", None), (None, None), ([], None),
])
def test_reset_instants_iso_or_epoch_seconds(raw, expected):
    assert read_reset(raw) == expected


def test_login_child_names_the_email_without_the_network(node, provider, env):
    out = subprocess.run([sys.executable, "-m", "svcposture.probe", "login", "--json"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and json.loads(out.stdout) == {"ok": True, "email": "me@example.com"}
    node.paths.login_credentials.unlink()
    out = subprocess.run([sys.executable, "-m", "svcposture.probe", "login"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and out.stdout.strip() == "error (config): No login credentials file was found."
    assert provider.usage_calls() == 0 and provider.message_calls() == 0
