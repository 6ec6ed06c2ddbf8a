"""Liveness read from the log aggregator (SVC_LIVENESS_READ_SOURCE=loki).

A host with at least one log line in the last two publish intervals is live;
the anchor plays no part. One instant query, its reply bounded and checked
field by field, since it comes from a service this node does not control.
"""
from __future__ import annotations

import math
import urllib.parse
from typing import Any, List, Tuple

from .._http import DeadlineExceeded
from .._http import get as http_get
from .._text import loads_bounded
from .._version import __version__
from ..errors import SvcpostureError
from ..settings import LOKI_URL_ENV
from . import tracker

LOKI_TIMEOUT_S = 10.0
MAX_LOKI_REPLY_BYTES = 8 * 1024 * 1024


class LokiError(SvcpostureError):
    """Base of every Loki failure; each concern below also subclasses a builtin."""


class LokiConfigError(LokiError, ValueError):
    """SVC_LOKI_URL is not an http(s) URL."""


class LokiUnreachableError(LokiError, ConnectionError):
    """No answer from Loki: connection refused, timeout."""


class LokiResponseError(LokiError, ValueError):
    """Loki answered, but not with a successful instant-vector query result."""


def loki_query(interval_ms: int) -> str:
    window_s = max(1, int(math.ceil(2 * interval_ms / 1000.0)))
    return 'sum by (host) (count_over_time({host=~".+"}[%ds]))' % window_s


def loki_live_hosts(base_url: str, interval_ms: int, timeout: float = LOKI_TIMEOUT_S) -> List[str]:
    """Hosts with at least one log line in the last two publish intervals."""
    if urllib.parse.urlsplit(base_url).scheme not in ("http", "https"):
        raise LokiConfigError("%s must be an http(s) URL" % LOKI_URL_ENV)
    url = base_url.rstrip("/") + "/loki/api/v1/query?" + urllib.parse.urlencode({"query": loki_query(interval_ms)})
    status, raw = _loki_get(url, timeout)
    if len(raw) > MAX_LOKI_REPLY_BYTES:
        raise LokiResponseError("Loki reply larger than %d bytes" % MAX_LOKI_REPLY_BYTES)
    try:
        reply = loads_bounded(raw, MAX_LOKI_REPLY_BYTES)
    except ValueError:
        raise LokiResponseError("Loki reply is not JSON (HTTP %d)" % status) from None
    return _live_hosts_from_reply(reply, status)


def _loki_get(url: str, timeout: float) -> Tuple[int, bytes]:
    """(HTTP status, at most MAX_LOKI_REPLY_BYTES + 1 bytes of the body); an error status is still read."""
    try:
        # `timeout` bounds the whole exchange, however slowly Loki trickles it.
        return http_get(url, timeout, MAX_LOKI_REPLY_BYTES, "svcposture/%s" % __version__)
    except DeadlineExceeded:
        raise LokiUnreachableError("cannot reach Loki: no complete answer within %g s" % timeout) from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise LokiUnreachableError("cannot reach Loki: %s" % str(reason)[:200]) from None


def _live_hosts_from_reply(reply: Any, status: int) -> List[str]:
    if not isinstance(reply, dict):
        raise LokiResponseError("Loki reply is not a JSON object (HTTP %d)" % status)
    if reply.get("status") != "success" or status >= 300:
        error = reply.get("error")
        detail = tracker.CONTROL_RUN_RE.sub(" ", error)[:200] if isinstance(error, str) else "no detail"
        raise LokiResponseError("Loki query failed (HTTP %d): %s" % (status, detail))
    data = reply.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(result, list):
        raise LokiResponseError("Loki reply is not an instant vector")
    live: List[str] = []
    for sample in result:
        metric = sample.get("metric") if isinstance(sample, dict) else None
        value = sample.get("value") if isinstance(sample, dict) else None
        name = metric.get("host") if isinstance(metric, dict) else None
        if not isinstance(name, str) or not isinstance(value, list) or len(value) != 2:
            raise LokiResponseError("Loki reply has a malformed sample")
        try:
            count = float(value[1])
        except (TypeError, ValueError):
            raise LokiResponseError("Loki reply has a non-numeric sample value") from None
        if count > 0:
            live.append(name)
    return live
