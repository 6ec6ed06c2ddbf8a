"""The node's settings, read from the environment once.

Settings.from_environ(environ) is a pure function of the mapping it is given:
it reads every SVC_MONITOR_*, SVC_SSE_KEEPALIVE_S, SVC_FLEET_TTL_S and
SVC_ACCOUNTS_PROBE knob the monitor's application and sockets use, checks
them, and returns a frozen object. Nothing downstream reads the environment
for these again, so a test builds the monitor from a dict and a change to
os.environ after start-up changes nothing.

The module imports nothing at load time: the terminal clients take
DEFAULT_PORT from here and their start-up time is counted.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

DEFAULT_BIND = "127.0.0.1"
DEFAULT_PORT = 7400
DEFAULT_MAX_STREAMS = 1024
DEFAULT_MAX_CONNECTIONS = 4096
DEFAULT_KEEPALIVE_S = 15.0
# Slowloris: a request (or the next one on a kept-alive connection) must
# arrive within this many seconds unless SVC_MONITOR_REQUEST_TIMEOUT_S says otherwise.
DEFAULT_REQUEST_TIMEOUT_S = 10.0
DEFAULT_FLEET_TTL_S = 60.0
MAX_FLEET_TTL_S = 3600.0


def probing_on(environ: Mapping[str, str]) -> bool:
    """Whether the node probes its provider: yes unless SVC_ACCOUNTS_PROBE=0."""
    return environ.get("SVC_ACCOUNTS_PROBE", "").strip() != "0"


class Settings:
    """What the monitor was told by its environment; frozen once built.

    A bad value of a setting that decides what the monitor serves
    (SVC_MONITOR_*, SVC_SSE_KEEPALIVE_S) raises InvalidSetting; the fleet's
    TTL only tunes timing and falls back to its default.
    """

    __slots__ = ("probe", "max_streams", "keepalive_s", "read_guard", "request_timeout_s",
                 "max_connections", "trusted_hosts", "trusted_origins", "fleet_ttl_s")

    def __init__(self, *, probe: bool = True, max_streams: int = DEFAULT_MAX_STREAMS,
                 keepalive_s: float = DEFAULT_KEEPALIVE_S, read_guard: bool = False,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, trusted_hosts: str = "",
                 trusted_origins: str = "", fleet_ttl_s: float = DEFAULT_FLEET_TTL_S) -> None:
        values = dict(probe=probe, max_streams=max_streams, keepalive_s=keepalive_s, read_guard=read_guard,
                      request_timeout_s=request_timeout_s, max_connections=max_connections,
                      trusted_hosts=trusted_hosts, trusted_origins=trusted_origins, fleet_ttl_s=fleet_ttl_s)
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "Settings":
        from ._env import env_number

        return cls(
            probe=probing_on(environ),
            max_streams=env_number(environ, "SVC_MONITOR_MAX_STREAMS", DEFAULT_MAX_STREAMS,
                                   low=1, high=100000, kind=int, strict=True),
            keepalive_s=env_number(environ, "SVC_SSE_KEEPALIVE_S", DEFAULT_KEEPALIVE_S,
                                   low=0.05, high=3600.0, strict=True),
            read_guard=environ.get("SVC_MONITOR_READ_GUARD", "") == "1",
            request_timeout_s=env_number(environ, "SVC_MONITOR_REQUEST_TIMEOUT_S", DEFAULT_REQUEST_TIMEOUT_S,
                                         low=0.1, high=300.0, strict=True),
            max_connections=env_number(environ, "SVC_MONITOR_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS,
                                       low=16, high=1000000, kind=int, strict=True),
            trusted_hosts=environ.get("SVC_MONITOR_TRUSTED_HOSTS", ""),
            trusted_origins=environ.get("SVC_MONITOR_TRUSTED_ORIGINS", ""),
            fleet_ttl_s=env_number(environ, "SVC_FLEET_TTL_S", DEFAULT_FLEET_TTL_S, low=0.0, high=MAX_FLEET_TTL_S))

    def replace(self, **changes: Any) -> "Settings":
        """A copy with `changes` applied (the object itself never changes)."""
        values = {name: getattr(self, name) for name in self.__slots__}
        values.update(changes)
        return type(self)(**values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Settings are frozen; use replace()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Settings are frozen; use replace()")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def __repr__(self) -> str:
        return "Settings(%s)" % ", ".join("%s=%r" % (n, getattr(self, n)) for n in self.__slots__)
