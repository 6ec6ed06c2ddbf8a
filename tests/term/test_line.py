"""The one formatter behind the HUD strip and the agent's status line (term/line.py).

Posture bodies are the posture shape, trajectory bodies the trajectory shape (the route
itself is built elsewhere; the formatter is tested against its documented body).
"""
from __future__ import annotations

import time
from typing import Any, Dict, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcposture.settings import Settings
from svcposture.term import line

NOW = 1_800_000_000_000            # 2027-01-15T08:00:00Z
H, M = 3_600_000, 60_000


def iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


def window(pct: Any, resets_in_ms: Optional[int], status: str = "allowed") -> Dict[str, Any]:
    return {"pct": pct, "resetsAt": iso(NOW + resets_in_ms) if resets_in_ms is not None else None,
            "status": status}


def body(status: str = "ok", five: Any = None, seven: Any = None, sibling: Any = None,
         probed_at: int = NOW, **extra: Any) -> Dict[str, Any]:
    five = window(61.4, H + 2 * M) if five is None else five
    seven = window(41, 3 * 24 * H + 6 * H + 5 * M) if seven is None else seven
    active = {"label": "acct1", "email": "ada@example.com", "active": True, "overallStatus": "allowed",
              "representativeClaim": "five_hour", "bindingWindow": "five_hour", "bindingStatus": "allowed",
              "fiveHour": five, "sevenDay": seven, "error": None}
    out = {"available": True, "node": "node-a", "generatedAt": iso(NOW), "probedAt": probed_at, "cached": True,
           "status": status, "active": active, "accounts": [active], "siblingWithHeadroom": sibling}
    out.update(extra)
    return out


