"""svcposture.posture.health (docs/posture.md, "Health"): the pure rules, one by one.

The real monitor's side of it is tests/steering/test_health.py and tests/posture/test_health_bad_input.py.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from svcposture.posture.health import account_health, apply_health
from svcposture.summary import posture_body

NOW = 1_800_000_000_000
MINUTE = 60_000
INTERVAL = 5 * MINUTE


def named(error: Any) -> Optional[str]:
    """A vendor's error_health: auth is refused, transport unreachable, a 429 limited."""
    kind = error.get("kind")
    return {"auth": "refused", "transport": "unreachable"}.get(kind) or (
        "limited" if error.get("httpStatus") == 429 else None)


def view(label: str, pct: Optional[float] = 10.0, *, active: bool = False, error: Any = None,
         **more: Any) -> Dict[str, Any]:
    window = {"pct": pct, "resetsAt": None, "status": "allowed"} if pct is not None else None
    out = {"label": label, "email": None, "active": active, "overallStatus": "allowed" if window else None,
           "representativeClaim": None, "bindingWindow": "five_hour" if window else None,
           "bindingStatus": "allowed" if window else None, "fiveHour": window, "sevenDay": None, "error": error}
    out.update(more)
    return out


def body(*views: Dict[str, Any], at: int = NOW) -> Dict[str, Any]:
    return posture_body("n", at, list(views))


def test_each_health_from_the_view_the_time_and_the_interval() -> None:
    assert account_health({"readAt": NOW}, NOW, INTERVAL, named) == "ok"
    assert account_health({"readAt": NOW - 3 * INTERVAL}, NOW, INTERVAL, named) == "ok"
    assert account_health({"readAt": NOW - 3 * INTERVAL - 1}, NOW, INTERVAL, named) == "stale"
    assert account_health({"readAt": None}, NOW, INTERVAL, named) == "unread"
    for kind, health in (("auth", "refused"), ("transport", "unreachable")):
        # The error's own health, whatever figures are kept.
        assert account_health({"readAt": NOW, "error": {"kind": kind}}, NOW, INTERVAL, named) == health
    assert account_health({"readAt": None, "error": {"kind": "http", "httpStatus": 429}}, NOW, INTERVAL,
                          named) == "limited"
    # An error the vendor does not name: kept figures are stale, none is unread.
    assert account_health({"readAt": NOW, "error": {"kind": "parse"}}, NOW, INTERVAL, named) == "stale"
    assert account_health({"readAt": None, "error": {"kind": "parse"}}, NOW, INTERVAL, named) == "unread"
    assert account_health({"readAt": None, "error": {"kind": "auth"}}, NOW, INTERVAL, None) == "unread"


def test_a_failed_reading_keeps_the_last_good_figures_with_their_time() -> None:
    first, kept = apply_health(body(view("a", 42.0, active=True), view("b", 5.0)), {}, INTERVAL, named)
    assert [(v["label"], v["health"], v["readAt"]) for v in first["accounts"]] == [("a", "ok", NOW), ("b", "ok", NOW)]
    later = NOW + INTERVAL
    error = {"kind": "transport", "message": "x", "httpStatus": None}
    second, kept = apply_health(body(view("a", None, active=True, error=error), view("b", 6.0), at=later), kept,
                                INTERVAL, named)
    a = second["accounts"][0]
    assert (a["health"], a["fiveHour"]["pct"], a["readAt"], a["error"]) == ("unreachable", 42.0, NOW, error)
    assert a["bindingStatus"] == "allowed" and second["active"] == a
    assert second["status"] == "error"  # the node status is the contract's: the active account erred
    # Read well again: its own figures, its own time.
    third, kept = apply_health(body(view("a", 44.0, active=True), view("b", 6.0), at=later + INTERVAL), kept,
                               INTERVAL, named)
    assert (third["accounts"][0]["health"], third["accounts"][0]["fiveHour"]["pct"]) == ("ok", 44.0)


def test_memory_forgets_what_the_file_no_longer_has_and_a_node_error_keeps_it() -> None:
    _, kept = apply_health(body(view("a", 42.0), view("b", 5.0)), {}, INTERVAL, named)
    node_error = {"available": True, "node": "n", "probedAt": NOW, "status": "error", "active": None,
                  "accounts": [], "siblingWithHeadroom": None, "error": {"kind": "config"}}
    assert apply_health(node_error, kept, INTERVAL, named) == (node_error, kept)
    assert apply_health({"available": False, "node": "n"}, kept, INTERVAL, named)[1] == {}
    _, only_a = apply_health(body(view("a", 42.0)), kept, INTERVAL, named)
    assert set(only_a) == {"a"}
    # b comes back refused: nothing of it is remembered, so it shows no figures.
    back = apply_health(body(view("a", 42.0), view("b", None, error={"kind": "auth"})), only_a, INTERVAL,
                        named)[0]
    assert (back["accounts"][1]["health"], back["accounts"][1]["fiveHour"], back["accounts"][1]["readAt"]) == \
        ("refused", None, None)


def test_a_vendor_sample_dates_its_reading_and_the_sibling_is_always_healthy() -> None:
    old = NOW - 4 * INTERVAL
    summary = body(view("a", 95.0, active=True), view("b", 5.0, sampledAt=old), view("c", 20.0))
    out, _ = apply_health(summary, {}, INTERVAL, named)
    assert summary["siblingWithHeadroom"]["label"] == "b"
    assert [v["health"] for v in out["accounts"]] == ["ok", "stale", "ok"]
    assert out["accounts"][1]["readAt"] == old
    # A stale sibling is never the one with headroom.
    assert out["siblingWithHeadroom"] == {"label": "c", "email": None}
