"""A Linear-compatible GraphQL test server on 127.0.0.1 (docs/liveness.md, Tracker).

It answers the two documents the liveness code sends, the way Linear does:

- `query($id: String!, $prefix: String![, $after: String]) { issue(id: $id) {...} }`
  by identifier or id; archived and trashed issues are still returned (with
  `archivedAt` and `trashed: true`); an unknown id is `errors: [{"message":
  "Entity not found: Issue ..."}]`. Attachments are paged as Linear pages them:
  `first` (default 50 when absent, at most 250), `after` an opaque cursor, and
  `pageInfo {hasNextPage endCursor}`; a client that ignores pageInfo sees only
  the first 50.
- `mutation($input: AttachmentCreateInput!) { attachmentCreate(input: $input) {...} }`,
  an upsert by url per issue.

Errors carry `extensions.code` and come with HTTP 200 or 400, as Linear sends
them; RATELIMITED carries the `X-RateLimit-Requests-*` headers. Anything but a
variable-only document (a value spliced into the query text) is refused.

    with TrackerServer(tokens=["Bearer lin_oauth_x"]) as srv:
        srv.add_issue("OPS-1")
        env["SVC_TRACKER_URL"] = srv.url
"""
from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any, Dict, Iterable, List, Optional, Tuple

from tests.support.httpserver import StandInServer, send_raw
from tests.support.ratebudget import RateBudgetGate

# Linear's page sizes: 50 when `first` is not given, 250 at most.
DEFAULT_PAGE = 50
MAX_PAGE = 250
_FIRST_RE = re.compile(r"attachments\(\s*first:\s*(\d+)")
FAILURE_MODES = ("ratelimit", "garbage", "deep", "huge", "wrong_shape", "errors_not_list", "http500", "html",
                 "drop", "slow", "echo_token", "auth", "internal_error", "empty")


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


