"""Text that is safe to show, words that are safe to copy, and JSON that is safe to read.

Anything printed to a terminal or a log may have come from a hostile peer, a
tracker or a monitor reply; an escape sequence in it could rewrite the
operator's screen, so C0, DEL and C1 controls never pass through.
"""
from __future__ import annotations

import json
import re

# typing costs more to import than this module; `svc-monitor statusline`
# imports it on every render of the agent's status line.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROLS = dict.fromkeys(list(range(0x20)) + list(range(0x7f, 0xa0)), "?")

# The shapes of the few words the package copies from a report it did not
# build itself (the probe child's JSON, a history row). Anything else is
# dropped, never escaped: a whitelist cannot be talked around.
EMAIL = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
# Unanchored: finds the address in an env file's inline comment.
EMAIL_RE = re.compile(EMAIL)
# A provider status or claim word (`allowed_warning`, `five_hour`).
WORD_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# An account label: the env file suffix in lower case.
LABEL_RE = re.compile(r"^[a-z0-9_]{1,64}$")


def printable(text: Any) -> str:
    """`str(text)` with every control character replaced by `?`."""
    return str(text).translate(_CONTROLS)


def has_control(text: str) -> bool:
    return CONTROL_RE.search(text) is not None


def loads_bounded(raw: bytes, limit: int) -> Any:
    """Decode UTF-8 JSON of at most `limit` bytes; ValueError otherwise.

    Callers read `limit + 1` bytes so that an oversized reply is told apart
    from one that fits exactly. RecursionError (deep nesting) and the int
    digit limit both surface as ValueError, so one except clause covers every
    hostile input.
    """
    if len(raw) > limit:
        raise ValueError("larger than %d bytes" % limit)
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply") from None
