"""`svc-monitor init` writes a commented Codex example; uncommented, it is a usable Codex login,
and a file with only Codex lines is a usable file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from svcposture.probe import runner as probe
from svcposture.paths import Paths
from tests.support.cli import assert_clean, cli
from tests.support.codex import CodexServer, make_login, usage_reply
from tests.support.home import REPO, accounts_path, canary


def _check(env) -> dict:
    done = subprocess.run([sys.executable, "-m", "svcposture.probe", "check", "--json"], env=env, cwd=str(REPO),
                          capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout)


def test_init_writes_a_commented_codex_example_that_works_uncommented(home: Path, env: dict) -> None:
    done = cli(env, "monitor", "init", "--host-name", "node-a")
    assert_clean(done)
    assert done.returncode == 0, done.stderr
    path = accounts_path(home)
    text = path.read_text()
    assert '# CODEX_HOME_WORK="$HOME/.codex"  # you@example.com' in text
    assert '# export CODEX_HOME="$CODEX_HOME_WORK"' in text
    # Commented out, it is no Codex login at all: a node without Codex shows nothing about it.
    assert "codex" not in _check(env)
    token = canary("codexinit")
    make_login(home / ".codex", token)
    uncommented = text.replace('# CODEX_HOME_WORK=', 'CODEX_HOME_WORK=').replace(
        '# export CODEX_HOME=', 'export CODEX_HOME=')
    path.write_text(uncommented)
    check = _check(env)
    assert check["codex"] == {"usable": ["codex-work"], "unusable": [], "active": "codex-work",
                              "duplicateActive": []}
    assert check["claude"]["unusable"] == ["acct1", "acct2"]
    # Only the Codex lines left: still a usable file, Claude's side disabled.
    only = "\n".join(l for l in uncommented.splitlines() if "MODEL_" not in l) + "\n"
    path.write_text(only)
    with CodexServer() as server:
        server.set_reply(token, usage_reply(55, 66))
        env = dict(env, SVC_CODEX_URL=server.url)
        report = probe.run_headers(Paths(home, environ=env), env)
    assert report["available"] is True and "claude" not in report
    row = report["codex"]["accounts"][0]
    assert row["label"] == "codex-work" and row["active"] is True and row["email"] == "you@example.com"
    assert row["fiveHour"]["pct"] == 55.0 and row["sevenDay"]["pct"] == 66.0
    assert token not in json.dumps(report)
    assert os.stat(str(path)).st_mode & 0o777 == 0o600


def test_doctor_names_the_codex_logins(home: Path, env: dict) -> None:
    from tests.support.codex import write_codex_accounts

    login = home / ".codex"
    make_login(login, canary("doctor"))
    write_codex_accounts(accounts_path(home), [("WORK", str(login), None), ("SIDE", str(login), None)],
                         active="WORK", extra="CODEX_HOME_NONE=\n")

    def accounts_check() -> dict:
        done = cli(env, "cluster", "doctor", "--json")
        assert_clean(done)
        report = json.loads(done.stdout)
        return next(c for c in report["checks"] if c["name"] == "accounts-env")

    found = accounts_check()
    # Both lines name the same directory, so both match CODEX_HOME: the doctor warns.
    assert found["status"] == "WARN" and "several Codex lines are the active one (codex-work, codex-side)" \
        in found["detail"]
    other = home / ".codex-side"
    make_login(other, canary("doctor2"))
    write_codex_accounts(accounts_path(home), [("WORK", str(login), None), ("SIDE", str(other), None)],
                         active="WORK", extra="CODEX_HOME_NONE=\n")
    found = accounts_check()
    assert found["status"] == "PASS", found
    assert "Codex: 2 usable accounts (codex-work, codex-side), unusable (empty or placeholder): codex-none, " \
           "active codex-work" in found["detail"]
