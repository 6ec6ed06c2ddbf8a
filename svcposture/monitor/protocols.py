"""The typed seams of the HTTP side: what the server, the fast lane, the
handler and the application may ask of each other, and nothing more.

    accept -> MonitorServer -> FastLane --(plain cached GET)--> Application.fast_reads
                                  |                                   -> Response.encode -> send
                                  +--(anything else: Connection)--> MonitorServer.hand_off
                                                                      -> MonitorHandler -> Application.respond
                                                                      -> Response.encode or sse.pump

A request only travels down that path; nothing below calls back up.
"""
from __future__ import annotations

import threading
from typing import Callable, Mapping, Optional, Protocol, Union, runtime_checkable

from ..settings import Settings
from .connection import Connection
from .request import Request
from .response import Response
from .sse import Stream, StreamSlots

# What an endpoint answers: a whole response, or a stream for sse.pump to write.
Reply = Union[Response, Stream]
# A cached read the fast lane may answer with: its Response, or None to hand the request on.
FastRead = Callable[[], Optional[Response]]


@runtime_checkable
class Application(Protocol):
    """The routes, as the server and its request paths see them (app.MonitorApp)."""

    settings: Settings

    def respond(self, request: Request) -> Reply:
        """The reply to any request the handler parsed (405, 404, the guard included)."""

    def fast_reads(self) -> Mapping[bytes, FastRead]:
        """Request targets a plain `GET <target> HTTP/1.1` of which the fast lane may
        answer itself, each with its cached read (empty when every request needs the guard)."""

    def listening(self, host: str, port: int, streams: Optional[StreamSlots] = None) -> None:
        """The server is bound to `host`:`port`; `streams` are its stream slots."""

    def wake_streams(self) -> None:
        """Wake every stream waiting for a frame, so that those whose client hung up end."""


@runtime_checkable
class LaneServer(Protocol):
    """The server, as the fast lane sees it."""

    app: Application
    stopping: threading.Event
    request_timeout_s: float
    max_connections: int

    def connections_held(self, in_lane: int) -> int:
        """Client connections held: `in_lane` waiting in the fast lane plus those on threads."""

    def hand_off(self, conn: Connection) -> None:
        """Serve `conn` (and what the lane left on it) on a handler thread of its own."""


@runtime_checkable
class HandlerServer(Protocol):
    """The server, as a handler thread sees it."""

    app: Application
    stopping: threading.Event
    request_timeout_s: float
    streams: StreamSlots

    def watch_hangup(self, conn: Connection) -> threading.Event:
        """An Event set once the client of a stream hangs up."""

    def unwatch_hangup(self, conn: Connection) -> None:
        """Stop watching before the connection closes."""
