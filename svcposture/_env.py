"""Reading numbers and ports from environment variables and arguments.

Two policies, chosen by the caller, because the consequences differ: a knob
that only tunes timing falls back to its default on a bad value (a typo must
not stop a node), while a setting that decides what the monitor serves
(`SVC_MONITOR_*`, a port) is refused with a clear error.
"""
from __future__ import annotations

import math
from typing import Mapping, Optional, Union

from .errors import FACE, SvcpostureError

Number = Union[int, float]


class InvalidSetting(SvcpostureError, ValueError):
    """An environment variable or argument that does not hold a usable value."""

    __module__ = FACE


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
    text = raw.strip()
    try:
        value = kind(text)
    except ValueError:
        if strict:
            noun = "an integer" if kind is int else "a number"
            raise InvalidSetting("%s=%r is not %s" % (name, text, noun)) from None
        return default
    # NaN fails every comparison, so it lands here as out of range too.
    if not (value >= low and (high is None or value <= high)) or not math.isfinite(value):
        if strict:
            shown = "%d" % value if kind is int else text
            raise InvalidSetting("%s=%s is outside %s..%s" % (name, shown, low, high))
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
