"""The probe child's HTTP to a provider, whatever the vendor: no redirect, any status, two readings.

A redirect would carry the bearer token to wherever it points, so none is
followed; a reply is read whatever its status (the rate-limit headers ride on
429s too); an exception is classified as a timeout or a transport error; a
`retry-after` header is read as seconds from now.

urllib is imported inside the functions that send, so importing this costs nothing.
"""
from __future__ import annotations

import time
from typing import Any, Optional


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


def _opener(url: str) -> Any:
    """A URL opener that never follows redirects; loopback never goes through a proxy."""
    import urllib.parse
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        # A redirect would carry the bearer token to wherever it points.
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host in ("localhost", "::1") or host.startswith("127."):
        return urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect())
    return urllib.request.build_opener(NoRedirect())


def open_any_status(request: Any, timeout_s: float) -> Any:
    """The response whatever its status: the rate-limit headers ride on 429s too."""
    import urllib.error
    try:
        return _opener(request.full_url).open(request, timeout=timeout_s)
    except urllib.error.HTTPError as exc:
        return exc


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
