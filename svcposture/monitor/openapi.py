"""The monitor's OpenAPI 3.1 document: every route, its parameters and schemas.

A pure function of nothing but the package, built once per app: the handler
serves its bytes. The second vendor's and the first look's parts are added by
vendor_openapi and login_openapi, so the contract's schemas here stay as they are.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from .._names import NODE_STATUSES
from .._version import __version__
from . import advice_openapi, login_openapi, vendor_openapi
from .trust import GUARD_MESSAGES
from .response import JSON_TYPE


def _ref(name: str) -> Dict[str, str]:
    return {"$ref": "#/components/schemas/" + name}


def _window_schema() -> Dict[str, Any]:
    return {"oneOf": [{"type": "null"}, {"type": "object", "additionalProperties": False,
                                         "required": ["pct", "resetsAt", "status"],
                                         "properties": {
                                             "pct": {"type": ["number", "null"], "description": "Percent of the window limit; may exceed 100."},
                                             "resetsAt": {"type": ["string", "null"], "format": "date-time"},
                                             "status": {"type": ["string", "null"], "examples": ["allowed", "allowed_warning", "rejected"]}}}]}


def _account_schema() -> Dict[str, Any]:
    return {"type": "object", "additionalProperties": False,
            "required": ["label", "email", "active", "overallStatus", "representativeClaim",
                         "bindingWindow", "bindingStatus", "fiveHour", "sevenDay", "error"],
            "properties": {
                "label": {"type": "string", "pattern": "^[a-z0-9_]+$", "examples": ["acct2"]},
                "email": {"type": ["string", "null"]},
                "active": {"type": "boolean"},
                "overallStatus": {"type": ["string", "null"]},
                "representativeClaim": {"type": ["string", "null"]},
                "bindingWindow": {"type": ["string", "null"], "enum": ["five_hour", "seven_day", None]},
                "bindingStatus": {"type": ["string", "null"]},
                "fiveHour": _ref("Window"),
                "sevenDay": _ref("Window"),
                "error": {"oneOf": [{"type": "null"}, _ref("ProbeError")]}}}


def _posture_schema() -> Dict[str, Any]:
    return {"type": "object",
            "required": ["available", "node", "generatedAt", "probedAt", "cached", "status",
                         "active", "accounts", "siblingWithHeadroom"],
            "properties": {
                "available": {"const": True},
                "node": {"type": "string"},
                "generatedAt": {"type": "string", "format": "date-time"},
                "probedAt": {"type": "integer", "description": "Epoch ms of the probe; unchanged across cached replies."},
                "cached": {"type": "boolean"},
                "status": {"type": "string", "enum": list(NODE_STATUSES)},
                "active": {"oneOf": [{"type": "null"}, _ref("Account")]},
                "accounts": {"type": "array", "items": _ref("Account")},
                "siblingWithHeadroom": {"oneOf": [{"type": "null"}, {
                    "type": "object", "required": ["label", "email"], "additionalProperties": False,
                    "properties": {"label": {"type": "string"}, "email": {"type": ["string", "null"]}}}]},
                "error": {"description": "Node-level error (status error): the probe itself failed.",
                          "$ref": "#/components/schemas/ProbeError"}}}


def _schemas() -> Dict[str, Any]:
    error_kinds = ["transport", "timeout", "auth", "http", "no_headers", "parse", "config", "internal"]
    probe_error = {"type": "object", "required": ["kind", "message"],
                   "properties": {"kind": {"type": "string", "enum": error_kinds},
                                  "message": {"type": "string"},
                                  "httpStatus": {"type": ["integer", "null"]}}}
    disabled = {"type": "object", "additionalProperties": False, "required": ["available", "node"],
                "properties": {"available": {"const": False}, "node": {"type": "string"}}}
    forbidden = {"type": "object", "additionalProperties": False, "required": ["error", "reason", "message"],
                 "properties": {"error": {"const": "forbidden"},
                                "reason": {"type": "string", "enum": list(GUARD_MESSAGES)},
                                "message": {"type": "string"}}}
    error = {"type": "object", "required": ["error", "message"],
             "properties": {"error": {"type": "string"}, "message": {"type": "string"}}}
    health = {"type": "object", "required": ["ok", "node", "version", "startedAt", "probeIntervalS"],
              "properties": {"ok": {"const": True}, "node": {"type": "string"},
                             "version": {"type": "string"}, "startedAt": {"type": "string", "format": "date-time"},
                             "probeIntervalS": {"type": "number", "exclusiveMinimum": 0,
                                                "description": "SVC_PROBE_INTERVAL_S: a posture whose probedAt "
                                                               "is older than twice this is stale."}}}
    return dict({"Window": _window_schema(), "ProbeError": probe_error, "Account": _account_schema(),
                 "Posture": _posture_schema(), "Disabled": disabled, "Forbidden": forbidden, "Error": error,
                 "Health": health}, **fleet_schemas())


def _json_response(description: str, ref: str, headers: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {"description": description, "content": {JSON_TYPE: {"schema": _ref(ref)}}}
    if headers:
        out["headers"] = headers
    return out


def _text_response(description: str, ctype: str) -> Dict[str, Any]:
    return {"description": description, "content": {ctype: {"schema": {"type": "string"}}}}


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


_COMMON = {
    "405": {"$ref": "#/components/responses/MethodNotAllowed"},
    "414": {"$ref": "#/components/responses/TooLarge"},
    "431": {"$ref": "#/components/responses/TooLarge"},
}
_GUARDED = {"403": {"$ref": "#/components/responses/Forbidden"}}


def _get_op(op_id: str, summary: str, responses: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    op = {"operationId": op_id, "summary": summary, "responses": dict(responses, **_COMMON, **_GUARDED)}
    op.update(extra)
    return {"get": op, "head": dict(op, operationId=op_id + "Head", summary=summary + " (headers only)")}


def _accounts_op(body_schema: Dict[str, Any]) -> Dict[str, Any]:
    return _get_op(
        "getAccounts", "The node's account posture (cached for the TTL).",
        {"200": {"description": "The posture body, or exactly {available:false,node} when disabled.",
                 "headers": {"Cache-Control": {"schema": {"const": "no-store"}}},
                 "content": {JSON_TYPE: {"schema": body_schema}}},
         "500": _json_response("The posture layer failed.", "Error")},
        description=("A plain read needs no header. `refresh=true` forces a fresh probe (floor and "
                     "single-flight apply) and needs the X-Svc-Refresh header, a trusted Host and, "
                     "when present, a trusted Origin; otherwise 403 and no probe is spent."),
        parameters=[
            {"name": "refresh", "in": "query", "required": False, "schema": {"type": "string"},
             "examples": {"force": {"value": "true"}, "plain": {"value": "false"}},
             "description": ("Exactly `true` forces a fresh probe; any other value, like an absent "
                             "parameter, is a plain read.")},
            {"name": "X-Svc-Refresh", "in": "header", "required": False, "schema": {"type": "string"},
             "description": "Required (any value, even empty) with refresh=true."}])


def _paths() -> Dict[str, Any]:
    body_schema = {"oneOf": [_ref("Posture"), _ref("Disabled")]}
    return {
        "/": _get_op("dashboard", "The dashboard page (plain HTML, CSS and JS).",
                     {"200": _text_response("Dashboard HTML.", "text/html")}),
        "/static/dashboard.css": _get_op("dashboardCss", "Dashboard stylesheet.",
                                         {"200": _text_response("CSS.", "text/css")}),
        "/static/dashboard.js": _get_op("dashboardJs", "Dashboard script.",
                                        {"200": _text_response("JavaScript.", "text/javascript")}),
        "/api/accounts": _accounts_op(body_schema),
        "/api/accounts/stream": _get_op(
            "streamAccounts", "Server-sent events: the current posture, then one frame per refresh.",
            {"200": sse_response(
                "`retry: 5000`, then `account` events; `: keepalive` comments every SVC_SSE_KEEPALIVE_S seconds.",
                [sse_event_schema("account", body_schema,
                                  "The posture body a plain read returns: on connect, then after every probe.")]),
             "503": _json_response("Too many subscribers.", "Error",
                                   {"Retry-After": {"schema": {"type": "integer"}}})}),
        "/api/openapi.json": _get_op("openapi", "This document.",
                                     {"200": {"description": "OpenAPI 3.1 document.",
                                              "content": {JSON_TYPE: {"schema": {"type": "object"}}}}}),
        "/metrics": _get_op("metrics", "Prometheus text exposition.",
                            {"200": _text_response("Prometheus text format 0.0.4.", "text/plain")}),
        "/healthz": _get_op("healthz", "Liveness of the monitor process.",
                            {"200": _json_response("Serving.", "Health")}),
        **fleet_paths(),
    }


# ------------------------------------------------------------------ openapi: the fleet (docs/fleet.md)

def fleet_schemas() -> Dict[str, Any]:
    """FleetReport (GET /api/fleet), its host rows, and the heartbeat account and quota blocks."""
    from ..cluster.heartbeat import account_schema, quota_schema
    from ..cluster.hostaccounts import MAX_ACCOUNTS, entry_schema

    host = {"type": "object", "additionalProperties": False,
            "required": ["host", "state", "ageS", "quota", "account", "accounts"],
            "properties": {
                "host": {"type": "string"},
                "state": {"type": "string", "enum": ["live", "stale", "missing", "unknown"]},
                "ageS": {"type": ["number", "null"], "minimum": 0,
                         "description": "Heartbeat age in seconds; null when missing, unknown or under Loki."},
                "quota": {"oneOf": [{"type": "null"}, _ref("HeartbeatQuota")]},
                "account": {"oneOf": [{"type": "null"}, _ref("HeartbeatAccount")]},
                "codex": _ref("HeartbeatAccount"),
                "accounts": {"type": "array", "maxItems": MAX_ACCOUNTS, "items": _ref("HostAccount"),
                             "description": "Every account of the host, active or not; empty when unknown."}}}
    report = {"type": "object", "additionalProperties": False,
              "required": ["source", "anchor", "hosts", "generatedAt"],
              "properties": {
                  "source": {"type": "string", "enum": ["tracker", "loki", "prometheus", "demo"]},
                  "anchor": {"type": ["string", "null"]},
                  "publishIntervalMs": {"type": "integer", "minimum": 1, "description": "The heartbeat interval "
                                        "in force: the tracker's budget may stretch the configured one."},
                  "hosts": {"type": "array", "items": _ref("FleetHost"),
                            "description": "Every roster host, in roster order."},
                  "unlisted": {"type": "array", "maxItems": 100, "items": {
                      "type": "object", "additionalProperties": False, "required": ["host", "ageS"],
                      "properties": {"host": {"type": "string", "maxLength": 200},
                                     "ageS": {"type": ["number", "null"], "minimum": 0}}},
                      "description": "Heartbeats of hosts not in the roster: never counted live."},
                  "warning": {"type": "string"},
                  "error": {"type": "string", "description": "Liveness is unknown (anchor unset, tracker, "
                                                             "Loki or Prometheus unreadable): every host is "
                                                             "`unknown`."},
                  "stale": {"type": "boolean", "enum": [True],
                            "description": "Present when a newer read is still running after a few seconds "
                                           "(a slow tracker or Loki): this is the last good report."},
                  "staleAgeS": {"type": "number", "minimum": 0,
                                "description": "With `stale`: seconds since that report was read."},
                  "generatedAt": {"type": "string", "format": "date-time"}}}
    return {"FleetReport": report, "FleetHost": host, "HostAccount": entry_schema(),
            "HeartbeatAccount": account_schema(), "HeartbeatQuota": quota_schema(),
            "FleetAccounts": _fleet_accounts_schema()}


def _fleet_accounts_schema() -> Dict[str, Any]:
    """GET /api/fleet/accounts (cluster/fleetaccounts.py)."""
    time = {"type": ["string", "null"], "format": "date-time"}
    window = {"type": "object", "additionalProperties": False, "required": ["pct", "resetsAt", "probedAt", "host"],
              "properties": {"pct": {"type": ["number", "null"], "minimum": 0}, "resetsAt": time,
                             "probedAt": dict(time, description="When the newest reading of the window was "
                                                                "probed, on `host`."),
                             "host": {"type": ["string", "null"]}}}
    account = {"type": "object", "additionalProperties": False,
               "required": ["key", "provider", "labels", "hosts", "status", "fiveHour", "sevenDay", "wallAt"],
               "properties": {
                   "key": {"type": ["string", "null"], "pattern": "^[0-9a-f]{16}$",
                           "description": "sha256(provider NUL lower-cased email), first 16 hex digits; null "
                                          "when the host does not know the email (then one host, one label)."},
                   "provider": {"type": "string"},
                   "labels": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                              "description": "What the hosts call this account."},
                   "hosts": {"type": "array", "items": {
                       "type": "object", "additionalProperties": False, "required": ["host", "active"],
                       "properties": {"host": {"type": "string"}, "active": {"type": "boolean"}}}},
                   "status": {"type": ["string", "null"],
                              "enum": ["ok", "degraded", "rejected", "error", "unknown", None]},
                   "fiveHour": window, "sevenDay": window,
                   "wallAt": dict(time, description="The forecast wall of the binding window, from the newest "
                                                    "reading.")}}
    return {"type": "object", "additionalProperties": False, "required": ["accounts", "source", "readAt"],
            "properties": {
                "accounts": {"type": "array", "items": account,
                             "description": "Most urgent first: rejected, then the soonest wall."},
                "source": {"type": ["string", "null"], "enum": ["tracker", "loki", "prometheus", "demo", None]},
                "readAt": dict(time, description="When the fleet was read (the report's generatedAt)."),
                "error": {"type": "string", "description": "The fleet could not be read; accounts is empty."},
                "stale": {"type": "boolean", "enum": [True]},
                "staleAgeS": {"type": "number", "minimum": 0}}}


def fleet_paths() -> Dict[str, Any]:
    return {
        "/fleet": _get_op("fleetPage", "Every roster host on one page (plain HTML, CSS and JS).",
                          {"200": _text_response("Fleet page HTML.", "text/html")}),
        "/static/fleet.css": _get_op("fleetCss", "Fleet page stylesheet.", {"200": _text_response("CSS.", "text/css")}),
        "/static/fleet.js": _get_op("fleetJs", "Fleet page script.",
                                    {"200": _text_response("JavaScript.", "text/javascript")}),
        "/api/fleet": _get_op(
            "getFleet", "Every roster host's liveness and active account (cached SVC_FLEET_TTL_S, default 60 s).",
            {"200": _json_response("The `svc-cluster status --json` report plus generatedAt.", "FleetReport",
                                   {"Cache-Control": {"schema": {"const": "no-store"}}})},
            description=("Read from the liveness anchor (every page of its attachments) or from Loki, at most "
                         "once per TTL whatever the number of readers; concurrent readers share one read. "
                         "Never writes to the tracker.")),
        "/api/fleet/accounts": _get_op(
            "getFleetAccounts", "The fleet by account: each account once, its hosts, each window from its "
                                "newest probe across the fleet, most urgent first.",
            {"200": _json_response("The accounts view of the same cached read as /api/fleet.", "FleetAccounts",
                                   {"Cache-Control": {"schema": {"const": "no-store"}}})}),
    }


def _forecast_schema() -> Dict[str, Any]:
    return {"oneOf": [{"type": "null"}, {
        "type": "object", "additionalProperties": False,
        "required": ["ratePctPerHour", "wallAt", "beforeReset", "pctAtReset", "samples"],
        "properties": {
            "ratePctPerHour": {"type": "number", "minimum": 0, "description": "Least-squares slope, floored at 0."},
            "wallAt": {"type": ["string", "null"], "format": "date-time",
                       "description": "When pct reaches 100 at this rate; null when the rate is 0."},
            "beforeReset": {"type": "boolean"},
            "pctAtReset": {"type": ["number", "null"], "description": "May exceed 100; null without resetsAt."},
            "samples": {"type": "integer", "minimum": 3}}}]}


def _trajectory_schemas() -> Dict[str, Any]:
    """The schemas of the trajectory routes, kept apart from the contract's."""
    window = {"oneOf": [{"type": "null"}, {
        "type": "object", "additionalProperties": False, "required": ["pct", "resetsAt", "forecast"],
        "properties": {"pct": {"type": ["number", "null"]},
                       "resetsAt": {"type": ["string", "null"], "format": "date-time"},
                       "forecast": _ref("Forecast")}}]}
    extra = {"type": "object", "additionalProperties": False,
             "required": ["name", "seconds", "pct", "resetsAt", "forecast"],
             "description": "An extra window: a model's own limit, a credit plan's `credits`, another length.",
             "properties": {"name": {"type": ["string", "null"]}, "seconds": {"type": ["integer", "null"]},
                            "pct": {"type": ["number", "null"]},
                            "resetsAt": {"type": ["string", "null"], "format": "date-time"},
                            "forecast": _ref("Forecast")}}
    account = {"type": "object", "additionalProperties": False,
               "required": ["label", "email", "active", "fiveHour", "sevenDay"],
               "properties": {"label": {"type": "string"}, "email": {"type": ["string", "null"]},
                              "active": {"type": "boolean"}, "fiveHour": _ref("TrajectoryWindow"),
                              "sevenDay": _ref("TrajectoryWindow"),
                              "extraWindows": {"type": "array", "items": extra,
                                               "description": "Only on an account that has extra windows."}}}
    alert = {"type": "object", "required": ["v", "id", "ts", "attributes"],
             "description": "An account.quota.threshold or account.quota.forecast event (v2 envelope).",
             "properties": {"v": {"const": 2}, "id": {"type": "string"}, "ts": {"type": "string"},
                            "attributes": {"type": "object"}}}
    trajectory = {"type": "object", "additionalProperties": False,
                  "required": ["node", "generatedAt", "probedAt", "accounts", "alerts"],
                  "properties": {"node": {"type": "string"}, "generatedAt": {"type": "string", "format": "date-time"},
                                 "probedAt": {"type": ["integer", "null"], "description": "null before the first probe."},
                                 "accounts": {"type": "array", "items": _ref("TrajectoryAccount")},
                                 "alerts": {"type": "array", "maxItems": 20, "items": _ref("Alert"),
                                            "description": "The newest 20 alert events, newest first."},
                                 "reservePct": {"type": "integer", "minimum": 0, "maximum": 50,
                                                "description": "The human reserve (svc.posture.reservePct): "
                                                               "automation holds from 100 - reservePct %."}}}
    # [t, pct]: epoch ms and percent. Plain `items` rather than prefixItems,
    # which some 3.1 tooling still reads with the older array-form meaning.
    point = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2,
             "description": "[t (epoch ms), pct]"}
    series = {"type": "array", "maxItems": 500, "items": point}
    history = {"type": "object", "additionalProperties": False, "required": ["node", "from", "to", "accounts"],
               "properties": {"node": {"type": "string"}, "from": {"type": "integer"}, "to": {"type": "integer"},
                              "accounts": {"type": "object", "additionalProperties": {
                                  "type": "object", "required": ["fiveHour", "sevenDay"],
                                  "properties": {"fiveHour": series, "sevenDay": series, "extraWindows": {
                                      "type": "array", "description": "Only on an account that has extra windows.",
                                      "items": {"type": "object", "required": ["name", "seconds", "points"],
                                                "properties": {"name": {"type": ["string", "null"]},
                                                               "seconds": {"type": ["integer", "null"]},
                                                               "points": series}}}}}}}}
    return {"Forecast": _forecast_schema(), "TrajectoryWindow": window, "TrajectoryAccount": account,
            "Alert": alert, "Trajectory": trajectory, "History": history}


