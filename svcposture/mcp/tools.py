"""The MCP server's tools and resources, read from the local monitor (docs/mcp.md).

Every answer comes from the monitor's cached read endpoints, as the status
line gets its own, under a total deadline; nothing here calls a provider or
reads a token. `guard` and `switch` run the very code of `svc-monitor guard
--json` and `svc-monitor switch --to`, so an agent and a script always get
the same decision. A monitor that does not answer is a tool result with
`isError` and a sentence naming the URL tried, never a protocol error.
"""
from __future__ import annotations

import json
import os
import time

from .._text import loads_bounded, printable
from ..errors import SvcpostureError
from . import schema
from .session import ARGUMENT_ERRORS_AS_RESULTS, ArgumentError, ToolError
from ..vendors import DEFAULT_PROVIDER, names_text, provider_names, provider_of_label, registered, with_provider
from .wire import INTERNAL_ERROR, RESOURCE_NOT_FOUND

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Tuple

READ_TIMEOUT_S = 2.0
MAX_BODY = 1024 * 1024
# How long one answer to "does this node read a fleet?" is kept: a no from the monitor for a
# minute, anything else (a yes that may be a guess, no answer) briefly.
FLEET_CHECK_TTL_S = 60.0
FLEET_MAYBE_TTL_S = 5.0
FLEET_CHECK_TIMEOUT_S = 1.0
RESOURCE_PREFIX = "svcposture://posture/"

_READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
# Where a tool's input schema takes `provider`: the registered vendors' names (tool_specs).
_PROVIDER = {"type": "string", "enum": [], "description": "whose accounts"}
TOOLS: "Dict[str, Dict[str, Any]]" = {
    "posture": {
        "description": ("This node's account posture from the local monitor: the active account, each "
                        "account's 5-hour and 7-day utilization (pct) with their resets (resetsAt), status "
                        "(ok, degraded, rejected, error, unknown), health (ok; refused: the provider refused "
                        "its token; limited, unreachable, stale, unread: its figures are not a fresh reading, "
                        "readAt says when they were read) and the sibling with headroom."),
        "inputSchema": {"type": "object", "properties": {"provider": _PROVIDER}, "additionalProperties": False},
        "annotations": _READ_ONLY},
    "advice": {
        "description": ("Which account to use now: advice stay, wait (waitS seconds until the holding window "
                        "resets), switch (to the account named) or none, with the reason and every other "
                        "account ranked (candidates first, by headroom), each with its health; an account "
                        "whose token was refused carries a note and the fix (the command and the accounts "
                        "file line)."),
        "inputSchema": {"type": "object", "properties": {"provider": _PROVIDER}, "additionalProperties": False},
        "annotations": _READ_ONLY},
    "guard": {
        "description": ("May automation start another run now? decision go, hold (the account is rejected or a "
                        "window is at or above 100 - reserve %; retryAfterS says until when) or unavailable, "
                        "the same answer as `svc-monitor guard --json`. It never waits."),
        "inputSchema": {"type": "object", "properties": {
            "provider": _PROVIDER,
            "account": {"type": "string", "minLength": 1, "maxLength": 80,
                        "description": "judge this account (e.g. acct2) instead of the active one"},
            "reserve": {"type": "integer", "minimum": 0, "maximum": 50,
                        "description": "the share (percent) left for people; default: the node's setting"}},
            "additionalProperties": False},
        "annotations": _READ_ONLY},
    "fleet_accounts": {
        "description": ("Every account across the fleet this node reads: each window from the newest probe "
                        "of that account on any host, its health (and each host's), the hosts using it, most "
                        "urgent first."),
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
        "annotations": _READ_ONLY},
    "fleet_owner": {
        "description": ("Which host of the fleet should take a ticket: the first host in the contract's "
                        "highest-random-weight order whose accounts of the vendor have headroom (healthy, below "
                        "100 - reserve %), skipping hosts at the wall, refused or unread, each with the reason. "
                        "When none has, the contract's owner and waitUntil (when the first holding window "
                        "resets)."),
        "inputSchema": {"type": "object", "properties": {
            "ticket": {"type": "string", "minLength": 1, "maxLength": 80,
                       "description": "a tracker ticket identifier like ENG-123"},
            "provider": _PROVIDER}, "required": ["ticket"], "additionalProperties": False},
        "annotations": _READ_ONLY},
    "switch": {
        "description": ("Make another account the active one for new agent sessions on this node (running "
                        "sessions keep theirs), as `svc-monitor switch --to`: only the accounts file's export "
                        "line changes, and one account.switched event is recorded."),
        "inputSchema": {"type": "object", "properties": {
            "to": {"type": "string", "minLength": 1, "maxLength": 80,
                   "description": "the account label to make active (acct2, codex-work, ...)"}},
            "required": ["to"], "additionalProperties": False},
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True,
                        "openWorldHint": False}},
}


