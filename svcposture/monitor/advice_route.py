"""GET /api/advice[?provider=codex] (docs/steering.md): the advice beside the posture, read-only.

The body is the posture's node and probedAt, the reserve, then the advice
(svcposture.advice): computed once per probe by the node's Advisor, so a read
inside the posture's TTL spends nothing but the serialisation, and its bytes
are kept per summary, millisecond and Connection line, as /api/accounts's.
Same query and trust rules as /api/accounts: a bad `provider` is a 400, the
read guard applies before every route; there is no forced refresh here.
"""
from __future__ import annotations

import logging
from typing import Any, Optional, Tuple

from .._time import now_ms
from ..advice import DEFAULT_WAIT_S
from ..advisor import Advisor, advice_body
from ..summary import disabled_body
from ..vendors import CLAUDE, CODEX, provider_from_query
from . import wire
from .wire import JSON_HEADERS, JSON_TYPE, dumps

log = logging.getLogger("svcposture.monitor")

TARGETS = {b"/api/advice": CLAUDE, b"/api/advice?provider=codex": CODEX}


class AdviceRoute:
    """The bytes of /api/advice for each vendor, over the node's posture services and advisor."""

    def __init__(self, service: Any, trajectory: Any) -> None:
        self.service = service
        advisor = getattr(service, "advisor", None)
        home = getattr(getattr(service, "paths", None), "home", None)
        settings = getattr(service, "settings", None)
        self.advisor = advisor if advisor is not None else Advisor(
            trajectory, getattr(settings, "advice_wait_s", DEFAULT_WAIT_S), str(home) if home is not None else None)
        self._cache: Tuple[Any, bytes] = (None, b"")
        self._whole: Tuple[Any, bytes] = (None, b"")

    def _posture(self, provider: str) -> Any:
        if provider == CLAUDE:
            return self.service
        return getattr(self.service, "codex", None)

    def body_bytes(self, provider: str) -> bytes:
        """The JSON of the advice for `provider` now (a cached summary, else a plain read)."""
        posture = self._posture(provider)
        if posture is None:
            return dumps(disabled_body(getattr(self.service, "node", "")))
        summary = posture.fresh_summary()
        if summary is None:
            summary = posture.read()
        ms = now_ms()
        key = (id(summary), ms, provider)
        cached = self._cache
        if cached[0] == key:
            return cached[1]
        advice, reserve = self.advisor.advice_for(summary, provider)
        body = dumps(advice_body(summary, advice, reserve, ms))
        self._cache = (key, body)
        return body

    def response(self, query: str, conn: bytes, head_only: bool = False) -> bytes:
        provider, bad = provider_from_query(query)
        if bad is not None or provider is None:
            return wire.json_response(400, bad, conn, head_only=head_only)
        try:
            body = self.body_bytes(provider)
        except Exception as exc:  # the posture layer failed: say so, keep serving
            log.warning("advice read failed: %s: %s", type(exc).__name__, exc)
            return wire.error_response(500, "The advice could not be read.", conn, head_only=head_only)
        return wire.response(200, JSON_TYPE, body, conn, JSON_HEADERS, head_only)

    def fast(self, target: bytes, conn: bytes) -> Optional[bytes]:
        """The whole response of a plain read, reused within its millisecond (generatedAt's
        resolution) for the same vendor and Connection line, as /api/accounts's."""
        provider = TARGETS.get(target)
        if provider is None:
            return None
        body = self.body_bytes(provider)
        key = (self._cache[0], conn)  # (summary, millisecond, vendor) of the body just built or reused
        whole = self._whole
        if whole[0] == key:
            return whole[1]
        response = wire.response(200, JSON_TYPE, body, conn, JSON_HEADERS)
        self._whole = (key, response)
        return response
