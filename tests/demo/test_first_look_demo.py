"""The demo as a new user starts it (docs/first-look.md): commands that run as printed, a
simulated fleet on /fleet, a taken --port refused; and the exhausted banner's
recommendation, which follows the forecasts."""
from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
import time

import pytest

from svcposture.demo import main as demo
from svcposture.demo.fleet import simulated_report
from svcposture.steering.advice import iso_ms
from tests.support.browser import chromium, wait_for
from tests.support.firstlook import Demo, get_json
from tests.support.home import REPO, clean_env
from tests.support.monitor import start_monitor


def test_printed_commands_run_as_written_and_the_fleet_is_simulated(tmp_path):
    started = Demo(tmp_path / "home", ["--port", "0"]).wait_ready()
    try:
        text = started.text()
        hud = [l for l in started.lines if "terminal HUD: " in l][0].split("terminal HUD: ", 1)[1]
        status = [l for l in started.lines if "status line: " in l][0].split("status line: ", 1)[1]
        assert not hud.startswith("svc-monitor") and " -m svcposture monitor hud --url " + started.url in hud
        env = clean_env(tmp_path)
        done = subprocess.run(shlex.split(hud) + ["--once"], cwd=str(REPO), env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith("svc demo-node | "), (done.stdout, done.stderr)
        done = subprocess.run(shlex.split(status), cwd=str(REPO), env=env, capture_output=True, text=True,
                              input="", timeout=60)
        assert done.returncode == 0 and "5h " in done.stdout and "monitor not running" not in done.stdout, done
        assert "/fleet" in text
        # The fleet in a terminal, as printed: the page's words, durations and order (exhausted first).
        fleet_cmd = [l for l in started.lines if "fleet in a terminal: " in l][0].split("fleet in a terminal: ", 1)[1]
        done = subprocess.run(shlex.split(fleet_cmd), cwd=str(REPO), env=env, capture_output=True, text=True,
                              timeout=60)
        lines = done.stdout.splitlines()
        assert done.returncode == 3 and "Traceback" not in done.stderr, done  # a host is stale, one missing
        assert lines[0].startswith("Fleet of the monitor at %s: heartbeats of the demo's simulated fleet, read at "
                                   % started.url), lines
        assert lines[1] == "6 hosts: 4 live, 1 stale, 1 missing, 1 not in roster", lines
        assert "source:" not in done.stdout and "anchor:" not in done.stdout
        assert not re.search(r"\d\.\d+s\b", done.stdout), done.stdout  # durations as the pages write them: no `357.2s`
        table = lines[lines.index("") + 1:]
        assert table[0].split() == ["STATE", "HOST", "HEARTBEAT", "ACTIVE", "ACCOUNT", "5H", "·", "RESETS", "IN",
                                    "7D", "·", "RESETS", "IN", "REACHES", "100", "%"], table
        assert table[1].split()[:2] == ["live", "staging-1"] and "acct1 rejected" in table[1], table
        assert "at 100% now" in table[1] and re.search(r"  \d+(m \d+s|s) ago  ", table[1]), table
        assert [r.split()[1] for r in table[1:7]] == ["staging-1", "build-02", "ci-runner-3", "laptop-ada", "gpu-box",
                                                      "build-01"], table
        fleet = get_json(started.url + "/api/fleet")
        assert "error" not in fleet and fleet["source"] == "demo"
        assert len(fleet["hosts"]) >= 5
        assert {h["state"] for h in fleet["hosts"]} >= {"live", "stale", "missing"}
        with_account = [h for h in fleet["hosts"] if h["account"]]
        assert len(with_account) >= 4 and any(h["account"]["wall_at"] for h in with_account)
    finally:
        assert started.stop() == 0


def test_a_taken_port_is_an_error(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "demo", "--port", str(port)],
                              cwd=str(REPO), env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    finally:
        holder.close()
    assert done.returncode != 0
    assert "port %d" % port in done.stderr and "taken" in done.stderr
    assert "dashboard at" not in done.stdout


@pytest.mark.parametrize("argv0, expected", [
    ("/usr/lib/python3/site-packages/svcposture/__main__.py", " -m svcposture monitor"),
    ("/home/u/.local/bin/svc-monitor", "svc-monitor"),
    ("/usr/local/bin/svc", "svc monitor"),
    ("", " -m svcposture monitor"),
])
def test_invoked_as(argv0, expected):
    got = demo.invoked_as(argv0, sys.executable)
    assert got.endswith(expected) if expected.startswith(" ") else got == expected


def test_simulated_fleet_moves_with_the_clock():
    first = simulated_report(1000.0, 1000.0)
    later = simulated_report(1000.0, 1300.0)
    assert [h["host"] for h in first["hosts"]] == [h["host"] for h in later["hosts"]]
    assert first["hosts"][0]["account"]["five_hour_pct"] != later["hosts"][0]["account"]["five_hour_pct"]


# The two waits the dashboard shows: the banner's and the advice box's, read in one go.
WAITS_JS = """
function wait(id) { var m = document.getElementById(id).textContent.match(/Wait ((\\d+[dhm]\\s?)*\\d+[dhms])/);
                    return m ? m[1].replace(/\\s/g, " ") : null; }
return {banner: wait("banner"), advice: wait("advice")};
"""


def _seconds(text):
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return sum(int(part[:-1]) * units[part[-1]] for part in text.split())


def test_banner_waits_for_a_reset_seconds_away_rather_than_switching(tmp_path):
    # acct1 exhausted (its 5-hour window), which resets a few minutes later; acct2 has headroom now but
    # its forecast hits 100 % before its reset; acct3 is steady at 91 % of its week. Leaving an
    # account that comes back in seconds costs more than it saves: the banner says to wait,
    # as /api/advice does, in the words people use.
    clock = [time.time()]
    provider = demo.SimulatedProvider(clock=lambda: clock[0]).start()
    node = demo.DemoNode(provider.url, base_environ=clean_env(REPO), started=provider.started)
    mon = start_monitor(dict(node.environ, SVC_REFRESH_FLOOR_S="0", SVC_QUOTA_SAMPLER="0"))
    try:
        clock[0] += 100
        body = mon.get_json("/api/accounts?refresh=true", {"X-Svc-Refresh": "1"})[1]
        assert body["status"] == "rejected"
        wait_until_forecast = lambda: any(  # noqa: E731
            a["label"] == "acct2" and (a["fiveHour"].get("forecast") or {}).get("beforeReset")
            for a in get_json(mon.url + "/api/trajectory").get("accounts", []))
        wait_for(wait_until_forecast, timeout=30, what="acct2's forecast before its reset")
        with chromium(1280, 900) as driver:
            driver.get(mon.url + "/")
            wait_for(lambda: "Wait " in driver.find_element("id", "banner").text, timeout=30,
                     what="the banner saying to wait")
            banner = driver.find_element("id", "banner").text
            assert "acct1 is exhausted (its 5-hour window)" in banner and "five_hour" not in banner
            assert "for its reset" in banner and "acct2" not in banner and "acct3" not in banner
            advice = get_json(mon.url + "/api/advice")
            assert advice["advice"] == "wait" and 0 < advice["waitS"] <= 600 and advice["to"] is None
            # The cards are redrawn with each push: found and read in one script.
            pct = driver.execute_script(
                "var e = document.querySelector('#claude-cards [data-label=\"acct1\"] .win-pct');"
                "return e ? e.textContent : null;")
            assert pct == "100%+"
            # The advice box and the banner count down to one instant (the advice's waitUntil, the
            # window's own reset), each second, and always say the same wait.
            seen = []
            for _ in range(3):
                waits = driver.execute_script(WAITS_JS)
                assert waits["banner"] and waits["banner"] == waits["advice"], waits
                seen.append(_seconds(waits["banner"]))
                time.sleep(1.1)  # the page's own one-second tick, not a wait for a condition
            assert seen[0] > seen[-1] and seen == sorted(seen, reverse=True), seen
            until = iso_ms(advice["waitUntil"])
            assert abs(until / 1000.0 - time.time() - seen[-1]) < 5, (advice, seen)
    finally:
        mon.stop()
        provider.stop()
        node.remove()
