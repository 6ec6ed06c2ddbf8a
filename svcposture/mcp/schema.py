"""The part of JSON Schema the tools' input schemas use, checked with one sentence per problem.

Only what those schemas say is understood: `type` (object, string, integer),
`properties`, `required`, `additionalProperties: false`, `enum`, `minLength`,
`maxLength`, `minimum` and `maximum`. The schemas are the package's own, so
a keyword outside this list is a bug caught by the tests, not input.
"""
from __future__ import annotations

from .._text import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Mapping, Optional

_TYPE_WORDS = {"object": "an object", "string": "a string", "integer": "an integer"}


def _is(value: "Any", kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        # JSON has one number type: 5.0 is the integer 5, true is no number.
        return (isinstance(value, int) and not isinstance(value, bool)) \
            or (isinstance(value, float) and value.is_integer())
    raise ValueError("schema type %r is not supported" % kind)


def _show(value: "Any") -> str:
    text = printable(repr(value))
    return text if len(text) <= 40 else text[:37] + "..."


def check_value(name: str, value: "Any", spec: "Mapping[str, Any]") -> "Optional[str]":
    """One sentence saying what is wrong with argument `name`, or None."""
    kind = spec.get("type")
    if kind is not None and not _is(value, kind):
        return "%s must be %s, not %s" % (name, _TYPE_WORDS[kind], _show(value))
    if "enum" in spec and value not in spec["enum"]:
        return "%s must be one of %s, not %s" % (name, ", ".join(spec["enum"]), _show(value))
    if isinstance(value, str):
        if len(value) < spec.get("minLength", 0):
            return "%s must not be empty" % name if spec["minLength"] == 1 \
                else "%s must be at least %d characters" % (name, spec["minLength"])
        if "maxLength" in spec and len(value) > spec["maxLength"]:
            return "%s must be at most %d characters" % (name, spec["maxLength"])
    if kind == "integer":
        low, high = spec.get("minimum"), spec.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            return "%s must be an integer from %s to %s, not %s" % (name, low, high, _show(value))
    return None


def check(arguments: "Any", schema: "Mapping[str, Any]") -> "Optional[str]":
    """What is wrong with a tool's `arguments` under its input `schema`, in one sentence, or None."""
    if not isinstance(arguments, dict):
        return "arguments must be an object"
    properties: "Dict[str, Any]" = schema.get("properties", {})
    for name in arguments:
        if name not in properties and schema.get("additionalProperties") is False:
            known = ", ".join(sorted(properties)) or "no arguments"
            return "unknown argument %s (it takes %s)" % (_show(name), known)
    for name in schema.get("required", ()):
        if name not in arguments:
            return "%s is required" % name
    for name, value in arguments.items():
        if name in properties:
            problem = check_value(name, value, properties[name])
            if problem is not None:
                return problem
    return None
