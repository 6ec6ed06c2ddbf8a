"""The OpenAPI document's components: every schema and shared response (docs/http-api.md).

Pure functions of the package and the vendor registry, grouped by what they
describe: the posture bodies (the default vendor's, named Posture, Account,
Window, ProbeError; the second built-in vendor's, named after it), the error
and health bodies, the fleet, the trajectory and history, the login and the
advice. Where a schema lists providers, the list is the registry's
(vendors.provider_names()). The paths that use them are openapi_paths'.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from .._names import HEALTHS, NODE_STATUSES
from ..cluster.heartbeat import account_schema, quota_schema
from ..cluster.hostaccounts import MAX_ACCOUNTS, entry_schema
from ..steering.advice import ADVICE_WORDS
from ..vendors import default_vendor, others, provider_names
from .response import JSON_TYPE
from .trust import GUARD_MESSAGES

# Window statuses as a vendor's windows carry them, and as they are derived from pct when it sends none.
_STATUSES = ("allowed", "allowed_warning", "rejected")


def _time(**extra: Any) -> Dict[str, Any]:
    """An instant, or null; a new object each time, so that no two documents share one."""
    return dict({"type": ["string", "null"], "format": "date-time"}, **extra)


def ref(name: str) -> Dict[str, str]:
    return {"$ref": "#/components/schemas/" + name}


def nullable(schema: Dict[str, Any]) -> Dict[str, Any]:
    return {"oneOf": [{"type": "null"}, schema]}


def json_answer(description: str, schema: str, headers: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """An answer whose JSON body is the component schema named `schema`."""
    out: Dict[str, Any] = {"description": description, "content": {JSON_TYPE: {"schema": ref(schema)}}}
    if headers:
        out["headers"] = headers
    return out


def posture_body() -> Dict[str, Any]:
    """What GET /api/accounts and each frame of its stream carry: the default vendor's body, or
    another vendor's (each described by schemas named after it, `<display name>Posture`)."""
    return {"anyOf": [ref("Posture")] + [ref(v.display_name + "Posture") for v in others()] + [ref("Disabled")]}


def provider_schema() -> Dict[str, Any]:
    return {"type": "string", "enum": list(provider_names())}


def health_schema() -> Dict[str, Any]:
    return {"type": "string", "enum": list(HEALTHS),
            "description": "The account's health (docs/posture.md): ok, refused (the credential), limited (the "
                           "reader rate-limited), unreachable, stale (no fresh good reading), unread."}


def health_properties() -> Dict[str, Any]:
    """What every vendor's account view carries besides its figures: health, readAt, envLine."""
    return {"health": health_schema(),
            "readAt": {"type": ["integer", "null"],
                       "description": "Epoch ms of the good reading the figures come from (kept beside a failed "
                                      "one); null when none."},
            "envLine": {"type": ["integer", "null"], "minimum": 1,
                        "description": "The accounts env file's line that defines the account, when known."}}


def component_schemas() -> Dict[str, Any]:
    """Every schema of the document, by name."""
    schemas: Dict[str, Any] = {}
    for group in (_posture_schemas(), _reply_schemas(), _fleet_schemas(), _trajectory_schemas(),
                  {"Login": _login_schema(), "Vendors": _vendors_schema()}, _advice_schemas()):
        schemas.update(group)
    for vendor in others():
        schemas.update(_vendor_posture_schemas(vendor))
    return schemas


def component_responses() -> Dict[str, Any]:
    """The answers every route may give, whatever it serves."""
    return {
        "Forbidden": json_answer("Forced-refresh guard (or SVC_MONITOR_READ_GUARD) refused the request.",
                                 "Forbidden"),
        "MethodNotAllowed": json_answer("Only GET and HEAD.", "Error", {"Allow": {"schema": {"const": "GET, HEAD"}}}),
        "TooLarge": json_answer("Request line or header fields too large.", "Error"),
    }


# ------------------------------------------------------------------ the default vendor's posture (docs/posture.md)

