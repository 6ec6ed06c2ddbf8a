"""The accounts env file's lines, whatever vendor they name: comments, emails, placeholders.

The file is POSIX sh (docs/posture.md), one assignment per account line; each
vendor's accounts module names its own lines (a pattern capturing the suffix
and the rest) and hands it to `parse_entries`. Names and comments are read,
never values, so no quoting rule of ours can disagree with the shell's.
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from .._text import EMAIL_RE

PLACEHOLDER = "PASTE_TOKEN_HERE"
# The email `svc-monitor init` writes on its placeholder and example lines, to be replaced.
PLACEHOLDER_EMAIL = "you@example.com"
# An env file is sourced as shell; a file this large is not an accounts file.
MAX_ENV_FILE_BYTES = 1024 * 1024

# RFC 5321 caps an address at 254 octets; a longer match is not an email.
_MAX_EMAIL = 254


def comment_of(rest: str) -> Optional[str]:
    """The inline comment of an assignment's right-hand side (quote-aware), or None."""
    quote = ""
    prev = " "
    i = 0
    while i < len(rest):
        ch = rest[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                prev = "x"
                continue
            if ch == quote:
                quote = ""
        elif ch == "\\":
            i += 2
            prev = "x"
            continue
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "#" and prev in (" ", "\t"):
            return rest[i + 1:]
        prev = ch
        i += 1
    return None


def parse_entries(text: str, entry_re: "re.Pattern[str]") -> List[Tuple[str, Optional[str]]]:
    """[(SUFFIX, email)] in file order from the env file text; values are not looked at.

    A suffix defined twice keeps its first position and the last line's email,
    as the shell keeps the last value. `entry_re` picks the lines and captures
    (suffix, the rest): one vendor's lines.
    """
    order: List[str] = []
    emails: Dict[str, Optional[str]] = {}
    for line in text.splitlines():
        m = entry_re.match(line)
        if not m:
            continue
        suffix = m.group(1)
        email: Optional[str] = None
        comment = comment_of(m.group(2))
        if comment is not None:
            found = EMAIL_RE.search(comment)
            if found and len(found.group(0)) <= _MAX_EMAIL:
                email = found.group(0)
        if suffix not in emails:
            order.append(suffix)
        emails[suffix] = email
    return [(s, emails[s]) for s in order]


def entry_line_numbers(text: str, entry_re: "re.Pattern[str]") -> Dict[str, int]:
    """{SUFFIX: line number (1-based)} of the last line assigning each of one vendor's entries, the
    one the shell keeps. Names and line numbers only: what the child may report of the file."""
    lines: Dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        m = entry_re.match(line)
        if m:
            lines[m.group(1)] = number
    return lines


def env_line(value: object) -> Optional[int]:
    """A line number someone else reported (the child's JSON), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 10 ** 6 else None


_NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")


def account_values(text: str, environ: Mapping[str, str], entry_re: "re.Pattern[str]", entry_prefix: str,
                   label_of: Callable[[str], str], is_usable: Callable[[Optional[str]], bool]
                   ) -> Tuple[List[Tuple[str, str, Optional[str], str]], List[str]]:
    """([(NAME, label, email, value)] of the usable accounts in file order, [unusable labels]) of one vendor.

    Values come from `environ` (the child's own, after sourcing) only. A
    variable the file defined in a way the line parser does not see (`eval`,
    a loop) still counts, after the lines, in name order; a label seen twice
    counts once.
    """
    seen = parse_entries(text, entry_re)
    known = {name for name, _ in seen}
    for var in sorted(environ):
        name = var[len(entry_prefix):]
        if var.startswith(entry_prefix) and _NAME_RE.match(name) and name not in known:
            seen.append((name, None))
            known.add(name)
    found: List[Tuple[str, str, Optional[str], str]] = []
    unusable: List[str] = []
    labels = set()
    for name, email in seen:
        label = label_of(name)
        if label in labels:
            continue
        labels.add(label)
        value = environ.get(entry_prefix + name)
        if value is None or not is_usable(value):
            unusable.append(label)
            continue
        found.append((name, label, email, value.strip()))
    return found, unusable


def usable(value: Optional[str]) -> bool:
    """A token value that can be sent: not missing, blank or the placeholder."""
    if value is None:
        return False
    value = value.strip()
    return bool(value) and value != PLACEHOLDER
