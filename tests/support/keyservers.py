"""Stand-ins for the key vendors' usage endpoints (docs/copilot.md, docs/zai.md, docs/kimi.md), on loopback.

Each one answers its vendor's path only, and only with the scheme the real endpoint takes
and the monitor sends: GitHub's `Authorization: token <t>` for Copilot, `Bearer <key>` for
z.ai and Kimi. A key it was given a reply for gets that reply (a captured body from
tests/fixtures/field, any status and headers); any other key gets the vendor's refusal,
HTTP 401 with the body that vendor sends. `auths` lists every Authorization header seen.

    with CopilotServer() as server:
        server.set_reply("gho_...", reply("copilot-user-business-seat.json"))
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from tests.support.httpserver import QuietHandler, Served, send_raw

Reply = Tuple[int, bytes, Dict[str, str]]


class _Handler(QuietHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        server: "KeyServer" = self.server.owner  # type: ignore[attr-defined]
        auth = self.headers.get("Authorization") or ""
        prefix = server.scheme + " "
        key = auth[len(prefix):] if auth.startswith(prefix) else None
        with server.lock:
            server.auths.append(auth)
            reply = server.replies.get(key) if key is not None else None
        if self.path.split("?", 1)[0] != server.path:
            send_raw(self, 404, b'{"message":"Not Found"}')
        elif reply is None:
            send_raw(self, 401, json.dumps(server.refusal).encode("utf-8"))
        else:
            send_raw(self, reply[0], reply[1], headers=reply[2])


class KeyServer(Served):
    """One vendor's usage endpoint; the subclasses name its path, scheme and refusal body."""

    handler = _Handler
    provider = ""
    path = "/"
    scheme = "Bearer"
    refusal: Any = {"error": "unauthorized"}

    def __init__(self) -> None:
        super().__init__()
        self.replies: Dict[str, Reply] = {}
        self.auths: List[str] = []

    def set_reply(self, key: str, body: Any, status: int = 200, headers: Optional[Dict[str, str]] = None) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        with self.lock:
            self.replies[key] = (status, raw, dict(headers or {}))


class CopilotServer(KeyServer):
    """`GET /copilot_internal/user`, `Authorization: token <t>`; GitHub's 401 body otherwise."""

    provider = "copilot"
    path = "/copilot_internal/user"
    scheme = "token"
    refusal = {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"}


class ZaiServer(KeyServer):
    """`GET /api/monitor/usage/quota/limit`, `Authorization: Bearer <key>`; z.ai's refusal envelope otherwise."""

    provider = "zai"
    path = "/api/monitor/usage/quota/limit"
    refusal = {"code": 401, "msg": "token expired or incorrect", "success": False}


class KimiServer(KeyServer):
    """`GET /coding/v1/usages`, `Authorization: Bearer <key>`; a 401 otherwise (its body is not captured)."""

    provider = "kimi"
    path = "/coding/v1/usages"
    refusal = {"error": {"message": "Invalid Authentication", "type": "invalid_authentication_error"}}
