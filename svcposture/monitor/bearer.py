"""The bearer check: a request's `Authorization: Bearer <token>` against the node's one token.

BearerCheck(digest) holds the token's SHA-256 and nothing else of it
(remote/token.py reads the file). A request passes when it carries exactly
one Authorization field, its scheme is `Bearer` in any case (RFC 7235: the
scheme is case-insensitive) and its credential is the token exactly (the
token's case counts). The SHA-256 of the credential is compared with
hmac.compare_digest: two 32-byte digests, so the time taken tells nothing of
where they differ, nor of the token's length. Everything else fails: no
field, two fields (which one counts is a question only an attacker asks),
another scheme such as Basic, an empty credential, or one longer than any
token, refused before it is hashed.

BearerGate(app, check) puts an application behind the check: every route
but /healthz (which a load balancer must reach) answers 401 without the
token. The fast lane then answers nothing (fast_reads is empty): its cached
reads would go out without the check.
"""
from __future__ import annotations

import hashlib
import hmac
from typing import Mapping, Optional

from ..remote.token import MAX_TOKEN_BYTES
from .protocols import Application, FastRead, Reply
from .request import Request, RequestHeaders
from .response import error_response
from .sse import StreamSlots

__all__ = ["BearerCheck", "BearerGate", "UNAUTHORIZED"]

# A 401 says which scheme is wanted and is never cached (error_response adds Cache-Control: no-store).
UNAUTHORIZED = error_response(401, "This listener answers only a request with Authorization: Bearer and the "
                                   "node's metrics token.", b"WWW-Authenticate: Bearer\r\n")
OPEN_PATH = "/healthz"


class BearerCheck:
    """Whether a request carries the token whose SHA-256 is `digest`."""

    __slots__ = ("_digest",)

    def __init__(self, digest: bytes) -> None:
        if len(digest) != hashlib.sha256().digest_size:
            raise ValueError("a BearerCheck holds a SHA-256 digest")
        self._digest = digest

    def allows(self, headers: RequestHeaders) -> bool:
        values = headers.get_all("Authorization")
        if values is None or len(values) != 1:
            return False
        scheme, _, credential = values[0].partition(" ")
        credential = credential.lstrip(" ")
        if scheme.lower() != "bearer" or not credential or len(credential) > MAX_TOKEN_BYTES:
            return False
        # The header's text is ISO-8859-1 as read off the wire; so is the token's digest.
        presented = hashlib.sha256(credential.encode("iso-8859-1")).digest()
        return hmac.compare_digest(presented, self._digest)


class BearerGate:
    """`app` behind the bearer check: /healthz stays open, every other route needs the token."""

    def __init__(self, app: Application, check: BearerCheck) -> None:
        self.app = app
        self.settings = app.settings
        self.check = check

    def respond(self, request: Request) -> Reply:
        if request.path == OPEN_PATH or self.check.allows(request.headers):
            return self.app.respond(request)
        return UNAUTHORIZED

    def fast_reads(self) -> Mapping[bytes, FastRead]:
        return {}  # every request goes through respond(), and so through the check

    def listening(self, host: str, port: int, streams: Optional[StreamSlots] = None) -> None:
        self.app.listening(host, port, streams)

    def wake_streams(self) -> None:
        self.app.wake_streams()
