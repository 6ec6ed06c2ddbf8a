"""The human reserve, `svc.posture.reservePct`: the share of every account automation leaves for people.

A SHARED Layer-2 setting (docs/steering.md), read like the anchor: cluster-secrets.json
first, then config.json. An integer from 0 to 50; 0 (no reserve) when unset.

Its own small module because `svc-monitor guard` reads it on every call and must
cost little more than the interpreter's start: no pathlib, no config layers, no
typing at run time.
"""
from __future__ import annotations

import os

from ._text import loads_bounded
from .errors import SvcpostureError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, Tuple

RESERVE_KEY = "svc.posture.reservePct"
MAX_RESERVE = 50
# The files the getter reads, in order, relative to ~/.config/svc.
RESERVE_FILES = ("cluster-secrets.json", "config.json")
# A config file larger than this is not one (config.read_json allows 4 MiB too).
MAX_CONFIG_BYTES = 4 * 1024 * 1024


class ReserveError(SvcpostureError, ValueError):
    """The configured reserve is not an integer from 0 to 50, or its file is corrupt."""


def parse_reserve(value: "Any") -> "Optional[int]":
    """An integer 0..50 (a JSON integer, or a whole float like 10.0), else None.

    Booleans are refused: `true` is not a percentage."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_RESERVE:
        return value
    return None


def parse_reserve_text(text: str) -> "Optional[int]":
    """`--reserve PCT` as given on a command line: decimal digits only, 0..50."""
    if not text.isdigit() or not text.isascii() or len(text) > 3:
        return None
    return parse_reserve(int(text))


def _lookup(data: "Any") -> "Any":
    node = data
    for part in RESERVE_KEY.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def reserve_pct(home: str) -> int:
    """The reserve configured for the node at `home` (an absolute directory).

    The first file holding a non-null value decides; a value that is not an
    integer 0..50, or a file that is not a JSON object, raises ReserveError
    naming the file. A missing file counts as unset.
    """
    return reserve_source(home)[0]


def reserve_source(home: str) -> "Tuple[int, Optional[str]]":
    """(the reserve, the file it was read from: None when no file sets it), by reserve_pct's rule."""
    for name in RESERVE_FILES:
        path = os.path.join(home, ".config", "svc", name)
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_CONFIG_BYTES + 1)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ReserveError("%s: cannot read: %s" % (path, exc.strerror or exc)) from None
        if not raw.strip():
            continue
        try:
            data = loads_bounded(raw, MAX_CONFIG_BYTES)
        except ValueError:
            raise ReserveError("%s: not valid JSON" % path) from None
        if not isinstance(data, dict):
            raise ReserveError("%s: top level must be a JSON object" % path)
        value = _lookup(data)
        if value is None:
            continue
        pct = parse_reserve(value)
        if pct is None:
            raise ReserveError("%s: %s must be an integer from 0 to %d, not %s"
                               % (path, RESERVE_KEY, MAX_RESERVE, _shown(value)))
        return pct, path
    return 0, None


def reserve_or_zero(home: str) -> int:
    """reserve_pct for the monitor's own views: a bad value counts as no reserve
    (the commands that act on it, guard and switch, refuse it instead)."""
    try:
        return reserve_pct(home)
    except ReserveError:
        return 0


def _shown(value: "Any") -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
