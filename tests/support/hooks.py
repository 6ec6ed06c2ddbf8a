"""The test side's hooks into the processes a test starts: `hooked(env, **hooks)` (docs/testing.md).

The package reads no test-only variable; `tests/support/sitehooks/sitecustomize.py`
patches it in each process whose environment names a hook. This helper puts
that directory on PYTHONPATH and sets the hooks' variables:

    hooked(env, quota_poll_s=0.5)           # the quota sampler polls every 0.5 s
    hooked(env, reset_margin_s=1)           # the probe at a reset, 1 s past it
    hooked(env, auto_switch_gap_s=0)        # no gap between automatic switches
    hooked(env, switch_gate="/tmp/gate")    # a switch waits for that path before its rename
    hooked(env, switch_pause="rename:5")    # a switch holds 5 s after its rename
    hooked(env, token_swap="/tmp/other")    # that file replaces the token file once it is open
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Mapping

SITEHOOKS = Path(__file__).resolve().parent / "sitehooks"
HOOKS = ("reset_margin_s", "quota_poll_s", "auto_switch_gap_s", "switch_gate", "switch_pause", "token_swap")


def hook_var(name: str) -> str:
    """The variable of hook `name` (`quota_poll_s` -> SVCTEST_QUOTA_POLL_S)."""
    if name not in HOOKS:
        raise TypeError("no test hook named %r (one of %s)" % (name, ", ".join(HOOKS)))
    return "SVCTEST_" + name.upper()


def hooked(env: Mapping[str, str], **hooks: Any) -> Dict[str, str]:
    """A copy of `env` with the hooks' directory first on PYTHONPATH and each hook's variable set."""
    out = dict(env)
    path = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITEHOOKS)]
    out["PYTHONPATH"] = os.pathsep.join([str(SITEHOOKS)] + path)
    for name, value in hooks.items():
        out[hook_var(name)] = str(value)
    return out
