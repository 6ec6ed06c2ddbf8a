"""A provider (or anyone on the path of an http:// provider URL) that answers a
status header with the bearer token: the status words come from a fixed
vocabulary, so the token is a `parse` error for that account and shows up in
no body and no frame."""
from __future__ import annotations

import json

import pytest

from tests.support.home import monitor_env, write_accounts, accounts_path
from tests.support.monitor import SSEClient
from tests.support.provider import PREFIX, ProviderServer
from tests.support.waiting import wait_until

# Lower-case and word-shaped, so a shape check alone would let it through.
TOKEN = "sk_ant_oat_lowercase_token_" + "abcdef0123456789"[:12]
GOOD = "tok-good-account"


def _headers(status: str, window_status: str = "allowed") -> dict:
    return {PREFIX + "status": status, PREFIX + "representative-claim": "five_hour",
            PREFIX + "5h-utilization": "0.25", PREFIX + "5h-reset": "4102444800",
            PREFIX + "5h-status": window_status}


@pytest.mark.parametrize("where", ["overall", "window"])
def test_token_echoed_as_a_status_is_a_parse_error_and_never_served(home, where, monitors):
    with ProviderServer() as provider:
        bad = _headers(TOKEN) if where == "overall" else _headers("allowed", TOKEN)
        provider.set_account(TOKEN, raw_headers=bad)
        provider.set_account(GOOD, raw_headers=_headers("allowed_warning"))
        write_accounts(accounts_path(home), [("EVIL", TOKEN, "evil@example.com"),
                                             ("GOOD", GOOD, "good@example.com")], active="EVIL")
        mon = monitors.start(monitor_env(home, provider.url))
        try:
            def probed():
                status, body = mon.get_json("/api/accounts")
                return body if body.get("probedAt") else None
            body = wait_until(probed, message="a probed posture")
            by_label = {a["label"]: a for a in body["accounts"]}
            assert by_label["evil"]["error"]["kind"] == "parse"
            assert by_label["evil"]["overallStatus"] is None
            assert by_label["good"]["error"] is None
            assert by_label["good"]["overallStatus"] == "allowed_warning"
            assert body["status"] == "error"  # the active account is the broken one
            with SSEClient(mon.port) as stream:
                frame = stream.next_event()
            assert frame is not None and frame["event"] == "account"
            status, _, metrics = mon.get("/metrics")
            for blob in (json.dumps(body).encode(), frame["data"].encode(), metrics):
                assert TOKEN.encode() not in blob
        finally:
            mon.stop()
        assert TOKEN not in mon.stderr_text()


@pytest.mark.parametrize("word", ["allowed", "allowed_warning", "rejected"])
def test_every_status_of_the_vocabulary_is_kept(word):
    from svcposture.claude.provider import parse_unified_headers
    view = parse_unified_headers({k.lower(): v for k, v in _headers(word, word).items()})
    assert view["overallStatus"] == word and view["fiveHour"]["status"] == word


@pytest.mark.parametrize("word", ["ok", "allowedx", "warning", "Allowed", "rejected2", "unknown", " "])
def test_any_other_status_word_raises(word):
    from svcposture.claude.provider import parse_unified_headers
    with pytest.raises(ValueError):
        parse_unified_headers({(PREFIX + "status"): word})
    with pytest.raises(ValueError):
        parse_unified_headers({(PREFIX + "7d-status"): word, PREFIX + "status": "allowed"})
