"""One advice, every surface (docs/steering.md): at the same moment, against one real monitor and the
stand-in provider, the dashboard's banner (headless Chromium), the status line, `hud --once`,
/api/accounts, /api/advice, `switch --best --dry-run` and guard's hold line all name the same account.

acct1 (active) is exhausted, its 5-hour window resetting in three hours; acct2 and acct3 have
headroom, acct3 the most. Each surface is read once the monitor has probed, and the probe
time is the same before and after the reads (long clocks: nothing probes in between).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from tests.support.browser import wait_for
from tests.support.home import canary, node_env
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

TOK1, TOK2, TOK3 = canary("one1"), canary("one2"), canary("one3")
QUIET = {"SVC_PROBE_INTERVAL_S": "300", "SVC_POSTURE_TTL_S": "300", "SVC_REFRESH_FLOOR_S": "0",
         "SVC_STATUSLINE_BUDGET_MS": "5000", "SVC_GUARD_BUDGET_MS": "5000"}


def cli(env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", *args], env=env, capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    for tok in (TOK1, TOK2, TOK3):
        assert tok.encode() not in done.stdout + done.stderr
    assert b"Traceback" not in done.stderr, done.stderr
    return done


def test_every_surface_names_the_same_account(browser: Any, tmp_path: Path, monitors: Any) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with ProviderServer() as provider:
        provider.set_account(TOK1, status="rejected", five_hour=(1.0, "rejected"), seven_day=(0.40, "allowed"),
                             representative_claim="five_hour", reset_5h=time.time() + 3 * 3600)
        provider.set_account(TOK2, five_hour=(0.60, "allowed"), seven_day=(0.30, "allowed"))
        provider.set_account(TOK3, five_hour=(0.20, "allowed"), seven_day=(0.25, "allowed"))
        env = node_env(home, provider.url, [("ACCT1", TOK1, "ada@example.com"), ("ACCT2", TOK2, "bob@example.com"),
                                            ("ACCT3", TOK3, "cy@example.com")], active="ACCT1", extra=QUIET)
        mon = monitors.start(env)
        env = dict(env, SVC_MONITOR_PORT=str(mon.port))
        posture = wait_until(lambda: (lambda b: b if b.get("status") == "rejected" else None)(
            mon.get_json("/api/accounts")[1]), 30, message="acct1 rejected")
        probed = posture["probedAt"]
        env_file = home / ".config" / "svc" / "model-accounts.env"
        before = env_file.read_bytes()
        calls = provider.message_calls(), provider.usage_calls()

        browser.get(mon.url + "/")
        wait_for(lambda: "Switch to" in browser.find_element("id", "banner").text, timeout=30, what="the banner")
        banner = browser.find_element("id", "banner").text
        statusline = cli(env, "statusline", "--url", mon.url, "--no-color").stdout.decode()
        hud = cli(env, "hud", "--once", "--url", mon.url).stdout.decode()
        accounts = mon.get_json("/api/accounts")[1]
        advice = mon.get_json("/api/advice")[1]
        best = cli(env, "switch", "--best", "--dry-run", "--json", "--url", mon.url)
        guard = cli(env, "guard", "--url", mon.url)

        assert mon.get_json("/api/accounts")[1]["probedAt"] == probed == advice["probedAt"], "a probe in between"
        named: List[str] = []
        assert advice["advice"] == "switch", advice
        named.append(advice["to"]["label"])
        named.append(accounts["siblingWithHeadroom"]["label"])
        assert "Switch to acct3 (cy@example.com)" in banner, banner
        named.append("acct3")
        assert statusline.rstrip("\n").endswith("| next acct3"), statusline
        named.append("acct3")
        assert "EXHAUSTED -> switch to acct3 <cy@example.com>" in hud, hud
        named.append("acct3")
        assert best.returncode == 0, best.stderr
        named.append(json.loads(best.stdout)["to"])
        assert guard.returncode == 1 and "advice: switch to acct3" in guard.stderr.decode(), guard.stderr
        named.append("acct3")
        assert named == ["acct3"] * len(named), named
        # Read-only: the dry run wrote nothing, and nobody asked the provider on the way.
        assert env_file.read_bytes() == before
        assert (provider.message_calls(), provider.usage_calls()) == calls