def _posture_schemas() -> Dict[str, Any]:
    window = nullable({"type": "object", "additionalProperties": False, "required": ["pct", "resetsAt", "status"],
                       "properties": {
                           "pct": {"type": ["number", "null"],
                                   "description": "Percent of the window limit; may exceed 100."},
                           "resetsAt": _time(),
                           "status": {"type": ["string", "null"], "examples": list(_STATUSES)}}})
    probe_error = {"type": "object", "required": ["kind", "message"],
                   "properties": {"kind": {"type": "string", "enum": list(default_vendor().error_kinds)},
                                  "message": {"type": "string"},
                                  "httpStatus": {"type": ["integer", "null"]}}}
    disabled = {"type": "object", "additionalProperties": False, "required": ["available", "node"],
                "properties": {"available": {"const": False}, "node": {"type": "string"}}}
    return {"Window": window, "ProbeError": probe_error, "Account": _account_schema(), "Posture": _posture_schema(),
            "Disabled": disabled}


def _account_schema() -> Dict[str, Any]:
    return {"type": "object", "additionalProperties": False,
            "required": ["label", "email", "active", "overallStatus", "representativeClaim",
                         "bindingWindow", "bindingStatus", "fiveHour", "sevenDay", "error", "health", "readAt"],
            "properties": dict(health_properties(), **{
                "label": {"type": "string", "pattern": "^[a-z0-9_]+$", "examples": ["acct2"]},
                "email": {"type": ["string", "null"]},
                "active": {"type": "boolean"},
                "overallStatus": {"type": ["string", "null"]},
                "representativeClaim": {"type": ["string", "null"]},
                "bindingWindow": {"type": ["string", "null"], "enum": ["five_hour", "seven_day", None]},
                "bindingStatus": {"type": ["string", "null"]},
                "fiveHour": ref("Window"),
                "sevenDay": ref("Window"),
                "error": nullable(ref("ProbeError"))})}


def _posture_schema() -> Dict[str, Any]:
    return {"type": "object",
            "required": ["available", "node", "generatedAt", "probedAt", "cached", "status",
                         "active", "accounts", "siblingWithHeadroom"],
            "properties": {
                "available": {"const": True},
                "node": {"type": "string"},
                "generatedAt": {"type": "string", "format": "date-time"},
                "probedAt": {"type": "integer",
                             "description": "Epoch ms of the probe; unchanged across cached replies."},
                "cached": {"type": "boolean"},
                "status": {"type": "string", "enum": list(NODE_STATUSES)},
                "active": nullable(ref("Account")),
                "accounts": {"type": "array", "items": ref("Account")},
                "siblingWithHeadroom": nullable({
                    "type": "object", "required": ["label", "email"], "additionalProperties": False,
                    "properties": {"label": {"type": "string"}, "email": {"type": ["string", "null"]}}}),
                "error": {"description": "Node-level error (status error): the probe itself failed.",
                          "$ref": "#/components/schemas/ProbeError"}}}


# ------------------------------------------------------------------ the second vendor's posture (docs/codex.md)

def _vendor_posture_schemas(vendor: Any) -> Dict[str, Any]:
    """`vendor`'s posture body: the default's shape, plus its extra windows, plan and credits.
    Its schemas are named after it (`<display name>Posture`, ...)."""
    name = vendor.display_name
    window_props = {
        "pct": {"type": "number", "minimum": 0, "description": "Percent used; may exceed 100."},
        "resetsAt": _time(),
        "status": {"type": "string", "enum": list(_STATUSES),
                   "description": ("Derived from pct (the vendor sends none): rejected at 100 (and at 0 "
                                   "left of a quota above 0), allowed_warning from 90.")},
        "derived": {"const": True}}
    window = {"type": "object", "additionalProperties": False, "required": ["pct", "resetsAt", "status", "derived"],
              "properties": window_props}
    extra = {"type": "object", "additionalProperties": False,
             "required": ["pct", "resetsAt", "status", "derived", "seconds", "name"],
             "properties": dict(window_props, seconds={"type": ["integer", "null"], "minimum": 1,
                                                         "description": "The window's length; null for a "
                                                                        "limit without one (`credits`)."},
                                name={"type": ["string", "null"],
                                      "description": "The limit's name as the vendor gives it: a model, a "
                                                     "quota (`premium_interactions`), `credits`, or `usage limit` "
                                                     "(a 429 saying the login's limit is reached)."},
                                windowMinutes={"type": ["integer", "null"], "minimum": 1,
                                               "description": "The length in minutes, where the vendor gives "
                                                              "one (a month counts 43,200)."})}
    error = {"type": "object", "required": ["kind", "message"],
             "properties": {"kind": {"type": "string", "enum": list(vendor.error_kinds)},
                            "message": {"type": "string"}, "httpStatus": {"type": ["integer", "null"]},
                            "fix": {"type": ["string", "null"],
                                    "description": "What the operator does about it (the vendor's fixed sentence)."},
                            "retryAt": {"type": ["string", "null"], "format": "date-time",
                                        "description": "When a rate limit on the usage endpoint lifts, where "
                                                       "its reply said."}}}
    return {name + "Window": window, name + "ExtraWindow": extra, name + "Error": error,
            name + "Account": _vendor_account_schema(vendor), name + "Posture": _vendor_posture_schema(name)}


