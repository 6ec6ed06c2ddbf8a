"""Health on the field's bad replies (docs/posture.md, "Health"), through one real monitor.

The stand-in provider answers each token as a test sets it: a 401 whose body is garbage, a
403, a 429 whose reset is missing or absurd, a 429 with no rate-limit header at all, a refused
token that comes back to life, and a probe that fails at every third reading. A failed reading
flips the account's health and keeps its last good figures beside the error, with their age
(`readAt`); the advice never names such an account as a candidate and never stays on it. The
same node holds a Codex login and a key of the stand-in third vendor, both refused: every
vendor's accounts carry `health`, and the fix is the vendor's own.
"""
from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List

import pytest

from tests.support.cli import cli
from tests.support.codex import CodexServer, make_login
from tests.support.home import accounts_path, canary, monitor_env, write_accounts
from tests.support.monitor import SSEClient, start_monitor
from tests.support.provider import ProviderServer
from tests.support.thirdvendor.server import AcmeServer
from tests.support.waiting import wait_until

TOK_A = canary("badin-a")
TOK_B = canary("badin-b")
CODEX_TOKEN = "codex-access-CANARY-health-" + "5" * 12
ACME_KEY = "acme-key-CANARY-health-" + "6" * 16
PREFIX = "anthropic-ratelimit-unified-"


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[Dict[str, Any]]:
    home = tmp_path_factory.mktemp("bad-input")
    codex_home = home / "codex-work"
    make_login(codex_home, CODEX_TOKEN)
    extra = ('CODEX_HOME_WORK="%s"  # work@x.example\nexport CODEX_HOME="$CODEX_HOME_WORK"\n'
             'ACME_KEY_THREE="%s"  # three@acme.example\nexport ACME_KEY="$ACME_KEY_THREE"\n' % (codex_home, ACME_KEY))
    write_accounts(accounts_path(home), [("ACCT1", TOK_A, "ada@example.com"), ("ACCT2", TOK_B, "bob@example.com")],
                   active="ACCT1", extra=extra)
    # Neither stand-in knows its token: both answer 401.
    with ProviderServer() as provider, CodexServer() as codex, AcmeServer() as acme:
        provider.set_account(TOK_A, five_hour=(0.30, "allowed"), seven_day=(0.10, "allowed"))
        provider.set_account(TOK_B, five_hour=(0.05, "allowed"), seven_day=(0.05, "allowed"))
        env = monitor_env(home, provider.url, SVC_CODEX_URL=codex.url, SVC_ACME_URL=acme.url,
                          SVC_VENDORS="tests.support.thirdvendor", SVC_GUARD_BUDGET_MS="5000",
                          SVC_STATUSLINE_BUDGET_MS="5000")
        mon = start_monitor(env)
        try:
            yield {"env": dict(env, SVC_MONITOR_PORT=str(mon.port)), "mon": mon, "provider": provider}
        finally:
            mon.stop()
        assert "Traceback" not in mon.stderr_text()


def accounts(node: Dict[str, Any], provider: str = "claude") -> Dict[str, Dict[str, Any]]:
    body = node["mon"].get_json("/api/accounts?provider=%s" % provider)[1]
    return {a["label"]: a for a in body.get("accounts") or []}


def settle(node: Dict[str, Any], label: str, health: str, message: str) -> Dict[str, Any]:
    """The account's view once its health is `health` (the provider set before)."""
    return wait_until(lambda: (lambda a: a if a and a["health"] == health else None)(accounts(node).get(label)),
                      timeout=30, message=message)


def healthy(node: Dict[str, Any]) -> None:
    """Both tokens answered well, and read so: acct1 at 30 %, acct2 at 5 %."""
    node["provider"].set_account(TOK_A, five_hour=(0.30, "allowed"), seven_day=(0.10, "allowed"))
    node["provider"].set_account(TOK_B, five_hour=(0.05, "allowed"), seven_day=(0.05, "allowed"))

    def read() -> bool:
        found = accounts(node)
        return all(found.get(label, {}).get("health") == "ok" and found[label]["error"] is None
                   and (found[label]["fiveHour"] or {}).get("pct") == pct
                   for label, pct in (("acct1", 30.0), ("acct2", 5.0)))
    wait_until(read, timeout=30, message="both accounts read well")


