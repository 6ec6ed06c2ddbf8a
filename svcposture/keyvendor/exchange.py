"""One key's usage request, in the token-scoped child (docs/vendors.md).

`GET <base URL><path>` with `Authorization: <scheme> <key>` through the package's one bounded
client (svcposture._http.Exchange: a total deadline, no redirect, the reply whatever its status).
What it gives back is `{"sample": ...}` (the windows the vendor's parser read from a 2xx reply)
or `{"error": ...}` in the vendor's vocabulary:

- 401/403: `unauthorized`, the key refused; except a 403 whose `x-ratelimit-remaining` is 0,
  which is GitHub's documented rate limit and `rate_limited` like a 429;
- 429: `rate_limited`, with `retryAt` when the reply says when it lifts (`retry-after`, else
  `x-ratelimit-reset` in epoch seconds), up to a week ahead;
- any other status but 2xx: `http`; a reply past MAX_REPLY_BYTES, not JSON, or not the
  vendor's: `parse`; the vendor's own error in a 2xx body (z.ai answers a refused key with
  HTTP 200 and `{"code": 401}`): as that status would be;
- no connection: `transport`; no whole answer before the deadline: `timeout`.

No key is ever refreshed. Nothing of the reply leaves here but what the parser returned, and
only the headers named above are read.
"""
from __future__ import annotations

import time
from typing import Any, Dict, Mapping, Optional

from .. import _time
from .._text import loads_bounded, read_number
from .._version import __version__
from .._http import Exchange
from ..errors import SvcpostureError
from ..probe.providerhttp import classify_transport, retry_after_s
from ..settings import knob_value

MAX_REPLY_BYTES = 1024 * 1024
# A rate limit said to last longer than this is not read as one's end.
MAX_RETRY_S = 7 * 86400
_HEADERS = ("retry-after", "x-ratelimit-remaining", "x-ratelimit-reset")


class BodyError(SvcpostureError, ValueError):
    """The vendor's own error in a 2xx reply's body: `status` is the HTTP status it stands for
    (401, 403, 429), or None for any other error the body names."""

    def __init__(self, status: Optional[int]) -> None:
        super().__init__("the reply body is an error")
        self.status = status


def fetch(vendor: Any, key: str, environ: Mapping[str, str], timeout_s: float) -> Dict[str, Any]:
    """One exchange for `key`: `{"sample": windows}` or `{"error": error}` (above)."""
    headers = {"Authorization": "%s %s" % (vendor.scheme, key), "Accept": "application/json",
               "User-Agent": "svcposture/" + __version__}
    try:
        with Exchange(knob_value(environ, vendor.url) + vendor.path, timeout_s, headers) as reply:
            status = reply.status
            head = {name: str(reply.headers.get(name) or "")[:64] for name in _HEADERS}
            raw = reply.read(MAX_REPLY_BYTES + 1) if 200 <= status < 300 else b""
    except Exception as exc:  # noqa: BLE001 - mapped to the fixed vocabulary
        return {"error": vendor.errors.error(classify_transport(exc))}
    if not 200 <= status < 300:
        return {"error": refusal(vendor.errors, status, head)}
    try:
        return {"sample": vendor.parse_reply(loads_bounded(raw, MAX_REPLY_BYTES), time.time())}
    except BodyError as exc:
        return {"error": refusal(vendor.errors, exc.status, head)}
    except ValueError:
        return {"error": vendor.errors.error("parse", http_status=status)}


def refusal(errors: Any, status: Optional[int], head: Mapping[str, str]) -> Dict[str, Any]:
    """The error a status other than 2xx means (above); None is an error the body named."""
    limited = status == 429 or (status == 403 and head.get("x-ratelimit-remaining", "").strip() == "0")
    if limited:
        return errors.error("rate_limited", http_status=status, retry_at=retry_at(head, time.time()))
    if status in (401, 403):
        return errors.error("unauthorized", http_status=status)
    return errors.error("http", http_status=status)


def retry_at(head: Mapping[str, str], now_s: float) -> Optional[str]:
    """When a rate limit lifts, as the reply says it: `retry-after`, else `x-ratelimit-reset`."""
    wait = retry_after_s(head.get("retry-after") or None)
    if wait is None:
        reset = read_number(head.get("x-ratelimit-reset") or None)
        wait = reset - now_s if reset is not None else None
    if wait is None or not 0 <= wait <= MAX_RETRY_S:
        return None
    return _time.iso_from_epoch(now_s + wait)