def _vendor_account_schema(vendor: Any) -> Dict[str, Any]:
    name = vendor.display_name
    credits = {"type": "object", "additionalProperties": False,
               "properties": {"hasCredits": {"type": ["boolean", "null"]}, "unlimited": {"type": ["boolean", "null"]},
                              "balance": {"type": ["number", "null"]}}}
    reset_credits = {"type": "object", "additionalProperties": False, "required": ["available", "applicable"],
                     "description": ("The login's banked usage resets (rate_limit_reset_credits): how many, "
                                     "and how many may be used now."),
                     "properties": {"available": {"type": "integer", "minimum": 0},
                                    "applicable": {"type": ["integer", "null"], "minimum": 0}}}
    fields = ["label", "email", "active", "overallStatus", "representativeClaim", "bindingWindow", "bindingStatus",
              "fiveHour", "sevenDay", "error", "provider", "extraWindows", "codeReview", "planType", "credits",
              "resetCredits", "source", "sampledAt", "health", "readAt"]
    prefix = vendor.lines.label_prefix  # lower case and `-` only (vendor.check_vendor): no regex escape needed
    properties = dict(health_properties(), **{
        "label": {"type": "string", "pattern": "^%s[a-z0-9_]+$" % prefix, "examples": [prefix + "work"]},
        "email": {"type": ["string", "null"]},
        "active": {"type": "boolean", "description": "The account %s names." % vendor.lines.active_var},
        "overallStatus": {"type": "null"}, "representativeClaim": {"type": "null"},
        "bindingWindow": {"type": ["string", "null"], "enum": ["five_hour", "seven_day", None]},
        "bindingStatus": {"type": ["string", "null"]},
        "fiveHour": nullable(ref(name + "Window")), "sevenDay": nullable(ref(name + "Window")),
        "error": nullable(ref(name + "Error")),
        "provider": {"const": vendor.name},
        "extraWindows": {"type": "array", "items": ref(name + "ExtraWindow"),
                         "description": "Windows of other lengths, and the vendor's additional limits."},
        "codeReview": nullable({"type": "array", "items": ref(name + "ExtraWindow")}),
        "planType": {"type": ["string", "null"]},
        "credits": nullable(credits),
        "resetCredits": nullable(reset_credits),
        "source": {"type": ["string", "null"], "enum": ["api", "session", None],
                   "description": "Where the sample came from: the usage endpoint or the CLI's own session log."},
        "sampledAt": {"type": ["integer", "null"], "description": "Epoch ms of the sample shown."}})
    return {"type": "object", "additionalProperties": False, "required": fields, "properties": properties}


def _vendor_posture_schema(name: str) -> Dict[str, Any]:
    return {"type": "object",
            "required": ["available", "node", "generatedAt", "probedAt", "cached", "status", "active",
                         "accounts", "siblingWithHeadroom"],
            "properties": {
                "available": {"const": True}, "node": {"type": "string"},
                "generatedAt": {"type": "string", "format": "date-time"}, "probedAt": {"type": "integer"},
                "cached": {"type": "boolean"}, "status": {"type": "string", "enum": list(NODE_STATUSES)},
                "active": nullable(ref(name + "Account")),
                "accounts": {"type": "array", "items": ref(name + "Account")},
                "siblingWithHeadroom": nullable({"type": "object", "required": ["label", "email"]}),
                "error": ref("ProbeError")}}


# ------------------------------------------------------------------ errors and health

def _reply_schemas() -> Dict[str, Any]:
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
                                                               "is older than twice this is stale."},
                             "accountsFile": {"type": ["string", "null"], "pattern": "^[0-9a-f]{16}$",
                                              "description": "Which accounts env file the monitor watches, as a "
                                                             "fingerprint (svc-monitor switch compares it with the "
                                                             "file it edits); null when its directory is missing."}}}
    return {"Forbidden": forbidden, "Error": error, "Health": health}