def advice(node: Dict[str, Any], provider: str = "claude") -> Dict[str, Any]:
    return node["mon"].get_json("/api/advice?provider=%s" % provider)[1]


def test_a_401_with_a_garbage_body_is_refused_and_keeps_the_last_figures(node) -> None:
    healthy(node)
    node["provider"].set_account(TOK_A, mode="auth", error_body=b"\x00\xff<html>Unauthorized</ht")
    view = settle(node, "acct1", "refused", "acct1 refused")
    assert view["error"]["kind"] == "auth" and view["error"]["httpStatus"] == 401
    # The last good reading stays, dated: the figures are not this probe's.
    assert view["fiveHour"]["pct"] == 30.0 and isinstance(view["readAt"], int)
    said = advice(node)
    assert said["advice"] == "switch" and said["to"]["label"] == "acct2", said
    assert said["reason"].startswith("acct1's token was refused by the provider (HTTP 401): run `claude "
                                     "setup-token` signed in as ada@example.com and paste it into "
                                     "~/.config/svc/model-accounts.env line 2; switch to acct2"), said["reason"]
    guard = cli(node["env"], "monitor", "guard")
    assert guard.returncode == 69 and "acct1's token was refused" in guard.stderr and \
        "advice: switch to acct2" in guard.stderr, guard.stderr


def test_a_403_is_refused(node) -> None:
    healthy(node)
    node["provider"].set_account(TOK_B, mode="auth", http_status=403)
    view = settle(node, "acct2", "refused", "acct2 refused")
    assert view["error"]["httpStatus"] == 403
    said = advice(node)
    # The active account is fine; the refused sibling is listed, never a candidate, never "full".
    assert said["advice"] == "stay"
    [acct2] = said["ranked"]
    assert (acct2["health"], acct2["candidate"], acct2["headroomPct"]) == ("refused", False, None)
    assert acct2["note"].startswith("acct2's token was refused by the provider (HTTP 403)")


def test_a_refused_token_that_comes_back_to_life_is_ok_again(node) -> None:
    healthy(node)
    node["provider"].set_account(TOK_A, mode="auth")
    settle(node, "acct1", "refused", "acct1 refused")
    node["provider"].set_account(TOK_A, five_hour=(0.35, "allowed"), seven_day=(0.10, "allowed"))
    view = settle(node, "acct1", "ok", "acct1 read again")
    assert view["error"] is None and view["fiveHour"]["pct"] == 35.0
    assert wait_until(lambda: advice(node)["advice"] == "stay", timeout=30, message="the advice back to stay")
    assert cli(node["env"], "monitor", "guard").returncode == 0


def test_a_429_without_a_reset_is_read_and_rejected(node) -> None:
    healthy(node)
    headers = {PREFIX + "status": "rejected", PREFIX + "representative-claim": "five_hour",
               PREFIX + "5h-utilization": "1.0", PREFIX + "5h-status": "rejected"}
    node["provider"].set_account(TOK_A, mode="raw", http_status=429, raw_headers=headers)
    view = wait_until(lambda: (lambda a: a if a and a["bindingStatus"] == "rejected" else None)(
        accounts(node).get("acct1")), timeout=30, message="acct1 rejected")
    # It was read: its health is ok, the window is full and says no reset.
    assert view["health"] == "ok" and view["fiveHour"] == {"pct": 100.0, "resetsAt": None, "status": "rejected"}
    said = advice(node)
    assert said["advice"] == "switch" and said["to"]["label"] == "acct2" and said["waitS"] is None
    guard = cli(node["env"], "monitor", "guard", "--json")
    assert guard.returncode == 1 and '"retryAfterS": null' in guard.stdout, guard.stdout


