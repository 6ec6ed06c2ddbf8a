"""One top-level member of a large JSON object file, read as a stream, as json.loads reads it.

Claude Code's `~/.claude.json` holds the login's `oauthAccount` beside every
project's history, and on a busy machine the whole file runs to many
megabytes. Loading it to read one small member costs its whole size in memory
(and more, parsed), so it is scanned in chunks instead, and only the member's
own value is parsed.

The answer is json.loads's: a member given twice counts by its last value (as
every JSON parser and Claude Code itself take it), and a key spelled with
escapes (`oauth\\u0041ccount`) is the key it decodes to.

Every byte is examined once: a string or a nesting cut short by the end of a
chunk is carried on from where the scan stopped, never scanned again from its
start, so the cost is linear in the file's size whatever the length of its
strings. Nothing larger than a chunk plus the member's value is held at once:
strings are skipped without being kept, keys of the top-level object only up to
the length the wanted key could be spelled in. The scan stops at the file's
size bound.
"""
from __future__ import annotations

import json
import re
from typing import Any, BinaryIO, Optional

from ..errors import SvcpostureError

CHUNK = 1024 * 1024
_BOM = b"\xef\xbb\xbf"
# Inside a string, from where the scan stands: every byte up to its closing quote, or up to the end
# of the chunk (less a backslash the chunk ends on, whose escaped byte is in the next one).
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
# Inside a nested value: whole strings and every byte that is no bracket and opens no string.
_NESTED_RUN = re.compile(rb'(?:[^"{}\[\]]+|"[^"\\]*(?:\\.[^"\\]*)*")*', re.DOTALL)
# A number or a literal at the top level: up to the comma or brace that ends it.
_SCALAR = re.compile(rb'[^,}\] \t\r\n]*')
_BLANKS = re.compile(rb'[ \t\r\n]*')
_MISSING = object()


class InvalidScan(SvcpostureError, ValueError):
    """The file is not a JSON object holding the member, or runs past a bound."""


