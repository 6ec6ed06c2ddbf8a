"""Text that is safe to show, words that are safe to copy, and JSON that is safe to read
(what counts as a number in it included).

Anything printed to a terminal or a log may have come from a hostile peer, a
tracker or a monitor reply; an escape sequence in it could rewrite the
operator's screen, so C0, DEL and C1 controls never pass through. Nor do the
characters that change what the operator sees without being seen: every
Unicode format character (category Cf: the bidirectional overrides such as
U+202E, zero-width spaces and joiners, the BOM) and the line and paragraph
separators U+2028/U+2029, which some terminals and editors break lines at.
"""
from __future__ import annotations

import math

# `re` and `json` are not imported here: they would cost `svc-monitor
# statusline` more than the rest of a render, and it needs neither. The
# patterns below are compiled on first use (PEP 562), JSON is read with the
# C scanner json itself uses, and typing is for the checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, Union

# The separators break a line as a newline does, so they show as one does (`?`);
# format characters are invisible by definition, so they are dropped.
_C0_C1 = frozenset(map(chr, list(range(0x20)) + list(range(0x7f, 0xa0))))
_CONTROLS = dict.fromkeys(list(range(0x20)) + list(range(0x7f, 0xa0)) + [0x2028, 0x2029], "?")

# The shapes of the few words the package copies from a report it did not
# build itself (the probe child's JSON, a history row). Anything else is
# dropped, never escaped: a whitelist cannot be talked around.
EMAIL = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
_PATTERNS = {
    "CONTROL_RE": r"[\x00-\x1f\x7f-\x9f]",
    # Unanchored: finds the address in an env file's inline comment.
    "EMAIL_RE": EMAIL,
    # A provider status or claim word (`allowed_warning`, `five_hour`).
    "WORD_RE": r"^[a-z][a-z0-9_]{0,39}$",
    # An account label: the env file suffix in lower case.
    "LABEL_RE": r"^[a-z0-9_]{1,64}$",
}


def __getattr__(name: str) -> Any:
    pattern = _PATTERNS.get(name)
    if pattern is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    import re

    compiled = re.compile(pattern)
    globals()[name] = compiled  # the next access is a plain attribute
    return compiled


def _pattern(name: str) -> Any:
    compiled = globals().get(name)
    return compiled if compiled is not None else __getattr__(name)


def word(value: Any) -> Optional[str]:
    """`value` when it is a word (WORD_RE: a provider status or claim name), else None.

    The whole string must match: `$` alone would let a trailing newline through.
    """
    return value if isinstance(value, str) and _pattern("WORD_RE").fullmatch(value) else None


def account_label(value: Any) -> Optional[str]:
    """`value` when it is an account label (LABEL_RE), else None; the whole string must match."""
    return value if isinstance(value, str) and _pattern("LABEL_RE").fullmatch(value) else None


# RFC 5321 caps an address at 254 octets; a longer match is not an email.
MAX_EMAIL = 254


def email_address(value: Any) -> Optional[str]:
    """`value` when the whole of it is one email address (EMAIL_RE, at most 254
    characters), else None: markup, escapes, invisible characters and line breaks are not."""
    if isinstance(value, str) and len(value) <= MAX_EMAIL and _pattern("EMAIL_RE").fullmatch(value):
        return value
    return None


def printable(text: Any) -> str:
    """`str(text)` with every control character and line or paragraph separator
    replaced by `?`, and every format (Cf) character removed."""
    text = str(text).translate(_CONTROLS)
    if text.isascii():
        return text  # no format character is ASCII: the common case costs no lookup
    return _without_format(text)


def _without_format(text: str) -> str:
    # unicodedata is imported only for non-ASCII text, which a status line
    # rarely holds; the interpreter's own Unicode database decides, so a format
    # character added by a later Unicode version is dropped too.
    from unicodedata import category

    return "".join(ch for ch in text if ch.isascii() or category(ch) != "Cf")


def has_control(text: str) -> bool:
    """Whether `text` holds a C0, DEL or C1 control (what CONTROL_RE finds);
    validators use it, and what they accept is still shown through printable."""
    return not _C0_C1.isdisjoint(text)


def loads_bounded(raw: bytes, limit: int) -> Any:
    """Decode UTF-8 JSON of at most `limit` bytes; ValueError otherwise.

    Callers read `limit + 1` bytes so that an oversized reply is told apart
    from one that fits exactly. RecursionError (deep nesting) and the int
    digit limit both surface as ValueError, so one except clause covers every
    hostile input. What it accepts and returns is exactly json.loads's.
    """
    if len(raw) > limit:
        raise ValueError("larger than %d bytes" % limit)
    try:
        return _json_loads()(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply") from None


_LOADS: "Optional[Callable[[str], Any]]" = None
_WHITESPACE = " \t\n\r"  # json's own: nothing else may surround a document
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Settings:
    """json.JSONDecoder()'s defaults, as the C scanner reads them."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__
    memo: "dict" = {}


def _json_loads() -> "Callable[[str], Any]":
    global _LOADS
    if _LOADS is None:
        try:
            from _json import make_scanner
        except ImportError:  # an interpreter without the C accelerator
            import json
            _LOADS = json.loads
        else:
            _LOADS = _scanner_loads(make_scanner(_Settings()))
    return _LOADS


def _scanner_loads(scan_once: Any) -> "Callable[[str], Any]":
    def loads(text: str) -> Any:
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = scan_once(text, start)
        except (StopIteration, SystemError, ValueError):
            # Malformed: json.loads says how. The C scanner reports errors through
            # json.decoder, which only json itself imports, so the verdict is its.
            import json
            return json.loads(text)
        if text[end:].lstrip(_WHITESPACE):
            raise ValueError("extra data at position %d" % end)
        return value
    return loads


# ---------------------------------------------------------------- numbers
# `True` is an `int` to Python but never a number to JSON: every check here
# refuses booleans. Every reader of JSON numbers in the package uses these.

def is_number(value: Any) -> bool:
    """An int or a float, not a bool (NaN and infinities included)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_int(value: Any) -> bool:
    """An int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def finite_number(value: Any) -> Optional[Union[int, float]]:
    """`value` itself when it is a finite number, else None.

    An integer too large for a float (hundreds of digits, from a hostile
    document) is not finite here rather than an OverflowError.
    """
    if not is_number(value):
        return None
    try:
        return value if math.isfinite(value) else None
    except OverflowError:
        return None
