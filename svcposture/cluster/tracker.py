"""A Linear-compatible GraphQL client for the liveness anchor: read the issue, upsert a heartbeat.

Every value travels as a GraphQL variable; the documents below are constants.
The token is sent in the Authorization header and nowhere else: no error message
built here can carry it, and any text the tracker sends back is scrubbed of it.
"""
from __future__ import annotations

import json
import re
import socket
import time
import urllib.parse
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from .. import config
from .._http import Exchange
from .._text import loads_bounded
from .._version import __version__
from ..errors import SvcpostureError
from ..paths import Paths
from ..settings import tracker_url
from .budget import NO_BUDGET, RateBudget, budget_from_headers, merge

TIMEOUT_S = 10.0
# An anchor carries one small attachment per host; a reply bigger than this is
# hostile or broken, and reading it whole would only cost memory.
MAX_REPLY_BYTES = 2 * 1024 * 1024
HEARTBEAT_URL_PREFIX = "svc://heartbeat/"
BOT_TOKEN_KEY = config.BOT_ORCHESTRATOR_PREFIX + ".accessToken"
PERSONAL_TOKEN_KEY = "tracker.apiKey"

# Attachments come 100 a page (Linear's default page is 50, and a fleet past it
# would silently lose heartbeats), following pageInfo until the last page.
PAGE_SIZE = 100
MAX_PAGES = 50
ISSUE_QUERY = (
    "query($id: String!, $prefix: String!, $after: String) { issue(id: $id) {id identifier archivedAt trashed "
    "state{type} attachments(first: %d, after: $after, filter:{url:{startsWith: $prefix}})"
    "{nodes{url subtitle metadata updatedAt} pageInfo{hasNextPage endCursor}}} }" % PAGE_SIZE
)
ATTACHMENT_MUTATION = (
    "mutation($input: AttachmentCreateInput!) { attachmentCreate(input: $input) "
    "{ success attachment { id url issue { identifier archivedAt trashed } } } }"
)

# Back-off for RATELIMITED when the reply's headers say nothing usable, and the
# longest wait obeyed: the stated reset, but never past one rate-limit window.
DEFAULT_BACKOFF_S = 60.0
MAX_BACKOFF_S = 3600.0
_TEAM_KEY_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Runs of C0 controls and DEL: each run of them becomes one space when tracker or
# Loki text is made into one line of a message. Not _text.CONTROL_RE, which also
# matches C1 and stands for one character, not a run: these messages would change.
CONTROL_RUN_RE = re.compile(r"[\x00-\x1f\x7f]+")


class TrackerError(SvcpostureError):
    """Base of every tracker failure; each concern below also subclasses a builtin."""


class TrackerTokenMissingError(TrackerError, LookupError):
    """Neither the bot orchestrator token nor a personal key is configured."""


class TrackerAuthError(TrackerError, PermissionError):
    """The tracker refused the token."""


class TrackerUnreachableError(TrackerError, ConnectionError):
    """No answer: connection refused, timeout, or a 5xx from the tracker."""


class TrackerRateLimitedError(TrackerError, RuntimeError):
    """RATELIMITED; `retry_after_s` says how long to stay away."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TrackerNotFoundError(TrackerError, LookupError):
    """The issue does not exist (or this token cannot see it)."""


class TrackerResponseError(TrackerError, ValueError):
    """The tracker answered something that is not a usable GraphQL reply."""


class TrackerPaginationError(TrackerResponseError):
    """The attachments did not end within MAX_PAGES pages, or a page's cursor is unusable."""


class TrackerAuth(NamedTuple):
    header: str   # the Authorization header value; never print this
    source: str   # "bot" or "personal": safe to show

    def __repr__(self) -> str:
        return "TrackerAuth(source=%r)" % self.source


class Heartbeat(NamedTuple):
    url: str
    subtitle: Optional[str]
    metadata: Dict[str, Any]
    updated_at: Optional[str]


class AnchorIssue(NamedTuple):
    id: Optional[str]
    identifier: Optional[str]
    archived_at: Optional[str]
    trashed: bool
    state_type: Optional[str]
    heartbeats: List[Heartbeat]

    @property
    def closed(self) -> bool:
        return self.state_type in ("completed", "canceled")


# ---------------------------------------------------------------- auth

