"""The typed seams of the HTTP side: what the server hands the fast lane and the
handler threads, and what any of them may ask of the application.

    accept -> MonitorServer -> FastLane --(plain cached GET)--> a FastRead -> Response.encode -> send
                                  |
                                  +--(anything else: Connection)--> HandOff -> a handler thread
                                                                      -> MonitorHandler -> Application.respond
                                                                      -> Response.encode or sse.pump

The server builds the lane and each handler and gives them values at
construction: the lane its cached reads, a count of the connections held on
threads and where to hand off a connection (FastLane's arguments), a handler
a Serving. Neither imports the server nor is given it, only plain values and
callables: a request only travels down that path.
"""
from __future__ import annotations

import threading
from typing import Callable, Mapping, NamedTuple, Optional, Protocol, Union, runtime_checkable

from ..settings import Settings
from .connection import Connection
from .hangup import HangupWatch
from .request import Request
from .response import Response
from .sse import Stream, StreamSlots

# What an endpoint answers: a whole response, or a stream for sse.pump to write.
Reply = Union[Response, Stream]
# A cached read the fast lane may answer with: its Response, or None to hand the request on.
FastRead = Callable[[], Optional[Response]]
# Where the fast lane sends a connection it will not answer (with what it left on it): a handler thread.
HandOff = Callable[[Connection], None]


@runtime_checkable
class Application(Protocol):
    """The routes, as the server and its handler threads see them (app.MonitorApp)."""

    settings: Settings

    def respond(self, request: Request) -> Reply:
        """The reply to any request the handler parsed (405, 404, the guard included)."""

    def fast_reads(self) -> Mapping[bytes, FastRead]:
        """Request targets a plain `GET <target>` of which the fast lane may answer
        itself, each with its cached read (empty when every request needs the guard)."""

    def listening(self, host: str, port: int, streams: Optional[StreamSlots] = None) -> None:
        """The server is bound to `host`:`port`; `streams` are its stream slots."""

    def wake_streams(self) -> None:
        """Wake every stream waiting for a frame, so that those whose client hung up end."""


class Serving(NamedTuple):
    """What the server gives each handler thread, and all it gives it."""

    app: Application
    # Set once the server is stopping: open streams end.
    stopping: threading.Event
    # A request must arrive whole within this many seconds of its first byte.
    request_timeout_s: float
    # The stream slots (SVC_MONITOR_MAX_STREAMS): a stream takes one or gets 503.
    streams: StreamSlots
    # Tells a stream that its client hung up (watch before pumping, unwatch before closing).
    hangups: HangupWatch