def tool_specs(providers: "Tuple[str, ...]") -> "Dict[str, Dict[str, Any]]":
    """TOOLS with each `provider` property listing `providers` (the registered vendors, docs/vendors.md),
    the default first."""
    provider = dict(_PROVIDER, enum=list(providers),
                    description="whose accounts: %s (default %s)" % (names_text(), DEFAULT_PROVIDER))
    specs: "Dict[str, Dict[str, Any]]" = {}
    for name, spec in TOOLS.items():
        properties = spec["inputSchema"]["properties"]
        if "provider" in properties:
            schema = dict(spec["inputSchema"], properties=dict(properties, provider=provider))
            spec = dict(spec, inputSchema=schema)
        specs[name] = spec
    return specs


class MonitorUnavailable(SvcpostureError, OSError):
    """The monitor did not give a usable answer; the message is one sentence naming its URL."""


class Toolbox:
    """The tools and resources over the monitor at `url` (guard.base_url's rule), for every vendor
    registered when it is built: a `provider` argument and a posture resource each."""

    def __init__(self, url: str, allow_switch: bool = False, environ: "Optional[Mapping[str, str]]" = None) -> None:
        from .._http import parse_url
        self.vendors = registered()
        self.providers = provider_names()
        self.specs = tool_specs(self.providers)
        self.url = url
        self.target = parse_url(url)
        self.allow_switch = allow_switch
        self.environ = os.environ if environ is None else environ
        self._fleet_check: "Tuple[float, Optional[str]]" = (float("-inf"), None)

    # ------------------------------------------------------------ listing

    def names(self) -> "List[str]":
        names = ["posture", "advice", "guard"]
        if self.fleet_reason() is None:
            names += ["fleet_accounts", "fleet_owner"]
        if self.allow_switch:
            names.append("switch")
        return names

    def tools(self, version: "Optional[str]") -> "List[Dict[str, Any]]":
        annotated = version not in (None, "2024-11-05")  # tool annotations came with 2025-03-26
        return [dict({"name": name}, **{k: v for k, v in self.specs[name].items() if annotated or k != "annotations"})
                for name in self.names()]

    def resources(self) -> "List[Dict[str, Any]]":
        """One posture resource per registered vendor, in registration order."""
        return [{"uri": RESOURCE_PREFIX + vendor.name, "name": "%s posture" % vendor.display_name,
                 "description": "the posture body of this node's %s accounts (as the posture tool)" % vendor.name,
                 "mimeType": "application/json"} for vendor in self.vendors]

    # ------------------------------------------------------------ calling

    def call(self, name: str, arguments: "Dict[str, Any]", version: "Optional[str]") -> "Dict[str, Any]":
        if name not in self.specs or (name == "switch" and not self.allow_switch):
            why = " (this server was started without --allow-switch)" if name == "switch" else ""
            raise ToolError("Invalid params: unknown tool %r%s; the tools are %s"
                            % (printable(name[:80]), why, ", ".join(self.names())))
        try:
            problem = schema.check(arguments, self.specs[name]["inputSchema"])
            if problem is not None:
                raise ArgumentError("Invalid params: %s: %s" % (name, problem))
            body, failed = getattr(self, "_" + name)(arguments)
        except MonitorUnavailable as exc:
            return tool_result(None, str(exc), True, version)
        except ArgumentError as exc:
            if version not in ARGUMENT_ERRORS_AS_RESULTS:
                raise
            # The model reads a tool result and may retry with other arguments (2025-11-25).
            return tool_result(None, str(exc), True, version)
        return tool_result(body, None, failed, version)

    def read(self, uri: str) -> "Dict[str, Any]":
        provider = uri[len(RESOURCE_PREFIX):] if uri.startswith(RESOURCE_PREFIX) else ""
        if provider not in self.providers:
            raise ToolError("Resource not found: %s" % printable(uri[:200]), RESOURCE_NOT_FOUND,
                            {"uri": printable(uri[:200])})
        try:
            body, _ = self._posture({"provider": provider})
        except MonitorUnavailable as exc:
            raise ToolError(str(exc), INTERNAL_ERROR) from None
        return {"contents": [{"uri": uri, "mimeType": "application/json", "text": _text(body)}]}

    # ------------------------------------------------------------ the tools: (body, isError)

    def _posture(self, args: "Dict[str, Any]") -> "Tuple[Any, bool]":
        return without_error_internals(self.get_json(_with_provider("/api/accounts", args))), False

    def _advice(self, args: "Dict[str, Any]") -> "Tuple[Any, bool]":
        return self.get_json(_with_provider("/api/advice", args)), False

    def _fleet_accounts(self, args: "Dict[str, Any]") -> "Tuple[Any, bool]":
        reason = self.fleet_reason(fresh=True)
        if reason is not None:
            raise MonitorUnavailable(reason)
        return self.get_json("/api/fleet/accounts"), False

    def _fleet_owner(self, args: "Dict[str, Any]") -> "Tuple[Any, bool]":
        from ..cluster.dispatch import bad_ticket
        problem = bad_ticket(args["ticket"])
        if problem is not None:
            raise ArgumentError("Invalid params: fleet_owner: %s" % problem)
        reason = self.fleet_reason(fresh=True)
        if reason is not None:
            raise MonitorUnavailable(reason)
        provider = args.get("provider", DEFAULT_PROVIDER)
        return self.get_json("/api/fleet/owner?ticket=%s&provider=%s" % (args["ticket"], provider)), False

    def _guard(self, args: "Dict[str, Any]") -> "Tuple[Any, bool]":
        from ..steering.headroom import NO_ANSWER, UNAVAILABLE
        from ..term import guard
        argv = ["--json", "--url", self.url, "--provider", args.get("provider", DEFAULT_PROVIDER)]
        if "account" in args:
            argv.append("--account=" + args["account"])
        if "reserve" in args:
            argv += ["--reserve", str(int(args["reserve"]))]
        code, out, err = guard.run(argv, self.environ, time.monotonic())
        if code == 2 and b"no account" in err:
            # An account the posture does not have: bad usage for the command, a bad argument here.
            raise ArgumentError("Invalid params: %s" % printable(err.decode("utf-8", "replace").strip()))
        if not out:
            # Bad usage the schema cannot see (a reserve the node's config cannot hold).
            return {"error": printable(err.decode("utf-8", "replace").strip())}, True
        decision = json.loads(out.decode("ascii"))
        if code == 2:
            # An account the posture does not have: bad usage for the command, a bad argument here.
            raise ArgumentError("Invalid params: guard: %s" % printable(decision.get("reason")))
        # The monitor not answering is the tool's failure (the command names the URL it tried);
        # any other unavailable (a stale or failed posture) is the monitor's answer.
        no_answer = (NO_ANSWER, guard.no_answer(self.url))
        return decision, decision.get("decision") == UNAVAILABLE and decision.get("reason") in no_answer

    def _switch(self, args: "Dict[str, Any]") -> "Tuple[Any, bool]":
        from ..term import switch
        # The label tells its vendor (every vendor but the default one has a label prefix).
        provider = provider_of_label(args["to"])
        ns = switch.build_parser().parse_args(["--to=" + args["to"], "--provider", provider, "--json",
                                               "--url", self.url])
        try:
            return switch.run(ns), False
        except (SvcpostureError, OSError) as exc:  # SwitchError, and a config or file the command refuses
            return {"switched": False, "provider": provider, "error": printable(exc)}, True

    # ------------------------------------------------------------ the monitor

    def get_json(self, path: str, timeout_s: float = READ_TIMEOUT_S) -> "Any":
        """The JSON body of a 200 to GET `path`; MonitorUnavailable with a sentence otherwise."""
        from .._http import get_reply
        if self.target is None:
            raise MonitorUnavailable("the monitor URL %s is not http[s]://host[:port]" % printable(self.url))
        where = "the monitor at %s" % self.url
        try:
            status, raw = get_reply(self.target, path, time.monotonic() + timeout_s, "svc-monitor-mcp")
        except OSError as exc:
            from ..settings import MONITOR_START_HINT
            raise MonitorUnavailable("%s did not answer (%s); %s, or name another with svc-monitor mcp --url URL"
                                     % (where, printable(exc) or type(exc).__name__, MONITOR_START_HINT)) from None
        except (ValueError, UnicodeError):
            raise MonitorUnavailable("%s did not answer %s with HTTP" % (where, path)) from None
        if status == 404:
            raise MonitorUnavailable("%s does not serve %s (an older svc-monitor?)" % (where, path))
        if status != 200:
            raise MonitorUnavailable("%s answered HTTP %d to %s" % (where, status, path))
        try:
            body = loads_bounded(raw, MAX_BODY)
        except ValueError:
            raise MonitorUnavailable("%s answered %s with something that is not JSON" % (where, path)) from None
        if not carriable(body):
            # NaN, an infinity (1e999 reads as one) or a nesting the encoder refuses: no reply to the
            # agent could carry it, so the monitor has not answered usefully.
            raise MonitorUnavailable("%s answered %s with a number JSON cannot carry (NaN or infinity)"
                                     % (where, path))
        return body

    def fleet_reason(self, fresh: bool = False) -> "Optional[str]":
        """Why this node reads no fleet (None: it reads one, or may), from its monitor's /api/fleet;
        kept for a while, as tools/list may be asked often."""
        until, reason = self._fleet_check
        if not fresh and time.monotonic() < until:
            return reason
        try:
            reason = fleet_reason(self.get_json("/api/fleet", FLEET_CHECK_TIMEOUT_S))
            ttl = FLEET_CHECK_TTL_S if reason is not None else FLEET_MAYBE_TTL_S
        except MonitorUnavailable as exc:
            reason, ttl = str(exc), FLEET_MAYBE_TTL_S
        self._fleet_check = (time.monotonic() + ttl, reason)
        return reason


