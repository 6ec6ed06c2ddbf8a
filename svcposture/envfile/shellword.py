"""Where a shell word ends, read as POSIX sh reads it, and where the shell reports a syntax error.

An assignment's value in the accounts env file is one shell word: `"..."`,
`'...'`, a backslash escape, `$( ... )`, `` `...` `` and `${ ... }` may hold
blanks, and nest (`"$(pass show 'a b')"`). The word ends at the first blank,
`;`, `&`, `|`, `<`, `>`, `(` or `)` outside all of them. A word that opens one
of these and does not close it on its own line is refused (InvalidShellWordError),
never guessed at: a switch that guessed would leave the rest of the value
behind as shell text.

What this cannot follow (a `case` pattern's `)` inside `$( ... )`) it may end
too early; the switch checks the file it is about to rename with `sh -n`,
which is the backstop. Strings are worked on as text: callers holding bytes
decode them as latin-1, which keeps every offset.
"""
from __future__ import annotations

import re
from typing import List, Optional

from ..errors import SvcpostureError

# Where the word ends at the top level: blanks, CR, and the shell's operators.
_ENDS = frozenset(" \t\r\n;&|<>()")
_OPENERS = {"'": "'", '"': '"', "`": "`", "$(": ")", "${": "}"}
_NAMES = {"'": "single quote", '"': "double quote", "`": "backquote", "$(": "$(", "${": "${", "(": "("}


class InvalidShellWordError(SvcpostureError, ValueError):
    """A quote, `$(`, `${` or backquote opened in the word is not closed on its line, or a
    backslash ends the line (the word goes on to the next)."""

    def __init__(self, opener: str, offset: int) -> None:
        super().__init__("a backslash ends the line, so the value goes on to the next one" if opener == "\\"
                         else "a %s opened here is not closed on this line" % _NAMES.get(opener, opener))
        self.opener = opener
        self.offset = offset


def _opener_at(text: str, i: int) -> Optional[str]:
    two = text[i:i + 2]
    if two in ("$(", "${"):
        return two
    one = text[i:i + 1]
    return one if one in ("'", '"', "`") else None


def word_end(text: str, start: int = 0, stop: Optional[int] = None) -> int:
    """The offset just past the shell word that starts at `start` (within `text[:stop]`).

    Raises InvalidShellWordError when something opened in the word is still open at `stop`.
    """
    stop = len(text) if stop is None else stop
    stack: List[tuple] = []  # (opener, offset)
    i = start
    while i < stop:
        ch = text[i]
        top = stack[-1][0] if stack else None
        if top == "'":
            if ch == "'":
                stack.pop()
            i += 1
            continue
        if ch == "\\":
            if i + 1 >= stop:
                # A backslash that ends the line continues the word on the next one.
                raise InvalidShellWordError("\\", i)
            i += 2
            continue
        if top == "`":
            if ch == "`":
                stack.pop()
            i += 1
            continue
        if top == '"':
            if ch == '"':
                stack.pop()
                i += 1
                continue
            opener = _opener_at(text, i)
            if opener in ("$(", "${", "`"):
                stack.append((opener, i))
                i += len(opener)
                continue
            i += 1
            continue
        if top is None and ch in _ENDS:
            return i
        if top in ("$(", "(") and ch == "(":
            stack.append(("(", i))
            i += 1
            continue
        if (top in ("$(", "(") and ch == ")") or (top == "${" and ch == "}"):
            stack.pop()
            i += 1
            continue
        opener = _opener_at(text, i)
        if opener is not None:
            stack.append((opener, i))
            i += len(opener)
            continue
        i += 1
    if stack:
        raise InvalidShellWordError(stack[0][0], stack[0][1])
    return min(i, stop)


def unclosed_quote(line: str) -> Optional[int]:
    """The offset of a quote the line opens and does not close, else None.

    For naming the line where an unterminated quote began: the shell itself
    reports the end of the file. A `#` that starts a word outside quotes ends
    the line's text.
    """
    quote = ""
    opened = 0
    prev = " "
    i = 0
    while i < len(line):
        ch = line[i]
        if quote == "'":
            if ch == "'":
                quote = ""
        elif ch == "\\":
            i += 2
            prev = "x"
            continue
        elif quote == '"':
            if ch == '"':
                quote = ""
        elif ch in ("'", '"'):
            quote, opened = ch, i
        elif ch == "#" and prev in (" ", "\t"):
            break
        prev = ch
        i += 1
    return opened if quote else None


def syntax_error_line(stderr: bytes, source: bytes) -> Optional[int]:
    """The line at which the shell reported a syntax error in `source` (a path as
    the shell names it), from its own message (dash: `SOURCE: 2: Syntax error: ...`;
    bash: `SOURCE: line 2: syntax error ...`); None when it reported none.

    Only the number is kept: bash goes on to quote the offending line, which may
    hold a token, so nothing else of the message ever leaves this function.
    """
    for line in stderr.splitlines():
        if source not in line or not re.search(rb"(?i)syntax error|unexpected EOF|unterminated", line):
            continue
        found = re.search(rb"\bline (\d{1,9})\b", line) or re.search(rb": (\d{1,9}): ", line)
        if found:
            return int(found.group(1))
    return None


def code_part(line: str) -> str:
    """The line up to its comment: a `#` that starts a word outside quotes, as the shell reads it."""
    quote = ""
    prev = " "
    i = 0
    while i < len(line):
        ch = line[i]
        if quote == "'":
            if ch == "'":
                quote = ""
        elif ch == "\\":
            i += 2
            prev = "x"
            continue
        elif quote == '"':
            if ch == '"':
                quote = ""
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "#" and prev in " \t;&|()":
            return line[:i]
        prev = ch
        i += 1
    return line


def unquoted(code: str) -> str:
    """`code` with every quoted stretch (its quotes and backslash escapes included) turned into `_`s, so
    that only what the shell reads as words and operators is left to look at; offsets are kept."""
    out = []
    quote = ""
    i = 0
    while i < len(code):
        ch = code[i]
        if quote:
            if (ch == quote) or (ch == "\\" and quote == '"' and i + 1 < len(code)):
                if ch == "\\":
                    out.append("__")
                    i += 2
                    continue
                quote = ""
            out.append("_")
        elif ch == "\\":
            out.append("_" * len(code[i:i + 2]))
            i += 2
            continue
        elif ch in ("'", '"'):
            quote = ch
            out.append("_")
        else:
            out.append(ch)
        i += 1
    return "".join(out)
