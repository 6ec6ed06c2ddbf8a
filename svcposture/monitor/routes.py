"""Routes as data: (method, path, endpoint), and the answers no route gives.

A Route names the method and path it answers and its endpoint: a function
of the application and the Request that returns a Response (or an
sse.Stream), e.g. `MonitorApp.get_accounts`. HEAD is answered by the GET route of the same path: the server
side drops the body (Response.encode), so an endpoint never knows which of
the two it answered. A method no route has gets 405 with `Allow: GET, HEAD`
(and ends the connection: a body it may carry is left unread); a path no
route has gets 404.
"""
from __future__ import annotations

from types import MethodType
from typing import Any, Callable, Dict, FrozenSet, Iterable, NamedTuple, Optional, Tuple

from .protocols import Reply
from .request import Request
from .response import ALLOW, Response, error_response

Endpoint = Callable[[Request], Reply]

NOT_FOUND = error_response(404, "No such route. See /api/openapi.json.")
METHOD_NOT_ALLOWED = error_response(405, "Only GET and HEAD are supported.", ALLOW, ends_connection=True)


class Route(NamedTuple):
    method: str
    path: str
    # The application's function answering the route: endpoint(app, request).
    endpoint: Callable[[Any, Request], Reply]


class RouteTable:
    """Endpoints by (method, path), each bound once to `owner` (the application);
    a later route for the same method and path wins."""

    def __init__(self, routes: Iterable[Route], owner: object) -> None:
        self._endpoints: Dict[Tuple[str, str], Endpoint] = {
            (route.method, route.path): MethodType(route.endpoint, owner) for route in routes}
        methods = {method for method, _ in self._endpoints}
        if "GET" in methods:
            methods.add("HEAD")
        self.methods: FrozenSet[str] = frozenset(methods)

    def endpoint(self, method: str, path: str) -> Optional[Endpoint]:
        """The endpoint answering `method` (HEAD as GET) on `path`, or None (a 404)."""
        return self._endpoints.get(("GET" if method == "HEAD" else method, path))


def refusal(table: RouteTable, method: str) -> Optional[Response]:
    """The 405 for a method no route answers, else None."""
    return None if method in table.methods else METHOD_NOT_ALLOWED
