"""GET /api/login: this machine's Claude Code login, shown when no accounts file is set up.

The quota sampler already polls the interactive login's usage in its
token-scoped child (docs/posture.md); this module turns its newest sample into
the body of `GET /api/login` (docs/first-look.md):

    {"available": true, "node", "vendor": "claude", "loginName": "Claude Code", "plan",
     "fiveHour": {"pct", "resetsAt"}, "sevenDay": {...}, "extraWindows": [...],
     "extraUsage": {...} | null, "sampledAt", "source": "login"}

or, when there is nothing to show, `{"available": false, "node", "reason"}`
whose reason names the file the sampler looked for. Only the sampled numbers
and the plan name get here: the token never leaves the child. `extraWindows`
are the reply's other weekly buckets and model-scoped limits, `extraUsage` its
overage credits (usage.usage_extras); neither is in the contract's event.
`vendor` and `loginName` say whose login it is, so that the pages name it
("this machine's Claude Code login") without naming any vendor themselves.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from .._time import iso_from_ms
from .accounts import NAME

# The program whose interactive login the sampler reads, as the pages write it.
LOGIN_NAME = "Claude Code"

# (body field, contract pct key, contract resets_at key)
_WINDOWS = (
    ("fiveHour", "ratelimit.five_hour_pct", "ratelimit.five_hour_resets_at"),
    ("sevenDay", "ratelimit.seven_day_pct", "ratelimit.seven_day_resets_at"),
)


class LoginSample:
    """The newest usage sample of the login: its contract values and when it was taken."""

    __slots__ = ("values", "sampled_ms", "extras")

    def __init__(self, values: Mapping[str, Any], sampled_ms: int,
                 extras: Optional[Mapping[str, Any]] = None) -> None:
        self.values = dict(values)
        self.sampled_ms = sampled_ms
        self.extras = dict(extras or {})


def login_body(node: str, sample: Optional[LoginSample], reason: str) -> Dict[str, Any]:
    """The /api/login body: the sample's windows, or unavailable with `reason`."""
    if sample is None:
        return {"available": False, "node": node, "reason": reason}
    body: Dict[str, Any] = {"available": True, "node": node, "vendor": NAME, "loginName": LOGIN_NAME}
    plan = sample.values.get("subscription.type")
    body["plan"] = plan if isinstance(plan, str) and plan else None
    for field, pct_key, reset_key in _WINDOWS:
        pct = sample.values.get(pct_key)
        if isinstance(pct, (int, float)) and not isinstance(pct, bool):
            reset = sample.values.get(reset_key)
            body[field] = {"pct": pct, "resetsAt": reset if isinstance(reset, str) else None}
        else:
            body[field] = None
    body["extraWindows"] = list(sample.extras.get("extraWindows") or [])
    body["extraUsage"] = sample.extras.get("extraUsage")
    body["sampledAt"] = iso_from_ms(sample.sampled_ms)
    body["source"] = "login"
    return body


def no_sampler_reason() -> str:
    return "the quota sampler does not run in this process (only the svc-monitor command starts it)"
