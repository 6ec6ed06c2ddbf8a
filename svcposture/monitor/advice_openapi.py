"""The OpenAPI document's part for GET /api/advice (docs/steering.md), added onto openapi's document."""
from __future__ import annotations

from typing import Any, Dict

from ..steering.advice import ADVICE_WORDS
from ..vendors import provider_names

_JSON = "application/json"
_COMMON = {
    "403": {"$ref": "#/components/responses/Forbidden"},
    "405": {"$ref": "#/components/responses/MethodNotAllowed"},
    "414": {"$ref": "#/components/responses/TooLarge"},
    "431": {"$ref": "#/components/responses/TooLarge"},
}


def _ref(name: str) -> Dict[str, str]:
    return {"$ref": "#/components/schemas/" + name}


def advice_schemas() -> Dict[str, Any]:
    ident = {"type": "object", "additionalProperties": False, "required": ["label", "email"],
             "properties": {"label": {"type": "string"}, "email": {"type": ["string", "null"]}}}
    ranked = {"type": "object", "additionalProperties": False,
              "required": ["label", "email", "headroomPct", "wallAt", "reachesReset"],
              "properties": {
                  "label": {"type": "string"}, "email": {"type": ["string", "null"]},
                  "headroomPct": {"type": "number", "minimum": 0,
                                  "description": "Points left below 100 - reserve on the account's fuller window."},
                  "wallAt": {"type": ["string", "null"], "format": "date-time",
                             "description": "The earliest forecast wall of its windows, if any."},
                  "reachesReset": {"type": "boolean",
                                   "description": "Its forecast reaches its reset below 100 - reserve."}}}
    body = {"type": "object", "additionalProperties": False,
            "required": ["available", "node", "generatedAt", "probedAt", "reservePct", "provider", "active",
                         "advice", "to", "waitS", "reason", "ranked"],
            "properties": {
                "available": {"const": True}, "node": {"type": "string"},
                "generatedAt": {"type": "string", "format": "date-time"},
                "probedAt": {"type": "integer", "description": "The probe the advice was computed on, as the "
                                                               "posture's probedAt."},
                "reservePct": {"type": "integer", "minimum": 0, "maximum": 50},
                "provider": {"type": "string", "enum": list(provider_names())},
                "active": {"oneOf": [{"type": "null"}, _ref("AdviceAccount")]},
                "advice": {"type": "string", "enum": list(ADVICE_WORDS)},
                "to": {"oneOf": [{"type": "null"}, _ref("AdviceAccount")],
                       "description": "The account to switch to (advice `switch` only)."},
                "waitS": {"type": ["integer", "null"], "minimum": 0,
                          "description": "Seconds until the active account's holding window resets "
                                         "(advice `wait` and `none`)."},
                "reason": {"type": "string"},
                "ranked": {"type": "array", "items": _ref("AdviceCandidate"),
                           "description": "The candidates, best first."}}}
    return {"AdviceAccount": ident, "AdviceCandidate": ranked, "Advice": body}


def extend(document: Dict[str, Any]) -> Dict[str, Any]:
    """Add /api/advice and its schemas to an OpenAPI document (in place)."""
    document["components"]["schemas"].update(advice_schemas())
    op = {"operationId": "getAdvice",
          "summary": "Stay, wait, switch or none: the one advice every surface names.",
          "description": ("Read-only, computed once per probe and cached with the posture (same probedAt); "
                          "no forced refresh. The same trust rules as /api/accounts."),
          "parameters": [{"name": "provider", "in": "query", "required": False,
                          "schema": {"type": "string", "enum": list(provider_names()), "default": "claude"},
                          "description": "Whose accounts: `claude` (default) or `codex`. Anything else: 400."}],
          "responses": dict({
              "200": {"description": "The advice, or exactly {available:false,node} when that posture is disabled.",
                      "content": {_JSON: {"schema": {"oneOf": [_ref("Advice"), _ref("Disabled")]}}}},
              "400": {"description": "`provider` is not `claude` or `codex`.",
                      "content": {_JSON: {"schema": _ref("Error")}}},
              "500": {"description": "The posture layer failed.", "content": {_JSON: {"schema": _ref("Error")}}}},
              **_COMMON)}
    document["paths"]["/api/advice"] = {"get": op, "head": dict(op, operationId="getAdviceHead",
                                                                summary=op["summary"] + " (headers only)")}
    return document
