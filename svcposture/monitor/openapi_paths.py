"""The OpenAPI document's paths: every route of the monitor, its parameters and its answers.

Pure functions of the package and the vendor registry, grouped by job: the
pages and their files, the posture (accounts, its stream, the advice, the
login), the trajectory and history, the fleet, and the monitor's own
(/healthz, /metrics, this document). Bodies are named by reference to the
components of openapi_schemas. Every route answers GET and HEAD, and may
answer 403 (the read guard), 405, 414 and 431.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ..vendors import DEFAULT_PROVIDER, bad_provider_message, others, provider_names
from .openapi_schemas import json_answer, posture_body, ref
from .response import JSON_TYPE



def document_paths() -> Dict[str, Any]:
    """Every route, by path."""
    return dict(_page_paths(), **_posture_paths(), **_trajectory_paths(), **_fleet_paths(), **_monitor_paths())


def sse_event_schema(event: str, data_schema: Dict[str, Any], description: str) -> Dict[str, Any]:
    """One event type of a text/event-stream: its `event` name, a numeric `id`, and
    `data` carrying one line of JSON that `data_schema` describes."""
    return {"type": "object", "description": description, "required": ["event", "data"],
            "properties": {"event": {"const": event},
                           "id": {"type": "string", "pattern": "^[0-9]+$"},
                           "retry": {"type": "integer"},
                           "data": {"type": "string", "contentMediaType": JSON_TYPE, "contentSchema": data_schema}}}


def sse_response(description: str, events: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """A 200 answer that is an event stream; `events` are sse_event_schema()s, one per event type.

    In OpenAPI 3.1 the `schema` of text/event-stream describes one event as parsed
    by an EventSource ({event, id, retry, data}); schemathesis validates every
    event of the stream against it, and the JSON in `data` against contentSchema."""
    one = events[0] if len(events) == 1 else {"oneOf": list(events)}
    return {"description": description, "headers": {"Cache-Control": {"schema": {"const": "no-cache"}}},
            "content": {"text/event-stream": {"schema": one}}}


def _route(op_id: str, summary: str, responses: Dict[str, Any], head_summary: Optional[str] = None,
           **extra: Any) -> Dict[str, Any]:
    """GET and HEAD of one path: HEAD is the GET's answer without its body."""
    every_route = {"403": {"$ref": "#/components/responses/Forbidden"},
                   "405": {"$ref": "#/components/responses/MethodNotAllowed"},
                   "414": {"$ref": "#/components/responses/TooLarge"},
                   "431": {"$ref": "#/components/responses/TooLarge"}}
    op = {"operationId": op_id, "summary": summary, "responses": dict(responses, **every_route)}
    op.update(extra)
    head_summary = summary + " (headers only)" if head_summary is None else head_summary
    return {"get": op, "head": dict(op, operationId=op_id + "Head", summary=head_summary)}


def _text(description: str, ctype: str) -> Dict[str, Any]:
    return {"description": description, "content": {ctype: {"schema": {"type": "string"}}}}


def _no_store() -> Dict[str, Any]:
    return {"Cache-Control": {"schema": {"const": "no-store"}}}


def _too_many_subscribers() -> Dict[str, Any]:
    return json_answer("Too many subscribers.", "Error", {"Retry-After": {"schema": {"type": "integer"}}})


def _either(words: List[str]) -> str:
    """`a`, `a or b`, `a, b or c`."""
    return words[0] if len(words) == 1 else "%s or %s" % (", ".join(words[:-1]), words[-1])


# ------------------------------------------------------------------ the pages and their files

def _page_paths() -> Dict[str, Any]:
    return {
        "/": _route("dashboard", "The dashboard page (plain HTML, CSS and JS).",
                    {"200": _text("Dashboard HTML.", "text/html")}),
        "/static/dashboard.css": _route("dashboardCss", "Dashboard stylesheet.", {"200": _text("CSS.", "text/css")}),
        "/static/dashboard.js": _route("dashboardJs", "Dashboard script.",
                                       {"200": _text("JavaScript.", "text/javascript")}),
        "/fleet": _route("fleetPage", "Every roster host on one page (plain HTML, CSS and JS).",
                         {"200": _text("Fleet page HTML.", "text/html")}),
        "/static/fleet.css": _route("fleetCss", "Fleet page stylesheet.", {"200": _text("CSS.", "text/css")}),
        "/static/fleet.js": _route("fleetJs", "Fleet page script.", {"200": _text("JavaScript.", "text/javascript")}),
        "/static/favicon.svg": _route("favicon", "The pages' icon.", {"200": _text("SVG.", "image/svg+xml")},
                                      head_summary="The pages' icon."),
    }


