"""One MCP session: the lifecycle, version negotiation, dispatch, batches and errors (docs/mcp.md).

`Session.handle(line)` takes one line as the client sent it and returns the
bytes to write back (None for a notification). It never raises for what a
client sends: every malformed, unknown, early or oversized message gets the
JSON-RPC error it calls for, and the session goes on.
"""
from __future__ import annotations

import sys
import traceback

from .._text import loads_bounded, printable
from .._version import __version__
from ..errors import SvcpostureError
from . import wire
from .wire import (INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, NOT_INITIALIZED,
                   PARSE_ERROR, InvalidMessage, Oversized)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Union

# Oldest first. A client asking for another version gets the newest (the protocol's rule).
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# The versions in which a tool's bad arguments are a tool result with `isError` the model can read
# and correct, not a protocol error (2025-11-25, server/tools "Error Handling"); an unknown tool and a
# malformed tools/call stay protocol errors in every version.
ARGUMENT_ERRORS_AS_RESULTS = ("2025-11-25",)
# The versions whose serverInfo (Implementation) may carry a description.
DESCRIBED_VERSIONS = ("2025-11-25",)
DESCRIPTION = "This node's AI coding-agent accounts, read from the local svc-monitor"
# The versions whose messages may come as a JSON-RPC batch (2025-06-18 removed batches).
BATCH_VERSIONS = ("2024-11-05", "2025-03-26")
MAX_BATCH = 64
# Served before `initialize`, as the protocol allows.
BEFORE_INIT = ("initialize", "ping")
INSTRUCTIONS = ("Read-only view of this node's AI coding-agent accounts (Claude, Codex) from the local "
                "svc-monitor: `posture` for utilization and resets, `advice` for which account to use, "
                "`guard` before starting more work (go/hold/unavailable). It never calls a provider.")


