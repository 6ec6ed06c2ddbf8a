"""The usage probe child and the quota sampler against the provider test server."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from tests.support.home import assert_no_canary, canary, files_text
from tests.support.waiting import wait_until
from svcposture.probe import backoff
from svcposture.events import QUOTA_KEYS, RATELIMIT_SAMPLED, EventLog, event_name
from svcposture.paths import Paths
from svcposture.claude.sampler import QuotaSampler

NODE = "node-q"
USAGE = {
    "five_hour": {"utilization": 12.5, "resets_at": "2026-01-01T04:59:59.600956+00:00"},
    "seven_day": {"utilization": 40.0, "resets_at": "2026-01-07T00:00:00+00:00"},
    "seven_day_opus": {"utilization": 81.0, "resets_at": "2026-01-07T00:00:00+00:00"},
    "seven_day_sonnet": None,
    "unknown_future_key": {"utilization": 1},
}


@pytest.fixture
def setup(home, env, provider):
    token = canary("login")
    env["SVC_PROVIDER_URL"] = provider.url
    paths = Paths(home, environ=env)
    creds = paths.login_credentials
    creds.parent.mkdir(parents=True, exist_ok=True)
    creds.write_text(json.dumps({"claudeAiOauth": {"accessToken": token, "refreshToken": canary("refresh"),
                                                   "subscriptionType": "max",
                                                   "rateLimitTier": "default_claude_max_20x"}}))
    paths.login_profile.write_text(json.dumps({"oauthAccount": {"emailAddress": "me@example.com"}}))
    log = EventLog.for_paths(paths)
    provider.set_usage(token, USAGE)

    class Setup:
        pass
    s = Setup()
    s.token, s.paths, s.log, s.env, s.creds = token, paths, log, env, creds
    s.sampler = lambda **kw: QuotaSampler(paths, node=NODE, log=log, environ=env, **kw)
    s.samples = lambda: [e for e in log.iter_newest_first() if event_name(e) == RATELIMIT_SAMPLED][::-1]
    return s


def test_one_poll_appends_the_contract_event(setup, provider):
    delay = setup.sampler().poll_once()
    assert delay == 300.0
    [event] = setup.samples()
    attrs = event["attributes"]
    assert attrs["account.email"] == "me@example.com" and attrs["event.label"] == "me@example.com"
    quota = {k: v for k, v in attrs.items() if k in QUOTA_KEYS}
    assert quota == {
        "ratelimit.five_hour_pct": 12.5,
        "ratelimit.seven_day_pct": 40.0,
        "ratelimit.five_hour_resets_at": "2026-01-01T04:59:59.600Z",
        "ratelimit.seven_day_resets_at": "2026-01-07T00:00:00.000Z",
        "ratelimit.seven_day_large_pct": 81.0,
        "subscription.type": "max",
        "rate_limit.tier": "default_claude_max_20x",
    }
    assert "ratelimit.seven_day_medium_pct" not in attrs  # null source -> omitted, not zero
    assert not any(k in json.dumps(event) for k in ("fiveHourPct", "opusPct", "sonnetPct", "sevenDayPct"))
    req = [r for r in provider.requests if r["path"] == "/api/oauth/usage"][0]
    assert req["headers"]["anthropic-beta"] == "oauth-2025-04-20"
    assert req["headers"]["authorization"] == "Bearer " + setup.token


def test_profile_missing_or_bad_gives_login_label(setup):
    setup.paths.login_profile.write_text("{not json")
    setup.sampler().poll_once()
    attrs = setup.samples()[0]["attributes"]
    assert attrs["event.label"] == "login" and "account.email" not in attrs


@pytest.mark.parametrize("content", [
    b"", b"{", b"[]", b"null", b'{"claudeAiOauth": []}', b'{"claudeAiOauth": {}}',
    b'{"claudeAiOauth": {"accessToken": ""}}', b'{"claudeAiOauth": {"accessToken": 7}}',
    b'{"claudeAiOauth": {"accessToken": "PASTE_TOKEN_HERE"}}', b"\xff\xfe\x00garbage",
    b'{"a":' * 5000, b'{"pad": "' + b"x" * (2 * 1024 * 1024) + b'"}',
])
def test_bad_credentials_emit_nothing_and_call_nothing(setup, provider, content):
    setup.creds.write_bytes(content)
    sampler = setup.sampler()
    assert sampler.poll_once() == 300.0
    assert setup.samples() == [] and provider.usage_calls() == 0


@pytest.mark.parametrize("body,status", [
    ("not json", 200), ([1, 2], 200), ({"five_hour": "high"}, 200),
    ({"five_hour": {"utilization": "12%"}}, 200), ({"seven_day": {"utilization": None, "resets_at": "later"}}, 200),
    (USAGE, 500), (USAGE, 401), ({"pad": "x" * (2 * 1024 * 1024)}, 200),
])
def test_bad_usage_replies_emit_nothing(setup, provider, body, status):
    provider.set_usage(setup.token, body, http_status=status)
    assert setup.sampler().poll_once() == 300.0
    assert setup.samples() == [] and provider.usage_calls() == 1


def test_429_backs_off_honouring_retry_after_capped(setup, provider):
    sampler = setup.sampler(poll_interval_s=0.5)
    provider.set_usage(setup.token, {}, http_status=429, retry_after=100)
    assert sampler.poll_once() == pytest.approx(110.0)   # retry-after + 10 %
    provider.set_usage(setup.token, {}, http_status=429, retry_after=2)
    assert sampler.poll_once() == 60.0                   # never shorter than 60 s
    provider.set_usage(setup.token, {}, http_status=429, retry_after=3600)
    assert sampler.poll_once() == backoff.MAX_BACKOFF_S
    provider.set_usage(setup.token, {}, http_status=429)
    assert sampler.poll_once() == 60.0  # no retry-after: doubling the interval, still at least 60 s
    assert setup.samples() == []
    provider.set_usage(setup.token, USAGE)
    assert sampler.poll_once() == 0.5
    assert len(setup.samples()) == 1


def test_backoff_delay_rules():
    assert backoff.backoff_delay(300, 60, 1) == 300       # never shorter than the interval
    assert backoff.backoff_delay(300, 600, 1) == pytest.approx(660)   # retry-after + 10 %
    assert backoff.backoff_delay(180, 200, 1) == pytest.approx(220)
    assert backoff.backoff_delay(1, 10, 1) == 60          # at least 60 s
    assert backoff.backoff_delay(1, 0, 1) == 60
    assert backoff.backoff_delay(300, 10 ** 6, 1) == 900  # at most 15 min
    assert backoff.backoff_delay(300, None, 1) == 600
    assert backoff.backoff_delay(300, None, 9) == 900
    assert backoff.backoff_delay(3600, None, 3) == 3600   # a long interval is not shortened by the cap


def test_interval_floor_and_switches(setup, provider, caplog):
    caplog.set_level(logging.INFO, logger="svcposture")
    setup.env["SVC_QUOTA_POLL_INTERVAL_S"] = "1"
    assert setup.sampler().interval_s == 180.0
    assert [r.getMessage() for r in caplog.records] == [
        "SVC_QUOTA_POLL_INTERVAL_S=1 is below the usage endpoint's budget; polling every 180 s"]
    setup.env["SVC_QUOTA_POLL_INTERVAL_S"] = "120"
    assert setup.sampler().interval_s == 180.0
    setup.env["SVC_QUOTA_POLL_INTERVAL_S"] = "soon"
    assert setup.sampler().interval_s == 300.0
    setup.env["SVC_QUOTA_POLL_INTERVAL_S"] = "181.5"
    assert setup.sampler().interval_s == 181.5
    setup.env["SVC_QUOTA_SAMPLER"] = "0"
    off = setup.sampler(poll_interval_s=0.05)
    off.start()
    off.stop()
    assert provider.usage_calls() == 0 and off.polls == 0


def test_no_credentials_file_means_idle_until_one_appears(setup, provider):
    os.unlink(str(setup.creds))
    sampler = setup.sampler(poll_interval_s=0.05)
    sampler.start()
    try:
        assert wait_until(lambda: sampler.last_delay_s is not None)
        assert provider.usage_calls() == 0 and setup.samples() == []
        # Credentials are looked for on every poll.
        setup.creds.write_text(json.dumps({"claudeAiOauth": {"accessToken": setup.token}}))
        assert wait_until(lambda: len(setup.samples()) >= 2, timeout=15)
    finally:
        sampler.stop()
    attrs = setup.samples()[0]["attributes"]
    assert "subscription.type" not in attrs and "rate_limit.tier" not in attrs


def test_token_never_leaks(setup, provider, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    sampler = setup.sampler()
    sampler.poll_once()
    provider.set_usage(setup.token, "junk " + setup.token)
    sampler.poll_once()
    provider.set_usage(setup.token, {}, http_status=401)
    sampler.poll_once()
    env = dict(setup.env)
    outs = []
    for args in (["usage", "--json"], ["usage"]):
        out = subprocess.run([sys.executable, "-m", "svcposture.probe"] + args, env=env, capture_output=True,
                             text=True, timeout=30)
        outs += [out.stdout, out.stderr]
    assert json.loads(outs[0])["error"]["kind"] == "auth"
    texts = outs + [files_text(setup.paths.svc_dir), "\n".join(r.getMessage() for r in caplog.records)]
    assert_no_canary(texts, [setup.token])
    assert len(setup.samples()) == 1
