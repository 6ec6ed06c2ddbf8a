"""Codex accounts on the monitor's surfaces (docs/codex.md), through real monitors.

Two nodes share one Claude provider stand-in, one Codex usage stand-in and one
tracker stand-in:

- `mixed` (host a): Claude acct1 (active, 61 %) and acct2 (7-day at 93 %), and
  Codex codex-work (active, CODEX_HOME, 92 % of its 5-hour window) and
  codex-side (30 %);
- `plain` (host b): the same two Claude accounts and no Codex line at all.

Claude's body, stream and events must be the same on both, byte for byte once
the per-reply clocks are set aside; Codex shows on the mixed node's every
surface and nowhere on the plain one.
"""
from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.codex import CodexServer, make_login, token_count_line, usage_reply, write_session
from tests.support.home import BEARER, FAST_TIMINGS, accounts_path, canary, files_text, make_node, node_env, \
    write_accounts
from tests.support.monitor import SSEClient, start_monitor
from tests.support.provider import ProviderServer
from tests.support.tracker import TrackerServer
from tests.support.waiting import wait_until

TOK1 = canary("cx1")
TOK2 = canary("cx2")
CODEX_WORK = "codex-access-CANARY-work-" + "7" * 12
CODEX_SIDE = "codex-access-CANARY-side-" + "8" * 12
CODEX_REFRESH = "codex-refresh-CANARY-rt-" + "9" * 12
CONTRACT_KEYS = ["available", "node", "generatedAt", "probedAt", "cached", "status", "active", "accounts",
                 "siblingWithHeadroom"]
ACCOUNT_KEYS = ["label", "email", "active", "overallStatus", "representativeClaim", "bindingWindow",
                "bindingStatus", "fiveHour", "sevenDay", "error"]
# What the posture service adds to every vendor's view (docs/posture.md, "Health").
HEALTH_KEYS = ["readAt", "health"]
CODEX_EXTRA_KEYS = ["provider", "extraWindows", "codeReview", "planType", "credits", "resetCredits", "source",
                    "sampledAt", "envLine"]
# The per-reply clocks, the node's name and where each account's line is in its file: everything else of
# Claude's body must match byte for byte.
_VOLATILE = re.compile(rb'"(generatedAt|probedAt|readAt|envLine|cached|node)":("[^"]*"|\d+|true|false)')


def _normal(body: bytes) -> bytes:
    return _VOLATILE.sub(rb'"\1":_', body)


@functools.lru_cache(maxsize=None)
def resets():
    """(5h reset, 7d reset) in epoch seconds, read once, when the first test asks: not at import,
    since the file may run long after the suite started."""
    now_s = int(time.time())
    return now_s + 2 * 3600, now_s + 3 * 86400


@pytest.fixture(scope="module")
def stands():
    reset_5h, reset_7d = resets()
    with ProviderServer() as provider, CodexServer() as codex, TrackerServer(tokens=[BEARER]) as tracker:
        tracker.add_issue("OPS-1")
        provider.set_account(TOK1, five_hour=(0.614, "allowed"), seven_day=(0.20, "allowed"),
                             reset_5h=reset_5h, reset_7d=reset_7d)
        provider.set_account(TOK2, five_hour=(0.10, "allowed"), seven_day=(0.93, "allowed_warning"),
                             reset_5h=reset_5h, reset_7d=reset_7d, representative_claim="seven_day")
        codex.set_reply(CODEX_WORK, usage_reply(92, 40, reset_5h=reset_5h, reset_7d=reset_7d), account_id="acc-work")
        codex.set_reply(CODEX_SIDE, usage_reply(30, 10, reset_5h=reset_5h, reset_7d=reset_7d), account_id="acc-side")
        yield provider, codex, tracker


