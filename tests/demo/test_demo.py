"""svc-monitor demo: the simulated provider, the demo home and the whole demo process."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.home import REPO, clean_env
from tests.support.waiting import wait_until
from svcposture.claude import demo as claude_demo
from svcposture.demo import main as demo


def _post(url, token):
    req = urllib.request.Request(url + "/v1/messages", data=b"{}", method="POST",
                                 headers={"authorization": "Bearer " + token, "content-type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}


def test_timeline_moves_ok_degraded_rejected_ok_within_three_minutes():
    start = 1_800_000_000.0
    seen = []
    for t in range(0, 181, 5):
        status = demo.account_state("acct1", float(t), start)["status"]
        if not seen or seen[-1] != status:
            seen.append(status)
    assert seen == ["allowed", "allowed_warning", "rejected", "allowed"]
    assert demo.account_state("acct2", 100.0, start)["status"] == "allowed"
    assert demo.account_state("acct3", 100.0, start)["7d"][1] == "allowed_warning"
    # the 5h window of acct1 resets exactly when it recovers
    assert demo.account_state("acct1", 100.0, start)["5h"][2] == start + 135.0


def test_the_active_account_is_used_as_a_real_account_is():
    # A day before the demo and ten hours of it, a reading a minute: every 5-hour window is a real one
    # (it resets 5 h after the last, but for the window the demo starts in), never a comb of
    # three-minute teeth; within a window the figure only climbs, and the first act's window is the
    # one its history climbs in (so the forecast has that window's readings at the first probe).
    start = 1_800_000_000.0
    resets, last = [], None
    for minute in range(-25 * 60, 10 * 60):
        state = demo.account_state("acct1", minute * 60.0, start)
        pct, _status, reset = state["5h"]
        if last is not None and reset == last[1]:
            assert pct >= last[0], minute
        elif last is not None:
            resets.append(reset)
        last = (pct, reset)
    gaps = [b - a for a, b in zip(resets, resets[1:])]
    assert len(resets) <= 8 and all(gap == 5 * 3600 for gap in gaps), (len(resets), gaps)
    assert demo.account_state("acct1", -50 * 60.0, start)["5h"][2] == start + 135.0


def test_simulated_provider_speaks_the_wire_format():
    clock = [1_800_000_000.0]
    provider = demo.SimulatedProvider(clock=lambda: clock[0]).start()
    try:
        token1 = claude_demo.ACCOUNTS[0][1]
        status, headers = _post(provider.url, token1)
        assert status == 200
        assert headers["anthropic-ratelimit-unified-status"] == "allowed"
        assert headers["anthropic-ratelimit-unified-5h-status"] == "allowed"
        assert float(headers["anthropic-ratelimit-unified-5h-utilization"]) == pytest.approx(0.55)
        assert int(headers["anthropic-ratelimit-unified-5h-reset"]) == int(clock[0] + 135)
        clock[0] += 100
        status, headers = _post(provider.url, token1)
        assert status == 429 and headers["anthropic-ratelimit-unified-status"] == "rejected"
        assert _post(provider.url, "not-a-demo-token")[0] == 401
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        req = urllib.request.Request(provider.url + "/api/oauth/usage",
                                     headers={"authorization": "Bearer " + claude_demo.LOGIN_TOKEN})
        with opener.open(req, timeout=10) as resp:
            usage = json.loads(resp.read())
        assert usage["five_hour"]["utilization"] >= 100 and usage["seven_day"]["resets_at"].endswith("+00:00")
    finally:
        provider.stop()


def test_demo_node_files(tmp_path):
    node = demo.DemoNode("http://127.0.0.1:9", base_environ={"PATH": "/usr/bin", "SVC_X": "1", "MODEL_TOKEN_Z": "z"})
    try:
        text = node.paths.accounts_env.read_text()
        assert text.count("export MODEL_TOKEN_ACCT") == 3 and "MODEL_CODE_OAUTH_TOKEN" in text
        assert oct(node.paths.accounts_env.stat().st_mode & 0o777) == "0o600"
        assert node.environ["HOME"] == str(node.home) and "SVC_X" not in node.environ
        assert "MODEL_TOKEN_Z" not in node.environ and node.environ["SVC_PROVIDER_URL"] == "http://127.0.0.1:9"
    finally:
        node.remove()
    assert not node.root.exists()


def test_real_monitor_against_the_simulated_provider_emits_edges(monitors):
    clock = [1_800_000_000.0]
    provider = demo.SimulatedProvider(clock=lambda: clock[0]).start()
    node = demo.DemoNode(provider.url, base_environ=clean_env(REPO))
    env = dict(node.environ, SVC_REFRESH_FLOOR_S="0", SVC_QUOTA_SAMPLER="0")
    mon = monitors.start(env)
    try:
        force = {"X-Svc-Refresh": "1"}
        body = mon.get_json("/api/accounts")[1]
        assert body["status"] == "ok" and len(body["accounts"]) == 3
        clock[0] += 60
        assert mon.get_json("/api/accounts?refresh=true", force)[1]["status"] == "degraded"
        clock[0] += 40
        body = mon.get_json("/api/accounts?refresh=true", force)[1]
        assert body["status"] == "rejected" and body["siblingWithHeadroom"]["label"] == "acct2"
        clock[0] += 40
        assert mon.get_json("/api/accounts?refresh=true", force)[1]["status"] == "ok"
        events = []
        for path in sorted(node.paths.events_dir.glob("*.jsonl")):
            events += [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
        edges = [e["attributes"]["account.status"] for e in events
                 if e["attributes"]["event.name"] == "account.status.changed"]
        assert edges == ["rejected", "ok"]
    finally:
        mon.stop()
        provider.stop()
        node.remove()


def _acct(body, label):
    return next(a for a in body["accounts"] if a["label"] == label)


def test_demo_command_smoke(tmp_path):
    env = clean_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "demo", "--port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(tmp_path))
    try:
        lines = []
        deadline = time.monotonic() + 30
        url = home = None
        while time.monotonic() < deadline and (url is None or home is None):
            line = proc.stdout.readline().decode()
            if not line:
                break
            lines.append(line)
            m = re.search(r"dashboard at (http://127\.0\.0\.1:\d+)/", line)
            url = m.group(1) if m else url
            m = re.search(r"demo home (\S+);", line)
            home = Path(m.group(1)) if m else home
        assert url and home, lines
        assert home.exists()
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url + "/", timeout=10) as resp:
            assert resp.status == 200 and b"svc-monitor" in resp.read()
        with opener.open(url + "/api/accounts", timeout=20) as resp:
            body = json.loads(resp.read())
        assert body["available"] is True and body["node"] == "demo-node"
        assert [a["label"] for a in body["accounts"]] == ["acct1", "acct2", "acct3"]
        assert body["active"]["label"] == "acct1"

        def trajectory():
            with opener.open(url + "/api/trajectory", timeout=20) as resp:
                traj = json.loads(resp.read())
            beats = [a["label"] for a in traj.get("accounts", [])
                     if a["fiveHour"] and (a["fiveHour"]["forecast"] or {}).get("beforeReset")]
            thresholds = [e for e in traj.get("alerts", [])
                          if e["attributes"]["event.name"] == "account.quota.threshold"]
            return traj if beats and thresholds else None
        # Within three minutes of the start: a forecast that beats its reset, and a threshold alert.
        traj = wait_until(trajectory, timeout=180, interval=1.0, message="a forecast before reset and an alert")
        assert _acct(traj, "acct2")["fiveHour"]["forecast"]["ratePctPerHour"] > 0
        # The active account has its forecast too, from the history of the window it is in.
        assert _acct(traj, "acct1")["fiveHour"]["forecast"]["samples"] >= 3
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        assert not home.exists()
        err = proc.stderr.read().decode()
        assert "Traceback" not in err and "svc-monitor listening on " + url in err
        assert "demo-token" not in err + "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_the_demo_fleet_ages_and_counts_down_with_the_clock():
    # Read a minute apart, the same heartbeat is a minute older and the same reset a minute nearer.
    from svcposture._time import parse_iso_ms
    from svcposture.demo import fleet

    start = 1_800_000_000.0
    first, later = fleet.moving_report(start, start + 30), fleet.moving_report(start, start + 90)
    for a, b in zip(first["hosts"], later["hosts"]):
        assert b["ageS"] == pytest.approx(a["ageS"] + 60)
        if a["account"]:
            left = [parse_iso_ms(r[k]) / 1000 - now for r, now in ((a["account"], start + 30), (b["account"], start + 90))
                    for k in ("five_hour_resets_at",)]
            assert left[1] == pytest.approx(left[0] - 60)
            assert b["account"]["age_s"] == pytest.approx(a["account"]["age_s"] + 60)
    assert later["unlisted"][0]["ageS"] == pytest.approx(first["unlisted"][0]["ageS"] + 60)


def test_the_demo_fleets_live_hosts_beat():
    # A live host publishes every interval, as a real one does: whenever it is read, its heartbeat and
    # the readings it carries are younger than two intervals (what `live` means); a stale host only ages.
    from svcposture._time import parse_iso_ms
    from svcposture.demo import fleet

    start = 1_800_000_000.0
    limit_s = 2 * fleet.BEAT_S
    stale_ages = []
    for elapsed in range(0, 1200, 7):
        report = fleet.moving_report(start, start + elapsed)
        for host in report["hosts"]:
            if host["state"] == "live":
                assert host["ageS"] < limit_s, (elapsed, host["host"], host["ageS"])
                for entry in host["accounts"]:
                    read_s = start + elapsed - parse_iso_ms(entry["probed_at"]) / 1000
                    assert read_s < limit_s, (elapsed, host["host"], read_s)
            elif host["host"] == "gpu-box":
                stale_ages.append((elapsed % fleet.LOOP_S, host["ageS"]))
    assert all(b[1] > a[1] for a, b in zip(stale_ages, stale_ages[1:]) if b[0] > a[0])


def _started_demo(tmp_path):
    """A demo process and its temporary home (the directory that holds home/ and codex-home/)."""
    proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "demo", "--port", "0"],
                            env=clean_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, cwd=str(tmp_path))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        if not line:
            break
        m = re.search(r"demo home (\S+);", line)
        if m:
            return proc, Path(m.group(1)).parent
    proc.kill()
    proc.wait(5)
    raise AssertionError("the demo did not announce its home: %s" % proc.stderr.read().decode()[-2000:])


def test_ctrl_c_on_the_demo_prints_a_clean_stop(tmp_path):
    """Ctrl-C reaches the terminal's whole process group, the probe children of the moment too: the
    demo stops with one line saying so, and never calls a child it stopped a failure. Stopped as the
    dashboard comes up (its first probes and the login's first usage poll in flight) and later."""
    from tests.support.browser import wait_for
    from tests.support.firstlook import DASHBOARD_RE, Demo

    for settle in (False, True):
        started = Demo(tmp_path / ("home-%s" % settle), ["--port", "0"])
        try:
            wait_for(lambda: DASHBOARD_RE.search(started.text()), timeout=60, what="the dashboard line")
            if settle:
                started.wait_ready()
        finally:
            code = started.stop()
        text = started.text()
        assert code == 0, text
        assert started.lines[-1] == "svc-monitor demo: stopped; its temporary home is removed", text
        assert "failed" not in text and "Traceback" not in text and "error" not in text.lower(), text


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_the_demo_stopped_by_a_signal_removes_its_temporary_home(tmp_path, signum):
    """As `timeout`, systemd and container runtimes stop it (SIGTERM), or a closed terminal
    (SIGHUP): the temporary home goes, the simulated accounts file and Codex login with it,
    whether the signal comes as the dashboard starts or once the monitor has been probing."""
    for settle_s in (0.0, 3.0):
        proc, root = _started_demo(tmp_path)
        try:
            assert (root / "home" / ".config" / "svc" / "model-accounts.env").exists()
            time.sleep(settle_s)  # how long the demo runs before it is stopped, not a wait for anything
            proc.send_signal(signum)
            assert proc.wait(60) == 0, proc.stderr.read().decode()[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        assert not root.exists(), sorted(str(p) for p in root.rglob("*"))[:20]
