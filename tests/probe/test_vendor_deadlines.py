"""One vendor's slow endpoint never holds another's posture (docs/vendors.md), through a real monitor.

The Codex usage endpoint here answers its head at once, then trickles the
body one byte every 0.5 s (a reply that would take minutes). Claude's
posture must be served while that exchange is still under way, and the
Codex login's exchange must end at its own deadline (1.5 request timeouts),
well before the sweep's.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from tests.support.codex import make_login, token_count_line, usage_reply, write_session
from tests.support.home import accounts_path, canary, monitor_env, write_accounts
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.rawserver import RawServer, Trickle
from tests.support.waiting import wait_until

from svcposture.codex.errors import CODEX_MESSAGES

CLAUDE_TOKEN = canary("slowcx")
CODEX_TOKEN = "codex-access-CANARY-slow-" + "5" * 12
USAGE_PATH = "/backend-api/wham/usage"


def test_a_trickling_codex_endpoint_does_not_hold_claudes_posture(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    make_login(home / "codex-work", CODEX_TOKEN, "acc-work")
    write_accounts(accounts_path(home), [("ACCT1", CLAUDE_TOKEN, "one@x.example")], active="ACCT1",
                   extra='CODEX_HOME_WORK="%s"  # work@x.example\nexport CODEX_HOME="$CODEX_HOME_WORK"\n'
                         % (home / "codex-work"))
    now = int(time.time())
    trickle = Trickle(json.dumps(usage_reply(40, 20, reset_5h=now + 3600, reset_7d=now + 86400)).encode())
    with ProviderServer() as provider, RawServer({USAGE_PATH: trickle}) as codex:
        provider.set_account(CLAUDE_TOKEN, five_hour=(0.25, "allowed"), seven_day=(0.10, "allowed"))
        env = monitor_env(home, provider.url, SVC_CODEX_URL=codex.url, SVC_PROBE_INTERVAL_S="300",
                          SVC_POSTURE_TTL_S="300", SVC_PROBE_DEADLINE_S="40", SVC_PROBE_TIMEOUT_S="10")
        mon = start_monitor(env)
        try:
            assert trickle.started.wait(30), "the Codex usage request never came"
            # However long it takes: what is checked is what the Codex exchange was doing meanwhile.
            status, _headers, raw = mon.get("/api/accounts", timeout=120)
            body = json.loads(raw)
            # Claude's posture came while the Codex reply was still trickling to a live client.
            assert status == 200 and body["available"] is True and body["active"]["label"] == "acct1"
            assert not trickle.client_gone() and not trickle.stop.is_set()
            # The Codex exchange ends at its own deadline, not the sweep's.
            status, _headers, raw = mon.get("/api/accounts?provider=codex", timeout=120)
            cx = json.loads(raw)
            account = cx["accounts"][0]
            assert (account["label"], account["error"]["kind"]) == ("codex-work", "timeout")
            assert account["error"]["message"] == CODEX_MESSAGES["timeout"].no_answer
            wait_until(trickle.client_gone, 15, message="the Codex child to let the trickled reply go")
        finally:
            trickle.stop.set()
            mon.stop()


def test_a_switch_during_a_slow_exchange_is_shown_when_it_ends(tmp_path: Path) -> None:
    """The file changed while the Codex child ran (it may have sourced the old one): one more run follows
    at once, instead of the next periodic probe (here 300 s away)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    make_login(home / "codex-work", CODEX_TOKEN, "acc-work")
    make_login(home / "codex-side", CODEX_TOKEN + "-side", "acc-side")
    at = time.time()
    write_session(home / "codex-side", at, [token_count_line(at, primary=(10.0, 300, int(at) + 3600))])
    lines = ('CODEX_HOME_WORK="%s"  # work@x.example\nCODEX_HOME_SIDE="%s"  # side@x.example\n'
             % (home / "codex-work", home / "codex-side"))
    write_accounts(accounts_path(home), [("ACCT1", CLAUDE_TOKEN, None)], active="ACCT1",
                   extra=lines + 'export CODEX_HOME="$CODEX_HOME_WORK"\n')
    trickle = Trickle(json.dumps(usage_reply(40, 20)).encode())
    with ProviderServer() as provider, RawServer({USAGE_PATH: trickle}) as codex:
        provider.set_account(CLAUDE_TOKEN, five_hour=(0.25, "allowed"), seven_day=(0.10, "allowed"))
        env = monitor_env(home, provider.url, SVC_CODEX_URL=codex.url, SVC_PROBE_INTERVAL_S="300",
                          SVC_POSTURE_TTL_S="300", SVC_PROBE_DEADLINE_S="40", SVC_PROBE_TIMEOUT_S="4")
        mon = start_monitor(env)
        try:
            assert trickle.started.wait(30), "the Codex usage request never came"
            write_accounts(accounts_path(home), [("ACCT1", CLAUDE_TOKEN, None)], active="ACCT1",
                           extra=lines + 'export CODEX_HOME="$CODEX_HOME_SIDE"\n')

            def active():
                status, _headers, raw = mon.get("/api/accounts?provider=codex", timeout=60)
                return ((json.loads(raw).get("active") or {}).get("label") == "codex-side") or None

            wait_until(active, 60, 0.2, "codex-side active after the slow exchange ended")
        finally:
            trickle.stop.set()
            mon.stop()