def _node(root: Path, host: str, stands, codex_lines: bool):
    provider, codex, tracker = stands
    home = make_node(root, host, ["a", "b"], anchor="OPS-1")
    extra = ""
    if codex_lines:
        make_login(home / "codex-work", CODEX_WORK, "acc-work", refresh=CODEX_REFRESH)
        make_login(home / "codex-side", CODEX_SIDE, "acc-side", refresh=CODEX_REFRESH)
        extra = ('CODEX_HOME_WORK="%s"  # work@x.example\nCODEX_HOME_SIDE="%s"  # side@x.example\n'
                 'export CODEX_HOME="$CODEX_HOME_WORK"\n' % (home / "codex-work", home / "codex-side"))
    write_accounts(accounts_path(home), [("ACCT1", TOK1, "one@x.example"), ("ACCT2", TOK2, "two@x.example")],
                   active="ACCT1", extra=extra)
    env = node_env(home, provider.url, extra=FAST_TIMINGS, tracker_url=tracker.url, interval_ms=300,
                   SVC_CODEX_URL=codex.url, SVC_FLEET_TTL_S="0.5")
    return home, start_monitor(env)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory, stands):
    root = tmp_path_factory.mktemp("codex-surfaces")
    mixed_home, mixed = _node(root, "a", stands, codex_lines=True)
    plain_home, plain = _node(root, "b", stands, codex_lines=False)
    try:
        wait_until(lambda: mixed.get_json("/api/accounts?provider=codex")[1].get("available") is True,
                   timeout=20, message="the Codex posture")
        wait_until(lambda: plain.get_json("/api/accounts")[1].get("available") is True, timeout=20,
                   message="the plain node's posture")
        yield {"mixed": mixed, "plain": plain, "mixed_home": mixed_home, "plain_home": plain_home}
    finally:
        mixed.stop(check=False)
        plain.stop(check=False)
    for mon in (mixed, plain):
        assert "Traceback" not in mon.stderr_text()


