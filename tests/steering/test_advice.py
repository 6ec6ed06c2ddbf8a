"""svcposture.advice (docs/steering.md): the one advice every surface names, as a pure function.

Table tests for the cases seen in the field (an account whose window resets in 30 s, a sibling at
91 % preferred to one at 33 %, an automatic switch onto a fuller account) and property tests over
arbitrary, hostile postures: the advice never names an account that is fuller than the active one,
rejected, at or over the limit, or unreadable, and does not depend on the accounts' order.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcposture.steering import advice
from svcposture._time import iso_from_ms

NOW = 1_800_000_000_000
HOUR = 3_600_000
KEYS = {"provider", "active", "advice", "to", "waitS", "waitUntil", "reason", "ranked"}
RANK_KEYS = {"label", "email", "health", "candidate", "headroomPct", "wallAt", "reachesReset", "note", "fix"}


def win(pct: Any, resets_in_ms: Optional[int] = 3 * HOUR, status: Any = None) -> Dict[str, Any]:
    if status is None and isinstance(pct, (int, float)) and not isinstance(pct, bool):
        status = "rejected" if pct >= 100 else "allowed_warning" if pct >= 90 else "allowed"
    return {"pct": pct, "resetsAt": iso_from_ms(NOW + resets_in_ms) if resets_in_ms is not None else None,
            "status": status}


def acct(label: str, five: Any, seven: Any = 10.0, *, active: bool = False, status: Optional[str] = None,
         five_reset: Optional[int] = 3 * HOUR, extra: Optional[List[Dict[str, Any]]] = None,
         error: Any = None) -> Dict[str, Any]:
    view = {"label": label, "email": label + "@example.com", "active": active, "overallStatus": None,
            "representativeClaim": None, "bindingWindow": "five_hour", "bindingStatus": None,
            "fiveHour": win(five, five_reset) if five is not None else None,
            "sevenDay": win(seven, 5 * 24 * HOUR) if seven is not None else None, "error": error}
    statuses = [w["status"] for w in (view["fiveHour"], view["sevenDay"]) if w]
    view["bindingStatus"] = status or ("rejected" if "rejected" in statuses else
                                       "allowed_warning" if "allowed_warning" in statuses else "allowed")
    if extra is not None:
        view["extraWindows"] = extra
    return view


def posture(*accounts: Dict[str, Any]) -> Dict[str, Any]:
    active = next((a for a in accounts if a["active"]), None)
    return {"available": True, "node": "n1", "generatedAt": iso_from_ms(NOW), "probedAt": NOW, "cached": True,
            "status": "ok", "active": active, "accounts": list(accounts), "siblingWithHeadroom": None}


def trajectory(**pct_at_reset: float) -> Dict[str, Any]:
    """A trajectory body whose 5h forecast for each label ends at the given pct at reset."""
    rows = []
    for label, at_reset in pct_at_reset.items():
        fc = {"ratePctPerHour": 5.0, "wallAt": iso_from_ms(NOW + HOUR), "beforeReset": at_reset >= 100,
              "pctAtReset": at_reset, "samples": 5}
        rows.append({"label": label, "provider": "claude", "email": None, "active": False,
                     "fiveHour": {"pct": 1.0, "resetsAt": iso_from_ms(NOW + 3 * HOUR), "forecast": fc},
                     "sevenDay": None})
    return {"node": "n1", "probedAt": NOW, "accounts": rows, "alerts": []}


def run(body: Any, traj: Any = None, **kw: Any) -> Dict[str, Any]:
    kw.setdefault("now_ms", NOW)
    out = advice.advise(body, traj, **kw)
    assert set(out) == KEYS
    for row in out["ranked"]:
        assert set(row) == RANK_KEYS
    return out


def cands(out: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The candidates of an advice's `ranked` (which lists every other account)."""
    return advice.candidates_of(out)


# ---------------------------------------------------------------- the field's cases

