"""JSON-RPC 2.0 over a byte stream, one message per line (the MCP stdio transport).

A line is read within a bound: a longer one is answered with one error and
skipped up to its newline, so a client that sends 10 MB holds at most the
bound and one read of it in this process, never the whole line.
"""
from __future__ import annotations

import json
import os

from ..errors import SvcpostureError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Union

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# MCP's own: a resource URI the server does not have.
RESOURCE_NOT_FOUND = -32002
# Implementation-defined (the server-error range): a request before `initialize`.
NOT_INITIALIZED = -32003

# The longest message accepted. Requests to this server are a few hundred bytes;
# a megabyte leaves room for any client's metadata.
MAX_LINE = 1024 * 1024
READ_SIZE = 64 * 1024


class Oversized:
    """What LineReader yields for a line longer than its bound (the line is skipped)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit


class LineReader:
    """Lines (without their newline) read from a descriptor, each at most `limit` bytes."""

    def __init__(self, fd: int, limit: int = MAX_LINE) -> None:
        self.fd = fd
        self.limit = limit
        self._buf = bytearray()
        self._skipping = False
        self._eof = False

    def next(self) -> "Optional[Union[bytes, Oversized]]":
        """The next line, an Oversized for a line over the bound, or None at the end of input."""
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[:end + 1]
                if self._skipping:
                    self._skipping = False
                    continue
                return line if end <= self.limit else Oversized(self.limit)
            if len(self._buf) > self.limit:
                # No newline within the bound: drop what is held, say so once, skip the rest.
                del self._buf[:]
                if not self._skipping:
                    self._skipping = True
                    return Oversized(self.limit)
            if self._eof:
                line, skipping = bytes(self._buf), self._skipping
                del self._buf[:]
                self._skipping = False
                if line and not skipping:
                    return line
                return None
            self._fill()

    def _fill(self) -> None:
        try:
            chunk = os.read(self.fd, READ_SIZE)
        except InterruptedError:
            return
        except OSError:
            chunk = b""  # stdin closed or unreadable: the end of the session
        if not chunk:
            self._eof = True
        elif self._skipping and b"\n" not in chunk:
            return
        else:
            self._buf += chunk


def result(msg_id: "Any", value: "Dict[str, Any]") -> "Dict[str, Any]":
    return {"jsonrpc": "2.0", "id": msg_id, "result": value}


def error(msg_id: "Any", code: int, message: str, data: "Any" = None) -> "Dict[str, Any]":
    body: "Dict[str, Any]" = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": body}


def encode(message: "Union[Dict[str, Any], List[Dict[str, Any]]]") -> bytes:
    """One line of ASCII JSON: escapes keep any newline or lone surrogate out of the frame."""
    return json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


def valid_id(value: "Any") -> bool:
    """A request id as MCP allows it: a string or an integer (never null)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class InvalidMessage(SvcpostureError, ValueError):
    """A message that is no JSON-RPC request or notification; `reply` is the error to send."""

    def __init__(self, reply: "Dict[str, Any]") -> None:
        super().__init__(reply["error"]["message"])
        self.reply = reply


def classify(message: "Any") -> str:
    """"request", "notification" or "response" (a client's reply, which this server never
    asked for); InvalidMessage when it is none of them."""
    if not isinstance(message, dict):
        raise InvalidMessage(error(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object"))
    msg_id = message.get("id") if valid_id(message.get("id")) else None
    if message.get("jsonrpc") != "2.0":
        raise InvalidMessage(error(msg_id, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"'))
    if "method" not in message:
        if "id" in message and ("result" in message or "error" in message):
            return "response"
        raise InvalidMessage(error(msg_id, INVALID_REQUEST, 'Invalid Request: no "method"'))
    if not isinstance(message["method"], str):
        raise InvalidMessage(error(msg_id, INVALID_REQUEST, 'Invalid Request: "method" must be a string'))
    if "id" in message and msg_id is None:
        raise InvalidMessage(error(None, INVALID_REQUEST,
                                   'Invalid Request: "id" must be a string or an integer, never null'))
    params = message.get("params")
    if params is not None and not isinstance(params, (dict, list)):
        raise InvalidMessage(error(msg_id, INVALID_REQUEST, 'Invalid Request: "params" must be an object'))
    return "request" if "id" in message else "notification"