def _events(home: Path):
    out = []
    for path in sorted((home / "svc" / "events").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


# ---------------------------------------------------------------- Claude's contract, unchanged

def test_claude_body_is_the_contracts_byte_for_byte(nodes):
    mixed, plain = nodes["mixed"], nodes["plain"]
    plain_body = plain.get("/api/accounts")[2]
    assert list(json.loads(plain_body)) == CONTRACT_KEYS
    for path in ("/api/accounts", "/api/accounts?provider=claude"):
        status, headers, body = mixed.get(path)
        assert status == 200 and headers["content-type"] == "application/json"
        assert _normal(body) == _normal(plain_body), path
        assert b"codex" not in body
    # The stream's first frame too, with and without the parameter.
    frames = []
    for mon, path in ((plain, "/api/accounts/stream"), (mixed, "/api/accounts/stream"),
                      (mixed, "/api/accounts/stream?provider=claude")):
        with SSEClient(mon.port, path) as client:
            event = client.next_event()
            assert event["event"] == "account"
            frames.append(_normal(event["data"].encode("utf-8")))
    assert frames[0] == frames[1] == frames[2] == _normal(plain_body)


def test_claude_events_carry_no_provider_and_codex_events_do(nodes):
    mixed_home = nodes["mixed_home"]

    def alerts():
        events = [e for e in _events(mixed_home) if e["attributes"]["event.name"] == "account.quota.threshold"]
        handles = {e["attributes"]["account.handle"] for e in events}
        return events if {"acct2", "codex-work"} <= handles else None
    events = wait_until(alerts, timeout=20, message="threshold alerts of both vendors")
    claude = [e for e in events if e["attributes"]["account.handle"] == "acct2"][0]
    codex = [e for e in events if e["attributes"]["account.handle"] == "codex-work"][0]
    assert list(claude["attributes"]) == ["event.name", "event.entity", "event.action", "event.label",
                                          "account.handle", "account.email", "node.name", "ratelimit.window",
                                          "ratelimit.threshold", "ratelimit.pct", "ratelimit.resets_at"]
    assert codex["attributes"]["account.provider"] == "codex"
    assert codex["attributes"]["ratelimit.threshold"] == 90 and codex["attributes"]["ratelimit.pct"] == 92.0
    # The plain node's events for the same Claude account are the same but for their ids and clocks.
    plain = [e for e in _events(nodes["plain_home"]) if e["attributes"].get("account.handle") == "acct2"]
    assert plain and all("account.provider" not in e["attributes"] for e in plain)
    assert [k for k in plain[0]["attributes"] if k != "node.name"] == \
        [k for k in claude["attributes"] if k != "node.name"]


# ---------------------------------------------------------------- ?provider=codex

def test_codex_body_has_the_posture_shape(nodes):
    status, body = nodes["mixed"].get_json("/api/accounts?provider=codex")
    assert status == 200 and list(body) == CONTRACT_KEYS
    assert body["node"] == "a" and body["status"] == "degraded"
    assert [a["label"] for a in body["accounts"]] == ["codex-work", "codex-side"]
    assert body["active"]["label"] == "codex-work" and body["active"]["email"] == "work@x.example"
    assert body["siblingWithHeadroom"] == {"label": "codex-side", "email": "side@x.example"}
    for account in body["accounts"]:
        assert list(account) == ACCOUNT_KEYS + CODEX_EXTRA_KEYS + HEALTH_KEYS
        assert account["provider"] == "codex" and account["error"] is None
        assert account["planType"] == "plus" and account["source"] in ("api", "session")
        for field in ("fiveHour", "sevenDay"):
            assert account[field]["derived"] is True
    work = body["accounts"][0]
    assert work["fiveHour"]["pct"] == 92.0 and work["fiveHour"]["status"] == "allowed_warning"
    assert work["bindingWindow"] == "five_hour" and work["bindingStatus"] == "allowed_warning"


@pytest.mark.parametrize("query", ["provider=", "provider=CODEX", "provider=gemini", "provider=codex&provider=codex",
                                   "provider=%ff", "provider=claude%20", "provider=codex&provider=claude"])
def test_a_bad_provider_is_a_clear_400(nodes, query):
    for path in ("/api/accounts", "/api/accounts/stream"):
        status, headers, body = nodes["mixed"].get("%s?%s" % (path, query))
        assert status == 400, (path, query)
        assert headers["content-type"] == "application/json"
        error = json.loads(body)
        assert error["error"] == "bad_request" and "claude, codex" in error["message"]


def test_codex_forced_refresh_goes_through_the_guard(nodes):
    mixed = nodes["mixed"]
    status, body = mixed.get_json("/api/accounts?provider=codex&refresh=true")
    assert status == 403 and body["reason"] == "refresh_header_missing"
    status, body = mixed.get_json("/api/accounts?refresh=true&provider=codex", {"X-Svc-Refresh": "1"})
    assert status == 200 and body["available"] is True and body["accounts"][0]["provider"] == "codex"


def test_codex_stream_pushes_a_session_sample_without_a_request(nodes, stands):
    reset_5h, reset_7d = resets()
    codex = stands[1]
    mixed, home = nodes["mixed"], nodes["mixed_home"]
    with SSEClient(mixed.port, "/api/accounts/stream?provider=codex") as client:
        first = json.loads(client.next_event()["data"])
        assert list(first) == CONTRACT_KEYS and first["accounts"][1]["label"] == "codex-side"
        calls = codex.total_calls()
        at = time.time()
        write_session(home / "codex-side", at, [token_count_line(at, primary=(55.0, 300, reset_5h),
                                                                 secondary=(31.0, 10080, reset_7d))])

        def pushed():
            event = client.next_event()
            body = json.loads(event["data"]) if event and event.get("event") == "account" else {}
            side = (body.get("accounts") or [{}, {}])[1]
            return body if (side.get("fiveHour") or {}).get("pct") == 55.0 else None
        body = wait_until(pushed, timeout=20, message="a pushed frame with the session sample")
    side = body["accounts"][1]
    assert side["source"] == "session" and side["sevenDay"]["pct"] == 31.0 and body["cached"] is False
    assert codex.total_calls() == calls  # the zero-call path sent nothing


# ---------------------------------------------------------------- both vendors on the other surfaces

def test_trajectory_history_and_metrics_carry_the_provider(nodes):
    mixed = nodes["mixed"]
    wait_until(lambda: len(mixed.get_json("/api/trajectory")[1].get("accounts") or []) == 4, timeout=20,
               message="both vendors on /api/trajectory")
    traj = mixed.get_json("/api/trajectory")[1]
    assert [(a["label"], a["provider"]) for a in traj["accounts"]] == [
        ("acct1", "claude"), ("acct2", "claude"), ("codex-work", "codex"), ("codex-side", "codex")]
    history = mixed.get_json("/api/history?hours=1")[1]["accounts"]
    assert history["acct1"]["provider"] == "claude" and history["codex-work"]["provider"] == "codex"
    assert history["codex-work"]["fiveHour"][-1][1] == 92.0
    text = mixed.get("/metrics")[2].decode("utf-8")
    # account_key (the login's key, docs/fleet.md) is checked in test_metrics_openapi; not here.
    text = re.sub(r',account_key="[0-9a-f]{16}"', '', text)
    account_series = [line for line in text.splitlines() if line.startswith("svc_account_")]
    assert account_series and all('provider="' in line for line in account_series)
    assert 'svc_account_utilization_percent{account="codex-work",provider="codex",window="five_hour"} 92.0' in text
    assert 'svc_account_active{account="acct1",provider="claude"} 1' in text
    assert 'svc_node_status{provider="codex",status="degraded"} 1' in text
    assert 'svc_node_status{status="ok"} 1' in text  # Claude's node-level series keep their labels


def test_heartbeat_has_a_codex_block_only_where_there_are_codex_accounts(nodes, stands):
    tracker = stands[2]

    def beats():
        found = tracker.attachments("OPS-1")
        a, b = found.get("svc://heartbeat/a"), found.get("svc://heartbeat/b")
        ok = a and b and (a["metadata"].get("codex") or {}).get("label") == "codex-work" \
            and (b["metadata"].get("account") or {}).get("label") == "acct1"
        return (a["metadata"], b["metadata"]) if ok else None
    mixed_meta, plain_meta = wait_until(beats, timeout=20, message="both heartbeats")
    assert set(mixed_meta["codex"]) == set(mixed_meta["account"])
    assert mixed_meta["account"]["label"] == "acct1" and mixed_meta["codex"]["five_hour_pct"] == 92.0
    assert mixed_meta["codex"]["status"] == "degraded"
    assert "codex" not in plain_meta

    def fleet_rows():
        rows = {row["host"]: row for row in nodes["mixed"].get_json("/api/fleet")[1]["hosts"]}
        return rows if "codex" in rows.get("a", {}) else None
    rows = wait_until(fleet_rows, timeout=20, message="the fleet report reading the codex block")
    assert rows["a"]["codex"]["label"] == "codex-work" and "codex" not in rows["b"]
    assert rows["a"]["account"]["label"] == rows["b"]["account"]["label"] == "acct1"


def test_hud_and_statusline_pick_the_vendor(nodes):
    mixed = nodes["mixed"]
    base = [sys.executable, "-m", "svcposture", "monitor"]

    def run(args, stdin=b""):
        done = subprocess.run(base + args, env=dict(mixed.env, NO_COLOR="1", SVC_STATUSLINE_BUDGET_MS="30000"),
                              input=stdin, capture_output=True, timeout=30)
        assert done.returncode == 0 and b"Traceback" not in done.stderr
        return done.stdout.decode("utf-8")
    assert "codex-work" in run(["hud", "--once", "--provider", "codex", "--url", mixed.url])
    assert "acct1" in run(["hud", "--once", "--url", mixed.url])
    statusline = ["statusline", "--url", mixed.url]
    assert run(statusline + ["--provider", "codex"]).startswith("codex-work 5h 92% ")
    assert run(statusline + ["--provider=claude"]).startswith("acct1 5h 61.4% ")
    assert run(statusline, b'{"model": {"id": "gpt-5-codex", "display_name": "GPT-5 Codex"}}').startswith("codex-work")
    assert run(statusline, b'{"model": {"id": "claude-opus-4-1", "display_name": "Opus"}}').startswith("acct1")
    assert run(statusline, b'{"rate_limits": {"primary": {"used_percent": 3}}}').startswith("codex-work")
    assert run(statusline, b"not json").startswith("acct1")
    assert run(statusline).startswith("acct1")
    assert "--provider must be claude, codex, copilot, zai or kimi" in run(statusline + ["--provider", "gemini"])


# ---------------------------------------------------------------- a node without Codex, and the tokens

def test_a_node_without_codex_lines_shows_nothing_of_codex(nodes):
    plain, home = nodes["plain"], nodes["plain_home"]
    assert plain.get_json("/api/accounts?provider=codex") == (200, {"available": False, "node": "b"})
    for path in ("/api/accounts", "/api/trajectory", "/api/history?hours=1", "/metrics", "/api/openapi.json"):
        body = plain.get(path)[2]
        if path != "/api/openapi.json":  # the document describes the parameter, whatever the node holds
            assert b"codex" not in body.lower(), path
    assert "codex" not in files_text(home / "svc").lower()
    with SSEClient(plain.port, "/api/trajectory/stream") as client:
        assert "codex" not in client.next_event()["data"].lower()


def test_codex_tokens_never_leave_the_child(nodes):
    mixed, home = nodes["mixed"], nodes["mixed_home"]
    seen = [mixed.stderr_text(), mixed.stdout_text(), files_text(home / "svc")]
    for path in ("/api/accounts?provider=codex", "/api/trajectory", "/api/history", "/metrics", "/api/fleet"):
        seen.append(mixed.get(path)[2].decode("utf-8", "replace"))
    with open("/proc/%d/environ" % mixed.pid, "rb") as fh:
        seen.append(fh.read().decode("utf-8", "replace"))
    text = "\n".join(seen)
    for secret in (CODEX_WORK, CODEX_SIDE, CODEX_REFRESH, "acc-work", "acc-side"):
        assert secret not in text


def test_fleet_page_shows_the_codex_account_of_hosts_that_have_one(nodes, browser):
    from tests.support.browser import wait_for

    mixed = nodes["mixed"]
    wait_until(lambda: "codex" in {r["host"]: r for r in mixed.get_json("/api/fleet")[1]["hosts"]}.get("a", {})
               or None, timeout=20, message="the fleet report reading the codex block")
    browser.get(mixed.url + "/fleet")

    def rows():
        found = browser.execute_script(
            "return Array.from(document.querySelectorAll('#rows .row')).map("
            "function (r) { return [r.querySelector('.host').textContent, r.textContent]; });")
        return found if len(found) == 2 and "codex-work" in "".join(t for _, t in found) else None
    by_host = dict(wait_for(rows, what="both hosts, one with its Codex account"))
    assert "Codex" in by_host["a"] and "codex-work" in by_host["a"] and "acct1" in by_host["a"]
    assert "codex" not in by_host["b"].lower() and "acct1" in by_host["b"]


def test_the_active_codex_account_moves_its_own_status_latch(nodes):
    """Last in the module: it exhausts codex-work (through its session log, no request)."""
    reset_5h, reset_7d = resets()
    mixed, home = nodes["mixed"], nodes["mixed_home"]

    def edges():
        return [e["attributes"] for e in _events(home) if e["attributes"]["event.name"] == "account.status.changed"
                and e["attributes"]["account.handle"] == "codex-work"]
    assert edges() == []
    at = time.time()
    write_session(home / "codex-work", at, [token_count_line(at, primary=(101.0, 300, reset_5h),
                                                             secondary=(40.0, 10080, reset_7d))], name="edge1")
    wait_until(lambda: edges() or None, timeout=20, message="the rejected edge of codex-work")
    # The edge is written before the body is cached: the GET may still see the one before it.
    body = wait_until(lambda: (lambda b: b if b["status"] == "rejected" else None)(
        mixed.get_json("/api/accounts?provider=codex")[1]), timeout=20, message="the rejected body")
    assert body["status"] == "rejected" and body["siblingWithHeadroom"]["label"] == "codex-side"
    later = time.time() + 1
    write_session(home / "codex-work", later, [token_count_line(later, primary=(20.0, 300, reset_5h),
                                                                secondary=(40.0, 10080, reset_7d))], name="edge2")
    wait_until(lambda: len(edges()) == 2 or None, timeout=20, message="the ok edge of codex-work")
    first, second = edges()
    assert (first["account.status"], second["account.status"]) == ("rejected", "ok")
    assert first["account.provider"] == second["account.provider"] == "codex"
    assert first["account.binding_window"] == "five_hour" and first["node.name"] == "a"
    # Claude's edges on the same node carry no provider, and none fired: acct1 stayed ok.
    assert not [e for e in _events(home) if e["attributes"]["event.name"] == "account.status.changed"
                and e["attributes"]["account.handle"].startswith("acct")]