def test_an_account_that_resets_in_30_s_is_waited_for_not_left() -> None:
    body = posture(acct("acct1", 100, active=True, five_reset=30_000), acct("acct2", 20), acct("acct3", 5))
    out = run(body)
    assert out["advice"] == "wait" and out["to"] is None and out["waitS"] == 30
    # The instant the wait ends is the holding window's own reset, which every countdown counts to.
    assert out["waitUntil"] == body["active"]["fiveHour"]["resetsAt"]
    assert "waiting" in out["reason"]
    # The siblings are still ranked, for the pages that show them.
    assert [r["label"] for r in cands(out)] == ["acct3", "acct2"]


def test_the_sibling_at_33_pct_beats_the_one_at_91_pct() -> None:
    # acct3 carries the vendor's early warning word at 33 %: a status, not a lack of headroom.
    body = posture(acct("acct1", 100, active=True), acct("acct2", 91, 40),
                   acct("acct3", 33, 20, status="allowed_warning"))
    out = run(body)
    assert out["advice"] == "switch" and out["to"] == {"label": "acct3", "email": "acct3@example.com"}
    assert [(r["label"], r["headroomPct"]) for r in cands(out)] == [("acct3", 67.0), ("acct2", 9.0)]


def test_a_sibling_that_reaches_its_reset_ranks_before_a_roomier_one_that_does_not() -> None:
    body = posture(acct("acct1", 100, active=True), acct("acct2", 60), acct("acct3", 30))
    out = run(body, trajectory(acct2=80.0, acct3=130.0))
    assert out["to"]["label"] == "acct2"
    assert [(r["label"], r["reachesReset"]) for r in cands(out)] == [("acct2", True), ("acct3", False)]


def test_the_automatic_switch_never_moves_to_a_fuller_account() -> None:
    # SVC_AUTO_SWITCH_AT=80: the active account at 85 %, the only sibling at 95 %.
    body = posture(acct("acct1", 85, 30, active=True), acct("acct2", 95, 30))
    out = run(body, ceiling=80)
    assert out["advice"] == "none" and out["to"] is None and cands(out) == []
    # Every other account is still listed, with its health and no claim of headroom it lacks.
    assert [(r["label"], r["health"], r["candidate"]) for r in out["ranked"]] == [("acct2", "ok", False)]
    # Below its threshold, a sibling with room is the target.
    out = run(posture(acct("acct1", 85, 30, active=True), acct("acct2", 40, 30)), ceiling=80)
    assert out["advice"] == "switch" and out["to"]["label"] == "acct2"
    # And without the threshold, 85 % is below 100 %: stay.
    assert run(body)["advice"] == "stay"


def test_stay_when_below_the_limit_and_the_forecast_reaches_the_reset() -> None:
    out = run(posture(acct("acct1", 50, active=True), acct("acct2", 5)))
    assert out["advice"] == "stay" and out["to"] is None and out["waitS"] is None
    assert out["active"] == {"label": "acct1", "email": "acct1@example.com", "health": "ok", "note": None,
                             "fix": None}


def test_a_forecast_that_misses_the_reset_switches_to_a_sibling_that_reaches_it() -> None:
    out = run(posture(acct("acct1", 50, active=True), acct("acct2", 5)), trajectory(acct1=140.0, acct2=20.0))
    assert out["advice"] == "switch" and out["to"]["label"] == "acct2"
    assert "forecast" in out["reason"]


def test_no_candidate_stays_while_below_the_limit_and_says_its_forecast() -> None:
    out = run(posture(acct("acct1", 50, active=True), acct("acct2", 70)), trajectory(acct1=140.0))
    assert out["advice"] == "stay" and "forecast" in out["reason"] and out["to"] is None


def test_none_says_when_the_holding_window_resets() -> None:
    out = run(posture(acct("acct1", 100, active=True, five_reset=2 * HOUR), acct("acct2", 100)))
    assert out["advice"] == "none" and out["waitS"] == 7200 and out["to"] is None
    assert out["waitUntil"] == iso_from_ms(NOW + 2 * HOUR)


