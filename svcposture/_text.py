"""Text that is safe to show, words that are safe to copy, and JSON that is safe to read
(what counts as a number in it included, and a percent and a duration read and written one way).

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
    # A decimal number written as text, as some vendors send their figures.
    "NUMBER_RE": r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$",
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


def read_number(value: Any) -> Optional[float]:
    """A JSON number or a string holding one (at most 40 characters, NUMBER_RE), finite,
    as a float; None otherwise. Booleans are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 40 or not _pattern("NUMBER_RE").match(text):
            return None
        value = text
    elif not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except (OverflowError, ValueError):
        return None
    return number if math.isfinite(number) else None


# ---------------------------------------------------------------- percents
# A percent is how full a window is: what a vendor reports and what every body carries.
# Each reader of one, and each writer of one for a person, goes through these two.

# Past 10^8 % (a million times the limit) a figure is broken or hostile, not usage.
MAX_PCT = 1e8


def read_pct(value: Any, high: float = MAX_PCT, text: bool = False) -> Optional[float]:
    """A percent as read from a reply or a body: a finite number from 0 to `high`, as a
    float; None for anything else: a bool, NaN, an infinity, a negative or a larger
    number, and a string unless `text` (then a string holding one number is read, as
    read_number reads it: some vendors send their figures as text)."""
    number = read_number(value) if text else finite_number(value)
    if number is None or not 0 <= number <= high:
        return None
    return float(number)


def pct_text(pct: Any, missing: str = "?") -> str:
    """A percent written for a person, one way on every surface, the pages' included:
    rounded to the nearest tenth with a trailing `.0` dropped (`68.7%`, `68%`), `100%+`
    past 100 (past the limit the exact figure says nothing more, and `101%` reads as a
    bug), and `missing` when there is no number."""
    number = finite_number(pct)
    if number is None:
        return missing
    if number > 100:
        return "100%+"
    return pct_figure(number) + "%"


def pct_figure(value: float) -> str:
    """A percent's figure without its sign: to the nearest tenth, halves up as the pages
    round (`Math.round`), a trailing `.0` dropped; below 0 it is 0 (no reading is)."""
    whole, tenth = divmod(math.floor(max(0.0, min(float(value), 1e15)) * 10 + 0.5), 10)
    return "%d.%d" % (whole, tenth) if tenth else "%d" % whole


# ---------------------------------------------------------------- durations

def duration(ms: float) -> str:
    """`3d 6h`, `2h 30m`, `48m 5s`, `59s` (a zero second part left out), or `now` when the
    instant has passed: the one way every page and terminal writes a duration."""
    if ms <= 0:
        return "now"
    s = int(ms // 1000)
    d, h, m, sec = s // 86400, s % 86400 // 3600, s % 3600 // 60, s % 60
    for big, big_unit, small, small_unit in ((d, "d", h, "h"), (h, "h", m, "m"), (m, "m", sec, "s")):
        if big:
            return "%d%s" % (big, big_unit) + (" %d%s" % (small, small_unit) if small else "")
    return "%ds" % s
