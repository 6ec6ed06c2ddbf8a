"""The tracker client against the GraphQL test server: auth, the two documents, every error shape."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.home import BEARER, CANARY, make_node
from svcposture.cluster import tracker
from svcposture.config import ConfigError
from svcposture.paths import Paths
from svcposture.settings import tracker_url
from tests.support.tracker import TrackerServer


@pytest.fixture
def srv():
    with TrackerServer(tokens=[BEARER]) as server:
        server.add_issue("OPS-1")
        yield server


def client(srv: TrackerServer, token: str = BEARER, timeout: float = 10.0) -> tracker.TrackerClient:
    return tracker.TrackerClient(srv.url, tracker.TrackerAuth(token, "bot"), timeout=timeout)


def test_fetch_issue_reads_state_and_heartbeats_only(srv):
    srv.put_attachment("OPS-1", "svc://heartbeat/a", subtitle="2026-01-01T00:00:00.000Z",
                       metadata={"host": "a", "publishedAt": "2026-01-01T00:00:00.000Z"})
    srv.put_attachment("OPS-1", "https://github.com/x/pull/1")
    issue = client(srv).fetch_issue("OPS-1")
    assert issue.identifier == "OPS-1" and issue.state_type == "started"
    assert not issue.trashed and issue.archived_at is None and not issue.closed
    assert [h.url for h in issue.heartbeats] == ["svc://heartbeat/a"]
    assert issue.heartbeats[0].metadata["host"] == "a"
    call = srv.calls[-1]
    assert call["op"] == "issue" and call["variables"] == {"id": "OPS-1", "prefix": "svc://heartbeat/", "after": None}
    # Values travel as variables only.
    assert "OPS-1" not in call["query"] and "heartbeat" not in call["query"]


def test_upsert_is_by_url_per_issue(srv):
    c = client(srv)
    for n in range(3):
        view = c.upsert_attachment("OPS-1", "svc://heartbeat/a", "svc heartbeat a", "t%d" % n, {"n": n})
        assert view == {"identifier": "OPS-1", "archivedAt": None, "trashed": False}
    attachments = srv.attachments("OPS-1")
    assert list(attachments) == ["svc://heartbeat/a"]
    assert attachments["svc://heartbeat/a"]["metadata"] == {"n": 2}
    assert attachments["svc://heartbeat/a"]["subtitle"] == "t2"
    assert all("OPS-1" not in c["query"] for c in srv.calls)


@pytest.mark.parametrize("status", [200, 400])
def test_not_found_is_missing_whatever_the_http_status(srv, status):
    srv.not_found_status = status
    with pytest.raises(tracker.TrackerNotFoundError) as info:
        client(srv).fetch_issue("OPS-404")
    assert "Entity not found" in str(info.value)
    with pytest.raises(tracker.TrackerNotFoundError):
        client(srv).upsert_attachment("OPS-404", "svc://heartbeat/a", "t", "s", {})


def test_archived_and_trashed_issues_are_reported(srv):
    srv.set_issue("OPS-1", archived=True)
    issue = client(srv).fetch_issue("OPS-1")
    assert issue.archived_at and not issue.trashed
    srv.set_issue("OPS-1", archived=False, trashed=True, state="canceled")
    issue = client(srv).fetch_issue("OPS-1")
    assert issue.trashed and issue.closed


@pytest.mark.parametrize("status", [200, 400, 429])
def test_ratelimited_backs_off_from_the_reset_header(srv, status):
    srv.fail_next("ratelimit", status=status, reset_in_s=42)
    with pytest.raises(tracker.TrackerRateLimitedError) as info:
        client(srv).fetch_issue("OPS-1")
    assert 30 <= info.value.retry_after_s <= 43


def test_ratelimited_honours_retry_after_and_caps(srv):
    srv.fail_next("ratelimit", retry_after=7, reset_in_s=0)
    with pytest.raises(tracker.TrackerRateLimitedError) as info:
        client(srv).fetch_issue("OPS-1")
    assert 6 <= info.value.retry_after_s <= 7
    srv.fail_next("ratelimit", reset_in_s=10 ** 6)
    with pytest.raises(tracker.TrackerRateLimitedError) as info:
        client(srv).fetch_issue("OPS-1")
    assert info.value.retry_after_s == tracker.MAX_BACKOFF_S


@pytest.mark.parametrize("auth_status", [400, 401])
def test_refused_token_is_an_auth_error_without_the_token(srv, auth_status):
    srv.auth_status = auth_status
    with pytest.raises(tracker.TrackerAuthError) as info:
        client(srv, token="Bearer " + CANARY + "-revoked").fetch_issue("OPS-1")
    assert CANARY not in str(info.value)


@pytest.mark.parametrize("mode,kind", [
    ("garbage", tracker.TrackerResponseError),
    ("deep", tracker.TrackerResponseError),
    ("empty", tracker.TrackerResponseError),
    ("huge", tracker.TrackerResponseError),
    ("wrong_shape", tracker.TrackerResponseError),
    ("errors_not_list", tracker.TrackerResponseError),
    ("internal_error", tracker.TrackerResponseError),
    ("http500", tracker.TrackerUnreachableError),
    ("html", tracker.TrackerUnreachableError),
    ("drop", tracker.TrackerUnreachableError),
    ("echo_token", tracker.TrackerResponseError),
])
def test_hostile_replies_give_one_clear_error(srv, mode, kind):
    srv.fail_next(mode)
    with pytest.raises(kind) as info:
        client(srv).fetch_issue("OPS-1")
    message = str(info.value)
    assert message and "\n" not in message and "\x1b" not in message and len(message) < 400
    assert CANARY not in message
    assert isinstance(info.value, tracker.TrackerError)


@pytest.mark.parametrize("body", [
    {"data": {"issue": "OPS-1"}},
    {"data": {"issue": {"attachments": {"nodes": "nope"}}}},
    {"data": None},
    ["a", "list"],
    {"data": {"attachmentCreate": {"success": False}}},
])
def test_wrong_shapes_are_response_errors(srv, body):
    srv.fail_next("wrong_shape", body=body, count=2)
    with pytest.raises(tracker.TrackerResponseError):
        client(srv).fetch_issue("OPS-1")
    with pytest.raises(tracker.TrackerResponseError):
        client(srv).upsert_attachment("OPS-1", "svc://heartbeat/a", "t", "s", {})


def test_junk_attachment_nodes_are_skipped(srv):
    srv.fail_next("wrong_shape", body={"data": {"issue": {
        "id": "x", "identifier": "OPS-1", "archivedAt": None, "trashed": None, "state": None,
        "attachments": {"nodes": [None, 5, {"url": 7}, {"url": "https://other"},
                                  {"url": "svc://heartbeat/b", "metadata": "{\"host\": \"b\"}"},
                                  {"url": "svc://heartbeat/c", "metadata": "{not json"}]}}}})
    issue = client(srv).fetch_issue("OPS-1")
    assert [(h.url, h.metadata) for h in issue.heartbeats] == [("svc://heartbeat/b", {"host": "b"}),
                                                               ("svc://heartbeat/c", {})]


def test_timeout_is_unreachable(srv):
    srv.fail_next("slow", delay=1.5)
    with pytest.raises(tracker.TrackerUnreachableError) as info:
        client(srv, timeout=0.3).fetch_issue("OPS-1")
    assert "0.3" in str(info.value)


def test_connection_refused_is_unreachable():
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    c = tracker.TrackerClient("http://127.0.0.1:%d/graphql" % port, tracker.TrackerAuth(BEARER, "bot"))
    with pytest.raises(tracker.TrackerUnreachableError):
        c.fetch_issue("OPS-1")


def test_non_http_url_is_refused():
    with pytest.raises(tracker.TrackerResponseError):
        tracker.TrackerClient("file:///etc/passwd", tracker.TrackerAuth(BEARER, "bot"))


def test_auth_repr_hides_the_token():
    auth = tracker.TrackerAuth(BEARER, "bot")
    assert CANARY not in repr(auth)
    assert CANARY not in repr(tracker.TrackerClient("http://127.0.0.1:1/graphql", auth))


# ---------------------------------------------------------------- auth resolution

def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def test_bot_token_from_cluster_secrets_then_config_json(tmp_path):
    home = make_node(tmp_path, "a", ["a"], token=None)
    paths = Paths(home, {"HOME": str(home)})
    assert tracker.resolve_auth(paths) is None
    _write(paths.config_json, {"svc": {"tracker": {"bot": {"orchestrator": {"accessToken": "fallback"}}}}})
    assert tracker.resolve_auth(paths) == ("Bearer fallback", "bot")
    _write(paths.cluster_secrets, {"svc": {"tracker": {"bot": {"orchestrator": {"accessToken": CANARY}}}}})
    assert tracker.resolve_auth(paths) == (BEARER, "bot")


def test_personal_key_is_sent_bare(tmp_path):
    home = make_node(tmp_path, "a", ["a"], token=None)
    repo = tmp_path / "project"
    _write(repo / ".svc" / "config.json", {"svc": {"tracker": {"teamKey": "OPS"}}})
    paths = Paths(home, {"HOME": str(home), "SVC_REPO_ROOT": str(repo)})
    assert tracker.resolve_auth(paths) is None
    _write(paths.personal_config("OPS"), {"tracker": {"apiKey": "lin_api_personal"}})
    assert tracker.resolve_auth(paths) == ("lin_api_personal", "personal")
    with TrackerServer(tokens=["lin_api_personal"]) as srv:
        srv.add_issue("OPS-1")
        assert tracker.TrackerClient(srv.url, tracker.resolve_auth(paths)).fetch_issue("OPS-1").identifier == "OPS-1"
        assert srv.calls[-1]["auth"] == "lin_api_personal"


def test_hostile_team_key_never_names_a_file(tmp_path):
    home = make_node(tmp_path, "a", ["a"], token=None)
    repo = tmp_path / "project"
    _write(repo / ".svc" / "config.json", {"svc": {"tracker": {"teamKey": "../../etc/x"}}})
    paths = Paths(home, {"HOME": str(home), "SVC_REPO_ROOT": str(repo)})
    assert tracker.resolve_auth(paths) is None


def test_corrupt_secrets_is_a_config_error_not_a_guess(tmp_path):
    home = make_node(tmp_path, "a", ["a"])
    paths = Paths(home, {"HOME": str(home)})
    paths.cluster_secrets.write_text('{"svc": ')
    with pytest.raises(ConfigError):
        tracker.resolve_auth(paths)


def test_default_url_is_linear():
    assert tracker_url({}) == "https://api.linear.app/graphql"
    assert tracker_url({"SVC_TRACKER_URL": "http://127.0.0.1:9/g"}) == "http://127.0.0.1:9/g"


def test_backoff_reads_epoch_ms_and_seconds():
    now = time.time()
    assert 19 <= tracker._backoff_seconds({"X-RateLimit-Requests-Reset": str(int((now + 20) * 1000))}, now) <= 20
    assert 19 <= tracker._backoff_seconds({"X-RateLimit-Requests-Reset": str(int(now + 20))}, now) <= 20
    assert tracker._backoff_seconds({"Retry-After": "soon"}, now) == tracker.DEFAULT_BACKOFF_S
    assert tracker._backoff_seconds(None, now) == tracker.DEFAULT_BACKOFF_S
