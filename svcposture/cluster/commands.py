"""The svc-cluster command table: each module registers its own commands; this
fixes their order in `svc-cluster --help`.

Every handler is `cmd_<name>(ns) -> int`; every module registers its handlers
with `add_commands(sub)`.
"""
from __future__ import annotations

from typing import Any

from . import doctor, liveness, mirror, owner, roster, status, sync

# classify bundle join | roster | sync | set-anchor status | doctor | owner
MODULES = (mirror, roster, sync, liveness, status, doctor, owner)


def add_commands(sub: Any) -> None:
    for module in MODULES:
        module.add_commands(sub)
