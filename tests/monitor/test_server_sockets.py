"""The server's socket rules without the monitor's routes: a stand-in application
behind a real MonitorServer on a loopback port.

Connection cap, descriptor pressure, stream slots, the hand-off from the fast
lane to a handler thread, and closing (the fast lane's thread is joined).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from typing import Any, List, Mapping

import pytest

from svcposture.broadcast import Broadcast
from svcposture.monitor import sse
from svcposture.monitor.protocols import Application, FastRead, Reply, Serving
from svcposture.monitor.request import Request
from svcposture.monitor.response import Response, dumps
from svcposture.monitor.server import MonitorServer
from svcposture.settings import Settings
from tests.support.home import REPO
from tests.support.waiting import wait_until

FAST = Response(200, "text/plain", b"fast\n")


class Frames:
    def __init__(self, broadcast: Broadcast) -> None:
        self.broadcast = broadcast

    def opening(self, seq: int) -> bytes:
        return sse.frame(b"hello", seq, b"{}")

    def update(self, seq: int, body: Any) -> bytes:
        return sse.frame(b"hello", seq, dumps(body))


class StandInApp:
    """The application interface the server and its handler use (protocols.Application),
    and nothing else: /fast from the fast lane, /slow from a handler thread, /stream a stream."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.broadcast = Broadcast()
        self.wakes = 0

    def listening(self, host: str, port: int, streams: Any = None) -> None:
        self.address = (host, port)

    def wake_streams(self) -> None:
        self.wakes += 1
        self.broadcast.wake()

    def fast_reads(self) -> Mapping[bytes, FastRead]:
        return {b"/fast": lambda: FAST}

    def respond(self, request: Request) -> Reply:
        if request.path == "/stream":
            return sse.Stream(Frames(self.broadcast), self.settings.keepalive_s)
        return Response(200, "text/plain", b"slow %s\n" % request.path.encode())


def serve(**settings: Any):
    app = StandInApp(Settings(**settings))
    server = MonitorServer(("127.0.0.1", 0), app)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return server, app, thread


@pytest.fixture
def server():
    made: List[Any] = []

    def make(**settings: Any):
        made.append(serve(**settings))
        return made[-1][:2]

    yield make
    for srv, app, thread in made:
        app.broadcast.close()
        srv.stopping.set()
        srv.shutdown()
        srv.server_close()
        thread.join(10)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def get(sock: socket.socket, path: str) -> bytes:
    """One request and its whole response (b"" when the server closed the connection)."""
    try:
        sock.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
        data = b""
        while True:
            head, found, body = data.partition(b"\r\n\r\n")
            if found:
                length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")]
                if length and len(body) >= length[0]:
                    return data
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        return b""


def closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(0.01)
    try:
        return sock.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def test_the_stand_in_is_what_the_seams_name_and_the_handlers_get_a_serving_not_the_server(server):
    srv, app = server()
    assert isinstance(app, Application)
    assert not isinstance(object(), Application)
    assert isinstance(srv.serving, Serving) and srv.serving.app is app
    assert all(value is not srv for value in srv.serving)


def test_fast_lane_answers_and_hands_the_rest_to_a_thread(server):
    srv, _ = server()
    with connect(srv.server_port) as sock:
        assert get(sock, "/fast").endswith(b"\r\n\r\nfast\n")
        sock.sendall(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\nGET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while not data.endswith(b"slow /slow\n"):
            chunk = sock.recv(65536)
            assert chunk
            data += chunk
        assert data.index(b"fast\n") < data.index(b"slow /slow\n")  # pipelined answers stay in order


def test_connection_cap_closes_the_oldest_idle_connections(server):
    srv, _ = server(max_connections=16)
    assert srv.max_connections == 16
    socks = [connect(srv.server_port) for _ in range(24)]
    try:
        for sock in socks:  # each has been adopted once it is answered
            assert get(sock, "/fast").endswith(b"fast\n") or closed_by_peer(sock)
        newest = connect(srv.server_port)
        socks.append(newest)
        assert get(newest, "/fast").endswith(b"fast\n")
        wait_until(lambda: sum(closed_by_peer(s) for s in socks[:9]) >= 9, timeout=15)
        assert srv.connections_held() <= 16
    finally:
        for sock in socks:
            sock.close()


def test_stream_slots_refuse_past_the_limit_and_free_on_hang_up(server):
    srv, app = server(max_streams=2, keepalive_s=60.0)
    streams = [connect(srv.server_port) for _ in range(2)]
    for sock in streams:
        sock.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_until(lambda: b"event: hello" in sock.recv(65536, socket.MSG_PEEK), timeout=15)
    assert srv.streams.count == 2
    with connect(srv.server_port) as third:
        status, _, body = get(third, "/stream").partition(b"\r\n")
        assert status == b"HTTP/1.1 503 Service Unavailable" and b"Retry-After: 5" in body
        assert json.loads(body.partition(b"\r\n\r\n")[2])["error"] == "unavailable"
    streams[0].close()  # the hang-up watch ends that stream at once, not at its next keepalive
    wait_until(lambda: srv.streams.count == 1, timeout=15)
    assert app.wakes >= 1
    app.broadcast.publish({"n": 1})
    wait_until(lambda: b'data: {"n":1}' in streams[1].recv(65536, socket.MSG_PEEK), timeout=15)
    streams[1].close()
    wait_until(lambda: srv.streams.count == 0, timeout=15)


def test_close_joins_the_fast_lane_and_closes_its_connections(server):
    srv, _ = server()
    idle = connect(srv.server_port)
    assert get(idle, "/fast").endswith(b"fast\n")
    lane = srv.fast_lane
    srv.server_close()
    assert not lane.thread.is_alive()  # close() returned after the lane's thread ended
    idle.settimeout(10)
    assert idle.recv(1) == b""
    idle.close()


DESCRIPTORS = r'''
import os, resource, sys, threading
resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from tests.monitor.test_server_sockets import serve
server, app, thread = serve()
eaten = []
while True:
    try:
        eaten.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        break
for _ in range(12):  # room for a dozen connections, far below the cap
    os.close(eaten.pop())
print(server.server_port, server.max_connections, flush=True)
sys.stdin.read()
'''


def test_out_of_descriptors_sheds_the_oldest_idle_connections_and_keeps_accepting():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.Popen([sys.executable, "-c", DESCRIPTORS], cwd=str(REPO), env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    socks: List[socket.socket] = []
    try:
        port, cap = (int(x) for x in child.stdout.readline().split())
        assert cap == 128 - 64  # the descriptor limit less the reserve
        for _ in range(10):
            sock = connect(port)
            assert get(sock, "/fast").endswith(b"fast\n")
            socks.append(sock)
        # Past the free descriptors accept fails with EMFILE: the server closes
        # its oldest idle connections and accepts again, instead of spinning.
        for _ in range(6):
            sock = connect(port)
            socks.append(sock)
            assert get(sock, "/fast").endswith(b"fast\n")
        assert closed_by_peer(socks[0])
    finally:
        for sock in socks:
            sock.close()
        child.stdin.close()
        child.kill()
        child.wait(10)