# ------------------------------------------------------------------ the fleet (docs/fleet.md)

def _fleet_schemas() -> Dict[str, Any]:
    """FleetReport (GET /api/fleet), its host rows, the heartbeat's blocks, GET /api/fleet/accounts and
    GET /api/fleet/owner."""
    return {"FleetReport": _fleet_report_schema(), "FleetHost": _fleet_host_schema(others()),
            "HostAccount": entry_schema(), "HeartbeatAccount": account_schema(), "HeartbeatQuota": quota_schema(),
            "FleetAccounts": _fleet_accounts_schema(), "FleetOwner": _fleet_owner_schema()}


def _fleet_host_schema(vendors: Any) -> Dict[str, Any]:
    """A roster host's row; each non-default vendor's active account rides in a block of its own, named after it."""
    blocks = {vendor.name: dict(ref("HeartbeatAccount"), description=(
        "The host's active %s account, same block as `account`; absent on a host without %s accounts."
        % (vendor.display_name, vendor.display_name))) for vendor in vendors}
    return {"type": "object", "additionalProperties": False,
            "required": ["host", "state", "ageS", "quota", "account", "accounts"],
            "properties": dict({
                "host": {"type": "string"},
                "state": {"type": "string", "enum": ["live", "stale", "missing", "unknown"]},
                "ageS": {"type": ["number", "null"], "minimum": 0,
                         "description": "Heartbeat age in seconds; null when missing, unknown or under Loki."},
                "quota": nullable(ref("HeartbeatQuota")),
                "account": nullable(ref("HeartbeatAccount")),
                "accounts": {"type": "array", "maxItems": MAX_ACCOUNTS, "items": ref("HostAccount"),
                             "description": "Every account of the host, active or not; empty when unknown."}},
                **blocks)}