def _token_string(value: Any) -> Optional[str]:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def resolve_auth(paths: Paths) -> Optional[TrackerAuth]:
    """The bot orchestrator token as Bearer, else the personal key sent bare, else None.

    Re-read on every call, so a token rotated by cluster-sync is picked up.
    Raises ConfigError when a file that should hold one is corrupt.
    """
    bot = _token_string(config.layer2_get(paths, BOT_TOKEN_KEY, (paths.cluster_secrets, paths.config_json)))
    if bot:
        return TrackerAuth("Bearer " + bot, "bot")
    team_key = config.layer1_get(paths, config.TEAM_KEY)
    if isinstance(team_key, str) and _TEAM_KEY_RE.match(team_key.strip()):
        personal = _token_string(config.get_dotted(config.load_layer(paths.personal_config(team_key.strip())),
                                                   PERSONAL_TOKEN_KEY))
        if personal:
            return TrackerAuth(personal, "personal")
    return None


# ---------------------------------------------------------------- transport

def _scrub(text: Any, secret: str, limit: int = 200) -> str:
    """Tracker-supplied text made safe for a log line: one line, short, token-free."""
    out = CONTROL_RUN_RE.sub(" ", str(text))
    for needle in {secret, secret[7:] if secret.startswith("Bearer ") else secret}:
        if needle:
            out = out.replace(needle, "[redacted]")
    if len(out) > limit:
        out = out[:limit] + "..."
    return out.strip()


def _backoff_seconds(headers: Any, now_s: float) -> float:
    """How long to stay away after RATELIMITED, from Retry-After or Linear's reset headers."""
    if headers is None:
        return DEFAULT_BACKOFF_S
    candidates: List[float] = []
    retry_after = headers.get("Retry-After")
    if retry_after:
        try:
            candidates.append(float(retry_after))
        except ValueError:
            pass
    for name in ("X-RateLimit-Requests-Reset", "X-RateLimit-Complexity-Reset", "X-RateLimit-Endpoint-Requests-Reset"):
        value = headers.get(name)
        if not value:
            continue
        try:
            reset = float(value)
        except ValueError:
            continue
        # Linear sends epoch milliseconds; accept epoch seconds too.
        reset_s = reset / 1000.0 if reset > 1e11 else reset
        candidates.append(reset_s - now_s)
    usable = [c for c in candidates if c == c and c > 0]
    if not usable:
        return DEFAULT_BACKOFF_S
    return min(max(max(usable), 1.0), MAX_BACKOFF_S)


def _raise_for_status(status: int, headers: Any) -> None:
    """Raise the error an HTTP status means on its own: rate limit, refused token, server failure."""
    if status == 429:
        raise TrackerRateLimitedError("tracker rate limit (HTTP 429)", _backoff_seconds(headers, time.time()))
    if status in (401, 403):
        raise TrackerAuthError("tracker refused the token (HTTP %d)" % status)
    if status >= 500:
        raise TrackerUnreachableError("tracker answered HTTP %d" % status)