class _Scan:
    """The scan's state between chunks: where it stands in the top-level object."""

    def __init__(self, key: str, max_value: int) -> None:
        self.wanted = key
        self.wanted_raw = json.dumps(key, ensure_ascii=False)[1:-1].encode("utf-8")
        # The longest spelling of the key: every character a \\uXXXX escape, or a pair of them.
        self.max_key = 12 * len(key) + 12
        self.max_value = max_value
        self.buf = b""
        self.pos = 0
        self.examined = 0
        self.depth = 0             # 0 before the object opens, 1 among its members, more inside a value
        self.state = "open"        # what the scan expects next at depth 0 and 1
        self.in_string = False     # inside a string the chunk cut short
        self.key: Optional[bytearray] = None   # the member name being read, while it may be the key
        self.name: Optional[bytearray] = None  # the member name just read, when it may be the key
        self.wanted_next = False   # the member name just read is the key: its value is captured
        self.capture: Optional[bytearray] = None  # the wanted member's value, while it is read
        self.found: Any = _MISSING

    # ------------------------------------------------------------ the bytes

    def feed(self, chunk: bytes) -> None:
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def _take(self, end: int) -> None:
        """Consume the bytes up to `end`, keeping them where the member name or the wanted value
        is being read."""
        start, self.pos = self.pos, end
        self.examined += end - start
        if self.capture is not None:
            self.capture += self.buf[start:end]
            if len(self.capture) > self.max_value:
                raise InvalidScan("the member's value is over %d bytes" % self.max_value)
        if self.key is not None:
            self.key += self.buf[start:end]
            if len(self.key) > self.max_key:
                self.key = None  # longer than any spelling of the key: not it

    def _skip_space(self) -> bool:
        """Past blanks; whether a byte follows in the chunk."""
        self._take(_BLANKS.match(self.buf, self.pos).end())
        return self.pos < len(self.buf)

    # ------------------------------------------------------------ strings and nesting

    def _string(self) -> bool:
        """On inside a string; whether it closed within the chunk (its quote consumed)."""
        end = _STRING_REST.match(self.buf, self.pos).end()
        self._take(end)
        if end < len(self.buf) and self.buf[end:end + 1] == b'"':
            if self.key is not None:
                self.key, name = None, self.key  # the closing quote is no part of the name
                self.name = name
            self._take(end + 1)
            self.in_string = False
            return True
        self.in_string = True
        return False

    def _nested(self) -> bool:
        """On inside a nested value; whether it closed (depth back to 1) within the chunk."""
        while True:
            if self.in_string and not self._string():
                return False
            self._take(_NESTED_RUN.match(self.buf, self.pos).end())
            if self.pos >= len(self.buf):
                return False
            byte = self.buf[self.pos:self.pos + 1]
            self._take(self.pos + 1)
            if byte == b'"':
                self.in_string = True
            elif byte in (b"{", b"["):
                self.depth += 1
            else:
                self.depth -= 1
                if self.depth == 1:
                    return True

    # ------------------------------------------------------------ the top-level object

    def step(self) -> Optional[str]:
        """Scan what the chunk holds; "done" when the object has closed, None when more is needed."""
        while True:
            if self.depth > 1 or self.in_string:
                closed = self._nested() if self.depth > 1 else self._string()
                if not closed:
                    return None
                self._after_string_or_value()
                continue
            if not self._skip_space():
                return None
            if self._top_token():
                return "done"

    def _top_token(self) -> bool:
        """One token at depth 0 or 1, by what the scan expects; True when the object closed."""
        byte = self.buf[self.pos:self.pos + 1]
        state = self.state
        if state == "open":
            if byte != b"{":
                raise InvalidScan("not a JSON object")
            self._take(self.pos + 1)
            self.depth, self.state = 1, "key_or_end"
        elif state in ("key_or_end", "key"):
            if byte == b"}" and state == "key_or_end":
                self._take(self.pos + 1)
                return True
            if byte != b'"':
                raise InvalidScan("a member name is not a string")
            self._take(self.pos + 1)
            self.key, self.name, self.state, self.in_string = bytearray(), None, "key_string", True
        elif state == "colon":
            if byte != b":":
                raise InvalidScan("a member name is not followed by ':'")
            self._take(self.pos + 1)
            self.state = "value"
        elif state == "value":
            self._value_start(byte)
        elif state == "comma":
            self._take(self.pos + 1)
            if byte == b"}":
                return True
            if byte != b",":
                raise InvalidScan("members are not separated by ','")
            self.state = "key"
        return False

    def _value_start(self, byte: bytes) -> None:
        if self.wanted_next:
            self.capture = bytearray()
        if byte == b'"':
            self._take(self.pos + 1)
            self.in_string, self.state = True, "string_value"
        elif byte in (b"{", b"["):
            self._take(self.pos + 1)
            self.depth, self.state = 2, "nested_value"
        else:
            end = _SCALAR.match(self.buf, self.pos).end()
            self._take(end)
            if end < len(self.buf):
                self._value_end()
            else:
                self.state = "scalar_value"

    def _after_string_or_value(self) -> None:
        """A string or nested value closed at depth 1: a member name, or a value ended."""
        if self.state == "key_string":
            self.wanted_next = self._is_wanted(self.name)
            self.key, self.name, self.state = None, None, "colon"
        else:
            self._value_end()

    def _is_wanted(self, raw: Optional[bytearray]) -> bool:
        if raw is None:
            return False
        raw = bytes(raw)
        if b"\\" not in raw:
            return raw == self.wanted_raw
        try:
            return json.loads(b'"' + raw + b'"') == self.wanted
        except ValueError:
            return False

    def _value_end(self) -> None:
        if self.capture is not None:
            try:
                self.found = json.loads(bytes(self.capture).decode("utf-8"))
            except (ValueError, RecursionError):
                raise InvalidScan("the member's value is not JSON") from None
            self.capture = None
        self.state, self.wanted_next = "comma", False

    def scalar_more(self) -> bool:
        """On through a number or literal the chunk cut short; whether it ended within this chunk."""
        end = _SCALAR.match(self.buf, self.pos).end()
        self._take(end)
        if end < len(self.buf):
            self._value_end()
            return True
        return False


def _read(fh: BinaryIO, size: int, total: int, limit: int) -> bytes:
    chunk = fh.read(min(size, limit + 1 - total))
    if total + len(chunk) > limit:
        raise InvalidScan("over %d bytes" % limit)
    return chunk


def top_level_member(fh: BinaryIO, key: str, *, limit: int, max_value: int = 64 * 1024,
                     chunk: int = CHUNK, stats: Optional[dict] = None) -> Any:
    """The value of `key` in the top-level object of the JSON file `fh` (its last, when the object
    names it twice), or None when the object has no such member. InvalidScan when the file is not
    an object, the value is over `max_value` bytes or not JSON, or the file runs past `limit`
    bytes. Members nested deeper never count, nor does text inside strings that looks like the
    key. `stats`, when given, receives `examined`: the bytes the scan looked at."""
    scan = _Scan(key, max_value)
    total = 0
    try:
        data = b""
        while len(data) < len(_BOM):  # the first bytes, enough to tell a byte order mark
            more = _read(fh, chunk, total, limit)
            total += len(more)
            data += more
            if not more:
                break
        if data.startswith(_BOM):
            data = data[len(_BOM):]  # json.loads takes a file that opens with one
        while True:
            if data:
                scan.feed(data)
                if (scan.state != "scalar_value" or scan.scalar_more()) and scan.step() == "done":
                    return None if scan.found is _MISSING else scan.found
            data = _read(fh, chunk, total, limit)
            total += len(data)
            if not data:
                raise InvalidScan("the file ends before its object does")
    finally:
        if stats is not None:
            stats["examined"] = scan.examined