def _fleet_report_schema() -> Dict[str, Any]:
    return {"type": "object", "additionalProperties": False,
            "required": ["source", "anchor", "hosts", "generatedAt"],
            "properties": {
                "source": {"type": "string", "enum": ["tracker", "loki", "prometheus", "demo"]},
                "anchor": {"type": ["string", "null"]},
                "publishIntervalMs": {"type": "integer", "minimum": 1, "description": "The heartbeat interval "
                                      "in force: the tracker's budget may stretch the configured one."},
                "hosts": {"type": "array", "items": ref("FleetHost"),
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


def _fleet_accounts_schema() -> Dict[str, Any]:
    """GET /api/fleet/accounts (cluster/fleetaccounts.py)."""
    window = {"type": "object", "additionalProperties": False,
              "required": ["pct", "resetsAt", "probedAt", "host", "suspect"],
              "properties": {"pct": {"type": ["number", "null"], "minimum": 0}, "resetsAt": _time(),
                             "probedAt": _time(description="When the newest reading of the window was "
                                                                 "probed, on `host`."),
                             "host": {"type": ["string", "null"]},
                             "suspect": {"type": "boolean", "description": "probedAt is more than a minute after "
                                         "the fleet was read (`host`'s clock runs fast): no host has a "
                                         "believable reading of this window, and this one's age is unknown."}}}
    account = {"type": "object", "additionalProperties": False,
               "required": ["key", "provider", "labels", "hosts", "status", "health", "fiveHour", "sevenDay",
                            "wallAt"],
               "properties": {
                   "key": {"type": ["string", "null"], "pattern": "^[0-9a-f]{16}$",
                           "description": "sha256(provider NUL lower-cased email), first 16 hex digits; null "
                                          "when the host does not know the email (then one host, one label)."},
                   "provider": {"type": "string"},
                   "labels": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                              "description": "What the hosts call this account."},
                   "hosts": {"type": "array", "items": {
                       "type": "object", "additionalProperties": False, "required": ["host", "active", "health"],
                       "properties": {"host": {"type": "string"}, "active": {"type": "boolean"},
                                      "health": dict(_nullable_health(), description=(
                                          "The account's health on this host: whether it read the account "
                                          "with its own credential, and lately."))}}},
                   "status": {"type": ["string", "null"],
                              "enum": ["ok", "degraded", "rejected", "error", "unknown", None]},
                   "health": dict(_nullable_health(), description=(
                       "The health of the reading the figures come from: `ok` when any host read the account "
                       "well lately; else the newest reading's (`refused`: the provider refused the "
                       "credential). Null from publishers that predate health.")),
                   "fiveHour": window, "sevenDay": window,
                   "wallAt": _time(description="The forecast wall of the binding window, from the newest "
                                                     "reading.")}}
    return {"type": "object", "additionalProperties": False, "required": ["accounts", "source", "readAt"],
            "properties": {
                "accounts": {"type": "array", "items": account,
                             "description": "Most urgent first: rejected, then the soonest wall."},
                "source": {"type": ["string", "null"], "enum": ["tracker", "loki", "prometheus", "demo", None]},
                "readAt": _time(description="When the fleet was read (the report's generatedAt)."),
                "error": {"type": "string", "description": "The fleet could not be read; accounts is empty."},
                "stale": {"type": "boolean", "enum": [True]},
                "staleAgeS": {"type": "number", "minimum": 0}}}


def _nullable_health() -> Dict[str, Any]:
    return {"type": ["string", "null"], "enum": list(HEALTHS) + [None]}


def _fleet_owner_schema() -> Dict[str, Any]:
    """GET /api/fleet/owner (cluster/dispatch.py): `svc-cluster owner --headroom --json`."""
    skipped = {"type": "object", "additionalProperties": False, "required": ["host", "reason"],
               "properties": {"host": {"type": "string"},
                              "reason": {"type": "string", "description": "Why the host has no headroom, in one "
                                                                          "line: each account of the vendor there "
                                                                          "and what keeps it out."}}}
    return {"type": "object", "additionalProperties": False,
            "required": ["ticket", "owner", "candidates", "livenessKnown", "headroom", "provider", "skipped",
                         "waitUntil"],
            "properties": {
                "ticket": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9]*-[0-9]+$"},
                "owner": {"type": ["string", "null"],
                          "description": "The first candidate in HRW order with headroom for the vendor; with "
                                         "none, the contract's owner (the first candidate); null for an empty "
                                         "roster."},
                "candidates": {"type": "array", "items": {"type": "string"},
                               "description": "The contract's candidates: the live roster hosts when liveness is "
                                              "known, else every roster host."},
                "livenessKnown": {"type": "boolean"},
                "headroom": {"const": True},
                "provider": provider_schema(),
                "skipped": {"type": "array", "items": skipped,
                            "description": "The candidates tried before the owner, in HRW order; with no host "
                                           "with headroom, every candidate."},
                "waitUntil": _time(description="With no host with headroom: the earliest time a candidate's "
                                               "holding windows have all reset; null otherwise, or when none "
                                               "is known (a refused credential does not reset).")}}


# ------------------------------------------------------------------ trajectory and history (docs/trajectory.md)

def _trajectory_schemas() -> Dict[str, Any]:
    forecast = nullable({
        "type": "object", "additionalProperties": False,
        "required": ["ratePctPerHour", "wallAt", "beforeReset", "pctAtReset", "samples"],
        "properties": {
            "ratePctPerHour": {"type": "number", "minimum": 0, "description": "Least-squares slope, floored at 0."},
            "wallAt": _time(description="When pct reaches 100 at this rate; null when the rate is 0."),
            "beforeReset": {"type": "boolean"},
            "pctAtReset": {"type": ["number", "null"], "description": "May exceed 100; null without resetsAt."},
            "samples": {"type": "integer", "minimum": 3}}})
    window = nullable({
        "type": "object", "additionalProperties": False, "required": ["pct", "resetsAt", "forecast"],
        "properties": {"pct": {"type": ["number", "null"]}, "resetsAt": _time(), "forecast": ref("Forecast")}})
    alert = {"type": "object", "required": ["v", "id", "ts", "attributes"],
             "description": "An account.quota.threshold, .forecast, .wall or .usable event (v2 envelope).",
             "properties": {"v": {"const": 2}, "id": {"type": "string"}, "ts": {"type": "string"},
                            "attributes": {"type": "object"}}}
    return {"Forecast": forecast, "TrajectoryWindow": window, "TrajectoryAccount": _trajectory_account_schema(),
            "Alert": alert, "Trajectory": _trajectory_schema(), "History": _history_schema()}


def _trajectory_account_schema() -> Dict[str, Any]:
    extra = {"type": "object", "additionalProperties": False,
             "required": ["name", "seconds", "pct", "resetsAt", "forecast"],
             "description": "An extra window: a model's own limit, a credit plan's `credits`, another length.",
             "properties": {"name": {"type": ["string", "null"]}, "seconds": {"type": ["integer", "null"]},
                            "pct": {"type": ["number", "null"]}, "resetsAt": _time(), "forecast": ref("Forecast")}}
    return {"type": "object", "additionalProperties": False,
            "required": ["label", "email", "active", "fiveHour", "sevenDay", "provider"],
            "properties": {"label": {"type": "string"}, "email": {"type": ["string", "null"]},
                           "active": {"type": "boolean"}, "fiveHour": ref("TrajectoryWindow"),
                           "sevenDay": ref("TrajectoryWindow"),
                           "extraWindows": {"type": "array", "items": extra,
                                            "description": "Only on an account that has extra windows."},
                           "provider": provider_schema()}}


def _trajectory_schema() -> Dict[str, Any]:
    return {"type": "object", "additionalProperties": False,
            "required": ["node", "generatedAt", "probedAt", "accounts", "alerts"],
            "properties": {"node": {"type": "string"}, "generatedAt": {"type": "string", "format": "date-time"},
                           "probedAt": {"type": ["integer", "null"], "description": "null before the first probe."},
                           "accounts": {"type": "array", "items": ref("TrajectoryAccount")},
                           "alerts": {"type": "array", "maxItems": 20, "items": ref("Alert"),
                                      "description": "The newest 20 alert events, newest first."},
                           "reservePct": {"type": "integer", "minimum": 0, "maximum": 50,
                                          "description": "The human reserve (svc.posture.reservePct): "
                                                         "automation holds from 100 - reservePct %."}}}


def _history_schema() -> Dict[str, Any]:
    # [t, pct]: epoch ms and percent. Plain `items` rather than prefixItems,
    # which some 3.1 tooling still reads with the older array-form meaning.
    point = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2,
             "description": "[t (epoch ms), pct]"}
    series = {"type": "array", "maxItems": 500, "items": point}
    extra = {"type": "array", "description": "Only on an account that has extra windows.",
             "items": {"type": "object", "required": ["name", "seconds", "points"],
                       "properties": {"name": {"type": ["string", "null"]}, "seconds": {"type": ["integer", "null"]},
                                      "points": series}}}
    row = {"type": "object", "required": ["fiveHour", "sevenDay", "provider"],
           "properties": {"fiveHour": series, "sevenDay": series, "extraWindows": extra,
                          "provider": provider_schema()}}
    return {"type": "object", "additionalProperties": False, "required": ["node", "from", "to", "accounts"],
            "properties": {"node": {"type": "string"}, "from": {"type": "integer"}, "to": {"type": "integer"},
                           "accounts": {"type": "object", "additionalProperties": row}}}