def trajectory(five_wall_in: Optional[int] = None, seven_wall_in: Optional[int] = None,
               before_reset: bool = True, label: str = "acct1") -> Dict[str, Any]:
    """An /api/trajectory body whose forecasts reach 100% at the given offsets from NOW."""
    def cast(wall_in: Optional[int], pct: float, resets_in: int) -> Dict[str, Any]:
        forecast = None
        if wall_in is not None:
            forecast = {"ratePctPerHour": 30.5, "wallAt": iso(NOW + wall_in), "beforeReset": before_reset,
                        "pctAtReset": 130.2, "samples": 7}
        return {"pct": pct, "resetsAt": iso(NOW + resets_in), "forecast": forecast}
    return {"node": "node-a", "generatedAt": iso(NOW), "probedAt": NOW,
            "accounts": [{"label": "acct0", "email": None, "active": False, "fiveHour": None, "sevenDay": None},
                         {"label": label, "email": "ada@example.com", "active": True,
                          "fiveHour": cast(five_wall_in, 85.0, H + 2 * M),
                          "sevenDay": cast(seven_wall_in, 41.0, 3 * 24 * H)}],
            "alerts": []}


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch):
    """Local time is UTC for the duration of a test (the HUD prints local reset times)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# ---------------------------------------------------------------- the status line (docs/monitor.md)

def test_status_line_ok():
    assert line.status_line(body(), now=NOW) == "acct1 5h 61.4% 1h 2m | 7d 41% 3d 6h"


def test_status_line_degraded_with_forecast_and_sibling():
    b = body("degraded", five=window(85.0, H + 2 * M, "allowed_warning"),
             sibling={"label": "acct2", "email": "grace@example.com"})
    assert line.status_line(b, trajectory(five_wall_in=48 * M + 20_000), now=NOW) == \
        "acct1 5h 85% 1h 2m | 7d 41% 3d 6h | 100% in 48m 20s! | next acct2"


def test_status_line_forecast_only_when_it_beats_the_reset():
    b = body("degraded", sibling={"label": "acct2", "email": None})
    # beforeReset false: nothing, however close the wall.
    assert "100%" not in line.status_line(b, trajectory(five_wall_in=10 * M, before_reset=False), now=NOW)
    # beforeReset true but this body's window resets first (a newer cycle): nothing.
    assert "100%" not in line.status_line(b, trajectory(five_wall_in=2 * H), now=NOW)
    # Both windows beat their resets: the earlier wall is the one shown.
    assert "| 100% in 30m! |" in line.status_line(b, trajectory(five_wall_in=50 * M, seven_wall_in=30 * M),
                                                   now=NOW)
    # Already at the wall.
    assert "| 100% now! |" in line.status_line(b, trajectory(five_wall_in=-M), now=NOW)
    # Another account's forecast never lands on the active one.
    assert "100%" not in line.status_line(b, trajectory(five_wall_in=10 * M, label="acct9"), now=NOW)


def test_status_line_rejected_names_next_or_says_none():
    b = body("rejected", five=window(101.5, 2 * H + 30 * M, "rejected"), sibling={"label": "acct2", "email": "g@x.io"})
    assert line.status_line(b, now=NOW) == "acct1 5h 100%+ 2h 30m | 7d 41% 3d 6h | rejected | next acct2"
    assert line.status_line(dict(b, siblingWithHeadroom=None), now=NOW) == \
        "acct1 5h 100%+ 2h 30m | 7d 41% 3d 6h | rejected | no sibling with headroom"


def test_status_line_writes_the_percentage_as_every_surface_does():
    # To the nearest tenth, as the HUD and the pages write it (svcposture._text.pct_text).
    b = body(five=window(99.6, 5 * M), seven=window(0.04, None))
    assert line.status_line(b, now=NOW) == "acct1 5h 99.6% 5m | 7d 0%"
    assert "| 5h 99.6% (5m" in line.hud_line(b, now=NOW)


def test_status_line_other_states():
    err = body("error", active=None, error={"kind": "transport", "message": "m"})
    assert line.status_line(err, now=NOW) == "svc: probe error (transport)"
    acct_err = body("error")
    acct_err["active"]["error"] = {"kind": "auth", "message": "m", "httpStatus": 401}
    # A body from before health: an account with an error was not read.
    assert line.status_line(acct_err, now=NOW) == "acct1 not read yet"
    acct_err["active"]["health"] = "refused"
    assert line.status_line(acct_err, now=NOW) == "acct1 token refused (HTTP 401)"
    unknown = body("unknown", active=None, sibling={"label": "acct2", "email": None})
    assert line.status_line(unknown, now=NOW) == "svc: no active account | next acct2"
    assert line.status_line({"available": False, "node": "n"}, now=NOW) == \
        "svc: no usable account (svc-monitor init)"
    for junk in (None, [], "x", 3):
        assert line.status_line(junk, now=NOW) == line.NOT_RUNNING
    missing = body(five=None)
    missing["active"]["fiveHour"] = None
    missing["active"]["sevenDay"] = {"pct": "x", "resetsAt": "bad"}
    assert line.status_line(missing, now=NOW) == "acct1 5h -- | 7d --"


def test_status_line_stale_with_age():
    old = body(probed_at=NOW - 23 * M)
    assert line.status_line(old, now=NOW, stale_ms=10 * M) == "acct1 5h 61.4% 1h 2m | 7d 41% 3d 6h | stale 23m"
    assert "stale" not in line.status_line(old, now=NOW, stale_ms=30 * M)
    # The default is twice the default probe interval: 10 min.
    assert line.status_line(body(probed_at=NOW - 11 * M), now=NOW).endswith("| stale 11m")
    assert line.status_line(body(probed_at=NOW - 11 * M), now=NOW, colour=True).startswith("\x1b[90m")


def test_status_line_colours_follow_the_status():
    assert line.status_line(body(), now=NOW, colour=True) == "\x1b[32macct1 5h 61.4% 1h 2m | 7d 41% 3d 6h\x1b[0m"
    assert line.status_line(body("degraded"), now=NOW, colour=True).startswith("\x1b[33m")
    assert line.status_line(body("rejected"), now=NOW, colour=True).startswith("\x1b[1;31m")
    assert line.status_line(body("error"), now=NOW, colour=True).startswith("\x1b[35m")


def test_status_line_hostile_text_is_neutered_and_short():
    b = body(sibling={"label": "\x1b]0;pwned\x07" + "n" * 500, "email": None}, status="degraded")
    b["active"]["label"] = "acct\x1b[2J\n1"
    out = line.status_line(b, now=NOW, colour=False)
    assert "\x1b" not in out and "\n" not in out and "\x07" not in out
    assert len(out) <= line.MAX_STATUS_CHARS
    assert out.startswith("acct?[2J?1 5h 61.4%")


# ---------------------------------------------------------------- the fallback from the agent's payload

def payload(five: Any = (61.4, 3720), seven: Any = (41, 3 * 86400 + 6 * 3600 + 300)) -> Dict[str, Any]:
    limits: Dict[str, Any] = {}
    if five is not None:
        limits["five_hour"] = {"used_percentage": five[0], "resets_at": NOW / 1000 + five[1]}
    if seven is not None:
        limits["seven_day"] = {"used_percentage": seven[0], "resets_at": NOW / 1000 + seven[1]}
    return {"session_id": "s", "model": {"id": "m"}, "rate_limits": limits}


def test_local_line_from_rate_limits():
    assert line.local_line(payload(), now=NOW) == "5h 61.4% 1h 2m | 7d 41% 3d 6h (local)"
    assert line.local_line(payload(seven=None), now=NOW) == "5h 61.4% 1h 2m (local)"
    assert line.local_line(payload(five=(100, 60)), now=NOW, colour=True).startswith("\x1b[1;31m")
    assert line.local_line(payload(five=(85, 60)), now=NOW, colour=True).startswith("\x1b[33m")
    iso_reset = {"rate_limits": {"five_hour": {"used_percentage": 5, "resets_at": iso(NOW + 90 * M)}}}
    assert line.local_line(iso_reset, now=NOW) == "5h 5% 1h 30m (local)"


@pytest.mark.parametrize("junk", [
    None, [], "x", {}, {"rate_limits": None}, {"rate_limits": []}, {"rate_limits": {}},
    {"rate_limits": {"five_hour": None, "seven_day": "x"}},
    {"rate_limits": {"five_hour": {"used_percentage": "61", "resets_at": "soon"}}},
    {"rate_limits": {"five_hour": {"used_percentage": True, "resets_at": None}}},
    {"rate_limits": {"five_hour": {"used_percentage": float("nan"), "resets_at": float("inf")}}},
])
def test_local_line_ignores_what_it_cannot_read(junk: Any):
    assert line.local_line(junk, now=NOW) is None


# ---------------------------------------------------------------- the HUD strip (docs/monitor.md)

def test_hud_line_rejected_with_local_reset_times(utc: None):
    b = body("rejected", five=window(101.5, 2 * H + 30 * M, "rejected"), sibling={"label": "acct2", "email": "b@x.io"})
    assert line.hud_line(b, now=NOW) == (
        "svc node-a | acct1 <ada@example.com> | REJECTED | 5h 100%+ (2h 30m, 10:30) | "
        "7d 41% (3d 6h, Mon 14:05) | EXHAUSTED -> switch to acct2 <b@x.io>")


def test_hud_line_local_clock_follows_the_time_zone(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # +05:30, no daylight saving
    time.tzset()
    try:
        assert "5h 61.4% (1h 2m, 14:32)" in line.hud_line(body(), now=NOW)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_hud_line_appends_the_forecast_when_it_beats_the_reset(utc: None):
    b = body("degraded", five=window(85.0, H + 2 * M, "allowed_warning"))
    text = line.hud_line(b, trajectory(five_wall_in=48 * M + 20_000), now=NOW)
    assert "| 5h 85% (1h 2m, 09:02) -> 100% in 48m 20s | 7d 41% (3d 6h, Mon 14:05) |" in text + " |"
    # A wall after this body's reset (the trajectory is of an older cycle) is not shown.
    assert "->" not in line.hud_line(b, trajectory(five_wall_in=H + 10 * M), now=NOW)
    assert "->" not in line.hud_line(b, trajectory(five_wall_in=30 * M, before_reset=False), now=NOW)
    assert "->" not in line.hud_line(b, None, now=NOW)
    assert "->" not in line.hud_line(b, {"available": False, "node": "node-a"}, now=NOW)
    seven = line.hud_line(b, trajectory(seven_wall_in=26 * H), now=NOW)
    assert "7d 41% (3d 6h, Mon 14:05) -> 100% in 1d 2h" in seven


def test_hud_line_unavailable_says_why():
    text = line.hud_line({"available": False, "node": "node-a"}, now=NOW)
    assert text.startswith("svc node-a: posture unavailable: no usable account in the accounts env file")
    assert "svc-monitor init" in text


def test_hud_line_stale_is_grey_with_its_age(utc: None):
    old = line.hud_line(body(probed_at=NOW - 25 * M), now=NOW, stale_ms=20 * M, colour=True)
    assert old.startswith("\x1b[90m") and old.endswith("| no new reading for 25m (readings every 10m)\x1b[0m")
    assert line.hud_line(body(probed_at=NOW - 25 * M), now=NOW, stale_ms=30 * M, colour=True).startswith("\x1b[32m")


def test_stale_after_two_probe_intervals_read_by_the_monitors_rule():
    assert line.stale_after_ms({}) == 600_000
    assert line.stale_after_ms({"SVC_PROBE_INTERVAL_S": "60"}) == 120_000
    for junk in ("", "x", "-5", "0", "nan", "inf", "1e400"):
        assert line.stale_after_ms({"SVC_PROBE_INTERVAL_S": junk}) == 600_000, junk
        # The monitor's own schedule takes the same default for the same junk.
        assert Settings.from_environ({"SVC_PROBE_INTERVAL_S": junk}).probe_interval_s == 300, junk


def test_durations():
    assert [line.duration(ms) for ms in (-1, 0, 999, 59_000, 61_000, H + 2 * M, 50 * H)] == \
        ["now", "now", "0s", "59s", "1m 1s", "1h 2m", "2d 2h"]


# ---------------------------------------------------------------- anything at all

nasty_text = st.one_of(st.text(max_size=30), st.sampled_from(
    ["\x1b[2J", "\x1b]0;pwned\x07", "\r", "\n", "\x00", "\u202e", "\x9b31m", "acct1", "ok", "rejected"]))
leaf = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 20, 10 ** 20), st.floats(allow_nan=True),
                 nasty_text, st.sampled_from(["2027-01-15T09:00:00.000Z", "9999-12-31T23:59:59.999Z",
                                              "0001-01-01T00:00:00Z", "2027-02-30T00:00:00Z"]))
json_value = st.recursive(leaf, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=8), kids, max_size=3)), max_leaves=12)
forecast = st.one_of(leaf, st.fixed_dictionaries({}, optional={
    "wallAt": leaf, "beforeReset": st.one_of(st.just(True), leaf), "ratePctPerHour": leaf}))
traj_window = st.one_of(leaf, st.fixed_dictionaries({}, optional={"pct": leaf, "resetsAt": leaf,
                                                                  "forecast": forecast}))
traj_body = st.one_of(json_value, st.fixed_dictionaries({}, optional={
    "accounts": st.one_of(leaf, st.lists(st.one_of(leaf, st.fixed_dictionaries({}, optional={
        "label": st.one_of(st.just("acct1"), leaf), "fiveHour": traj_window, "sevenDay": traj_window})),
        max_size=3))}))
win = st.one_of(leaf, st.fixed_dictionaries({}, optional={"pct": leaf, "resetsAt": leaf, "status": leaf}))
posture = st.one_of(json_value, st.fixed_dictionaries({}, optional={
    "available": st.one_of(st.just(True), leaf), "node": nasty_text, "status": st.one_of(nasty_text, leaf),
    "probedAt": leaf, "active": st.one_of(leaf, st.fixed_dictionaries({}, optional={
        "label": st.one_of(st.just("acct1"), nasty_text), "email": nasty_text, "fiveHour": win, "sevenDay": win,
        "error": st.one_of(leaf, st.fixed_dictionaries({"kind": nasty_text}))})),
    "siblingWithHeadroom": st.one_of(leaf, st.fixed_dictionaries({}, optional={"label": nasty_text})),
    "error": st.one_of(leaf, st.fixed_dictionaries({"kind": nasty_text}))}))
agent_payload = st.one_of(json_value, st.fixed_dictionaries({}, optional={"rate_limits": st.one_of(
    leaf, st.fixed_dictionaries({}, optional={
        "five_hour": st.one_of(leaf, st.fixed_dictionaries({}, optional={"used_percentage": leaf,
                                                                         "resets_at": leaf})),
        "seven_day": st.one_of(leaf, st.fixed_dictionaries({}, optional={"used_percentage": leaf,
                                                                         "resets_at": leaf}))}))}))

FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _plain(text: str) -> bool:
    return not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in text)


def _inner(text: str) -> str:
    if text.startswith("\x1b[") and text.endswith("\x1b[0m"):
        return text[text.index("m") + 1:-len("\x1b[0m")]
    return text


@FUZZ
@given(b=posture, t=traj_body, p=agent_payload, colour=st.booleans(), stale=st.integers(0, 10 ** 9))
def test_any_input_gives_one_short_plain_line(b: Any, t: Any, p: Any, colour: bool, stale: int) -> None:
    status = line.status_line(b, t, colour=colour, now=NOW, stale_ms=stale)
    assert _plain(_inner(status)) and len(_inner(status)) <= line.MAX_STATUS_CHARS, repr(status)
    hud = line.hud_line(b, t, colour=colour, now=NOW, stale_ms=stale)
    assert _plain(_inner(hud)) and len(_inner(hud)) <= line.MAX_HUD_CHARS, repr(hud)
    local = line.local_line(p, colour=colour, now=NOW)
    assert local is None or (_plain(_inner(local)) and _inner(local).endswith("(local)")), repr(local)


@FUZZ
@given(ms=st.integers(-62_135_596_800_000, 253_402_300_799_999))
def test_the_fast_timestamp_path_agrees_with_the_package_parser(ms: int) -> None:
    from svcposture._time import iso_from_ms, parse_iso_ms
    text = iso_from_ms(ms)
    assert line.canonical_ms(text) == parse_iso_ms(text) == ms


@pytest.mark.parametrize("text", [
    "2027-02-29T00:00:00.000Z", "2027-13-01T00:00:00.000Z", "2027-00-10T00:00:00.000Z", "2027-01-32T00:00:00.000Z",
    "2027-01-01T24:00:00.000Z", "2027-01-01T00:60:00.000Z", "2027-01-01T00:00:60.000Z", "0000-01-01T00:00:00.000Z",
    "2027-01-01T00:00:00.000+", "+027-01-01T00:00:00.000Z", "2027-0١-01T00:00:00.000Z", "2027-01-01 00:00:00.000Z",
    " 027-01-01T00:00:00.000Z",
])
def test_the_fast_timestamp_path_refuses_what_is_not_canonical(text: str) -> None:
    from svcposture._time import parse_iso_ms
    assert line.canonical_ms(text) is None
    try:
        expected = parse_iso_ms(text)
    except ValueError:
        expected = None
    assert line._instant_ms(text) == expected


def test_leap_days_and_far_dates():
    assert line.canonical_ms("2024-02-29T12:00:00.000Z") == 1_709_208_000_000
    assert line.canonical_ms("1970-01-01T00:00:00.000Z") == 0
    assert line.canonical_ms("1969-12-31T23:59:59.999Z") == -1
    assert line.canonical_ms("2000-02-29T00:00:00.000Z") == 951_782_400_000
    assert line.canonical_ms("1900-02-29T00:00:00.000Z") is None


# ---------------------------------------------------------------- the advice, in the dashboard's words

def _advice(word: str, to: Optional[str] = None, wait: Optional[int] = None) -> Dict[str, Any]:
    return {"available": True, "probedAt": NOW, "provider": "claude", "advice": word,
            "active": {"label": "acct1", "email": "ada@example.com"},
            "to": {"label": to, "email": None} if to else None, "waitS": wait, "reason": "", "ranked": []}


def test_hud_always_carries_the_advice(utc):
    assert line.hud_line(body(), now=NOW, advice=_advice("stay")).endswith("| advice: stay on acct1")
    assert line.hud_line(body(), now=NOW, advice=_advice("wait", wait=30)).endswith(
        "| advice: wait 30s for the reset")
    assert line.hud_line(body(), now=NOW, advice=_advice("switch", to="acct3")).endswith(
        "| advice: switch to acct3")
    rejected = body("rejected", five=window(100.0, 20 * M, "rejected"))
    assert line.hud_line(rejected, now=NOW, advice=_advice("none", wait=20 * 60)).endswith(
        "| EXHAUSTED, no account has headroom until 08:20")
    # Advice about another probe is not this posture's: nothing is said.
    stale = dict(_advice("stay"), probedAt=NOW - 1)
    assert "advice" not in line.hud_line(body(), now=NOW, advice=stale)
    # The status line stays short: nothing to do, nothing said; the rest as the HUD says it.
    assert line.status_line(body(), now=NOW, advice=_advice("stay")) == "acct1 5h 61.4% 1h 2m | 7d 41% 3d 6h"
    assert line.status_line(rejected, now=NOW, advice=_advice("none", wait=20 * 60)).endswith(
        "| no account has headroom until 08:20")