class TrackerClient:
    def __init__(self, url: str, auth: TrackerAuth, timeout: float = TIMEOUT_S) -> None:
        scheme = urllib.parse.urlsplit(url).scheme
        if scheme not in ("http", "https"):
            raise TrackerResponseError("SVC_TRACKER_URL must be an http(s) URL")
        self.url = url
        self._auth = auth
        self.timeout = timeout
        # The rate-limit figures of the newest reply that stated them (every reply, errors too).
        self.budget: RateBudget = NO_BUDGET

    def __repr__(self) -> str:
        return "TrackerClient(url=%r, source=%r)" % (self.url, self._auth.source)

    @classmethod
    def for_paths(cls, paths: Paths, environ: Optional[Mapping[str, str]] = None, *,
                  url: Optional[str] = None) -> "TrackerClient":
        """The client of `url` (default: $SVC_TRACKER_URL of `environ`) with this node's tracker token."""
        auth = resolve_auth(paths)
        if auth is None:
            raise TrackerTokenMissingError(
                "no tracker token: set %s in cluster-secrets.json (svc-cluster sync) or %s in "
                "~/.config/svc/config-<teamKey>.json" % (BOT_TOKEN_KEY, PERSONAL_TOKEN_KEY))
        return cls(tracker_url(paths.environ if environ is None else environ) if url is None else url, auth)

    # ------------------------------------------------------------ wire

    def execute(self, document: str, variables: Mapping[str, Any]) -> Dict[str, Any]:
        """POST one GraphQL document; the `data` object, or one of the Tracker*Error classes."""
        import urllib.error
        body = json.dumps({"query": document, "variables": dict(variables)}).encode("utf-8")
        sent = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": self._auth.header,
            "User-Agent": "svcposture/%s" % __version__,
        }
        status, headers = 0, None
        try:
            # A total deadline, not a per-recv timeout: a tracker trickling its reply must not
            # hold the caller (a fleet read, a publisher tick). Linear answers GraphQL errors
            # with 400 too: the reply is read whatever its status.
            with Exchange(self.url, self.timeout, sent, data=body, method="POST") as reply:
                status, headers = reply.status, reply.headers
                raw = reply.read(MAX_REPLY_BYTES + 1)
        except (socket.timeout, TimeoutError):
            raise TrackerUnreachableError("tracker did not answer within %g s" % self.timeout) from None
        except urllib.error.URLError as exc:
            raise TrackerUnreachableError("cannot reach the tracker: %s" % _scrub(exc.reason, self._auth.header)) from None
        except (OSError, ValueError) as exc:
            # http.client's own errors (bad status line, reset, incomplete read) land here.
            raise TrackerUnreachableError("tracker connection failed: %s" % _scrub(
                type(exc).__name__ + (": %s" % exc if str(exc) else ""), self._auth.header)) from None
        self.budget = merge(self.budget, budget_from_headers(headers))
        if len(raw) > MAX_REPLY_BYTES:
            raise TrackerResponseError("tracker reply larger than %d bytes (HTTP %d)" % (MAX_REPLY_BYTES, status))
        return self._interpret(status, headers, raw)

    def _interpret(self, status: int, headers: Any, raw: bytes) -> Dict[str, Any]:
        try:
            reply = loads_bounded(raw, MAX_REPLY_BYTES) if raw.strip() else None
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            _raise_for_status(status, headers)
            raise TrackerResponseError("tracker reply is not a JSON object (HTTP %d)" % status)
        errors = reply.get("errors")
        if errors is not None:
            # errors[] is read whatever the status: Linear answers errors with 200 or 400.
            self._raise_errors(status, headers, errors)
        _raise_for_status(status, headers)
        if status >= 300:
            raise TrackerResponseError("tracker answered HTTP %d without errors[]" % status)
        data = reply.get("data")
        if not isinstance(data, dict):
            raise TrackerResponseError("tracker reply has no data object")
        return data

    def _raise_errors(self, status: int, headers: Any, errors: Any) -> None:
        if not isinstance(errors, list) or not errors:
            raise TrackerResponseError("tracker reply has a malformed errors field (HTTP %d)" % status)
        messages: List[str] = []
        codes: List[str] = []
        for entry in errors[:20]:
            message = entry.get("message") if isinstance(entry, dict) else None
            extensions = entry.get("extensions") if isinstance(entry, dict) else None
            code = extensions.get("code") if isinstance(extensions, dict) else None
            messages.append(message if isinstance(message, str) else "")
            codes.append(code if isinstance(code, str) else "")
        if "RATELIMITED" in codes:
            raise TrackerRateLimitedError("tracker rate limit (RATELIMITED)", _backoff_seconds(headers, time.time()))
        if any(m.startswith("Entity not found") for m in messages):
            raise TrackerNotFoundError("tracker: %s" % _scrub(next(m for m in messages if m.startswith("Entity not found")),
                                                            self._auth.header))
        first = next((m for m in messages if m), "(no message)")
        if status in (401, 403) or any(c in ("AUTHENTICATION_ERROR", "FORBIDDEN") for c in codes):
            raise TrackerAuthError("tracker refused the token: %s" % _scrub(first, self._auth.header))
        code = next((c for c in codes if c), None)
        raise TrackerResponseError("tracker error%s: %s" % (
            " " + _scrub(code, self._auth.header, 40) if code else "", _scrub(first, self._auth.header)))

    # ------------------------------------------------------------ operations

    def fetch_issue(self, ticket: str, prefix: str = HEARTBEAT_URL_PREFIX,
                    max_pages: int = MAX_PAGES) -> AnchorIssue:
        """The anchor issue with every attachment under `prefix`, read page by page.

        At most `max_pages` requests: a cursor loop that never ends (a broken or
        hostile tracker) is a TrackerPaginationError, not a hang. An error on any
        page fails the whole read: a partial list would show hosts as missing.
        """
        heartbeats: List[Heartbeat] = []
        after: Optional[str] = None
        issue: Dict[str, Any] = {}
        for page in range(1, max_pages + 1):
            issue, nodes, after = self._issue_page(ticket, prefix, after, page)
            for node in nodes:
                heartbeat = _heartbeat(node, prefix)
                if heartbeat is not None:
                    heartbeats.append(heartbeat)
            if after is None:
                break
        else:
            raise TrackerPaginationError("tracker: attachments of %s did not end within %d pages of %d"
                                         % (ticket, max_pages, PAGE_SIZE))
        state = issue.get("state")
        state_type = state.get("type") if isinstance(state, dict) else None
        return AnchorIssue(
            id=_str_or_none(issue.get("id")),
            identifier=_str_or_none(issue.get("identifier")),
            archived_at=_str_or_none(issue.get("archivedAt")),
            trashed=issue.get("trashed") is True,
            state_type=_str_or_none(state_type),
            heartbeats=heartbeats,
        )

    def _issue_page(self, ticket: str, prefix: str, after: Optional[str],
                    page: int) -> Tuple[Dict[str, Any], List[Any], Optional[str]]:
        """(issue object, attachment nodes, cursor of the next page or None) of one page."""
        data = self.execute(ISSUE_QUERY, {"id": ticket, "prefix": prefix, "after": after})
        if "issue" not in data:
            raise TrackerResponseError("tracker reply: data has no issue field")
        issue = data["issue"]
        if issue is None:
            raise TrackerNotFoundError("tracker: issue %s not found" % ticket)
        if not isinstance(issue, dict):
            raise TrackerResponseError("tracker reply: issue is not an object")
        attachments = issue.get("attachments")
        if attachments is None:
            return issue, [], None
        nodes = attachments.get("nodes") if isinstance(attachments, dict) else None
        if not isinstance(nodes, list):
            raise TrackerResponseError("tracker reply: attachments.nodes is not an array (page %d)" % page)
        info = attachments.get("pageInfo")
        if not isinstance(info, dict) or info.get("hasNextPage") is not True:
            return issue, nodes, None
        cursor = info.get("endCursor")
        if not isinstance(cursor, str) or not cursor or len(cursor) > 1000 or cursor == after:
            raise TrackerPaginationError("tracker reply: page %d says there is a next page but gives no "
                                         "new endCursor" % page)
        return issue, nodes, cursor

    def upsert_attachment(self, ticket: str, url: str, title: str, subtitle: str,
                          metadata: Mapping[str, Any]) -> Dict[str, Any]:
        """attachmentCreate, which the tracker treats as an upsert by url per issue.

        Returns the attachment's issue view ({identifier, archivedAt, trashed}) so
        that a publisher notices an anchor archived under it.
        """
        data = self.execute(ATTACHMENT_MUTATION, {"input": {
            "issueId": ticket, "url": url, "title": title, "subtitle": subtitle, "metadata": dict(metadata)}})
        result = data.get("attachmentCreate")
        if not isinstance(result, dict):
            raise TrackerResponseError("tracker reply: attachmentCreate is not an object")
        if result.get("success") is not True:
            raise TrackerResponseError("tracker reply: attachmentCreate did not succeed")
        attachment = result.get("attachment")
        issue = attachment.get("issue") if isinstance(attachment, dict) else None
        return issue if isinstance(issue, dict) else {}


def _str_or_none(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def _heartbeat(node: Any, prefix: str) -> Optional[Heartbeat]:
    """One attachment node, or None when it is not a heartbeat we can read."""
    if not isinstance(node, dict):
        return None
    url = node.get("url")
    if not isinstance(url, str) or not url.startswith(prefix):
        return None
    metadata = node.get("metadata")
    if isinstance(metadata, str):
        # Some GraphQL gateways hand JSONObject scalars back as strings.
        try:
            metadata = json.loads(metadata)
        except (ValueError, RecursionError):
            metadata = None
    return Heartbeat(url=url, subtitle=_str_or_none(node.get("subtitle")),
                     metadata=metadata if isinstance(metadata, dict) else {},
                     updated_at=_str_or_none(node.get("updatedAt")))