# ------------------------------------------------------------------ the login (docs/first-look.md)

def _vendors_schema() -> Dict[str, Any]:
    vendor = {"type": "object", "additionalProperties": False, "required": ["name", "displayName", "shown"],
              "properties": {"name": {"type": "string", "enum": list(provider_names()),
                                      "description": "The provider parameter."},
                             "displayName": {"type": "string"},
                             "shown": {"type": "boolean", "description": "Whether this node has the vendor's accounts."}}}
    return {"type": "object", "additionalProperties": False, "required": ["node", "default", "vendors"],
            "properties": {"node": {"type": "string"},
                           "default": {"type": "string", "enum": list(provider_names()),
                                       "description": "The vendor /api/accounts serves without a provider parameter."},
                           "vendors": {"type": "array", "items": vendor}}}


def _login_schema() -> Dict[str, Any]:
    window = nullable({
        "type": "object", "additionalProperties": False, "required": ["pct", "resetsAt"],
        "properties": {"pct": {"type": "number", "description": "Percent used; may exceed 100."}, "resetsAt": _time()}})
    extra = {"type": "object", "additionalProperties": False,
             "required": ["pct", "resetsAt", "status", "derived", "seconds", "name"],
             "properties": {"pct": {"type": "number", "minimum": 0}, "resetsAt": _time(),
                            "status": {"type": "string", "enum": list(_STATUSES),
                                       "description": "Derived from pct: rejected at 100, allowed_warning from 90."},
                            "derived": {"const": True},
                            "seconds": {"type": ["integer", "null"], "description": "The window's length."},
                            "name": {"type": "string", "description": "The bucket (seven_day_cowork) or the "
                                                                      "model (Fable) the limit is for."}}}
    extra_usage = nullable({
        "type": "object", "additionalProperties": False,
        "required": ["enabled", "monthlyLimit", "usedCredits", "utilization", "currency"],
        "description": "The plan's overage credits (extra_usage), as the provider sends them.",
        "properties": {"enabled": {"type": ["boolean", "null"]},
                       "monthlyLimit": {"type": ["number", "null"], "minimum": 0},
                       "usedCredits": {"type": ["number", "null"], "minimum": 0},
                       "utilization": {"type": ["number", "null"], "minimum": 0},
                       "currency": {"type": ["string", "null"]}}})
    available = {
        "type": "object", "additionalProperties": False,
        "required": ["available", "node", "vendor", "loginName", "plan", "fiveHour", "sevenDay", "extraWindows",
                     "extraUsage", "sampledAt", "source"],
        "properties": {"available": {"const": True}, "node": {"type": "string"},
                       "vendor": {"type": "string", "description": "The registered vendor whose login this is "
                                                                   "(a `name` of GET /api/vendors)."},
                       "loginName": {"type": "string", "description": "The program whose login this is, as "
                                                                      "pages write it: \"this machine's "
                                                                      "<loginName> login\"."},
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


# ------------------------------------------------------------------ the advice (docs/steering.md)

def _advice_schemas() -> Dict[str, Any]:
    ident = {"type": "object", "additionalProperties": False, "required": ["label", "email"],
             "properties": {"label": {"type": "string"}, "email": {"type": ["string", "null"]}}}
    note = {"type": ["string", "null"],
            "description": "What is wrong with an account whose health is not ok (and, for a refused "
                           "credential, the fix); null for ok."}
    fix = {"type": ["string", "null"],
           "description": "For a refused credential, what to do: the vendor's command and the accounts env "
                          "file's line to paste it into; else null."}
    active = {"type": "object", "additionalProperties": False,
              "required": ["label", "email", "health", "note", "fix"],
              "properties": {"label": {"type": "string"}, "email": {"type": ["string", "null"]},
                             "health": health_schema(), "note": note, "fix": fix}}
    ranked = {"type": "object", "additionalProperties": False,
              "required": ["label", "email", "health", "candidate", "headroomPct", "wallAt", "reachesReset", "note",
                           "fix"],
              "properties": {
                  "label": {"type": "string"}, "email": {"type": ["string", "null"]},
                  "health": health_schema(),
                  "candidate": {"type": "boolean", "description": "An account worth switching to."},
                  "headroomPct": {"type": ["number", "null"], "minimum": 0,
                                  "description": "Points left below 100 - reserve on the account's fuller window; "
                                                 "null for an account that was not read (health not ok)."},
                  "wallAt": _time(description="The earliest forecast wall of its windows, if any."),
                  "reachesReset": {"type": "boolean",
                                   "description": "Its forecast reaches its reset below 100 - reserve."},
                  "note": note, "fix": fix}}
    return {"AdviceAccount": ident, "AdviceActive": active, "AdviceCandidate": ranked, "Advice": _advice_schema()}


def _advice_schema() -> Dict[str, Any]:
    required = ["available", "node", "generatedAt", "probedAt", "reservePct", "provider", "active", "advice", "to",
                "waitS", "waitUntil", "reason", "ranked"]
    return {"type": "object", "additionalProperties": False, "required": required,
            "properties": {
                "available": {"const": True}, "node": {"type": "string"},
                "generatedAt": {"type": "string", "format": "date-time"},
                "probedAt": {"type": "integer", "description": "The probe the advice was computed on, as the "
                                                               "posture's probedAt."},
                "reservePct": {"type": "integer", "minimum": 0, "maximum": 50},
                "provider": provider_schema(),
                "active": nullable(ref("AdviceActive")),
                "advice": {"type": "string", "enum": list(ADVICE_WORDS)},
                "to": dict(nullable(ref("AdviceAccount")),
                           description="The account to switch to (advice `switch` only)."),
                "waitS": {"type": ["integer", "null"], "minimum": 0,
                          "description": "Seconds until the active account's holding window resets "
                                         "(advice `wait` and `none`)."},
                "waitUntil": {"type": ["string", "null"], "format": "date-time",
                              "description": "When the active account's holding window resets (advice `wait` "
                                             "and `none`): the instant every countdown of the wait counts to."},
                "reason": {"type": "string"},
                "ranked": {"type": "array", "items": ref("AdviceCandidate"),
                           "description": "Every other account of the vendor: the candidates first, best "
                                          "first, then the others, each with its health."}}}
