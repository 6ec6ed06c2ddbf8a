"""The login's email from a large `~/.claude.json` (docs/posture.md): busy machines grow the profile
past a megabyte with per-project history, and the email decides which host of a cluster polls the
login. Through a real monitor in a two-host cluster whose anchor cannot be read (so the whole roster
counts), with the stand-in provider counting usage calls."""
from __future__ import annotations

import json
from pathlib import Path

import svcposture
from svcposture.cluster.usageowner import usage_ticket
from svcposture.paths import Paths
from tests.support.home import canary, make_node, node_env
from tests.support.hooks import hooked
from tests.support.monitor import start_monitor
from tests.support.provider import ANY, ProviderServer
from tests.support.waiting import wait_until

HOSTS = ["a", "b"]
USAGE = {"five_hour": {"utilization": 42.0, "resets_at": "2026-01-01T05:00:00+00:00"},
         "seven_day": {"utilization": 17.0, "resets_at": "2026-01-07T00:00:00+00:00"}}


def email_owned_by(host: str) -> str:
    """An address whose HRW owner among HOSTS (liveness unknown) is `host`."""
    for i in range(1000):
        email = "shared%d@example.com" % i
        if svcposture.owner(usage_ticket(email), HOSTS) == host:
            return email
    raise AssertionError("no address for %s" % host)


def big_profile(email: str, size: int, *, before: bool = False) -> bytes:
    """A profile of about `size` bytes: project history (with strings that look like the key),
    and the account after it (or before it)."""
    noise = {"/work/p%05d" % i: {"history": [{"display": 'paste "oauthAccount": {"emailAddress": '
                                              '"decoy@example.com"} \\ { [ ' + "x" * 200}],
                                 "oauthAccount": {"emailAddress": "nested@example.com"}}
             for i in range(size // 330)}
    account = {"emailAddress": email, "organizationName": "Org"}
    body = {"oauthAccount": account, "projects": noise} if before else {"projects": noise, "oauthAccount": account}
    return json.dumps(body, indent=2).encode()


def cluster_node(tmp_path: Path, provider: ProviderServer, profile: bytes):
    home = make_node(tmp_path, "a", HOSTS, anchor="OPS-1")
    paths = Paths(home, environ={"HOME": str(home)})
    paths.login_credentials.parent.mkdir(parents=True, exist_ok=True)
    paths.login_credentials.write_text(json.dumps({"claudeAiOauth": {"accessToken": canary("profile")}}))
    paths.login_profile.write_bytes(profile)
    env = hooked(node_env(home, provider.url, tracker_url="http://127.0.0.1:9/graphql", SVC_QUOTA_SAMPLER="1",
                          SVC_ACCOUNTS_PROBE="0"), quota_poll_s=0.5)
    return start_monitor(env, ["--no-probe"])


def test_the_email_of_a_profile_over_a_megabyte_is_read(tmp_path):
    email = email_owned_by("b")
    profile = big_profile(email, 3 * 1024 * 1024)
    assert len(profile) > 2 * 1024 * 1024
    with ProviderServer() as provider:
        provider.set_usage(ANY, USAGE)
        mon = cluster_node(tmp_path, provider, profile)
        try:
            # b owns the login: a reads the email (after 3 MB of history) and leaves the polls to b.
            wait_until(lambda: "usage: host b polls this login's usage; this host skips" in mon.stderr_text(),
                       timeout=60, message="a to leave the login to b")
            assert provider.usage_calls() == 0
        finally:
            mon.stop()


def test_an_unreadable_email_in_a_cluster_is_said_once(tmp_path):
    profile = json.dumps({"projects": {}, "oauthAccount": {"emailAddress": "not an address"}}).encode()
    with ProviderServer() as provider:
        provider.set_usage(ANY, USAGE)
        mon = cluster_node(tmp_path, provider, profile)
        try:
            # Without the email every host sharing the login polls it; this one does, and says why once.
            wait_until(lambda: provider.usage_calls() >= 3, timeout=60, message="three polls here")
        finally:
            mon.stop()
    lines = [l for l in mon.stderr_text().splitlines() if "cannot read the login's email" in l]
    assert len(lines) == 1, mon.stderr_text()
    assert ".claude.json" in lines[0] and "oauthAccount" in lines[0]


def probe_login(tmp_path: Path, profile: bytes) -> dict:
    """`python -m svcposture.probe login --json`, the token-free child, over a home holding `profile`."""
    import subprocess
    import sys

    home = tmp_path / "home"
    paths = Paths(home, environ={"HOME": str(home)})
    paths.login_credentials.parent.mkdir(parents=True, exist_ok=True)
    paths.login_credentials.write_text(json.dumps({"claudeAiOauth": {"accessToken": canary("profile")}}))
    paths.login_profile.write_bytes(profile)
    done = subprocess.run([sys.executable, "-m", "svcposture.probe", "login", "--json"], capture_output=True,
                          timeout=120, env=node_env(home, "http://127.0.0.1:9"))
    assert b"Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_email_is_json_loads_own_the_last_member_and_an_escaped_name(tmp_path):
    # Two members of one name: every JSON parser, Claude Code's included, keeps the last.
    twice = (b'{"oauthAccount": {"emailAddress": "stale@example.com"}, "projects": {}, '
             b'"oauthAccount": {"emailAddress": "current@example.com"}}')
    assert json.loads(twice)["oauthAccount"]["emailAddress"] == "current@example.com"
    assert probe_login(tmp_path / "twice", twice) == {"ok": True, "email": "current@example.com"}
    escaped = b'{"projects": {}, "oauth\\u0041ccount": {"emailAddress": "escaped@example.com"}}'
    assert probe_login(tmp_path / "escaped", escaped)["email"] == "escaped@example.com"


def test_a_string_of_20_mb_before_the_account_is_streamed_past(tmp_path):
    # Read once, byte by byte: the length of a string the chunks cut costs nothing more than its bytes.
    profile = json.dumps({"cachedChangelog": "x" * (20 * 1024 * 1024),
                          "oauthAccount": {"emailAddress": "after@example.com"}}).encode()
    assert probe_login(tmp_path, profile)["email"] == "after@example.com"