class ToolError(SvcpostureError, ValueError):
    """A request whose params are wrong: the JSON-RPC error `code` with one sentence."""

    def __init__(self, message: str, code: int = INVALID_PARAMS, data: "Any" = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


class ArgumentError(ToolError):
    """A tool's arguments the tool refuses (its input schema, or an account the posture does not
    have): a protocol error before 2025-11-25, a tool result with `isError` from then on."""


class Session:
    """The server side of one connection; `toolbox` (tools.Toolbox) answers the tools and resources."""

    def __init__(self, toolbox: "Any", log: "Callable[[str], None]") -> None:
        self.toolbox = toolbox
        self.log = log
        self.version: "Optional[str]" = None
        self.client = ""
        self._methods: "Dict[str, Callable[[Dict[str, Any]], Dict[str, Any]]]" = {
            "initialize": self._initialize,
            "ping": lambda params: {},
            "tools/list": lambda params: {"tools": toolbox.tools(self.version)},
            "tools/call": self._call_tool,
            "resources/list": lambda params: {"resources": toolbox.resources()},
            "resources/templates/list": lambda params: {"resourceTemplates": []},
            "resources/read": self._read_resource,
        }

    # ------------------------------------------------------------ framing

    def handle(self, line: "Union[bytes, Oversized]") -> "Optional[bytes]":
        if isinstance(line, Oversized):
            self.log("a message longer than %d bytes was skipped" % line.limit)
            return wire.encode(wire.error(None, INVALID_REQUEST, "Invalid Request: a message is at most %d bytes"
                                          % line.limit))
        if not line.strip():
            return None  # an empty line carries no message
        try:
            message = loads_bounded(line, wire.MAX_LINE)
        except ValueError as exc:
            return wire.encode(wire.error(None, PARSE_ERROR, "Parse error: %s" % _reason(exc)))
        if isinstance(message, list):
            return self._batch(message)
        reply = self._one(message)
        return self._encoded(reply) if reply is not None else None

    def _encoded(self, reply: "Union[Dict[str, Any], List[Dict[str, Any]]]") -> bytes:
        """The reply as one line; a reply that cannot be encoded (a value strict JSON has no
        spelling for) costs that one reply an internal error, never the session."""
        try:
            return wire.encode(reply)
        except (ValueError, TypeError, RecursionError):
            self.log("a reply could not be encoded:\n%s" % traceback.format_exc())
        if isinstance(reply, list):
            return wire.encode([self._unencodable(item) for item in reply])
        return wire.encode(self._unencodable(reply))

    @staticmethod
    def _unencodable(reply: "Dict[str, Any]") -> "Dict[str, Any]":
        try:
            wire.encode(reply)
            return reply
        except (ValueError, TypeError, RecursionError):
            msg_id = reply.get("id") if isinstance(reply, dict) and wire.valid_id(reply.get("id")) else None
            return wire.error(msg_id, INTERNAL_ERROR, "Internal error: the reply could not be encoded as JSON "
                                                      "(the server's stderr says why)")

    def _batch(self, batch: "List[Any]") -> "Optional[bytes]":
        if self.version not in BATCH_VERSIONS:
            why = ("before initialize" if self.version is None
                   else "in protocol version %s" % self.version)
            return wire.encode(wire.error(None, INVALID_REQUEST, "Invalid Request: no batches %s" % why))
        if not batch or len(batch) > MAX_BATCH:
            return wire.encode(wire.error(None, INVALID_REQUEST, "Invalid Request: a batch holds 1 to %d messages"
                                          % MAX_BATCH))
        replies = [reply for reply in (self._one(item, in_batch=True) for item in batch) if reply is not None]
        return self._encoded(replies) if replies else None

    def _one(self, message: "Any", in_batch: bool = False) -> "Optional[Dict[str, Any]]":
        try:
            kind = wire.classify(message)
        except InvalidMessage as exc:
            return exc.reply
        if kind == "response":
            self.log("ignored a response to no request of this server")
            return None
        if kind == "notification":
            self._notified(message["method"])
            return None
        msg_id, method = message["id"], message["method"]
        if method not in self._methods:
            return wire.error(msg_id, METHOD_NOT_FOUND, "Method not found: %s" % printable(method[:80]))
        if self.version is None and method not in BEFORE_INIT:
            return wire.error(msg_id, NOT_INITIALIZED, "Server not initialized: send initialize first")
        if method == "initialize" and in_batch:
            return wire.error(msg_id, INVALID_REQUEST, "Invalid Request: initialize cannot be part of a batch")
        params = message.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return wire.error(msg_id, INVALID_PARAMS, "Invalid params: params must be an object")
        try:
            return wire.result(msg_id, self._methods[method](params))
        except ToolError as exc:
            return wire.error(msg_id, exc.code, str(exc), exc.data)
        except Exception:  # a bug here must cost one reply, never the session
            self.log("%s failed:\n%s" % (method, traceback.format_exc()))
            return wire.error(msg_id, INTERNAL_ERROR, "Internal error: %s failed (the server's stderr says why)"
                              % method)

    def _notified(self, method: str) -> None:
        if method == "notifications/initialized" and self.version is not None:
            self.log("client %s ready (protocol %s)" % (self.client, self.version))

    # ------------------------------------------------------------ methods

    def _initialize(self, params: "Dict[str, Any]") -> "Dict[str, Any]":
        if self.version is not None:
            raise ToolError("Invalid Request: initialize was already answered (protocol %s)" % self.version,
                            INVALID_REQUEST)
        asked = params.get("protocolVersion")
        if not isinstance(asked, str):
            raise ToolError("Invalid params: initialize needs protocolVersion, a string such as %r" % VERSIONS[-1])
        if "capabilities" in params and not isinstance(params["capabilities"], dict):
            raise ToolError("Invalid params: capabilities must be an object")
        info = params.get("clientInfo")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            self.client = printable(info["name"][:80])
        self.version = asked if asked in VERSIONS else VERSIONS[-1]
        server_info = {"name": "svcposture", "version": __version__}
        if self.version in DESCRIBED_VERSIONS:
            server_info["description"] = DESCRIPTION
        return {"protocolVersion": self.version,
                "capabilities": {"tools": {"listChanged": False},
                                 "resources": {"subscribe": False, "listChanged": False}},
                "serverInfo": server_info, "instructions": INSTRUCTIONS}

    def _call_tool(self, params: "Dict[str, Any]") -> "Dict[str, Any]":
        name = params.get("name")
        if not isinstance(name, str):
            raise ToolError("Invalid params: tools/call needs name, a string")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolError("Invalid params: arguments must be an object")
        return self.toolbox.call(name, arguments, self.version)

    def _read_resource(self, params: "Dict[str, Any]") -> "Dict[str, Any]":
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise ToolError("Invalid params: resources/read needs uri, a string")
        return self.toolbox.read(uri)


def _reason(exc: Exception) -> str:
    text = printable(str(exc))
    return text[:120] if text else "not JSON"


def serve(reader: "wire.LineReader", write: "Callable[[bytes], None]", session: Session) -> None:
    """Answer every line from `reader` until the end of input."""
    while True:
        line = reader.next()
        if line is None:
            return
        reply = session.handle(line)
        if reply is not None:
            write(reply)


def stderr_log(text: str) -> None:
    try:
        sys.stderr.write("svc-monitor mcp: %s\n" % text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