def carriable(body: "Any") -> bool:
    """Whether `body` can go out in a reply: strict JSON has no NaN nor infinity, and the
    protocol's encoder (wire.encode) refuses them."""
    try:
        json.dumps(body, allow_nan=False, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError):
        return False
    return True


def fleet_reason(report: "Any") -> "Optional[str]":
    """Why a /api/fleet report shows that the node reads no fleet, or None.

    The node reads none when the status collector itself (its report states the
    publish interval) found no liveness anchor with the tracker as the read
    source; it says so in `error`. The cache's placeholder while a slow first
    read is under way has the same source and anchor but no interval: that node
    may well read a fleet, so the tool stays listed and its call tells."""
    if not isinstance(report, dict) or not isinstance(report.get("source"), str):
        return "the monitor's /api/fleet answered no fleet report"
    if report["source"] == "tracker" and report.get("anchor") is None and "publishIntervalMs" in report:
        why = report.get("error")
        return "this node reads no fleet: %s" % (printable(why) if isinstance(why, str) else "no liveness anchor")
    return None


def without_error_internals(body: "Any") -> "Any":
    """The posture body with each account's `error` reduced to its kind and fixed sentence."""
    if not isinstance(body, dict):
        return body
    out = dict(body)
    if isinstance(out.get("active"), dict):
        out["active"] = _clean_view(out["active"])
    if isinstance(out.get("accounts"), list):
        out["accounts"] = [_clean_view(view) for view in out["accounts"]]
    if out.get("error") is not None:
        out["error"] = _kind_and_sentence(out["error"])
    return out