def _trajectory_paths() -> Dict[str, Any]:
    """The three trajectory routes, kept apart from the contract's."""
    body = {"oneOf": [_ref("Trajectory"), _ref("Disabled")]}
    return {
        "/api/trajectory": _get_op(
            "getTrajectory", "Forecast per account and window, and the newest alerts (rebuilt once per probe).",
            {"200": {"description": "The trajectory body, or exactly {available:false,node} when disabled.",
                     "content": {JSON_TYPE: {"schema": body}}}}),
        "/api/history": _get_op(
            "getHistory", "Utilization history per account and window, at most 500 points per series.",
            {"200": _json_response("The history of the last `hours` hours, oldest first.", "History"),
             "400": _json_response("`hours` is not one integer from 1 to 192.", "Error"),
             "500": _json_response("The history could not be read.", "Error")},
            parameters=[{"name": "hours", "in": "query", "required": False,
                         "schema": {"type": "integer", "minimum": 1, "maximum": 192, "default": 24}}]),
        "/api/trajectory/stream": _get_op(
            "streamTrajectory", "Server-sent events: trajectory bodies and alerts.",
            {"200": sse_response(
                "`retry: 5000`, then `event: trajectory` frames (the /api/trajectory body) on connect and "
                "after every probe, and one `event: alert` frame per alert (one alert event as data) as it "
                "is emitted; `: keepalive` comments.",
                [sse_event_schema("trajectory", body, "The /api/trajectory body."),
                 sse_event_schema("alert", _ref("Alert"), "One alert event (v2 envelope).")]),
             "503": _json_response("Too many subscribers.", "Error",
                                   {"Retry-After": {"schema": {"type": "integer"}}})}),
    }


def openapi_document() -> Dict[str, Any]:
    """The OpenAPI 3.1 document of every route and schema (served at /api/openapi.json)."""
    return advice_openapi.extend(login_openapi.extend(vendor_openapi.extend({
        "openapi": "3.1.0",
        "info": {"title": "svc-monitor", "version": __version__,
                 "description": "Read-only, token-free account posture of one node."},
        "paths": dict(_paths(), **_trajectory_paths()),
        "components": {
            "schemas": dict(_schemas(), **_trajectory_schemas()),
            "responses": {
                "Forbidden": _json_response("Forced-refresh guard (or SVC_MONITOR_READ_GUARD) refused the request.",
                                            "Forbidden"),
                "MethodNotAllowed": _json_response("Only GET and HEAD.", "Error",
                                                   {"Allow": {"schema": {"const": "GET, HEAD"}}}),
                "TooLarge": _json_response("Request line or header fields too large.", "Error"),
            },
        },
    })))
