"""schemathesis over every route of a node with both vendors: the document's Codex posture,
`provider` parameter and 400 answer must be what the server does (see test_schemathesis)."""
from __future__ import annotations

import json

from tests.support.codex import CodexServer, make_login, usage_reply
from tests.support.home import accounts_path, canary, node_env, write_accounts
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.monitor.test_schemathesis import SELF, _schemathesis_or_skip, st_run

TOK1 = canary("stcx1")
CODEX_TOKEN = "codex-access-CANARY-st-" + "5" * 12


def test_schemathesis_finds_nothing_on_a_node_with_codex_accounts(tmp_path):
    _schemathesis_or_skip()
    home = tmp_path / "home"
    home.mkdir()
    with ProviderServer() as provider, CodexServer() as codex:
        provider.set_account(TOK1, five_hour=(0.30, "allowed"))
        codex.set_reply(CODEX_TOKEN, usage_reply(95, 20), account_id="acc-st")
        make_login(home / "codex-st", CODEX_TOKEN, "acc-st")
        write_accounts(accounts_path(home), [("ACCT1", TOK1, "one@example.com")], active="ACCT1",
                       extra='CODEX_HOME_ST="%s"  # st@example.com\nexport CODEX_HOME="$CODEX_HOME_ST"\n'
                             % (home / "codex-st"))
        env = node_env(home, provider.url, extra={"SVC_SSE_KEEPALIVE_S": "1", "SVC_CODEX_URL": codex.url})
        monitor = start_monitor(env)
        try:
            assert monitor.get_json("/api/accounts?provider=codex&refresh=true",
                                    {"X-Svc-Refresh": "1"})[1]["active"]["label"] == "codex-st"
            listed = {(method.upper(), path) for path, item in json.loads(monitor.get("/api/openapi.json")[2])
                      ["paths"].items() for method in item if method in ("get", "head")}
            done, tested = st_run(monitor.url, tmp_path)
            out = done.stdout + done.stderr
            assert done.returncode == 0, out[-6000:]
            assert "No issues found" in out, out[-6000:]
            assert tested == listed - {SELF}, (sorted(listed - tested), sorted(tested - listed))
        finally:
            code = monitor.stop()
    log = monitor.stderr_text()
    assert code == 0 and "Traceback" not in log, log
    assert CODEX_TOKEN not in out + log and TOK1 not in out + log
