"""How the probe child reads a provider's reply, whatever the vendor: its request timeout, and two readings.

The requests themselves go through svcposture._http's Exchange, the package's
one bounded client: what a provider request needs is what that client already
does for every service beyond the node (no redirect, which would carry the
bearer token to wherever it points; the reply whatever its status, since the
rate-limit headers ride on 429s too; a total deadline, so a provider that
trickles its reply cannot hold the child past SVC_PROBE_TIMEOUT_S). What is the
probe's own is here: an exception classified as a timeout or a transport error,
and a `retry-after` header read as seconds from now.
"""
from __future__ import annotations

import time
from typing import Optional


def classify_transport(exc: BaseException) -> str:
    """'timeout' when a timeout is anywhere in the cause chain, else 'transport'."""
    import socket

    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, (socket.timeout, TimeoutError)):
            return "timeout"
        reason = getattr(exc, "reason", None)
        exc = reason if isinstance(reason, BaseException) else exc.__cause__ or exc.__context__
        seen += 1
    return "transport"


def retry_after_s(raw: Optional[str]) -> Optional[float]:
    """A `retry-after` header (seconds or an HTTP date) as seconds from now, or None."""
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        if value == value and 0 <= value < float("inf"):
            return value
        return None
    except ValueError:
        pass
    try:
        import email.utils

        stamp = email.utils.parsedate_to_datetime(raw)
        if stamp is None:
            return None
        return max(0.0, stamp.timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