def _clean_view(view: "Any") -> "Any":
    if isinstance(view, dict) and view.get("error") is not None:
        return dict(view, error=_kind_and_sentence(view["error"]))
    return view


def _kind_and_sentence(err: "Any") -> "Dict[str, Any]":
    """An error as the agent sees it: its kind and its vendor's fixed sentence, nothing else."""
    err = err if isinstance(err, dict) else {}
    kind, message = err.get("kind"), err.get("message")
    return {"kind": printable(kind)[:40] if isinstance(kind, str) else "internal",
            "message": printable(message)[:300] if isinstance(message, str) else None}


def _with_provider(path: str, args: "Mapping[str, Any]") -> str:
    return with_provider(path, args.get("provider", DEFAULT_PROVIDER))


def _text(body: "Any") -> str:
    return json.dumps(body, ensure_ascii=False, separators=(", ", ": "))


def tool_result(body: "Any", sentence: "Optional[str]", failed: bool, version: "Optional[str]") -> "Dict[str, Any]":
    """A CallToolResult: the sentence, then the body as JSON text (and as structuredContent from
    2025-06-18 on)."""
    texts = ([sentence] if sentence is not None else []) + ([_text(body)] if body is not None else [])
    out: "Dict[str, Any]" = {"content": [{"type": "text", "text": text} for text in texts], "isError": failed}
    if isinstance(body, dict) and version not in (None, "2024-11-05", "2025-03-26"):
        out["structuredContent"] = body
    return out
