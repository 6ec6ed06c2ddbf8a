"""The forced-refresh guard (docs/http-api.md): hostile Host/Origin/header combinations
get 403 with a reason and spend no probe; trusted ones probe."""
from __future__ import annotations

import json
import re

import pytest

from tests.support.home import canary, node_env
from tests.support.waiting import wait_until
from tests.support.monitor import get_request, raw_http
from tests.support.provider import ProviderServer
from svcposture.monitor.trust import TrustPolicy, split_host

TOK = canary("guard")
PORT = "{port}"
WRONG = "{wrong}"

# (extra header lines, expected reason); Host given separately (None = no Host line).
HOSTILE = [
    ("localhost.evil.com:{port}", [], "untrusted_host"),
    ("127.0.0.1.nip.io:{port}", [], "untrusted_host"),
    ("user@localhost:{port}", [], "untrusted_host"),
    ("localhost:{wrong}", [], "untrusted_host"),
    ("127.0.0.1:{wrong}", [], "untrusted_host"),
    ("evil.com", [], "untrusted_host"),
    ("evil.com:{port}", [], "untrusted_host"),
    (None, [], "untrusted_host"),
    ("", [], "untrusted_host"),
    ("localhost:{port}/x", [], "untrusted_host"),
    ("local host:{port}", [], "untrusted_host"),
    ("[::2]:{port}", [], "untrusted_host"),
    ("127.1:{port}", [], "untrusted_host"),
    ("0x7f.0.0.1:{port}", [], "untrusted_host"),
    ("localhost:{port}@evil.com", [], "untrusted_host"),
    ("%6cocalhost:{port}", [], "untrusted_host"),
    ("[::ffff:127.0.0.1]:{port}", [], "untrusted_host"),
    ("localhost:99999", [], "untrusted_host"),
    ("10.0.0.1:{port}", [], "untrusted_host"),
    ("localhost..:{port}", [], "untrusted_host"),
    ("lo_calhost:{port}", [], "untrusted_host"),
    ("localhost:{port}:{port}", [], "untrusted_host"),
    ("localhost:", [], "untrusted_host"),
    ("localhost:{port}", ["Host: evil.com"], "untrusted_host"),  # a second Host line
    ("localhost:{port}", ["Origin: null"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: file://"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: http://evil.com"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: http://localhost.evil.com:{port}"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: http://localhost:{wrong}"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: http://localhost"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: https://127.0.0.1"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: chrome-extension://abcdef"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: http://user@localhost:{port}"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: http://localhost:{port}/path"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: ftp://localhost:{port}"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: "], "untrusted_origin"),
    ("localhost:{port}", ["Origin: http://127.0.0.1.nip.io:{port}"], "untrusted_origin"),
    ("localhost:{port}", ["Origin: http://localhost:{port}", "Origin: http://evil.com"], "untrusted_origin"),
]

TRUSTED = [
    ("localhost:{port}", []),
    ("127.0.0.1:{port}", []),
    ("127.9.8.7:{port}", []),
    ("[::1]:{port}", []),
    ("LOCALHOST.:{port}", []),
    ("localhost", []),
    ("guardnode:{port}", []),
    ("localhost:{port}", ["Origin: http://localhost:{port}"]),
    ("127.0.0.1:{port}", ["Origin: http://127.0.0.1:{port}"]),
    ("127.0.0.1:{port}", ["Origin: HTTP://[::1]:{port}"]),
]


@pytest.fixture(scope="module")
def provider():
    with ProviderServer() as p:
        p.set_account(TOK)
        yield p


@pytest.fixture(scope="module")
def mon(tmp_path_factory, provider, module_monitors):
    home = tmp_path_factory.mktemp("guard") / "home"
    home.mkdir()
    (home / ".config" / "svc").mkdir(parents=True)
    (home / ".config" / "svc" / "node.json").write_text('{"svc": {"host": {"name": "GuardNode"}}}')
    env = node_env(home, provider.url, [("ACCT1", TOK, "g@example.com")], active="ACCT1",
                   extra={"SVC_REFRESH_FLOOR_S": "0",
                          "SVC_MONITOR_TRUSTED_HOSTS": "proxy.example:*, fixed.example:8443",
                          "SVC_MONITOR_TRUSTED_ORIGINS": "https://dash.example"})
    m = module_monitors.start(env)
    # The first probe starts with the monitor and may reach the provider after /healthz answers; the
    # tests count provider calls from here, so they begin once it has, and once the monitor has its
    # reply: a refresh asked while that probe is still in flight joins it instead of probing anew.
    wait_until(lambda: provider.message_calls() >= 1, timeout=30, message="the monitor's first probe")
    wait_until(lambda: m.get_json("/api/accounts")[1].get("probedAt"), timeout=30,
               message="the monitor's first probe answered")
    yield m


def _fill(text, port):
    return None if text is None else text.format(port=port, wrong=port + 1 if port < 65535 else port - 1)


def _refresh(mon, host, lines, header=True):
    extra = [_fill(l, mon.port) for l in lines]
    if header:
        extra.append("X-Svc-Refresh: 1")
    return raw_http(mon.port, get_request("/api/accounts?refresh=true", _fill(host, mon.port), extra))


def test_guard_matrix_refuses_and_spends_no_probe(mon, provider):
    assert len(HOSTILE) >= 25
    before = provider.message_calls()
    for host, lines, reason in HOSTILE:
        status, headers, body = _refresh(mon, host, lines)
        assert status == 403, (host, lines, body)
        doc = json.loads(body)
        assert doc["error"] == "forbidden" and doc["reason"] == reason, (host, lines, doc)
        assert set(doc) == {"error", "reason", "message"} and doc["message"]
        assert "access-control-allow-origin" not in headers
    assert provider.message_calls() == before


def test_missing_refresh_header_is_refused_first(mon, provider):
    before = provider.message_calls()
    for host in ("localhost:{port}", "evil.com"):
        status, _, body = _refresh(mon, host, [], header=False)
        assert status == 403 and json.loads(body)["reason"] == "refresh_header_missing"
    assert provider.message_calls() == before


def test_trusted_combinations_force_a_probe(mon, provider):
    for host, lines in TRUSTED:
        before = provider.message_calls()
        status, _, body = _refresh(mon, host, lines)
        assert status == 200, (host, lines, body)
        assert json.loads(body)["cached"] is False
        assert provider.message_calls() == before + 1, (host, lines)


def test_empty_refresh_header_counts(mon, provider):
    before = provider.message_calls()
    status, _, _ = raw_http(mon.port, get_request("/api/accounts?refresh=true", "127.0.0.1:%d" % mon.port,
                                                  ["X-Svc-Refresh:"]))
    assert status == 200 and provider.message_calls() == before + 1


def test_configured_trusted_hosts_and_origins(mon, provider):
    ok = [("proxy.example:8443", []), ("proxy.example", ["Origin: https://proxy.example"]),
          ("fixed.example:8443", ["Origin: https://fixed.example:8443"]),
          ("localhost:{port}", ["Origin: https://dash.example"])]
    for host, lines in ok:
        status, _, body = _refresh(mon, host, lines)
        assert status == 200, (host, lines, body)
    bad = [("fixed.example:9999", [], "untrusted_host"),
           ("localhost:{port}", ["Origin: https://dash.example.evil"], "untrusted_origin"),
           ("localhost:{port}", ["Origin: http://dash.example"], "untrusted_origin")]
    for host, lines, reason in bad:
        status, _, body = _refresh(mon, host, lines)
        assert status == 403 and json.loads(body)["reason"] == reason, (host, lines)


def test_plain_reads_need_no_guard(mon, provider):
    before = provider.message_calls()
    for host, lines, _ in HOSTILE[:10]:
        status, _, body = raw_http(mon.port, get_request("/api/accounts", _fill(host, mon.port),
                                                         [_fill(l, mon.port) for l in lines]))
        assert status == 200 and json.loads(body)["cached"] is True
    for query in ("refresh=TRUE", "refresh=1", "refresh", "refreshx=true", "x=refresh%3Dtrue"):
        status, _, body = raw_http(mon.port, get_request("/api/accounts?" + query, "evil.com"))
        assert status == 200 and json.loads(body)["cached"] is True, query
    assert provider.message_calls() == before


def test_read_guard_env_guards_every_route(tmp_path, provider, monitors):
    env = node_env(tmp_path, provider.url, extra={"SVC_MONITOR_READ_GUARD": "1"})
    m = monitors.start(env, ["--no-probe"])
    for path in ("/", "/api/accounts", "/api/accounts/stream", "/metrics", "/healthz", "/api/openapi.json"):
        status, _, body = raw_http(m.port, get_request(path, "evil.com:%d" % m.port))
        assert status == 403 and json.loads(body)["reason"] == "untrusted_host", path
        status, _, body = raw_http(m.port, get_request(path, "localhost:%d" % m.port, ["Origin: null"]))
        assert status == 403 and json.loads(body)["reason"] == "untrusted_origin", path
    status, _, body = raw_http(m.port, get_request("/api/accounts", "localhost:%d" % m.port,
                                                   ["Origin: http://localhost:%d" % m.port]))
    assert status == 200


# ---- the trust policy in-process (fast, many more cases) ----

def test_split_host():
    assert split_host("LocalHost.:80") == ("localhost", 80)
    assert split_host("[0:0:0:0:0:0:0:1]:7") == ("[::1]", 7)
    for bad in ("", ":80", "a b", "a@b", "a/b", "[::1", "::1", "a:0", "a:65536", "-a", "a..b", "a_b", "a.-",
                "é.com", "a:+80"):
        assert split_host(bad) is None, bad


def test_policy_loopback_bind():
    p = TrustPolicy("127.0.0.1", 7400, "node-a", os_hostname="box.lan")
    assert p.host_trusted(["localhost:7400"]) and p.host_trusted(["127.3.2.1"]) and p.host_trusted(["[::1]:7400"])
    assert p.host_trusted(["node-a:7400"]) and p.host_trusted(["box.lan:7400"]) and p.host_trusted(["box:7400"])
    assert not p.host_trusted(["localhost:7401"]) and not p.host_trusted([]) and not p.host_trusted(["a", "a"])
    assert not p.host_trusted(["127.000.0.1:7400"]) and not p.host_trusted(["128.0.0.1:7400"])
    assert p.origin_trusted(["http://localhost:7400"]) and p.origin_trusted(["https://node-a:7400"])
    assert not p.origin_trusted(["null"]) and not p.origin_trusted(["http://localhost"])
    assert not p.origin_trusted(["javascript://localhost:7400"]) and not p.origin_trusted(["data:"])


def test_policy_default_port_origin():
    p = TrustPolicy("127.0.0.1", 80, "n")
    assert p.origin_trusted(["http://localhost"]) and not p.origin_trusted(["https://localhost"])


def test_policy_specific_non_loopback_bind():
    p = TrustPolicy("192.0.2.10", 7400, "node-a", os_hostname="box")
    assert p.host_trusted(["192.0.2.10:7400"]) and p.host_trusted(["node-a:7400"])
    assert not p.host_trusted(["localhost:7400"]) and not p.host_trusted(["127.0.0.1:7400"])
    assert not p.host_trusted(["box:7400"])
    w = TrustPolicy("0.0.0.0", 7400, "node-a", os_hostname="box")
    assert w.host_trusted(["localhost:7400"]) and w.host_trusted(["box:7400"])


try:
    from hypothesis import given, settings, strategies as st
except ImportError:  # pragma: no cover
    given = None

if given is not None:
    _TRUSTED_SHAPE = re.compile(r"^(localhost|127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\]|node-a)\.?(:7400)?$", re.I)

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FF), max_size=40)
           | st.from_regex(r"^[a-z0-9.:@\[\]/%_ -]{0,30}$", fullmatch=True))
    def test_hostile_host_values_never_crash_and_only_whitelisted_pass(value):
        policy = TrustPolicy("127.0.0.1", 7400, "node-a", os_hostname="node-a")
        if policy.host_trusted([value]):
            assert _TRUSTED_SHAPE.match(value), value
        policy.origin_trusted([value])
        policy.origin_trusted(["http://" + value])
