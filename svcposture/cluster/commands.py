"""The svc-cluster command table: each module registers its own commands; this
fixes their order in `svc-cluster --help`.

Every handler is `cmd_<name>(ns) -> int`; every module registers its handlers
with `add_commands(sub)`. Running one command imports only the module that
registers it: `svc-cluster status` does not load the doctor's checks, whose imports
took a twentieth of a 10,000-host status.
"""
from __future__ import annotations

import importlib
from typing import Any, Optional, Sequence, Tuple

# (module, the commands it registers), in `svc-cluster --help` order:
# classify bundle join | roster | sync | set-anchor status | doctor | owner
COMMANDS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("mirror", ("classify", "bundle", "join")), ("roster", ("roster",)), ("sync", ("sync",)),
    ("liveness", ("set-anchor",)), ("status", ("status",)), ("doctor", ("doctor",)), ("owner", ("owner",)))


def add_commands(sub: Any, argv: Optional[Sequence[str]] = None) -> None:
    """Register the commands; with `argv`, only the module of the command it names, when it
    names one (anything else, `--help` included, registers them all)."""
    first = argv[0] if argv else None
    chosen = [m for m, names in COMMANDS if first in names] or [m for m, _ in COMMANDS]
    for module in chosen:
        importlib.import_module("." + module, __package__).add_commands(sub)
