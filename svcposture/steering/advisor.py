"""The advice beside each vendor's posture (docs/steering.md): computed once per probe, served cached.

The monitor hands every fresh probe result of each vendor to `Advisor.observer(provider)`
after the trajectory service has seen it, so the forecasts of the same probe are in the
trajectory body. The advice (svcposture.advice) is computed there, once, before the
result is cached or pushed; in every vendor's body `siblingWithHeadroom` is set to its first
candidate, so the posture, its stream and /api/advice name the same account with the
same probedAt. `advice_body` is the pure builder of the /api/advice body.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, Mapping, Optional, Tuple

from .. import _time
from .._reserve import reserve_or_zero
from .._text import is_int
from .advice import DEFAULT_WAIT_S, advise, first_candidate

def reserve_of(trajectory_body: Any, home: Optional[str]) -> int:
    """The human reserve the trajectory body was built with (read once per probe), else the node's."""
    pct = trajectory_body.get("reservePct") if isinstance(trajectory_body, Mapping) else None
    if is_int(pct) and 0 <= pct <= 50:
        return pct
    return reserve_or_zero(home) if home else 0


def advice_body(summary: Mapping[str, Any], advice: Mapping[str, Any], reserve: int,
                generated_ms: int) -> Dict[str, Any]:
    """The /api/advice body: the posture's node and probe time, the reserve, then the advice."""
    if summary.get("available") is not True:
        return {"available": False, "node": summary.get("node")}
    body: Dict[str, Any] = {"available": True, "node": summary.get("node"),
                            "generatedAt": _time.iso_from_ms(generated_ms), "probedAt": summary.get("probedAt"),
                            "reservePct": reserve}
    body.update(advice)
    # waitS counts from the probe: a cached read says what is left of it.
    probed, wait = summary.get("probedAt"), advice.get("waitS")
    if is_int(probed) and is_int(wait):
        body["waitS"] = max(0, wait - max(0, generated_ms - probed) // 1000)
    return body


def shown_path(path: Optional[str], home: Optional[str]) -> Optional[str]:
    """A path as a person types it: under the home directory, `~/...`."""
    if not path:
        return None
    if home and home != "/" and path.startswith(home.rstrip("/") + "/"):
        return "~/" + path[len(home.rstrip("/")) + 1:]
    return path


class Advisor:
    """Each vendor's newest advice, keyed by the summary it was computed from.

    `accounts_env` is the node's accounts env file: the fix of a refused
    credential names it (and the account's line in it)."""

    def __init__(self, trajectory: Any, wait_s: int = DEFAULT_WAIT_S, home: Optional[str] = None,
                 accounts_env: Optional[str] = None) -> None:
        self.trajectory = trajectory
        self.home = home
        self.accounts_file = shown_path(accounts_env, home)
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._latest: Dict[str, Tuple[Any, Dict[str, Any], int]] = {}

    def _trajectory_body(self) -> Any:
        return self.trajectory.body() if self.trajectory is not None else None

    def compute(self, summary: Mapping[str, Any], provider: str) -> Tuple[Dict[str, Any], int]:
        """(the advice, the reserve it used) for one summary of `provider`'s posture (pure but for the clock)."""
        body = self._trajectory_body()
        reserve = reserve_of(body, self.home)
        now = summary.get("probedAt") if is_int(summary.get("probedAt")) else _time.now_ms()
        return advise(summary, body, provider=provider, reserve=reserve, wait_s=self.wait_s,
                      now_ms=now, accounts_file=self.accounts_file), reserve

    def observer(self, provider: str) -> Any:
        """The posture observer for `provider`: the advice computed, and siblingWithHeadroom
        set to its first candidate whenever there is one (the contract asks for a sibling
        with headroom; the advice is what every surface calls that). Without a candidate the
        body keeps the rule it was built with (docs/posture.md)."""
        def observe(summary: Dict[str, Any], edge: Any = None) -> None:
            advice, reserve = self.compute(summary, provider)
            first = first_candidate(advice)
            if first is not None and summary.get("available") is True and "siblingWithHeadroom" in summary:
                summary["siblingWithHeadroom"] = first
            with self._lock:
                self._latest[provider] = (summary, advice, reserve)
        return observe

    def advice_for(self, summary: Mapping[str, Any], provider: str) -> Tuple[Dict[str, Any], int]:
        """(advice, reserve) of `summary`: the one computed with its probe, else computed now."""
        with self._lock:
            latest = self._latest.get(provider)
        if latest is not None and latest[0] is summary:
            return latest[1], latest[2]
        return self.compute(summary, provider)
