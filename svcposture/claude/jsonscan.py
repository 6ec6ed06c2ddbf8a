"""One top-level member of a large JSON object file, read as a stream.

Claude Code's `~/.claude.json` holds the login's `oauthAccount` beside every
project's history, and on a busy machine the whole file runs to many
megabytes. Loading it to read one small member costs its whole size in memory
(and more, parsed), so it is scanned in chunks instead: strings and brackets
are matched with one regular expression, which keeps track of the nesting
depth, and only the member's own value is parsed. Nothing larger than a chunk
plus the longest string being scanned is held at once, and the scan stops at
the file's size bound.
"""
from __future__ import annotations

import json
import re
from typing import Any, BinaryIO, Optional, Tuple

from ..errors import SvcpostureError

# A whole string (escapes included), a lone quote (a string the buffer cuts
# short), or a bracket. Anything else between them is skipped unread.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|"|[{}\[\]]')
_SPACE = b" \t\r\n"
CHUNK = 1024 * 1024


class InvalidScan(SvcpostureError, ValueError):
    """The file is not a JSON object holding the member, or runs past a bound."""


class _Reader:
    """The file's bytes in chunks, with the bytes not yet scanned kept in `buf`."""

    def __init__(self, fh: BinaryIO, limit: int, max_pending: int, chunk: int) -> None:
        self.fh, self.limit, self.max_pending, self.chunk = fh, limit, max_pending, chunk
        self.buf, self.read, self.eof = b"", 0, False

    def more(self) -> bool:
        if self.eof:
            return False
        chunk = self.fh.read(min(self.chunk, self.limit + 1 - self.read))
        self.read += len(chunk)
        if self.read > self.limit:
            raise InvalidScan("over %d bytes" % self.limit)
        if not chunk:
            self.eof = True
            return False
        if len(self.buf) > self.max_pending:  # what is left unscanned: one string, cut short
            raise InvalidScan("a string over %d bytes" % self.max_pending)
        self.buf += chunk
        return True


def top_level_member(fh: BinaryIO, key: str, *, limit: int, max_value: int = 64 * 1024,
                     max_pending: int = 16 * 1024 * 1024, chunk: int = CHUNK) -> Any:
    """The value of `key` in the top-level object of the JSON file `fh`, or None when the object
    has no such member. InvalidScan when the file is not an object, the value is over
    `max_value` bytes or not JSON, or the file runs past `limit` bytes (or a string past
    `max_pending`) before the member is found. Members nested deeper never count, nor does
    text inside strings that looks like the key."""
    wanted = json.dumps(key).encode("utf-8")
    reader = _Reader(fh, limit, max_pending, chunk)
    depth = 0
    while True:
        pos, depth, found = _scan(reader.buf, depth, wanted)
        if found is not None:
            reader.buf = reader.buf[found:]
            return _value(reader, max_value)
        reader.buf = reader.buf[pos:]
        if depth < 0:
            return None  # the top-level object closed without the member
        if not reader.more():
            raise InvalidScan("the file ends before its object does")


def _scan(buf: bytes, depth: int, wanted: bytes) -> Tuple[int, int, Optional[int]]:
    """(where scanning stopped, the depth there, where the member's value starts or None)."""
    pos = 0
    for match in _TOKEN.finditer(buf):
        token = match.group()
        if token == b'"':
            return match.start(), depth, None  # cut short: scanned again with more bytes
        pos = match.end()
        if token in (b"{", b"["):
            if depth == 0 and token != b"{":
                raise InvalidScan("not a JSON object")
            depth += 1
        elif token in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                return pos, -1, None
        elif depth == 1 and token == wanted:
            rest = buf[pos:].lstrip(_SPACE)
            if not rest:
                return match.start(), depth, None  # the colon is in the next chunk
            if rest[:1] == b":":
                return pos, depth, len(buf) - len(rest) + 1
    return pos, depth, None


def _value(reader: _Reader, max_value: int) -> Any:
    """The JSON value at the start of `reader.buf`, reading on until it is whole."""
    decoder = json.JSONDecoder()
    while True:
        text = reader.buf.lstrip(_SPACE)[:max_value].decode("utf-8", "replace")
        try:
            value, end = decoder.raw_decode(text)
            if end < len(text) or reader.eof or len(text) >= max_value:
                return value
        except (ValueError, RecursionError):
            if len(text) >= max_value or reader.eof:
                raise InvalidScan("the member's value is not JSON within %d bytes" % max_value) from None
        reader.more()  # a value cut short, or a number that may go on: read on
