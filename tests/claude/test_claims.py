"""Header fixtures of the claims the provider sends (docs/posture.md): a representative
claim that is not a window (`overage`) binds to the worst window with overallStatus,
and unknown `anthropic-ratelimit-unified-*` headers are ignored.

Each fixture is answered by the test provider and read by the real token-scoped
child through `read_posture`.
"""
from __future__ import annotations

import time

import pytest

import svcposture
from tests.support.home import accounts_path, canary, write_accounts
from tests.support.provider import ProviderServer

U = "anthropic-ratelimit-unified-"
# Stands for "an hour from now" in the fixtures, which are built at import: the clock is read
# when a test sends them (the file may run long after the suite started).
RESET = "<an hour from now>"


def with_reset(raw):
    reset = str(int(time.time()) + 3600)
    return {k: reset if v == RESET else v for k, v in raw.items()}


def headers(status, claim, five, seven, **extra):
    out = {U + "status": status, U + "representative-claim": claim,
           U + "5h-utilization": five[0], U + "5h-status": five[1], U + "5h-reset": RESET,
           U + "7d-utilization": seven[0], U + "7d-status": seven[1], U + "7d-reset": RESET}
    out.update({U + k.replace("_", "-"): v for k, v in extra.items()})
    return out


OVERAGE_EXTRA = {"overage_status": "allowed", "overage_reset": RESET, "overage_utilization": "0.12",
                 "fallback_percentage": "0.5", "overage_disabled_reason": "org_level_disabled_until"}

# (id, headers, HTTP status, expected (node status, bindingWindow, bindingStatus))
FIXTURES = [
    ("overage past the 5h limit is not rejected",
     headers("allowed", "overage", ("1.0", "rejected"), ("0.4", "allowed"), **OVERAGE_EXTRA), 200,
     ("ok", "five_hour", "allowed")),
    ("overage nearing its own limit is degraded",
     headers("allowed_warning", "overage", ("1.02", "rejected"), ("0.97", "allowed_warning"), **OVERAGE_EXTRA), 200,
     ("degraded", "five_hour", "allowed_warning")),
    ("overage exhausted too is rejected",
     headers("rejected", "overage", ("1.0", "rejected"), ("0.5", "allowed"), overage_status="rejected"), 429,
     ("rejected", "five_hour", "rejected")),
    ("overage, the 7d window the worst",
     headers("allowed", "overage", ("0.3", "allowed"), ("1.0", "rejected")), 200,
     ("ok", "seven_day", "allowed")),
    ("a future claim word binds like overage",
     headers("allowed", "seven_day_opus", ("0.2", "allowed"), ("0.9", "allowed_warning")), 200,
     ("ok", "seven_day", "allowed")),
    ("a window claim still binds to its window",
     headers("rejected", "five_hour", ("1.0", "rejected"), ("0.5", "allowed"), **OVERAGE_EXTRA), 429,
     ("rejected", "five_hour", "rejected")),
]


@pytest.fixture
def node(home, env):
    with ProviderServer() as provider:
        token = canary("acct1")
        write_accounts(accounts_path(home), [("ACCT1", token, "a1@example.com")], active="ACCT1")
        env["SVC_PROVIDER_URL"] = provider.url
        yield provider, token, home, env


@pytest.mark.parametrize("raw,http_status,expected", [f[1:] for f in FIXTURES], ids=[f[0] for f in FIXTURES])
def test_claim_fixtures(node, raw, http_status, expected):
    provider, token, home, env = node
    provider.set_account(token, raw_headers=with_reset(raw), http_status=http_status)
    body = svcposture.read_posture(home, environ=env)
    active = body["active"]
    assert (body["status"], active["bindingWindow"], active["bindingStatus"]) == expected
    assert active["error"] is None
    assert active["representativeClaim"] == raw[U + "representative-claim"]
    # The overage headers ride along nowhere: the body is whitelisted.
    assert "overage" not in str({k: v for k, v in active.items() if k != "representativeClaim"})


def test_only_unknown_unified_headers_count_as_none(node):
    provider, token, home, env = node
    provider.set_account(token, raw_headers={U + "overage-status": "allowed", U + "fallback-percentage": "0.5"})
    body = svcposture.read_posture(home, environ=env)
    assert body["status"] == "error"
    assert body["active"]["error"]["kind"] == "no_headers"
