"""`?provider=` on /api/accounts and its stream (docs/codex.md): which posture answers.

Without the parameter, or with `provider=claude`, the Claude posture service
answers exactly as it always did (the contract's body and stream). With
another registered vendor's name, that vendor's posture (vendorposture.VendorPosture, on the
same schedule) answers in the same posture shape. A bad value is a 400 with one JSON
error, before any guard or probe. Functions over the services and the app's
Memo of reply bodies, so that wiring a route is one call.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional, Tuple

from .._time import now_ms
from ..summary import disabled_body, reply
from ..vendors import DEFAULT_PROVIDER, provider_from_query
from .memo import Memo
from .response import dumps

log = logging.getLogger("svcposture.monitor")



def vendor_target(name: str) -> bytes:
    """The request target of a plain read of a vendor's posture, answered from cached bytes like Claude's."""
    return b"/api/accounts?provider=" + name.encode("ascii")


class _NoPosture:
    """Stands in for a vendor's posture on a service built without one: always disabled."""

    def __init__(self, node: str) -> None:
        from ..broadcast import Broadcast
        self.node = node
        self.broadcast = Broadcast()

    def read(self, refresh: bool = False) -> Dict[str, Any]:
        return disabled_body(self.node)

    def fresh_summary(self) -> Optional[Dict[str, Any]]:
        return disabled_body(self.node)


def vendor_service(service: Any, query: str) -> Tuple[Any, Optional[Dict[str, str]]]:
    """(the posture service a query names, None), or (None, the 400 body) for a bad `provider`."""
    provider, bad = provider_from_query(query)
    if bad is not None:
        return None, bad
    if provider == DEFAULT_PROVIDER:
        return service, None
    posture = (getattr(service, "vendor_postures", None) or {}).get(provider)
    return (posture if posture is not None else _NoPosture(getattr(service, "node", ""))), None


def vendor_accounts_reply(service: Any, refresh: bool, bodies: Optional[Memo[bytes]] = None) -> Tuple[int, bytes]:
    """(status, JSON bytes) of a read of a non-default vendor's posture (the guard already passed)."""
    if not refresh:
        summary = service.fresh_summary()
        if summary is not None:
            return 200, cached_reply_bytes(summary, None, bodies)
    try:
        return 200, dumps(service.read(refresh=refresh))
    except Exception as exc:  # the posture layer failed: say so, keep serving
        log.warning("posture read failed: %s: %s", type(exc).__name__, exc)
        return 500, dumps({"error": "internal", "message": "The posture could not be read."})


def cached_reply_bytes(summary: Dict[str, Any], ms: Optional[int] = None, bodies: Optional[Memo[bytes]] = None) -> bytes:
    """The JSON of a cached read of `summary` at `ms` (now by default), built once per
    summary and millisecond (generatedAt's resolution) when `bodies` keeps them."""
    ms = now_ms() if ms is None else ms
    if bodies is None:
        return _reply_bytes(summary, ms)
    return bodies.get((ms, summary), _reply_bytes, summary, ms)


def _reply_bytes(summary: Dict[str, Any], ms: int) -> bytes:
    return dumps(reply(summary, cached=True, generated_ms=ms))