class _Issue:
    def __init__(self, identifier: str, state: str) -> None:
        self.id = str(uuid.uuid4())
        self.identifier = identifier
        self.state = state
        self.archived_at: Optional[str] = None
        self.trashed = False
        self.attachments: Dict[str, Dict[str, Any]] = {}
        # Attachment nodes served as they are, after the real ones: duplicates,
        # wrong types, whatever a broken tracker might send.
        self.raw_nodes: List[Dict[str, Any]] = []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    # The budget headers of the request being answered (when the budget is enforced).
    _rate_headers: Optional[Dict[str, str]] = None

    def _send_raw(self, status: int, raw: bytes, content_type: str = "application/json",
                  headers: Optional[Dict[str, str]] = None) -> None:
        if self._rate_headers:
            headers = dict(self._rate_headers, **(headers or {}))
        send_raw(self, status, raw, content_type, headers)

    def _send(self, status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> None:
        self._send_raw(status, json.dumps(body).encode("utf-8"), headers=headers)

    def do_GET(self) -> None:  # noqa: N802
        self._send(400, {"errors": [{"message": "GET query missing.", "extensions": {"code": "BAD_USER_INPUT"}}]})

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        auth = self.headers.get("authorization")
        try:
            request = json.loads(raw)
        except ValueError:
            self._send(400, {"errors": [{"message": "POST body is not JSON",
                                         "extensions": {"code": "BAD_USER_INPUT"}}]})
            return
        query = request.get("query") if isinstance(request, dict) else None
        variables = request.get("variables") if isinstance(request, dict) else None
        if not isinstance(query, str) or not isinstance(variables, dict):
            self._send(400, {"errors": [{"message": "query and variables are required",
                                         "extensions": {"code": "BAD_USER_INPUT"}}]})
            return
        op = _operation(query)
        owner._record(op, query, variables, auth)
        gate = owner.budget
        if gate is not None:
            allowed, self._rate_headers = gate.take()
            if not allowed:
                self._send(gate.refusal_status, {"errors": [{"message": "Rate limit exceeded",
                                                             "extensions": {"code": "RATELIMITED"}}]})
                return
        if owner.latency_s:
            time.sleep(owner.latency_s)
        failure = owner._take_failure(op, _page_number(variables.get("after")))
        if failure is not None:
            self._fail(failure, auth)
            return
        if auth not in owner.tokens:
            status = 401 if owner.auth_status == 401 else 400
            self._send(status, {"errors": [{"message": "Authentication required, not authenticated",
                                            "extensions": {"code": "AUTHENTICATION_ERROR"}}]})
            return
        if op is None:
            self._send(400, {"errors": [{"message": "Cannot query field on type \"Query\".",
                                         "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"}}]})
            return
        spliced = [v for v in _leaf_strings(variables) if len(v) > 2 and v in query]
        if spliced:
            self._send(400, {"errors": [{"message": "Syntax Error: a value was spliced into the document",
                                         "extensions": {"code": "GRAPHQL_PARSE_FAILED"}}]})
            return
        if op == "issue":
            self._issue(variables, query)
        else:
            self._attachment_create(variables)

    def _not_found(self) -> None:
        self._send(self.server.owner.not_found_status, {"data": None, "errors": [{
            "message": "Entity not found: Issue - Could not find referenced Issue.",
            "extensions": {"code": "INVALID_INPUT", "type": "invalid input", "userPresentableMessage":
                           "Could not find referenced Issue."}}]})

    def _issue(self, variables: Dict[str, Any], query: str) -> None:
        owner = self.server.owner
        ident, prefix, after = variables.get("id"), variables.get("prefix"), variables.get("after")
        if not isinstance(ident, str) or not isinstance(prefix, str):
            self._send(400, {"errors": [{"message": "Variable \"$id\" of required type \"String!\" was not provided.",
                                         "extensions": {"code": "BAD_USER_INPUT"}}]})
            return
        match = _FIRST_RE.search(query)
        first = int(match.group(1)) if match else DEFAULT_PAGE
        start = _offset_of(after)
        if first < 1 or first > MAX_PAGE or start is None:
            self._send(400, {"errors": [{"message": "Argument Validation Error: first must be 1..%d and after a "
                                         "cursor this server gave" % MAX_PAGE,
                                         "extensions": {"code": "INVALID_INPUT"}}]})
            return
        with owner._lock:
            issue = owner._find(ident)
            if issue is None:
                body = None
            else:
                nodes = [{k: n.get(k) for k in ("url", "subtitle", "metadata", "updatedAt")}
                         for url, n in sorted(issue.attachments.items()) if url.startswith(prefix)]
                nodes += [dict(n) for n in issue.raw_nodes]
                end = start + first
                more = end < len(nodes) or owner.endless_pages
                body = {"data": {"issue": {
                    "id": issue.id, "identifier": issue.identifier, "archivedAt": issue.archived_at,
                    "trashed": issue.trashed, "state": {"type": issue.state},
                    "attachments": {"nodes": nodes[start:end],
                                    "pageInfo": {"hasNextPage": more,
                                                 "endCursor": _cursor(end) if more else None}}}}}
        if body is None:
            self._not_found()
        else:
            self._send(200, body)

    def _attachment_create(self, variables: Dict[str, Any]) -> None:
        owner = self.server.owner
        data = variables.get("input")
        required = ("issueId", "url", "title")
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in required) \
                or not isinstance(data.get("metadata", {}), dict):
            self._send(400, {"errors": [{"message": "Argument Validation Error",
                                         "extensions": {"code": "INVALID_INPUT"}}]})
            return
        with owner._lock:
            issue = owner._find(data["issueId"])
            if issue is not None:
                now = _iso(int(time.time() * 1000))
                existing = issue.attachments.get(data["url"])
                attachment = existing or {"id": str(uuid.uuid4()), "url": data["url"], "createdAt": now}
                attachment.update(title=data["title"], subtitle=data.get("subtitle"),
                                  metadata=dict(data.get("metadata") or {}), updatedAt=now)
                issue.attachments[data["url"]] = attachment
                owner.upserts.append((issue.identifier, data["url"]))
                body = {"data": {"attachmentCreate": {"success": True, "attachment": {
                    "id": attachment["id"], "url": attachment["url"],
                    "issue": {"identifier": issue.identifier, "archivedAt": issue.archived_at,
                              "trashed": issue.trashed}}}}}
        if issue is None:
            self._not_found()
        else:
            self._send(200, body)

    def _fail(self, failure: Dict[str, Any], auth: Optional[str]) -> None:
        mode = failure["mode"]
        status = failure.get("status")
        if mode == "ratelimit":
            reset_ms = int(time.time() * 1000) + int(failure.get("reset_in_s", 30) * 1000)
            headers = {"X-RateLimit-Requests-Limit": "1500", "X-RateLimit-Requests-Remaining": "0",
                       "X-RateLimit-Requests-Reset": str(reset_ms)}
            if failure.get("retry_after") is not None:
                headers["Retry-After"] = str(failure["retry_after"])
            self._send(status or 400, {"errors": [{"message": "Rate limit exceeded",
                                                   "extensions": {"code": "RATELIMITED"}}]}, headers)
        elif mode == "garbage":
            self._send_raw(status or 200, b"\x00\xffnot json at all{{{")
        elif mode == "deep":
            self._send_raw(status or 200, b'{"data": ' + b"[" * 200000)
        elif mode == "empty":
            self._send_raw(status or 200, b"")
        elif mode == "html":
            self._send_raw(status or 502, b"<html><body>Bad gateway</body></html>", "text/html")
        elif mode == "huge":
            filler = "x" * (3 * 1024 * 1024)
            self._send(status or 200, {"data": {"issue": None}, "filler": filler})
        elif mode == "wrong_shape":
            self._send(status or 200, failure.get("body", {"data": ["not", "an", "object"]}))
        elif mode == "errors_not_list":
            self._send(status or 400, {"errors": "everything is broken"})
        elif mode == "http500":
            self._send(status or 500, {"message": "internal"})
        elif mode == "internal_error":
            self._send(status or 200, {"data": None, "errors": [{
                "message": "Something\nwent\x1b[31m wrong " + "!" * 500, "extensions": {"code": "INTERNAL_SERVER_ERROR"}}]})
        elif mode == "echo_token":
            self._send(status or 400, {"errors": [{"message": "bad token %s" % auth,
                                                   "extensions": {"code": "INPUT_ERROR"}}]})
        elif mode == "auth":
            self._send(status or 400, {"errors": [{"message": "Authentication required, not authenticated",
                                                   "extensions": {"code": "AUTHENTICATION_ERROR"}}]})
        elif mode == "slow":
            time.sleep(failure.get("delay", 2.0))
            self._send(200, {"data": {"issue": None}})
        elif mode == "drop":
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.close_connection = True


