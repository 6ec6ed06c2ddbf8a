"""The wall forecast in the status line and the HUD, end to end (docs/trajectory.md, docs/monitor.md).

A real monitor probes a fake provider; its HOME holds seeded history rows
(~/svc/history/<UTC day>.jsonl, written by the package's own writer) for the
active account's 5-hour window, so the monitor's own /api/trajectory carries a
forecast. Then `svc-monitor statusline` and `svc-monitor hud --once` run as
children against it:

- climb: 40 % -> 69 % over the last 30 min and 70 % now, the reset an hour away:
  the wall (about 30 min out) beats the reset, so the status line shows
  `100% in NNm!` and the HUD `-> 100% in NNm` after the 5h window;
- flat: 50 % for 30 min and now: rate 0, no wall, nothing shown;
- slow: 5 %/h from 50 % (52.5 % now): a wall about 9 h out, after the reset, nothing shown.

Each negative case first checks that the monitor did compute a forecast
(enough samples), so what is left out is left out for the right reason.
The minutes shown are checked against the `wallAt` the route serves, bounded
by the clock read before and after the render; no duration is asserted.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from typing import Any, Dict, Tuple

import pytest

from svcposture._text import pct_text
from svcposture._time import parse_iso_ms
from tests.support.history import HOUR_MS, climb_rows, write_rows
from tests.support.home import canary, node_env
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

TOKENS = {"climb": canary("lf1"), "flat": canary("lf2"), "slow": canary("lf3")}
# Long clocks: after the first probe the monitor probes nothing on its own while a test
# runs (the next periodic probe, and the probe at the reset, are minutes away), so
# every render must be a plain cached read.
QUIET = {"SVC_PROBE_INTERVAL_S": "300", "SVC_POSTURE_TTL_S": "300", "SVC_REFRESH_FLOOR_S": "0",
         "SVC_STATUSLINE_BUDGET_MS": "5000"}
# label: (pct 30 min ago, rate in pct per hour); the provider answers the pct of now.
SERIES = {"climb": (40.0, 60.0), "flat": (50.0, 0.0), "slow": (50.0, 5.0)}


@pytest.fixture(scope="module")
def provider():
    with ProviderServer() as server:
        yield server


def _node(tmp_path_factory: Any, provider: ProviderServer, kind: str) -> Dict[str, Any]:
    pct0, rate = SERIES[kind]
    now = int(time.time() * 1000)
    reset_5h = (now + HOUR_MS) // 1000 * 1000  # whole seconds, as on the wire
    start = now - 30 * 60_000
    home = tmp_path_factory.mktemp("line-" + kind) / "home"
    home.mkdir()
    write_rows(home, climb_rows("acct1", start, now - 60_000, step_ms=60_000, pct0=pct0, rate=rate,
                                resets_ms=reset_5h))
    pct_now = pct0 + rate * (now - start) / HOUR_MS
    token = TOKENS[kind]
    provider.set_account(token, five_hour=(round(pct_now / 100.0, 3), "allowed"), seven_day=(0.30, "allowed"),
                         reset_5h=reset_5h / 1000, reset_7d=now / 1000 + 3 * 86400)
    sibling = canary("lf-sib-" + kind)
    provider.set_account(sibling, five_hour=(0.05, "allowed"), seven_day=(0.10, "allowed"))
    env = node_env(home, provider.url, [("ACCT1", token, "ada@example.com"), ("ACCT2", sibling, None)],
                   active="ACCT1", extra=QUIET)
    mon = start_monitor(env)
    try:
        body = wait_until(lambda: _probed(mon), 30, message="the first probe in /api/trajectory")
    except BaseException:
        mon.stop(check=False)
        raise
    return {"mon": mon, "env": env, "home": home, "tokens": (token, sibling), "trajectory": body,
            "pct": int(pct_now // 1)}


def _probed(mon: Any) -> Any:
    status, body = mon.get_json("/api/trajectory")
    return body if status == 200 and body.get("probedAt") and body.get("accounts") else None


@pytest.fixture(scope="module", params=sorted(SERIES))
def node(request, tmp_path_factory, provider):
    state = _node(tmp_path_factory, provider, request.param)
    state["kind"] = request.param
    try:
        yield state
    finally:
        state["mon"].stop()


def _five_hour_forecast(body: Dict[str, Any]) -> Dict[str, Any]:
    acct1 = next(a for a in body["accounts"] if a["label"] == "acct1")
    assert acct1["active"] is True
    forecast = acct1["fiveHour"]["forecast"]
    assert isinstance(forecast, dict), acct1  # the seeded rows made a forecast in every case
    assert forecast["samples"] >= 30, forecast
    return forecast


def _statusline(node: Dict[str, Any]) -> str:
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "statusline", "--url", node["mon"].url,
                           "--no-color"], env=node["env"], input=b"", capture_output=True, timeout=30)
    assert proc.returncode == 0 and proc.stderr == b"", proc
    out = proc.stdout.decode("utf-8")
    assert out.endswith("\n") and out.count("\n") == 1, out
    return out[:-1]


def _hud(node: Dict[str, Any]) -> str:
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url",
                           node["mon"].url], env=node["env"], capture_output=True, timeout=30)
    assert proc.returncode == 0 and proc.stderr == b"", proc
    out = proc.stdout.decode("utf-8")
    assert out.endswith("\n") and out.count("\n") == 1 and "\x1b" not in out, out
    return out[:-1]


def _calls(node: Dict[str, Any], provider: ProviderServer) -> Tuple[int, ...]:
    return tuple(f(t) for t in node["tokens"] for f in (provider.message_calls, provider.usage_calls))


def _minutes_between(wall_ms: int, before_ms: int, after_ms: int) -> Tuple[int, int]:
    """The whole minutes to the wall that a render between the two clock reads can show."""
    return (wall_ms - after_ms) // 60_000, (wall_ms - before_ms) // 60_000


def test_the_route_serves_what_each_case_needs(node):
    forecast = _five_hour_forecast(node["trajectory"])
    if node["kind"] == "climb":
        assert forecast["beforeReset"] is True and forecast["wallAt"] is not None
        assert 40.0 <= forecast["ratePctPerHour"] <= 80.0, forecast
    elif node["kind"] == "flat":
        assert forecast["ratePctPerHour"] == 0.0 and forecast["wallAt"] is None
        assert forecast["beforeReset"] is False
    else:
        assert 3.0 <= forecast["ratePctPerHour"] <= 7.0, forecast
        assert forecast["wallAt"] is not None and forecast["beforeReset"] is False


def test_statusline_shows_the_forecast_only_when_it_beats_the_reset(node, provider):
    forecast = _five_hour_forecast(node["trajectory"])
    calls = _calls(node, provider)
    renders = []
    for _ in range(3):
        before = int(time.time() * 1000)
        out = _statusline(node)
        renders.append((before, out, int(time.time() * 1000)))
    hud_out = _hud(node)
    # Four renders later: not one call more to the provider, for either account.
    assert _calls(node, provider) == calls
    # ... and the monitor did not probe in between: the forecast rendered is the one read above.
    assert _probed(node["mon"])["probedAt"] == node["trajectory"]["probedAt"]
    head = r"^acct1 5h %s \S+(?: \S+)? \| 7d 30%% \S+(?: \S+)?" % re.escape(pct_text(_five_pct(node)))
    for before, out, after in renders:
        if node["kind"] == "climb":
            # The forecast misses the reset an hour away: the advice is to switch, to acct2.
            match = re.match(head + r" \| 100% in (\d+)m( \d+s)?! \| next acct2$", out)
            assert match, out
            low, high = _minutes_between(parse_iso_ms(forecast["wallAt"]), before, after)
            assert low <= int(match.group(1)) <= high, (out, forecast, before, after)
        else:
            assert re.match(head + "$", out), out
            assert "100%" not in out
    assert "acct1" in hud_out and "CANARY" not in hud_out


def test_hud_once_shows_the_forecast_only_when_it_beats_the_reset(node):
    forecast = _five_hour_forecast(node["trajectory"])
    before = int(time.time() * 1000)
    out = _hud(node)
    after = int(time.time() * 1000)
    assert "| acct1 <ada@example.com> | OK | 5h %s (" % pct_text(_five_pct(node)) in out, out
    if node["kind"] == "climb":
        match = re.search(r"\| 5h [0-9.]+% \([^)]*\) -> 100% in (\d+)m( \d+s)? \| 7d 30% \(", out)
        assert match, out
        low, high = _minutes_between(parse_iso_ms(forecast["wallAt"]), before, after)
        assert low <= int(match.group(1)) <= high, (out, forecast, before, after)
    else:
        assert "->" not in out and "100%" not in out, out


def _five_pct(node: Dict[str, Any]) -> float:
    acct1 = next(a for a in node["trajectory"]["accounts"] if a["label"] == "acct1")
    return acct1["fiveHour"]["pct"]


def test_the_forecast_is_made_of_the_seeded_rows(node):
    """30 seeded rows in ~/svc/history, then the monitor's first probe appended beside them."""
    files = sorted((node["home"] / "svc" / "history").glob("*.jsonl"))
    rows = [json.loads(raw) for path in files for raw in path.read_text().splitlines()]
    mine = [r for r in rows if r["label"] == "acct1"]
    assert len(mine) >= 31, len(mine)
    assert _five_hour_forecast(node["trajectory"])["samples"] == 31
