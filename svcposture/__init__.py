"""Account posture, quota events and cluster liveness for one node.

The library face (docs/architecture.md). Everything but the version and `forecast` is
imported on first use (PEP 562), so `import svcposture` costs about a
millisecond and loads neither http.server, subprocess nor urllib:

    read_posture(home=None, *, environ=None, deadline_s=None) -> dict
    read_events(home=None, *, name=None, since=None) -> iterator of dicts
    read_history(home=None, *, hours=24) -> dict
    forecast(points, *, now_ms, resets_at_ms, window) -> dict | None
    owner(ticket, roster, live=None) -> str | None
    start_server(home=None, *, bind="127.0.0.1", port=0) -> (server, thread)

`home` is a node's home directory: its `svc/` and `.config/svc/` are used,
as $HOME's are by the commands. Every error raised derives from
SvcpostureError.
"""
from __future__ import annotations

from ._version import __version__
# Bound now: the pure function is small, and `svcposture.forecast` is then the function itself.
from .trajectory.forecast import forecast

# typing alone costs more to import than the rest of this file.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List

__all__ = [
    "__version__",
    "read_posture",
    "read_events",
    "read_history",
    "forecast",
    "owner",
    "start_server",
    "SvcpostureError",
    "ConfigError",
    "CorruptFileError",
    "EventLogError",
    "LatchError",
    "HistoryError",
    "InvalidSetting",
]

# name -> module that defines it, imported on first access.
_LAZY = {
    "read_posture": ".posture.service",
    "read_events": ".events",
    "read_history": ".trajectory.history",
    "owner": ".hrw",
    "start_server": ".monitor.main",
    "SvcpostureError": ".errors",
    "ConfigError": ".config",
    "CorruptFileError": "._files",
    "EventLogError": ".events",
    "LatchError": ".posture.latch",
    "HistoryError": ".trajectory.history",
    "InvalidSetting": ".settings",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> List[str]:
    # The face and nothing else: submodules and helpers loaded on the way are not API.
    return list(__all__)
