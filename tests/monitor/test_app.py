"""The monitor's application without sockets: a Request in, a Response (or a Stream) out.

The app runs over a real node (posture and trajectory services, the probe
child against the provider stand-in); only the server around it is left out.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from svcposture.settings import InvalidSetting
from svcposture.monitor import sse
from svcposture.monitor.app import ROUTES, MonitorApp, Request, Route, parse_hours, refresh_requested
from svcposture.monitor.protocols import Application
from svcposture.monitor.request import RequestHeaders
from svcposture.monitor.response import CLOSE, Response, json_response
from svcposture.monitor.node import Node
from svcposture.paths import Paths
from svcposture.settings import DEFAULT_PORT, Settings, probing_on
from tests.support.home import canary, node_env
from tests.support.provider import ProviderServer

TOKEN = canary("app1")
PORT = 7411
HOST = "127.0.0.1:%d" % PORT


def parse(response: bytes) -> Tuple[int, Dict[str, str], bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip()
    return status, headers, body


def request(path: str, *, method: str = "GET", headers: Any = ()) -> Request:
    return Request.of(method, path, list(headers) or [("Host", HOST)])


def respond(app: MonitorApp, path: str, **kw: Any) -> Response:
    reply = app.respond(request(path, **kw))
    assert isinstance(reply, Response)
    return reply


def get_json(app: MonitorApp, path: str, **kw: Any) -> Tuple[int, Dict[str, str], Any]:
    status, headers, body = parse(respond(app, path, **kw).encode())
    assert int(headers["content-length"]) == len(body)
    return status, headers, json.loads(body)


@pytest.fixture(scope="module")
def provider():
    with ProviderServer() as p:
        p.set_account(TOKEN, five_hour=(0.25, "allowed"))
        yield p


def _node(root: Path, provider_url: str, **extra: str) -> Node:
    home = root / "home"
    home.mkdir(parents=True)
    env = node_env(home, provider_url, [("ACCT1", TOKEN, "one@example.com")], active="ACCT1",
                   extra=dict({"SVC_PROBE_INTERVAL_S": "3600"}, **extra))
    paths = Paths(home, environ=env)
    node = Node(paths, Settings.from_environ(env))
    node.app.listening("127.0.0.1", PORT)
    return node


@pytest.fixture(scope="module")
def node(tmp_path_factory, provider):
    node = _node(tmp_path_factory.mktemp("app"), provider.url)
    node.postures["claude"].read()  # one probe, through the real child: the posture is fresh from here on
    yield node
    node.close_streams()
    node.stop()


@pytest.fixture(scope="module")
def app(node) -> MonitorApp:
    return node.app


def test_healthz_and_openapi_are_json_with_the_contract_headers(app):
    status, headers, body = get_json(app, "/healthz")
    assert status == 200 and body["ok"] is True and body["node"] == app.node
    assert body["probeIntervalS"] == 3600.0
    assert headers["content-type"] == "application/json" and headers["cache-control"] == "no-store"
    assert headers["server"] == "svc-monitor" and "date" in headers
    status, _, document = get_json(app, "/api/openapi.json")
    assert status == 200 and {route.path for route in ROUTES} <= set(document["paths"]) | {"/healthz", "/metrics"}


def test_the_app_is_what_the_server_side_asks_for(app):
    assert isinstance(app, Application)


def test_unknown_route_is_a_json_404_and_other_methods_a_405(app):
    status, _, body = get_json(app, "/nope")
    assert status == 404 and body["error"] == "not_found"
    for path in ("/healthz", "/nope"):
        refused = respond(app, path, method="POST")
        status, headers, body = parse(refused.encode())
        assert (status, headers["allow"], json.loads(body)["error"]) == (405, "GET, HEAD", "method_not_allowed")
        assert refused.ends_connection  # a body it may carry is left unread


def test_head_is_answered_by_the_get_route_and_the_encoding_drops_the_body(app):
    for path in ("/healthz", "/api/openapi.json", "/", "/nope", "/api/history"):
        get = respond(app, path)
        head = respond(app, path, method="HEAD")
        status, headers, body = parse(head.encode(head_only=True))
        assert (status, body) == (get.status, b"")
        assert headers["content-length"] == str(len(get.body)) == str(len(head.body))


def test_the_connection_line_is_the_servers(app):
    for path in ("/healthz", "/api/accounts", "/nope", "/api/trajectory"):
        reply = respond(app, path)
        assert parse(reply.encode(CLOSE))[1]["connection"] == "close"
        assert "connection" not in parse(reply.encode())[1]


def test_cached_read_is_what_the_fast_lane_writes(app):
    reply = respond(app, "/api/accounts")
    status, _, body = get_json(app, "/api/accounts")
    assert status == 200 and body["cached"] is True and body["available"] is True
    reads = app.fast_reads()
    fast = reads[b"/api/accounts"]()
    assert fast is not None and fast.status == 200
    assert set(json.loads(fast.body)) == set(json.loads(reply.body))
    assert reads[b"/api/trajectory"]() is respond(app, "/api/trajectory")
    assert b"/api/accounts/stream" not in reads


def test_forced_refresh_needs_the_header_and_a_trusted_host(app, provider):
    calls = provider.message_calls()
    cases = [([("Host", HOST)], "refresh_header_missing"),
             ([("Host", "evil.example:%d" % PORT), ("X-Svc-Refresh", "1")], "untrusted_host"),
             ([("Host", HOST), ("X-Svc-Refresh", "1"), ("Origin", "http://evil.example")], "untrusted_origin")]
    for headers, reason in cases:
        status, _, body = get_json(app, "/api/accounts?refresh=true", headers=headers)
        assert (status, body["error"], body["reason"]) == (403, "forbidden", reason)
    assert provider.message_calls() == calls  # a refused refresh spends no probe
    assert app.refresh_refusal(RequestHeaders.of({"Host": HOST, "X-Svc-Refresh": "1"})) is None


def test_history_hours_are_checked(app):
    assert get_json(app, "/api/history?hours=0")[0] == 400
    assert get_json(app, "/api/history?hours=2&hours=3")[0] == 400
    status, _, body = get_json(app, "/api/history?hours=2")
    assert status == 200 and isinstance(body, dict)
    assert [parse_hours(q) for q in ("", "hours=192", "hours=193", "hours=%31", "hours=1e1")] == [24, 192, None, 1, None]
    assert [refresh_requested(q) for q in ("", "refresh=true", "a=1&refresh=true", "refresh=1")] == [
        False, True, True, False]


def test_metrics_report_the_stream_slots_the_server_lends(app):
    slots = sse.StreamSlots(7)
    app.listening("127.0.0.1", PORT, slots)
    assert slots.acquire()
    try:
        status, headers, body = parse(respond(app, "/metrics").encode())
        assert status == 200 and headers["content-type"].startswith("text/plain")
        assert b"svc_sse_subscribers 1" in body and b"svc_sse_subscribers_max 7" in body
    finally:
        slots.release()


def test_a_stream_is_a_source_the_one_pump_writes(app):
    assert isinstance(app.respond(request("/api/accounts/stream")), sse.Stream)
    # HEAD gets the stream too: the server answers it with the head alone, and takes no slot.
    assert isinstance(app.respond(request("/api/accounts/stream", method="HEAD")), sse.Stream)
    for path, event in (("/api/accounts/stream", b"event: account\n"), ("/api/trajectory/stream", b"event: trajectory\n")):
        stream = app.respond(request(path))
        written: List[bytes] = []
        stopping = threading.Event()
        got_frame = threading.Event()

        def write(data: bytes) -> None:
            written.append(data)
            if data.startswith(b"event:"):
                got_frame.set()

        # `stopping` is also what the wait is cancelled by, so that wake() ends it now, not at a keepalive.
        pump = threading.Thread(target=sse.pump, args=(write, stream, stopping, stopping), daemon=True)
        pump.start()
        assert got_frame.wait(30)
        stopping.set()
        stream.source.broadcast.wake()
        pump.join(30)
        assert not pump.is_alive()
        status, headers, rest = parse(written[0])
        assert status == 200 and headers["connection"] == "close" and rest == b"retry: 5000\n\n"
        assert written[1].startswith(event) and b"\ndata: {" in written[1]


def test_read_guard_refuses_every_route_and_the_fast_lane(tmp_path, provider):
    node = _node(tmp_path, provider.url, SVC_MONITOR_READ_GUARD="1")
    try:
        for path in ("/healthz", "/api/accounts", "/nope", "/"):
            status, _, body = get_json(node.app, path, headers=[("Host", "evil.example")])
            assert (status, body["reason"]) == (403, "untrusted_host")
        assert get_json(node.app, "/healthz")[0] == 200
        assert node.app.fast_reads() == {}
    finally:
        node.stop()


def test_a_route_is_one_table_entry_and_one_method(node):
    class WithHello(MonitorApp):
        def get_hello(self, request: Request) -> Response:
            return json_response(200, {"hello": self.node})

    WithHello.ROUTES = MonitorApp.ROUTES + (Route("GET", "/api/hello", WithHello.get_hello),)
    app = WithHello(node.app.services._replace(node="n1"))
    app.listening("127.0.0.1", PORT)
    assert get_json(app, "/api/hello")[2] == {"hello": "n1"}
    assert respond(app, "/api/hello", method="HEAD").body == b'{"hello":"n1"}'  # the server drops it
    assert respond(app, "/api/hello", method="DELETE").status == 405
    assert get_json(app, "/healthz")[0] == 200


def test_settings_are_read_once_and_frozen():
    settings = Settings.from_environ({"SVC_MONITOR_MAX_STREAMS": "5", "SVC_ACCOUNTS_PROBE": " 0 ",
                                      "SVC_FLEET_TTL_S": "nonsense"})
    assert (settings.max_streams, settings.probe, settings.fleet_ttl_s) == (5, False, 60.0)
    with pytest.raises(AttributeError):
        settings.max_streams = 6  # type: ignore[misc]
    assert settings.replace(max_streams=6).max_streams == 6 and settings.max_streams == 5
    assert Settings.from_environ({}) == Settings() and DEFAULT_PORT == 7400
    assert probing_on({}) and probing_on({"SVC_ACCOUNTS_PROBE": "1"}) and not probing_on({"SVC_ACCOUNTS_PROBE": "0"})
    for bad in ({"SVC_MONITOR_MAX_STREAMS": "0"}, {"SVC_SSE_KEEPALIVE_S": "x"},
                {"SVC_MONITOR_MAX_CONNECTIONS": "1e9"}, {"SVC_MONITOR_REQUEST_TIMEOUT_S": "-1"}):
        with pytest.raises(InvalidSetting):
            Settings.from_environ(bad)
