"""The request head: the one parser of a request line and its header fields.

Both request paths read heads with it, under the limits of request.py and by
the same rules in the same order: the fast lane parses a head it holds whole
(parse_head), a handler thread reads one line by line off its socket
(read_head). So the lane answers a head only when the handler would answer it
the same way, and a malformed head gets the same refusal on either path (the
lane hands it to the handler, which writes it).

A head is the request line, then header fields, each line ended by LF (CR LF
or a bare LF, as the stdlib reads them), then an empty line or the end of the
stream. Parsing yields one of:

- None: no request line at all; the connection ends without an answer;
- Refusal(status, message): 400, 414, 431 or 505. Where the request ends is
  not known, so the connection closes after the refusal;
- RequestHead: method, target, version, header fields by lower-cased name,
  whether a body was announced and whether the connection closes after the answer.
"""
from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Optional, Union

from .framing import framing_error
from .request import MAX_HEADERS, MAX_REQUEST_HEAD, MAX_REQUEST_LINE, TOKEN_BYTES_RE, TOKEN_RE

_EMPTY_LINES = (b"\r\n", b"\n", b"")
_token = TOKEN_BYTES_RE.match


class Refusal(NamedTuple):
    """A head the monitor will not answer: the error status and its message, and
    the method once the request line was read (a refusal to HEAD carries no body)."""

    status: int
    message: str
    method: str = ""


class RequestHead:
    """A parsed head. `target` is as sent (path and query) but a leading run of
    slashes, which reads as one (never as a network-path reference)."""

    __slots__ = ("method", "target", "version", "fields", "body", "close")

    def __init__(self, method: str, target: str, version: str, fields: Dict[str, List[str]], body: bool,
                 close: bool) -> None:
        self.method = method
        self.target = target
        self.version = version
        self.fields = fields
        # The request announces a body (a Content-Length other than 0, or Transfer-Encoding).
        self.body = body
        # The connection closes after the answer: HTTP/1.0 without keep-alive,
        # `Connection: close`, or a body the monitor does not read.
        self.close = close


Parsed = Union[RequestHead, Refusal, None]


def read_head(readline: Callable[[int], bytes]) -> Parsed:
    """The head `readline(limit)` yields, line by line (a handler's buffered socket).

    Reads no further than the first line that breaks a rule, and never more of
    a line than the limits leave room for (and a byte or two past, to see them
    broken), so a refusal goes out as soon as it is known and what a client can
    make the monitor hold is bounded."""
    line = _request_line(readline(MAX_REQUEST_LINE + 1))
    if not isinstance(line, _Line):
        return line
    fields = _Fields()
    while True:
        raw = readline(fields.room())
        if raw in _EMPTY_LINES:
            return _head(line, fields.fields)
        refusal = fields.add(raw)
        if refusal is not None:
            return Refusal(refusal.status, refusal.message, line.method)


def parse_head(data: bytes) -> Parsed:
    """The head `data` holds (the fast lane's buffer), read exactly as read_head would
    read it off a stream carrying `data` and then ending."""
    end = _line_end(data, 0, MAX_REQUEST_LINE + 1)
    line = _request_line(data[:end])
    if not isinstance(line, _Line):
        return line
    fields = _Fields()
    while True:
        start, end = end, _line_end(data, end, fields.room())
        raw = data[start:end]
        if raw in _EMPTY_LINES:
            return _head(line, fields.fields)
        refusal = fields.add(raw)
        if refusal is not None:
            return Refusal(refusal.status, refusal.message, line.method)


def head_end(data: bytes) -> int:
    """Where the head at the start of `data` ends (past its empty line), or -1 while
    it has not arrived whole."""
    crlf = data.find(b"\n\r\n")
    lf = data.find(b"\n\n")
    if crlf < 0:
        return lf + 2 if lf >= 0 else -1
    return crlf + 3 if lf < 0 or crlf < lf else lf + 2


def _line_end(data: bytes, start: int, limit: int) -> int:
    """The end of the line starting at `start`, cut where readline(limit) would cut it."""
    newline = data.find(b"\n", start, start + limit)
    return newline + 1 if newline >= 0 else min(len(data), start + limit)


class _Line(NamedTuple):
    method: str
    target: str
    version: str


def _request_line(raw: bytes) -> Union[_Line, Refusal, None]:
    if len(raw) > MAX_REQUEST_LINE:
        return Refusal(414, "URI Too Long")
    words = str(raw, "iso-8859-1").rstrip("\r\n").split()
    if not words:
        return None
    if len(words) != 3:
        return Refusal(400, "Bad request line.")
    method, target, version = words
    if not version.startswith("HTTP/") or not TOKEN_RE.match(method):
        return Refusal(400, "Bad request line.")
    major, dot, minor = version[5:].partition(".")
    if not (major.isdigit() and minor.isdigit() and dot and len(major) < 4 and len(minor) < 4):
        return Refusal(400, "Bad request version.")
    if major != "1":
        return Refusal(505, "Only HTTP/1.x is supported.")
    if target.startswith("//"):
        target = "/" + target.lstrip("/")
    return _Line(method, target, version)


class _Fields:
    """Header fields as they are read, one line at a time, within the limits."""

    __slots__ = ("fields", "count", "total")

    def __init__(self) -> None:
        self.fields: Dict[str, List[str]] = {}
        self.count = 0
        self.total = 0

    def room(self) -> int:
        """How much of the next line to read: what the fields may still hold, and one
        byte more, or the empty line (CR LF) that ends them."""
        return MAX_REQUEST_HEAD - self.total + 2

    def add(self, line: bytes) -> Optional[Refusal]:
        """Take one field line (with its line end); the refusal it earns, if any."""
        self.total += len(line)
        if self.total > MAX_REQUEST_HEAD:
            return Refusal(431, "Header fields too large.")
        self.count += 1
        if self.count > MAX_HEADERS:
            return Refusal(431, "Too many header fields.")
        name, colon, value = line.partition(b":")
        # No folded lines, no space before the colon: both are smuggling tools.
        if not colon or not _token(name):
            return Refusal(400, "Malformed header field.")
        key = name.decode("ascii").lower()
        text = value.strip(b" \t\r\n").decode("iso-8859-1")
        values = self.fields.get(key)
        if values is None:
            self.fields[key] = [text]
        else:
            values.append(text)
        return None


def _head(line: _Line, fields: Dict[str, List[str]]) -> Union[RequestHead, Refusal]:
    """The head once its fields are in: its framing judged and its connection decided."""
    lengths = fields.get("content-length")
    chunked = "transfer-encoding" in fields
    if lengths is not None:
        untrusted = framing_error(lengths, chunked)
        if untrusted:
            return Refusal(400, untrusted, line.method)
    body = chunked or (lengths is not None and lengths[0] != "0")
    return RequestHead(line.method, line.target, line.version, fields, body, _closes(line.version, fields, body))


def _closes(version: str, fields: Dict[str, List[str]], body: bool) -> bool:
    if body:
        return True  # a body is never read, so nothing after it can be
    option = fields.get("connection")
    if option is not None:
        word = option[0].lower()
        if word == "close":
            return True
        if word == "keep-alive":
            return False
    return version.endswith(".0")
