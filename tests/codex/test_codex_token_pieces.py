"""A Codex usage reply cannot carry a token out in pieces (docs/codex.md): any string of the reply
that shares 8 or more consecutive characters with a token of the login is dropped. Through a real
monitor and the stand-in Codex server, with the canary token scheme of the leak tests."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List

from tests.support.codex import CodexServer, make_login, usage_reply
from tests.support.home import accounts_path, monitor_env, set_host_name, write_accounts
from tests.support.monitor import Monitor, http_get
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

CORE = "CANARYCX" + os.urandom(8).hex().upper()


def canary(kind: str, label: str) -> str:
    return "%s-%s-%s" % (kind, CORE, label)


def _split_reply(token: str) -> Dict[str, object]:
    """A hostile reply that carries the whole token in pieces: each window name holds 10 of its
    characters wrapped in one extra character each side, so no name is a part of the token and
    none holds it, and the plan holds the first piece the same way."""
    pieces = [token[i:i + 10] for i in range(0, len(token), 10)]
    body = usage_reply(12.5, 40, plan="x%sx" % pieces[0])
    body["additional_rate_limits"] = [{"limit_name": "w%sw" % piece, "rate_limit": {
        "primary_window": {"used_percent": 1 + i, "limit_window_seconds": 3600}}} for i, piece in enumerate(pieces)]
    return body


def _shared_runs(token: str, text: str, run: int = 8) -> List[str]:
    return sorted({token[i:i + run] for i in range(len(token) - run + 1) if token[i:i + run] in text})


def test_a_token_split_across_window_names_never_reaches_the_api(tmp_path: Path) -> None:
    """Any string of a usage reply that shares 8 or more consecutive characters with a token is
    dropped, so a reply cannot carry a token out in pieces (docs/codex.md: any part of a token)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "split-node")
    claude = canary("sk-ant-oat01", "claude")
    access = canary("eyJhbGciOi", "split")
    login = home / "codex-split"
    with CodexServer() as codex, ProviderServer() as provider:
        provider.set_account(claude)
        make_login(login, access, "acct-split", refresh=canary("rt", "split"), id_token=canary("eyJpZCI6", "split"))
        codex.set_reply(access, _split_reply(access), 200)
        write_accounts(accounts_path(home), [("ACCT1", claude, "a@example.com")], active="ACCT1",
                       extra='CODEX_HOME_SPLIT="%s"  # split@example.com\nexport CODEX_HOME="$CODEX_HOME_SPLIT"\n'
                       % login)
        env = monitor_env(home, provider.url, SVC_CODEX_URL=codex.url, SVC_PROBE_INTERVAL_S="0.5",
                          SVC_REFRESH_FLOOR_S="0.05")
        monitor = Monitor(env).start(tmp_path / "monitor.log")
        try:
            def polled() -> object:
                status, _, raw = http_get(monitor.url, "/api/accounts?provider=codex")
                body = json.loads(raw)
                rows = [a for a in body.get("accounts") or [] if a.get("label") == "codex-split"]
                return raw.decode() if rows and (rows[0].get("extraWindows") or []) else None
            text = wait_until(polled, 30, message="the split login's windows on /api/accounts")
        finally:
            monitor.stop()
    body = json.loads(text)
    row = next(a for a in body["accounts"] if a["label"] == "codex-split")
    # The windows themselves stay (their numbers are the vendor's); only the names go.
    assert sorted(w["pct"] for w in row["extraWindows"]) == [1 + i for i in range(len(row["extraWindows"]))]
    assert len(row["extraWindows"]) == len(range(0, len(access), 10))
    assert _shared_runs(access, text) == [], "pieces of the token on /api/accounts"
