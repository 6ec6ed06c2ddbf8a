"""guard and switch for Codex accounts (docs/codex.md, docs/steering.md) against a real monitor serving
/api/accounts?provider=codex, its Codex logins answered by the Codex stand-in."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.codex import CodexServer, make_login, usage_reply
from tests.support.home import canary, monitor_env, set_host_name
from tests.support.monitor import start_monitor
from tests.support.waiting import wait_until

from svcposture.envfile.exportline import active_label

WORK, HOME = canary("cxwork"), canary("cxhome")


def run(env, *args):
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", *args], env=env, capture_output=True,
                          timeout=60)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert "Traceback" not in err and WORK not in out + err and HOME not in out + err
    return done.returncode, out, err


def test_guard_and_switch_for_codex_accounts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "cx-node")
    make_login(tmp_path / "work", WORK, account_id="acct-work")
    make_login(tmp_path / "home-login", HOME, account_id="acct-home")
    env_path = home / ".config" / "svc" / "model-accounts.env"
    env_path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    env_path.write_text("CODEX_HOME_WORK=%s  # work@example.com\nCODEX_HOME_HOME=%s  # home@example.com\n"
                        'export CODEX_HOME="$CODEX_HOME_WORK"\n' % (tmp_path / "work", tmp_path / "home-login"))
    env_path.chmod(0o600)
    with CodexServer() as codex:
        codex.set_reply(WORK, usage_reply(95, 20))
        codex.set_reply(HOME, usage_reply(10, 20))
        env = monitor_env(home, "http://127.0.0.1:9", SVC_CODEX_URL=codex.url, SVC_PROBE_INTERVAL_S="5",
                          SVC_POSTURE_TTL_S="5", SVC_GUARD_BUDGET_MS="60000")
        mon = start_monitor(env)
        try:
            env["SVC_MONITOR_PORT"] = str(mon.port)
            wait_until(lambda: (mon.get_json("/api/accounts?provider=codex")[1].get("active") or {}).get("label"),
                       30, message="the Codex posture")
            code, out, _ = run(env, "guard", "--provider", "codex", "--json")
            assert code == 0 and json.loads(out)["account"] == "codex-work" and json.loads(out)["pct"] == 95.0
            assert run(env, "guard", "--provider", "codex", "--reserve", "10")[0] == 1
            code, out, err = run(env, "switch", "--best", "--provider", "codex", "--json")
            assert code == 0, err
            assert (json.loads(out)["from"], json.loads(out)["to"]) == ("codex-work", "codex-home")
            assert active_label(env_path.read_bytes(), "codex") == "codex-home"
            wait_until(lambda: mon.get_json("/api/accounts?provider=codex")[1]["active"]["label"] == "codex-home",
                       20, message="the monitor to show codex-home")
            assert run(env, "guard", "--provider", "codex", "--reserve", "10")[0] == 0
        finally:
            mon.stop()