# ------------------------------------------------------------------ the posture (docs/posture.md, docs/steering.md)

def _posture_paths() -> Dict[str, Any]:
    provider = _provider_parameter()
    return {
        "/api/accounts": _route(
            "getAccounts", "The node's account posture (cached for the TTL).",
            {"200": {"description": "The posture body, or exactly {available:false,node} when disabled.",
                     "headers": _no_store(), "content": {JSON_TYPE: {"schema": posture_body()}}},
             "400": _bad_provider(),
             "500": json_answer("The posture layer failed.", "Error")},
            description=("A plain read needs no header. `refresh=true` forces a fresh probe (floor and "
                         "single-flight apply) and needs the X-Svc-Refresh header, a trusted Host and, "
                         "when present, a trusted Origin; otherwise 403 and no probe is spent."),
            parameters=_refresh_parameters() + [provider]),
        "/api/accounts/stream": _route(
            "streamAccounts", "Server-sent events: the current posture, then one frame per refresh.",
            {"200": sse_response(
                "`retry: 5000`, then `account` events; `: keepalive` comments every SVC_SSE_KEEPALIVE_S seconds.",
                [sse_event_schema("account", posture_body(),
                                  "The posture body a plain read returns: on connect, then after every probe.")]),
             "400": _bad_provider(),
             "503": _too_many_subscribers()},
            parameters=[provider]),
        "/api/advice": _advice_path(),
        "/api/login": _route(
            "getLogin", "This machine's interactive login (the program `loginName` of the vendor `vendor`): its "
                        "5-hour and 7-day windows from the quota sampler.",
            {"200": json_answer("The newest sample, or why there is none.", "Login")},
            description=("Read-only and cached; the token never leaves the sampler's child. Shown by the "
                         "dashboard, HUD and statusline when /api/accounts is unavailable.")),
        "/api/vendors": _route(
            "getVendors", "The registered vendors, as pages and clients name them, and which this node shows.",
            {"200": json_answer("Every registered vendor, in registration order.", "Vendors")}),
    }


def _refresh_parameters() -> List[Dict[str, Any]]:
    return [
        {"name": "refresh", "in": "query", "required": False, "schema": {"type": "string"},
         "examples": {"force": {"value": "true"}, "plain": {"value": "false"}},
         "description": ("Exactly `true` forces a fresh probe; any other value, like an absent "
                         "parameter, is a plain read.")},
        {"name": "X-Svc-Refresh", "in": "header", "required": False, "schema": {"type": "string"},
         "description": "Required (any value, even empty) with refresh=true."}]


def _provider_parameter(description: Optional[str] = None) -> Dict[str, Any]:
    """`?provider=`: one of the registered vendors, the default one when absent."""
    if description is None:
        description = ("Whose accounts: `%s` (the default: the contract's body, unchanged) or another registered "
                       "vendor, such as %s (the same shape for its accounts). Anything else: 400. %s"
                       % (DEFAULT_PROVIDER, _either(["`%s`" % v.name for v in others()]), bad_provider_message()))
    return {"name": "provider", "in": "query", "required": False,
            "schema": {"type": "string", "enum": list(provider_names()), "default": DEFAULT_PROVIDER},
            "description": description}


def _bad_provider() -> Dict[str, Any]:
    return json_answer("`provider` is not a registered vendor (%s)." % ", ".join(provider_names()), "Error")


def _advice_path() -> Dict[str, Any]:
    names = ["`%s`" % name for name in provider_names()]
    return _route(
        "getAdvice", "Stay, wait, switch or none: the one advice every surface names.",
        {"200": {"description": "The advice, or exactly {available:false,node} when that posture is disabled.",
                 "content": {JSON_TYPE: {"schema": {"oneOf": [ref("Advice"), ref("Disabled")]}}}},
         "400": json_answer("`provider` is not %s." % _either(names), "Error"),
         "500": json_answer("The posture layer failed.", "Error")},
        description=("Read-only, computed once per probe and cached with the posture (same probedAt); "
                     "no forced refresh. The same trust rules as /api/accounts."),
        parameters=[_provider_parameter("Whose accounts: %s. Anything else: 400."
                                        % _either([names[0] + " (default)"] + names[1:]))])