def test_a_429_with_an_absurd_reset_keeps_the_last_figures(node) -> None:
    healthy(node)
    good = accounts(node)["acct1"]
    headers = {PREFIX + "status": "rejected", PREFIX + "representative-claim": "five_hour",
               PREFIX + "5h-utilization": "1.0", PREFIX + "5h-status": "rejected",
               PREFIX + "5h-reset": "99999999999999999999"}
    node["provider"].set_account(TOK_A, mode="raw", http_status=429, raw_headers=headers)
    # The reply cannot be read: the figures shown are the last good reading's, no longer fresh.
    view = settle(node, "acct1", "stale", "acct1 stale")
    assert view["error"]["kind"] == "parse" and view["error"]["httpStatus"] == 429
    assert view["fiveHour"]["pct"] == good["fiveHour"]["pct"] == 30.0 and view["readAt"] >= good["readAt"]
    said = advice(node)
    assert said["advice"] == "switch" and said["to"]["label"] == "acct2"
    assert said["active"]["health"] == "stale" and said["reason"].startswith("acct1 has had no good reading for ")


def test_a_429_without_rate_limit_headers_is_limited(node) -> None:
    healthy(node)
    node["provider"].set_account(TOK_A, mode="no_headers", status="rejected")
    view = settle(node, "acct1", "limited", "acct1 limited")
    assert view["error"]["kind"] == "no_headers" and view["fiveHour"]["pct"] == 30.0
    said = advice(node)
    assert said["active"]["note"].startswith("acct1 could not be read: the provider is rate-limiting its reading "
                                             "(the figures shown are from ")


def test_a_probe_that_fails_at_every_third_reading_keeps_its_figures(node) -> None:
    healthy(node)
    node["provider"].set_account(TOK_A, five_hour=(0.42, "allowed"), seven_day=(0.10, "allowed"), fail_every=3)
    frames: List[Dict[str, Any]] = []
    with SSEClient(node["mon"].port) as stream:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            event = stream.next_event()
            if event is None:
                break
            import json
            body = json.loads(event["data"])
            if body.get("cached") is False and body.get("active"):
                frames.append(body["active"])
            healths = [f["health"] for f in frames if f["fiveHour"] and f["fiveHour"]["pct"] == 42.0]
            if "unreachable" in healths and "ok" in healths[healths.index("unreachable"):]:
                break
    flipped = [f for f in frames if f["health"] == "unreachable"]
    assert flipped, [f["health"] for f in frames]
    for view in flipped:
        # The error and its health, beside the last good figures and their time.
        assert view["error"]["kind"] in ("transport", "timeout") and isinstance(view["readAt"], int)
    assert any(f["fiveHour"]["pct"] == 42.0 for f in flipped)
    after = frames[frames.index(flipped[-1]):]
    assert any(f["health"] == "ok" and f["error"] is None for f in after), [f["health"] for f in frames]
    node["provider"].set_account(TOK_A, five_hour=(0.30, "allowed"), seven_day=(0.10, "allowed"))


def test_every_vendor_says_refused_with_its_own_fix(node) -> None:
    codex = wait_until(lambda: accounts(node, "codex").get("codex-work"), timeout=30, message="the Codex login")
    assert codex["health"] == "refused" and codex["envLine"] is not None
    said = advice(node, "codex")
    assert said["advice"] == "none" and said["active"]["fix"].startswith("run `codex login` with CODEX_HOME=")
    acme = wait_until(lambda: accounts(node, "acme").get("acme-three"), timeout=30, message="the acme key")
    assert acme["health"] == "refused"
    # The stand-in vendor says no line: the fix names the variable.
    assert advice(node, "acme")["active"]["fix"] == (
        "copy a new key for three@acme.example from the acme console into the ACME_KEY_THREE line of "
        "~/.config/svc/model-accounts.env")
