"""GET /api/advice (docs/steering.md) on a real monitor, and the field's cases through the real processes.

- An exhausted account whose window resets in 30 s is waited for: /api/advice, guard's hold line and
  the status line say wait; none of them names a sibling.
- A sibling at 33 % (with the vendor's early warning word) is named over one at 91 %: by /api/advice,
  `switch --best --dry-run` and the status line (the contract's siblingWithHeadroom keeps its own rule).
- Codex: siblingWithHeadroom is the advice's first candidate, and a sibling with a model's limit at
  100 % is none.
- The route itself: cached with the posture (same probedAt, no provider call), 400 on a bad provider,
  HEAD without a body, the read guard, and the disabled body on a node without Codex accounts.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from tests.support.codex import CodexServer, make_login, usage_reply, window
from tests.support.home import canary, monitor_env, node_env, set_host_name
from tests.support.monitor import get_request, raw_http, start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

TOK1, TOK2, TOK3 = canary("adv1"), canary("adv2"), canary("adv3")
CXA, CXB, CXC = canary("advcxa"), canary("advcxb"), canary("advcxc")
QUIET = {"SVC_PROBE_INTERVAL_S": "300", "SVC_POSTURE_TTL_S": "300", "SVC_REFRESH_FLOOR_S": "0",
         "SVC_STATUSLINE_BUDGET_MS": "5000", "SVC_GUARD_BUDGET_MS": "5000"}
KEYS = {"available", "node", "generatedAt", "probedAt", "reservePct", "provider", "active", "advice", "to", "waitS",
        "waitUntil", "reason", "ranked"}


def cli(env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", *args], env=env, capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert b"Traceback" not in done.stderr, done.stderr
    for tok in (TOK1, TOK2, TOK3, CXA, CXB, CXC):
        assert tok.encode() not in done.stdout + done.stderr
    return done


@pytest.fixture()
def claude(tmp_path: Path) -> Iterator[Dict[str, Any]]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with ProviderServer() as provider:
        for tok in (TOK1, TOK2, TOK3):
            provider.set_account(tok, five_hour=(0.10, "allowed"), seven_day=(0.10, "allowed"))
        env = node_env(home, provider.url, [("ACCT1", TOK1, "ada@example.com"), ("ACCT2", TOK2, "bob@example.com"),
                                            ("ACCT3", TOK3, "cy@example.com")], active="ACCT1", extra=QUIET)
        mon = start_monitor(env)
        try:
            yield {"mon": mon, "provider": provider, "env": dict(env, SVC_MONITOR_PORT=str(mon.port)), "home": home}
        finally:
            mon.stop()


def probe(node: Dict[str, Any]) -> Dict[str, Any]:
    status, body = node["mon"].get_json("/api/accounts?refresh=true", {"X-Svc-Refresh": "1"})
    assert status == 200 and body["cached"] is False, body
    return body


def test_a_reset_30_s_away_is_waited_for(claude: Dict[str, Any]) -> None:
    claude["provider"].set_account(TOK1, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.4, "allowed"),
                                   representative_claim="five_hour", reset_5h=time.time() + 30)
    posture = probe(claude)
    status, advice = claude["mon"].get_json("/api/advice")
    assert status == 200 and set(advice) == KEYS and advice["probedAt"] == posture["probedAt"]
    assert advice["advice"] == "wait" and advice["to"] is None and 0 < advice["waitS"] <= 31, advice
    # The siblings are ranked all the same, for whoever wants to look.
    assert [r["label"] for r in advice["ranked"]] == ["acct2", "acct3"]
    guard = cli(claude["env"], "guard")
    assert guard.returncode == 1 and "advice: wait" in guard.stderr.decode(), guard.stderr
    line = cli(claude["env"], "statusline", "--no-color").stdout.decode()
    assert "wait " in line and "for the reset" in line and "next" not in line, line
    hud = cli(claude["env"], "hud", "--once").stdout.decode()
    assert "EXHAUSTED -> wait " in hud and "acct2" not in hud and "acct3" not in hud, hud


def test_the_sibling_at_33_pct_is_named_over_the_one_at_91_pct(claude: Dict[str, Any]) -> None:
    claude["provider"].set_account(TOK1, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.4, "allowed"),
                                   representative_claim="five_hour", reset_5h=time.time() + 3 * 3600)
    claude["provider"].set_account(TOK2, five_hour=(0.10, "allowed"), seven_day=(0.91, "allowed"))
    claude["provider"].set_account(TOK3, status="allowed_warning", five_hour=(0.33, "allowed_warning"),
                                   seven_day=(0.20, "allowed"))
    posture = probe(claude)
    advice = claude["mon"].get_json("/api/advice")[1]
    assert advice["advice"] == "switch" and advice["to"] == {"label": "acct3", "email": "cy@example.com"}, advice
    assert [(r["label"], r["headroomPct"]) for r in advice["ranked"]] == [("acct3", 67.0), ("acct2", 9.0)]
    best = cli(claude["env"], "switch", "--best", "--dry-run", "--json")
    assert best.returncode == 0 and json.loads(best.stdout)["to"] == "acct3", best.stderr
    assert cli(claude["env"], "statusline", "--no-color").stdout.decode().rstrip().endswith("| next acct3")
    # The contract asks for a sibling with headroom: the posture names the advice's account too.
    assert posture["siblingWithHeadroom"]["label"] == "acct3"


def test_the_route_is_cached_with_the_posture_and_guarded_like_it(claude: Dict[str, Any]) -> None:
    mon, provider = claude["mon"], claude["provider"]
    posture = probe(claude)
    calls = provider.message_calls()
    bodies = [mon.get_json("/api/advice")[1] for _ in range(20)]
    assert {b["probedAt"] for b in bodies} == {posture["probedAt"]} and provider.message_calls() == calls
    assert bodies[0]["advice"] == "stay" and bodies[0]["active"]["label"] == "acct1"
    # refresh=true forces nothing here: the advice is read-only.
    assert mon.get_json("/api/advice?refresh=true")[1]["probedAt"] == posture["probedAt"]
    assert provider.message_calls() == calls
    for bad in ("provider=x", "provider=", "provider=claude&provider=codex", "provider=CODEX"):
        status, body = mon.get_json("/api/advice?" + bad)
        assert status == 400 and body["error"] == "bad_request", bad
    status, headers, body = raw_http(mon.port, get_request("/api/advice", "127.0.0.1", method="HEAD"))
    assert status == 200 and body == b"" and headers["content-type"].startswith("application/json")
    # A node without Codex accounts: the disabled body.
    assert mon.get_json("/api/advice?provider=codex")[1] == {"available": False, "node": posture["node"]}


def test_the_read_guard_covers_the_route(tmp_path: Path, provider: Any, monitors: Any) -> None:
    env = node_env(tmp_path, provider.url, extra={"SVC_MONITOR_READ_GUARD": "1"})
    m = monitors.start(env, ["--no-probe"])
    status, _, body = raw_http(m.port, get_request("/api/advice", "evil.com:%d" % m.port))
    assert status == 403 and json.loads(body)["reason"] == "untrusted_host"
    status, _, body = raw_http(m.port, get_request("/api/advice", "localhost:%d" % m.port, ["Origin: null"]))
    assert status == 403 and json.loads(body)["reason"] == "untrusted_origin"


def test_codex_sibling_with_headroom_is_the_first_candidate(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "cx-advice")
    lines = []
    for name, tok, acct in (("A", CXA, "acct-a"), ("B", CXB, "acct-b"), ("C", CXC, "acct-c")):
        make_login(tmp_path / name, tok, account_id=acct)
        lines.append("CODEX_HOME_%s=%s  # %s@example.com" % (name, tmp_path / name, name.lower()))
    env_path = home / ".config" / "svc" / "model-accounts.env"
    env_path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    env_path.write_text("\n".join(lines) + '\nexport CODEX_HOME="$CODEX_HOME_A"\n')
    env_path.chmod(0o600)
    now = int(time.time())
    model = [{"limit_name": "GPT-5.3-Codex-Spark", "metered_feature": "codex_bengalfox",
              "rate_limit": {"primary_window": window(100, 18000, reset_at=now + 3600), "secondary_window": None}}]
    with CodexServer() as codex:
        codex.set_reply(CXA, usage_reply(100, 50, reset_5h=now + 3 * 3600, reset_7d=now + 86400))
        # b has the lowest pct on its account windows, but one of its model limits is spent.
        codex.set_reply(CXB, usage_reply(5, 5, reset_5h=now + 3600, reset_7d=now + 86400, additional=model))
        codex.set_reply(CXC, usage_reply(30, 20, reset_5h=now + 3600, reset_7d=now + 86400))
        env = monitor_env(home, "http://127.0.0.1:9", SVC_CODEX_URL=codex.url, **QUIET)
        mon = start_monitor(env)
        try:
            body = wait_until(lambda: (lambda b: b if len([a for a in b.get("accounts") or [] if a.get("fiveHour")])
                                       == 3 else None)(mon.get_json("/api/accounts?provider=codex")[1]), 30,
                              message="the three Codex accounts measured")
            advice = mon.get_json("/api/advice?provider=codex")[1]
            assert advice["provider"] == "codex" and advice["probedAt"] == body["probedAt"]
            assert advice["advice"] == "switch" and advice["to"]["label"] == "codex-c", advice
            assert [r["label"] for r in advice["ranked"] if r["candidate"]] == ["codex-c"]
            # Every other account is listed, each with its health.
            assert [(r["label"], r["health"]) for r in advice["ranked"]] == [("codex-c", "ok"), ("codex-b", "ok")]
            assert body["siblingWithHeadroom"] == {"label": "codex-c", "email": "c@example.com"}
            best = cli(dict(env, SVC_MONITOR_PORT=str(mon.port)), "switch", "--best", "--provider", "codex",
                       "--dry-run", "--json")
            assert best.returncode == 0 and json.loads(best.stdout)["to"] == "codex-c", best.stderr
        finally:
            mon.stop()


def test_switch_best_never_follows_a_hostile_advice(tmp_path: Path) -> None:
    from tests.support.rawserver import RawServer, http_reply
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = node_env(home, "http://127.0.0.1:9", [("ACCT1", TOK1, None), ("ACCT2", TOK2, None)], active="ACCT1",
                   extra=QUIET)
    window = {"pct": 100.0, "resetsAt": "2030-01-01T00:00:00.000Z", "status": "rejected"}
    acct1 = {"label": "acct1", "email": None, "active": True, "overallStatus": "rejected",
             "representativeClaim": "five_hour", "bindingWindow": "five_hour", "bindingStatus": "rejected",
             "fiveHour": window, "sevenDay": None, "error": None}
    acct2 = dict(acct1, label="acct2", active=False, overallStatus="allowed", bindingStatus="allowed",
                 fiveHour=dict(window, pct=10.0, status="allowed"))
    probed = int(time.time() * 1000)
    posture = {"available": True, "node": "n", "generatedAt": "2030-01-01T00:00:00.000Z", "probedAt": probed,
               "cached": True, "status": "rejected", "active": acct1, "accounts": [acct1, acct2],
               "siblingWithHeadroom": None}
    hostile = [
        {"provider": "claude", "advice": "switch", "probedAt": probed,
         "ranked": [{"label": "acct9", "headroomPct": 99, "reachesReset": True}]},
        {"provider": "claude", "advice": "none", "probedAt": probed, "ranked": []},
        {"provider": "claude", "advice": "switch", "probedAt": probed, "ranked": [{"label": 7}]},
        [1, 2], "x", {"probedAt": probed},
    ]
    for advice in hostile:
        with RawServer({"/api/accounts": http_reply(200, posture), "/api/advice": http_reply(200, advice)}) as server:
            done = cli(env, "switch", "--best", "--dry-run", "--json", "--url", server.url)
        # Only an account of the posture: acct2 (the advice's own, or the one computed from the posture).
        if done.returncode == 0:
            assert json.loads(done.stdout)["to"] == "acct2", (advice, done.stdout)
        else:
            assert done.returncode == 1 and "acct9" not in done.stderr.decode(), (advice, done.stderr)