# ------------------------------------------------------------------ trajectory and history (docs/trajectory.md)

def _trajectory_paths() -> Dict[str, Any]:
    body = {"oneOf": [ref("Trajectory"), ref("Disabled")]}
    return {
        "/api/trajectory": _route(
            "getTrajectory", "Forecast per account and window, and the newest alerts (rebuilt once per probe).",
            {"200": {"description": "The trajectory body, or exactly {available:false,node} when disabled.",
                     "content": {JSON_TYPE: {"schema": body}}}}),
        "/api/history": _route(
            "getHistory", "Utilization history per account and window, at most 500 points per series.",
            {"200": json_answer("The history of the last `hours` hours, oldest first.", "History"),
             "400": json_answer("`hours` is not one integer from 1 to 192.", "Error"),
             "500": json_answer("The history could not be read.", "Error")},
            parameters=[{"name": "hours", "in": "query", "required": False,
                         "schema": {"type": "integer", "minimum": 1, "maximum": 192, "default": 24}}]),
        "/api/trajectory/stream": _route(
            "streamTrajectory", "Server-sent events: trajectory bodies and alerts.",
            {"200": sse_response(
                "`retry: 5000`, then `event: trajectory` frames (the /api/trajectory body) on connect and "
                "after every probe, and one `event: alert` frame per alert (one alert event as data) as it "
                "is emitted; `: keepalive` comments.",
                [sse_event_schema("trajectory", body, "The /api/trajectory body."),
                 sse_event_schema("alert", ref("Alert"), "One alert event (v2 envelope).")]),
             "503": _too_many_subscribers()}),
    }


# ------------------------------------------------------------------ the fleet (docs/fleet.md)

def _fleet_paths() -> Dict[str, Any]:
    return {
        "/api/fleet": _route(
            "getFleet", "Every roster host's liveness and active account (cached SVC_FLEET_TTL_S, default 60 s).",
            {"200": json_answer("The `svc-cluster status --json` report plus generatedAt.", "FleetReport",
                                _no_store())},
            description=("Read from the liveness anchor (every page of its attachments) or from Loki, at most "
                         "once per TTL whatever the number of readers; concurrent readers share one read. "
                         "Never writes to the tracker.")),
        "/api/fleet/accounts": _route(
            "getFleetAccounts", "The fleet by account: each account once, its hosts, each window from its "
                                "newest probe across the fleet, most urgent first.",
            {"200": json_answer("The accounts view of the same cached read as /api/fleet.", "FleetAccounts",
                                _no_store())}),
        "/api/fleet/owner": _route(
            "getFleetOwner", "Which host takes a ticket: the first in HRW order with headroom for the vendor "
                             "(`svc-cluster owner --headroom --json`).",
            {"200": json_answer("The owner, the hosts skipped and why; with no host with headroom, the "
                                "contract's owner and waitUntil.", "FleetOwner"),
             "400": json_answer("`ticket` is missing, repeated or not a tracker ticket identifier, or "
                                "`provider` is not a registered vendor (%s)." % ", ".join(provider_names()),
                                "Error")},
            description=("Judged from the same cached read as /api/fleet (no query of its own) and this node's "
                         "human reserve: a host has headroom when its active account of the vendor is healthy "
                         "and below 100 - reserve on every window, or another account there is. The same "
                         "trust rules as /api/fleet."),
            parameters=[{"name": "ticket", "in": "query", "required": True,
                         "schema": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9]*-[0-9]+$"},
                         "examples": {"ticket": {"value": "ENG-1"}},
                         "description": "A tracker ticket identifier like ENG-123."},
                        _provider_parameter("Whose headroom: a registered vendor (default %s). Anything else: "
                                            "400." % DEFAULT_PROVIDER)]),
    }


# ------------------------------------------------------------------ the monitor's own

def _monitor_paths() -> Dict[str, Any]:
    return {
        "/api/openapi.json": _route("openapi", "This document.",
                                    {"200": {"description": "OpenAPI 3.1 document.",
                                             "content": {JSON_TYPE: {"schema": {"type": "object"}}}}}),
        "/metrics": _route("metrics", "Prometheus text exposition.",
                           {"200": _text("Prometheus text format 0.0.4.", "text/plain")}),
        "/healthz": _route("healthz", "Liveness of the monitor process.", {"200": json_answer("Serving.", "Health")}),
    }