def test_the_reserve_and_the_wait_setting() -> None:
    body = posture(acct("acct1", 92, active=True, five_reset=20 * 60_000), acct("acct2", 50))
    assert run(body)["advice"] == "stay"
    assert run(body, reserve=10)["advice"] == "switch"  # 20 min is past the default 600 s
    out = run(body, reserve=10, wait_s=1800)
    assert out["advice"] == "wait" and out["waitS"] == 1200
    # A sibling over the limit on its own is no candidate.
    assert cands(run(posture(acct("acct1", 100, active=True), acct("acct2", 93)), reserve=10)) == []


def test_an_extra_window_at_100_holds_the_account_and_bars_a_sibling() -> None:
    extra = [{"pct": 100.0, "resetsAt": iso_from_ms(NOW + 4 * HOUR), "status": "rejected", "derived": True,
              "seconds": 17940, "name": None}]
    body = posture(acct("codex-a", 10, active=True, extra=extra), acct("codex-b", 30))
    out = run(body, provider="codex")
    assert out["advice"] == "switch" and out["to"]["label"] == "codex-b"
    body = posture(acct("codex-a", 100, active=True), acct("codex-b", 10, extra=extra))
    assert cands(run(body, provider="codex")) == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "12", True, None, -5, [1], {"x": 1}])
def test_an_unreadable_window_is_never_headroom(bad: Any) -> None:
    sibling = acct("acct2", 10)
    sibling["sevenDay"] = {"pct": bad, "resetsAt": None, "status": "allowed"}
    out = run(posture(acct("acct1", 100, active=True), sibling))
    assert cands(out) == [] and out["advice"] == "none"


def test_no_active_account_switches_to_the_best_account() -> None:
    out = run(posture(acct("acct1", 40), acct("acct2", 10)))
    assert out["advice"] == "switch" and out["to"]["label"] == "acct2" and out["active"] is None


@pytest.mark.parametrize("body", [None, [], "x", {"available": False, "node": "n"},
                                  {"available": True, "error": {"kind": "timeout"}}, {"available": True}])
def test_no_usable_posture_is_none(body: Any) -> None:
    out = run(body)
    assert out["advice"] == "none" and out["to"] is None and out["ranked"] == []


def test_the_wait_setting_is_read_strictly() -> None:
    from svcposture.settings import Settings
    assert Settings.from_environ({}).advice_wait_s == 600
    assert Settings.from_environ({"SVC_ADVICE_WAIT_S": "30"}).advice_wait_s == 30
    assert Settings.from_environ({"SVC_ADVICE_WAIT_S": "0"}).advice_wait_s == 0
    for junk in ("-1", "1e3", "ten", "604801", "3.5"):
        settings = Settings.from_environ({"SVC_ADVICE_WAIT_S": junk})
        assert settings.advice_wait_s == 600, junk


def test_a_wait_setting_of_0_never_waits() -> None:
    body = posture(acct("acct1", 100, active=True, five_reset=30_000), acct("acct2", 20))
    assert run(body, wait_s=0)["advice"] == "switch"
    assert run(posture(acct("acct1", 100, active=True, five_reset=-5_000), acct("acct2", 20)))["advice"] == "wait"


# ---------------------------------------------------------------- properties

PCT = st.one_of(st.floats(min_value=0, max_value=120, allow_nan=False), st.integers(min_value=0, max_value=120))
HOSTILE = st.one_of(PCT, st.just(float("nan")), st.just(float("inf")), st.just(-1.0), st.text(max_size=3),
                    st.booleans(), st.none())
RESETS = st.one_of(st.none(), st.integers(min_value=-HOUR, max_value=8 * 24 * HOUR))
WORDS = st.sampled_from([None, "allowed", "allowed_warning", "rejected", "weird"])


