"""GET /api/advice[?provider=NAME] (docs/steering.md): the advice beside the posture, read-only.

The body is the posture's node and probedAt, the reserve, then the advice
(svcposture.steering.advice): computed once per probe by the node's advisor,
so a read inside the posture's TTL spends nothing but the serialisation, and
its Response is kept per summary and millisecond, as /api/accounts's. Same
query and trust rules as /api/accounts: a bad `provider` is a 400, the read
guard applies before every route; there is no forced refresh here.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from .._time import now_ms
from ..steering.advisor import advice_body
from ..summary import disabled_body
from ..vendors import provider_from_query
from .memo import Memo
from .response import JSON_HEADERS, JSON_TYPE, Response, dumps, error_response, json_response
from .services import AdviceSource, PostureSource

log = logging.getLogger("svcposture.monitor")


class AdviceRoute:
    """The Responses of /api/advice for each vendor, over the node's posture services and advisor."""

    def __init__(self, postures: Mapping[str, PostureSource], advisor: AdviceSource, node: str) -> None:
        self.postures = postures
        self.advisor = advisor
        self.node = node
        self._reads: Memo[Response] = Memo()

    def read(self, provider: str) -> Response:
        """The Response of a plain read for `provider` now (a cached summary, else a plain posture read)."""
        posture = self.postures.get(provider)
        if posture is None:
            return json_response(200, disabled_body(self.node))
        summary = posture.fresh_summary()
        if summary is None:
            summary = posture.read()
        ms = now_ms()
        return self._reads.get((ms, provider, summary), self._build, summary, provider, ms)

    def _build(self, summary: Any, provider: str, ms: int) -> Response:
        advice, reserve = self.advisor.advice_for(summary, provider)
        return Response(200, JSON_TYPE, dumps(advice_body(summary, advice, reserve, ms)), JSON_HEADERS)

    def respond(self, query: str) -> Response:
        provider, bad = provider_from_query(query)
        if bad is not None or provider is None:
            return json_response(400, bad)
        try:
            return self.read(provider)
        except Exception as exc:  # the posture layer failed: say so, keep serving
            log.warning("advice read failed: %s: %s", type(exc).__name__, exc)
            return error_response(500, "The advice could not be read.")

    def fast(self, provider: str) -> Optional[Response]:
        """A cached read for the fast lane; None (hand it over) when the posture has no fresh summary."""
        posture = self.postures.get(provider)
        if posture is None or posture.fresh_summary() is None:
            return None
        return self.read(provider)