def _operation(query: str) -> Optional[str]:
    text = " ".join(query.split())
    if "attachmentCreate(input: $input)" in text and text.startswith("mutation($input: AttachmentCreateInput!)"):
        return "attachmentCreate"
    if "issue(id: $id)" in text and text.startswith(("query($id: String!, $prefix: String!)",
                                                     "query($id: String!, $prefix: String!, $after: String)")) \
            and "startsWith: $prefix" in text:
        return "issue"
    return None


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(b"svc-test-cursor:%d" % offset).decode("ascii")


def _offset_of(after: Any) -> Optional[int]:
    """The offset a cursor of ours stands for (0 for none); None for a forged one."""
    if after is None:
        return 0
    try:
        raw = base64.urlsafe_b64decode(str(after).encode("ascii"))
        tag, _, number = raw.partition(b":")
        return int(number) if tag == b"svc-test-cursor" and number.isdigit() else None
    except (ValueError, UnicodeEncodeError):
        return None


def _page_number(after: Any) -> Optional[int]:
    """1 for the first page; the page of a default-sized (100) read otherwise."""
    offset = _offset_of(after)
    return None if offset is None else offset // 100 + 1


def _leaf_strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaf_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaf_strings(v)


class TrackerServer:
    """The tracker on 127.0.0.1 and a random port. State lives on this object."""

    def __init__(self, tokens: Iterable[str] = (), host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self.tokens = set(tokens)
        self.auth_status = 400
        self.not_found_status = 200
        self._issues: Dict[str, _Issue] = {}
        self._failures: List[Dict[str, Any]] = []
        self.calls: List[Dict[str, Any]] = []
        self.upserts: List[Tuple[str, str]] = []
        # Seconds every request waits before it is answered (a distant tracker).
        self.latency_s = 0.0
        # pageInfo.hasNextPage is always true: a cursor loop that never ends.
        self.endless_pages = False
        # The hourly budget (RateBudgetGate), enforced only after enforce_budget().
        self.budget: Optional[RateBudgetGate] = None
        self._httpd = StandInServer((host, port), self, _Handler)
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return "http://%s:%d/graphql" % (host, port)

    def start(self) -> "TrackerServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="tracker-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "TrackerServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def enforce_budget(self, **options: Any) -> RateBudgetGate:
        """From now on every reply states the budget, and a request over it is RATELIMITED."""
        self.budget = RateBudgetGate(**options)
        return self.budget

    # ------------------------------------------------------------ state

    def _find(self, ident: str) -> Optional[_Issue]:
        for issue in self._issues.values():
            if issue.identifier == ident or issue.id == ident:
                return issue
        return None

    def add_issue(self, identifier: str, state: str = "started") -> str:
        with self._lock:
            issue = _Issue(identifier, state)
            self._issues[identifier] = issue
            return issue.id

    def set_issue(self, identifier: str, *, state: Optional[str] = None, archived: Optional[bool] = None,
                  trashed: Optional[bool] = None) -> None:
        with self._lock:
            issue = self._issues[identifier]
            if state is not None:
                issue.state = state
            if archived is not None:
                issue.archived_at = _iso(int(time.time() * 1000)) if archived else None
            if trashed is not None:
                issue.trashed = trashed

    def delete_issue(self, identifier: str) -> None:
        with self._lock:
            del self._issues[identifier]

    def put_attachment(self, identifier: str, url: str, *, subtitle: Optional[str] = None,
                       metadata: Optional[Dict[str, Any]] = None, updated_at: Optional[str] = None) -> None:
        with self._lock:
            issue = self._issues[identifier]
            issue.attachments[url] = {"id": str(uuid.uuid4()), "url": url, "title": url, "subtitle": subtitle,
                                      "metadata": dict(metadata or {}),
                                      "updatedAt": updated_at or _iso(int(time.time() * 1000))}

    def add_raw_node(self, identifier: str, node: Dict[str, Any]) -> None:
        """Serve `node` verbatim among the issue's attachments (after the real ones)."""
        with self._lock:
            self._issues[identifier].raw_nodes.append(node)

    def attachments(self, identifier: str) -> Dict[str, Dict[str, Any]]:
        with self._lock:
            return {k: dict(v) for k, v in self._issues[identifier].attachments.items()}

    def fail_next(self, mode: str, count: int = 1, op: Optional[str] = None, page: Optional[int] = None,
                  **options: Any) -> None:
        """The next `count` requests (of `op`, and of attachment page `page` of a
        100-a-page read, when given) fail in `mode`; count=-1 means until cleared."""
        if mode not in FAILURE_MODES:
            raise ValueError("mode must be one of %s" % (FAILURE_MODES,))
        with self._lock:
            self._failures.append(dict(options, mode=mode, count=count, op=op, page=page))

    def clear_failures(self) -> None:
        with self._lock:
            self._failures = []

    def _take_failure(self, op: Optional[str], page: Optional[int]) -> Optional[Dict[str, Any]]:
        with self._lock:
            for failure in self._failures:
                if failure["op"] not in (None, op):
                    continue
                if failure.get("page") is not None and (op != "issue" or failure["page"] != page):
                    continue
                if failure["count"] > 0:
                    failure["count"] -= 1
                    if failure["count"] == 0:
                        self._failures.remove(failure)
                return failure
        return None

    def _record(self, op: Optional[str], query: str, variables: Dict[str, Any], auth: Optional[str]) -> None:
        with self._lock:
            self.calls.append({"op": op, "query": query, "variables": variables,
                               "authorized": auth in self.tokens, "auth": auth, "at": time.monotonic()})

    def count(self, op: Optional[str] = None) -> int:
        with self._lock:
            return sum(1 for c in self.calls if op is None or c["op"] == op)
