"""Reading numbers and ports from environment variables and arguments.

Two policies, chosen by the caller, because the consequences differ: a knob
that only tunes timing falls back to its default on a bad value (a typo must
not stop a node), while a setting that decides what the monitor serves
(`SVC_MONITOR_*`, a port) is refused with a clear error.
"""
from __future__ import annotations

import math
from typing import Mapping, Optional, Union

from .errors import SvcpostureError

Number = Union[int, float]


class InvalidSetting(SvcpostureError, ValueError):
    """An environment variable or argument that does not hold a usable value."""


def _parse(raw: str, kind: type) -> Optional[Number]:
    try:
        value = kind(raw)
    except ValueError:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def env_number(environ: Mapping[str, str], name: str, default: Number, *, low: Number,
               high: Optional[Number] = None, kind: type = float, strict: bool = False) -> Number:
    """The value of `name` as `kind`, within [low, high].

    Unset or blank gives `default`. Anything unparseable, non-finite or out of
    range gives `default`, or raises InvalidSetting naming the variable when
    `strict` is true.
    """
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return default
    value = _parse(raw.strip(), kind)
    if value is None:
        if strict:
            noun = "an integer" if kind is int else "a number"
            raise InvalidSetting("%s=%r is not %s" % (name, raw.strip(), noun))
        return default
    if value < low or (high is not None and value > high):
        if strict:
            raise InvalidSetting("%s=%s is outside %s..%s" % (name, raw.strip(), low, high))
        return default
    return value


def parse_port(raw: str, source: str) -> int:
    """A TCP port 0..65535 from text; InvalidSetting names `source` otherwise."""
    try:
        port = int(raw.strip())
    except ValueError:
        raise InvalidSetting("%s: %r is not a port number" % (source, raw)) from None
    if not 0 <= port <= 65535:
        raise InvalidSetting("%s: %d is not in 0..65535" % (source, port))
    return port
