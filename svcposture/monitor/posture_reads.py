"""One vendor's posture over HTTP (docs/posture.md): its cached reads, its bytes, its stream.

`/api/accounts[?provider=NAME]` and its stream are answered the same way for
every vendor: a plain read inside the TTL is the cached summary's bytes, built
once per summary and millisecond (generatedAt's resolution); anything else
asks the posture service. Bodies of one probe differ only in generatedAt, so
the rest of a body is serialised once per probe and spliced.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Mapping, Optional, Tuple

from .._time import now_ms
from ..summary import reply
from .memo import Memo
from .response import JSON_HEADERS, JSON_TYPE, Response, dumps, error_response
from .services import PostureSource
from .sse import FrameCache, Stream
from .streams import ACCOUNT, PostureFrames

log = logging.getLogger("svcposture.monitor")

_GENERATED_MARKER = "\u0000svc-generated-at\u0000"


class PostureReads:
    """The reads of one vendor's posture service, each cached as bytes for its newest key."""

    def __init__(self, posture: PostureSource, keepalive_s: float) -> None:
        self.posture = posture
        self._keepalive_s = keepalive_s
        self.frames = FrameCache(ACCOUNT, self.posture_bytes)
        self._parts: Memo[Optional[Tuple[bytes, bytes]]] = Memo()
        self._cached: Memo[Response] = Memo()

    def cached(self) -> Optional[Response]:
        """The Response to a plain read from cache now, or None when the service has no fresh summary.

        Replies within one millisecond are byte-identical (generatedAt has ms
        resolution), so under load most reads reuse the previous Response (and
        its encoding) instead of building a body and a head again.
        """
        summary = self.posture.fresh_summary()
        if summary is None:
            return None
        ms = now_ms()
        return self._cached.get((ms, summary), self._cached_response, summary, ms)

    def respond(self, refresh: bool) -> Response:
        """The reply to a read the guard passed: the cached bytes, else what the service reads."""
        if not refresh:
            cached = self.cached()
            if cached is not None:
                return cached
        try:
            body = self.posture.read(refresh=refresh)
        except Exception as exc:  # the posture layer failed: say so, keep serving
            log.warning("%s posture read failed: %s: %s", self.posture.provider, type(exc).__name__, exc)
            return error_response(500, "The posture could not be read.")
        return Response(200, JSON_TYPE, self.posture_bytes(body), JSON_HEADERS)

    def stream(self) -> Stream:
        """A subscriber of the posture stream: the current body on connect, then every fresh result."""
        return Stream(PostureFrames(self.posture, self.posture_bytes, self.frames), self._keepalive_s)

    def posture_bytes(self, body: Mapping[str, Any]) -> bytes:
        """The JSON of a posture body, generatedAt spliced into the rest serialised once per probe."""
        generated = body.get("generatedAt")
        if not isinstance(generated, str) or body.get("probedAt") is None:
            return dumps(body)
        key = (body.get("available"), body.get("node"), body.get("probedAt"), body.get("cached"),
               body.get("status"), body.get("accounts"))
        parts = self._parts.get(key, _posture_parts, body)
        if parts is None:
            return dumps(body)
        return parts[0] + dumps(generated) + parts[1]

    def _cached_response(self, summary: Dict[str, Any], ms: int) -> Response:
        return Response(200, JSON_TYPE, self.posture_bytes(reply(summary, cached=True, generated_ms=ms)),
                        JSON_HEADERS)


def _posture_parts(body: Mapping[str, Any]) -> Optional[Tuple[bytes, bytes]]:
    """A posture body's JSON split around its generatedAt value (None when it cannot be)."""
    whole = dumps(dict(body, generatedAt=_GENERATED_MARKER))
    prefix, found, suffix = whole.partition(dumps(_GENERATED_MARKER))
    return (prefix, suffix) if found else None
