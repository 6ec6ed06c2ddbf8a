"""The OpenAPI document's first-look parts (docs/first-look.md), added onto openapi's document.

GET /api/login (this machine's Claude Code login from the quota sampler) and
the demo's simulated fleet source. Kept apart so the contract's schemas in
openapi stay as they are.
"""
from __future__ import annotations

from typing import Any, Dict

_JSON = "application/json"
_COMMON = {
    "403": {"$ref": "#/components/responses/Forbidden"},
    "405": {"$ref": "#/components/responses/MethodNotAllowed"},
    "414": {"$ref": "#/components/responses/TooLarge"},
    "431": {"$ref": "#/components/responses/TooLarge"},
}


def login_schema() -> Dict[str, Any]:
    window = {"oneOf": [{"type": "null"}, {
        "type": "object", "additionalProperties": False, "required": ["pct", "resetsAt"],
        "properties": {"pct": {"type": "number", "description": "Percent used; may exceed 100."},
                       "resetsAt": {"type": ["string", "null"], "format": "date-time"}}}]}
    extra = {"type": "object", "additionalProperties": False,
             "required": ["pct", "resetsAt", "status", "derived", "seconds", "name"],
             "properties": {"pct": {"type": "number", "minimum": 0},
                            "resetsAt": {"type": ["string", "null"], "format": "date-time"},
                            "status": {"type": "string", "enum": ["allowed", "allowed_warning", "rejected"],
                                       "description": "Derived from pct: rejected at 100, allowed_warning from 90."},
                            "derived": {"const": True},
                            "seconds": {"type": ["integer", "null"], "description": "The window's length."},
                            "name": {"type": "string", "description": "The bucket (seven_day_cowork) or the "
                                                                      "model (Fable) the limit is for."}}}
    extra_usage = {"oneOf": [{"type": "null"}, {
        "type": "object", "additionalProperties": False,
        "required": ["enabled", "monthlyLimit", "usedCredits", "utilization", "currency"],
        "description": "The plan's overage credits (extra_usage), as the provider sends them.",
        "properties": {"enabled": {"type": ["boolean", "null"]},
                       "monthlyLimit": {"type": ["number", "null"], "minimum": 0},
                       "usedCredits": {"type": ["number", "null"], "minimum": 0},
                       "utilization": {"type": ["number", "null"], "minimum": 0},
                       "currency": {"type": ["string", "null"]}}}]}
    available = {
        "type": "object", "additionalProperties": False,
        "required": ["available", "node", "plan", "fiveHour", "sevenDay", "extraWindows", "extraUsage", "sampledAt",
                     "source"],
        "properties": {"available": {"const": True}, "node": {"type": "string"},
                       "plan": {"type": ["string", "null"], "description": "The login's subscription type."},
                       "fiveHour": window, "sevenDay": window,
                       "extraWindows": {"type": "array", "items": extra,
                                        "description": "Other weekly buckets and model-scoped limits."},
                       "extraUsage": extra_usage,
                       "sampledAt": {"type": "string", "format": "date-time"},
                       "source": {"const": "login"}}}
    unavailable = {
        "type": "object", "additionalProperties": False, "required": ["available", "node", "reason"],
        "properties": {"available": {"const": False}, "node": {"type": "string"},
                       "reason": {"type": "string", "description": "Why there is nothing to show; names the "
                                                                   "credentials file the sampler looked for."}}}
    return {"oneOf": [available, unavailable]}


def extend(document: Dict[str, Any]) -> Dict[str, Any]:
    """Add /api/login and the demo's fleet source to an OpenAPI document (in place)."""
    document["components"]["schemas"]["Login"] = login_schema()
    op = {"operationId": "getLogin",
          "summary": "This machine's Claude Code login: its 5-hour and 7-day windows from the quota sampler.",
          "description": ("Read-only and cached; the token never leaves the sampler's child. Shown by the "
                          "dashboard, HUD and statusline when /api/accounts is unavailable."),
          "responses": dict({"200": {"description": "The newest sample, or why there is none.",
                                     "content": {_JSON: {"schema": {"$ref": "#/components/schemas/Login"}}}}},
                            **_COMMON)}
    document["paths"]["/api/login"] = {"get": op, "head": dict(op, operationId="getLoginHead",
                                                               summary=op["summary"] + " (headers only)")}
    document["components"]["schemas"]["Vendors"] = {
        "type": "object", "additionalProperties": False, "required": ["node", "default", "vendors"],
        "properties": {"node": {"type": "string"},
                       "default": {"type": "string", "description": "The vendor /api/accounts serves without "
                                                                    "a provider parameter."},
                       "vendors": {"type": "array", "items": {
                           "type": "object", "additionalProperties": False,
                           "required": ["name", "displayName", "shown"],
                           "properties": {"name": {"type": "string", "description": "The provider parameter."},
                                          "displayName": {"type": "string"},
                                          "shown": {"type": "boolean",
                                                    "description": "Whether this node has the vendor's accounts."}}}}}}
    vendors = {"operationId": "getVendors", "summary": "The registered vendors, as pages and clients name them.",
               "responses": dict({"200": {"description": "Every registered vendor, in registration order.",
                                          "content": {_JSON: {"schema": {"$ref": "#/components/schemas/Vendors"}}}}},
                                 **_COMMON)}
    document["paths"]["/api/vendors"] = {"get": vendors, "head": dict(vendors, operationId="getVendorsHead")}
    icon = {"operationId": "favicon", "summary": "The pages' icon.",
            "responses": dict({"200": {"description": "SVG.", "content": {"image/svg+xml": {"schema": {"type": "string"}}}}},
                              **_COMMON)}
    document["paths"]["/static/favicon.svg"] = {"get": icon, "head": dict(icon, operationId="faviconHead")}
    source = document["components"]["schemas"]["FleetReport"]["properties"]["source"]
    if "enum" in source and "demo" not in source["enum"]:
        source["enum"] = list(source["enum"]) + ["demo"]  # the demo's simulated fleet
    return document