@st.composite
def accounts(draw: Any) -> Dict[str, Any]:
    labels = draw(st.lists(st.sampled_from(["acct%d" % i for i in range(1, 7)]), min_size=1, max_size=5,
                           unique=True))
    active_at = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=len(labels) - 1)))
    views = []
    for i, label in enumerate(labels):
        view: Dict[str, Any] = {"label": label, "email": None, "active": i == active_at,
                                "bindingStatus": draw(WORDS), "bindingWindow": "five_hour",
                                "error": draw(st.one_of(st.none(), st.just({"kind": "timeout"}))) if draw(
                                    st.booleans()) else None}
        for field in ("fiveHour", "sevenDay"):
            view[field] = draw(st.one_of(st.none(), st.builds(lambda p, r, s: {
                "pct": p, "resetsAt": iso_from_ms(NOW + r) if r is not None else None, "status": s},
                HOSTILE, RESETS, WORDS)))
        if draw(st.booleans()):
            view["extraWindows"] = [{"pct": draw(HOSTILE), "resetsAt": None, "status": draw(WORDS),
                                     "seconds": 17940, "name": None}]
        views.append(view)
    active = views[active_at] if active_at is not None else None
    return {"available": True, "node": "n", "probedAt": NOW, "generatedAt": "x", "cached": True,
            "status": "ok", "active": active, "accounts": views, "siblingWithHeadroom": None}


def _used(view: Dict[str, Any]) -> Optional[float]:
    windows, doubt = advice.windows_of(view)
    return None if doubt or not windows else max(p for _n, p, _r, _s in windows)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(accounts(), st.integers(min_value=0, max_value=50), st.one_of(st.none(), st.floats(1, 100)),
       st.integers(min_value=0, max_value=3600))
def test_the_advice_never_names_a_worse_or_unreadable_account(body: Dict[str, Any], reserve: int,
                                                               ceiling: Optional[float], wait_s: int) -> None:
    out = run(body, reserve=reserve, ceiling=ceiling, wait_s=wait_s)
    assert out["advice"] in advice.ADVICE_WORDS
    limit = min(100 - reserve, ceiling if ceiling is not None else 101)
    by_label = {a["label"]: a for a in body["accounts"]}
    active = body["active"]
    assert sorted(r["label"] for r in out["ranked"]) == sorted(
        a["label"] for a in body["accounts"] if not a["active"])
    for row in out["ranked"]:
        assert row["candidate"] or row not in cands(out)
        if row["health"] != "ok":
            # Not read: nothing is said of its headroom.
            assert row["headroomPct"] is None and not row["candidate"] and row["note"]
    for row in cands(out):
        view = by_label[row["label"]]
        used = _used(view)
        assert not view["active"] and not view.get("error") and view["bindingStatus"] != "rejected"
        assert used is not None and used < limit and used < 100
        assert math.isclose(row["headroomPct"], round(limit - used, 1))
        if active is not None and _used(active) is not None and not active.get("error"):
            assert limit - used > limit - _used(active)
    keys = [(not r["reachesReset"], -r["headroomPct"], r["label"]) for r in cands(out)]
    for a, b in zip(keys, keys[1:]):  # headroomPct is rounded: labels may tie-break below its precision
        assert a[0] < b[0] or (a[0] == b[0] and a[1] <= b[1])
    if out["advice"] == "switch":
        assert out["to"] == {"label": cands(out)[0]["label"], "email": cands(out)[0]["email"]}
    else:
        assert out["to"] is None
    if out["advice"] == "wait":
        assert out["waitS"] is not None and 0 <= out["waitS"] <= wait_s
    # waitUntil and waitS come together, and say the same instant to the second.
    assert (out["waitUntil"] is None) == (out["waitS"] is None)
    if out["waitUntil"] is not None:
        assert out["waitS"] == max(0, -(-(advice.iso_ms(out["waitUntil"]) - NOW) // 1000))
    if out["advice"] == "stay" and active is not None:
        used = _used(active)
        assert used is not None and used < limit and not active.get("error")


@settings(max_examples=200, deadline=None)
@given(accounts(), st.randoms(use_true_random=False))
def test_the_advice_does_not_depend_on_the_accounts_order(body: Dict[str, Any], rnd: Any) -> None:
    shuffled = dict(body, accounts=list(body["accounts"]))
    rnd.shuffle(shuffled["accounts"])
    assert run(body) == run(shuffled)
