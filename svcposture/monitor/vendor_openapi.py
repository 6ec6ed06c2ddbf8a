"""The OpenAPI document's second vendor (docs/codex.md), added onto openapi's document.

`provider` on /api/accounts and its stream (400 when bad), the Codex posture
body in the posture body's shape with its vendor fields, `provider` on every trajectory
and history row, and the optional `codex` block of a fleet host. Kept apart
so the contract's schemas in openapi stay as they are.
"""
from __future__ import annotations

from typing import Any, Dict

from .._names import NODE_STATUSES
from ..vendors import DEFAULT_PROVIDER, bad_provider_message, provider_names

_JSON = "application/json"


def _ref(name: str) -> Dict[str, str]:
    return {"$ref": "#/components/schemas/" + name}


def _nullable(schema: Dict[str, Any]) -> Dict[str, Any]:
    return {"oneOf": [{"type": "null"}, schema]}


def codex_schemas() -> Dict[str, Any]:
    """CodexWindow, CodexExtraWindow, CodexError, CodexAccount and CodexPosture."""
    window_props = {
        "pct": {"type": "number", "minimum": 0, "description": "Percent used; may exceed 100."},
        "resetsAt": {"type": ["string", "null"], "format": "date-time"},
        "status": {"type": "string", "enum": ["allowed", "allowed_warning", "rejected"],
                   "description": "Derived from pct (the vendor sends none): rejected at 100, allowed_warning from 90."},
        "derived": {"const": True}}
    window = {"type": "object", "additionalProperties": False, "required": ["pct", "resetsAt", "status", "derived"],
              "properties": window_props}
    extra = {"type": "object", "additionalProperties": False,
             "required": ["pct", "resetsAt", "status", "derived", "seconds", "name"],
             "properties": dict(window_props, seconds={"type": ["integer", "null"], "minimum": 1,
                                                         "description": "The window's length; null for a "
                                                                        "credit plan's limit (`credits`)."},
                                name={"type": ["string", "null"],
                                      "description": "The model (limit_name, else limit_id) or `credits`."})}
    error = {"type": "object", "required": ["kind", "message"],
             "properties": {"kind": {"type": "string", "enum": ["unauthorized", "config", "transport", "timeout",
                                                                "http", "parse", "internal"]},
                            "message": {"type": "string"}, "httpStatus": {"type": ["integer", "null"]},
                            "fix": {"type": ["string", "null"], "description": "What to do, e.g. run `codex login`."}}}
    credits = {"type": "object", "additionalProperties": False,
               "properties": {"hasCredits": {"type": ["boolean", "null"]}, "unlimited": {"type": ["boolean", "null"]},
                              "balance": {"type": ["number", "null"]}}}
    fields = ["label", "email", "active", "overallStatus", "representativeClaim", "bindingWindow", "bindingStatus",
              "fiveHour", "sevenDay", "error", "provider", "extraWindows", "codeReview", "planType", "credits",
              "source", "sampledAt"]
    account = {"type": "object", "additionalProperties": False, "required": fields, "properties": {
        "label": {"type": "string", "pattern": "^codex-[a-z0-9_]+$", "examples": ["codex-work"]},
        "email": {"type": ["string", "null"]},
        "active": {"type": "boolean", "description": "The account CODEX_HOME names."},
        "overallStatus": {"type": "null"}, "representativeClaim": {"type": "null"},
        "bindingWindow": {"type": ["string", "null"], "enum": ["five_hour", "seven_day", None]},
        "bindingStatus": {"type": ["string", "null"]},
        "fiveHour": _nullable(_ref("CodexWindow")), "sevenDay": _nullable(_ref("CodexWindow")),
        "error": _nullable(_ref("CodexError")),
        "provider": {"const": "codex"},
        "extraWindows": {"type": "array", "items": _ref("CodexExtraWindow"),
                         "description": "Windows of other lengths, and the vendor's additional limits."},
        "codeReview": _nullable({"type": "array", "items": _ref("CodexExtraWindow")}),
        "planType": {"type": ["string", "null"]},
        "credits": _nullable(credits),
        "source": {"type": ["string", "null"], "enum": ["api", "session", None],
                   "description": "Where the sample came from: the usage endpoint or the CLI's own session log."},
        "sampledAt": {"type": ["integer", "null"], "description": "Epoch ms of the sample shown."}}}
    posture = {"type": "object",
               "required": ["available", "node", "generatedAt", "probedAt", "cached", "status", "active",
                            "accounts", "siblingWithHeadroom"],
               "properties": {
                   "available": {"const": True}, "node": {"type": "string"},
                   "generatedAt": {"type": "string", "format": "date-time"}, "probedAt": {"type": "integer"},
                   "cached": {"type": "boolean"}, "status": {"type": "string", "enum": list(NODE_STATUSES)},
                   "active": _nullable(_ref("CodexAccount")),
                   "accounts": {"type": "array", "items": _ref("CodexAccount")},
                   "siblingWithHeadroom": _nullable({"type": "object", "required": ["label", "email"]}),
                   "error": _ref("ProbeError")}}
    return {"CodexWindow": window, "CodexExtraWindow": extra, "CodexError": error, "CodexAccount": account,
            "CodexPosture": posture}


def _provider_parameter() -> Dict[str, Any]:
    return {"name": "provider", "in": "query", "required": False,
            "schema": {"type": "string", "enum": list(provider_names()), "default": DEFAULT_PROVIDER},
            "description": ("Whose accounts: `claude` (the default: the contract's body, unchanged) or another "
                            "registered vendor, such as `codex` (the same shape for its accounts). Anything else: "
                            "400. " + bad_provider_message())}


def _bad_request() -> Dict[str, Any]:
    return {"description": "`provider` is not a registered vendor (%s)." % ", ".join(provider_names()),
            "content": {_JSON: {"schema": _ref("Error")}}}


def extend(document: Dict[str, Any]) -> Dict[str, Any]:
    """Add the second vendor to an OpenAPI document built by openapi.openapi_document (in place)."""
    schemas = document["components"]["schemas"]
    schemas.update(codex_schemas())
    paths = document["paths"]
    for path in ("/api/accounts", "/api/accounts/stream"):
        for method in ("get", "head"):
            op = paths[path][method]
            op["parameters"] = list(op.get("parameters") or []) + [_provider_parameter()]
            op["responses"]["400"] = _bad_request()
    json_200 = paths["/api/accounts"]["get"]["responses"]["200"]["content"][_JSON]
    json_200["schema"] = {"anyOf": [_ref("Posture"), _ref("CodexPosture"), _ref("Disabled")]}
    stream_200 = paths["/api/accounts/stream"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    stream_200["schema"]["properties"]["data"]["contentSchema"] = json_200["schema"]
    provider = {"type": "string", "enum": list(provider_names())}
    schemas["TrajectoryAccount"]["properties"]["provider"] = provider
    schemas["TrajectoryAccount"]["required"] = schemas["TrajectoryAccount"]["required"] + ["provider"]
    history_row = schemas["History"]["properties"]["accounts"]["additionalProperties"]
    history_row["properties"]["provider"] = provider
    history_row["required"] = history_row["required"] + ["provider"]
    host = schemas["FleetHost"]["properties"]
    host["codex"] = dict(_ref("HeartbeatAccount"), description=(
        "The host's active Codex account, same block as `account`; absent on a host without Codex accounts."))
    return document
