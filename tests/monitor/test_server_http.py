"""The monitor's HTTP surface through a real subprocess on a loopback port."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.support.home import REPO, canary, clean_env, files_text, node_env
from tests.support.monitor import get_request, raw_http, read_response
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

TOK1 = canary("srv1")
TOK2 = canary("srv2")


@pytest.fixture(scope="module")
def provider():
    with ProviderServer() as p:
        p.set_account(TOK1, five_hour=(0.42, "allowed"))
        p.set_account(TOK2, five_hour=(0.05, "allowed"))
        yield p


@pytest.fixture(scope="module")
def node(tmp_path_factory, provider, module_monitors):
    home = tmp_path_factory.mktemp("srv") / "home"
    home.mkdir()
    env = node_env(home, provider.url, [("ACCT1", TOK1, "one@example.com"), ("ACCT2", TOK2, "two@example.com")],
                   active="ACCT1", extra={"SVC_REFRESH_FLOOR_S": "0"})
    mon = module_monitors.start(env)
    mon.home = home
    yield mon


def test_listening_line_shows_the_real_port_and_monitor_json(node):
    assert node.port > 0
    assert node.stderr_text().count("svc-monitor listening on http://127.0.0.1:%d" % node.port) == 1
    record = json.loads((node.home / "svc" / "run" / "monitor.json").read_text())
    assert record["pid"] == node.proc.pid
    assert record["url"] == node.url
    assert record["startedAt"].endswith("Z")
    assert oct(os.stat(str(node.home / "svc" / "run" / "monitor.json")).st_mode & 0o777) == "0o600"


def test_routes_and_content_types(node):
    cases = {
        "/": "text/html", "/static/dashboard.js": "text/javascript", "/static/dashboard.css": "text/css",
        "/api/accounts": "application/json", "/api/openapi.json": "application/json",
        "/metrics": "text/plain", "/healthz": "application/json",
    }
    for path, ctype in cases.items():
        status, headers, body = node.get(path)
        assert status == 200, path
        assert headers["content-type"].startswith(ctype), path
        assert int(headers["content-length"]) == len(body)
        assert "access-control-allow-origin" not in headers
        if ctype == "application/json":
            assert headers["cache-control"] == "no-store", path
            json.loads(body)


def test_head_is_get_without_body(node):
    for path in ("/", "/api/accounts", "/healthz", "/metrics", "/api/openapi.json"):
        _, get_headers, get_body = node.get(path)
        status, headers, body = raw_http(node.port, get_request(path, "127.0.0.1:%d" % node.port, method="HEAD"))
        assert status == 200 and body == b""
        assert headers["content-type"] == get_headers["content-type"]
        if path not in ("/api/accounts", "/metrics", "/healthz"):  # these embed a fresh timestamp or counter
            assert int(headers["content-length"]) == len(get_body)


def test_head_of_a_stream_is_its_head_alone_on_a_kept_alive_connection(node):
    """HEAD takes no stream slot and sends no frame; the connection stays open for the next request."""
    host = "Host: 127.0.0.1:%d\r\n" % node.port
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as sock:
        for path in ("/api/accounts/stream", "/api/trajectory/stream", "/api/accounts/stream?provider=codex"):
            sock.sendall(("HEAD %s HTTP/1.1\r\n%s\r\n" % (path, host)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(65536)
                assert chunk, path
                head += chunk
            top, _, rest = head.partition(b"\r\n\r\n")
            assert top.startswith(b"HTTP/1.1 200 OK\r\n") and rest == b"", (path, head)
            assert b"Content-Type: text/event-stream\r\n" in top and b"Content-Length: 0\r\n" in top
            assert b"Connection: close" not in top
        sock.sendall(("GET /healthz HTTP/1.1\r\n%sConnection: close\r\n\r\n" % host).encode())
        status, _, body = read_response(sock)
        assert status == 200 and json.loads(body)["ok"] is True


def test_other_methods_get_405_with_allow(node):
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "BREW"):
        status, headers, body = raw_http(node.port, get_request("/api/accounts", "127.0.0.1:%d" % node.port,
                                                                ["Content-Length: 0"], method=method))
        assert status == 405, method
        assert headers["allow"] == "GET, HEAD"
        assert json.loads(body)["error"] == "method_not_allowed"


def test_unknown_paths_404(node):
    for path in ("/nope", "/api", "/api/accounts/", "/static/../server.py", "/static/index.html",
                 "/api/accounts/stream/x", "//etc/passwd"):
        status, headers, body = raw_http(node.port, get_request(path, "127.0.0.1:%d" % node.port))
        assert status == 404, path
        assert json.loads(body)["error"] == "not_found"
        assert headers["cache-control"] == "no-store"


def test_oversize_request_line_and_headers(node):
    status, _, _ = raw_http(node.port, get_request("/" + "a" * 70000, "127.0.0.1:%d" % node.port))
    assert status == 414
    many = ["X-H%d: v" % i for i in range(150)]
    status, _, body = raw_http(node.port, get_request("/healthz", "127.0.0.1:%d" % node.port, many))
    assert status == 431 and json.loads(body)["error"] == "header_fields_too_large"
    status, _, _ = raw_http(node.port, get_request("/healthz", "127.0.0.1:%d" % node.port, ["X-Big: " + "b" * 70000]))
    assert status == 431


@pytest.mark.parametrize("raw", [
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
    b"GET / FTP/1.1\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n folded: continuation\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nBad Header : x\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nNoColon\r\n\r\n",
    b"\xff\xfe\x00GET / HTTP/1.1\r\n\r\n",
])
def test_malformed_requests_get_a_clean_error(node, raw):
    status, headers, body = raw_http(node.port, raw)
    assert status in (400, 505)
    assert json.loads(body)["error"] in ("bad_request", "http_version_not_supported")
    assert headers.get("connection") == "close"


def test_keep_alive_serves_many_requests_on_one_connection(node):
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as sock:
        for _ in range(20):
            sock.sendall(b"GET /api/accounts HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            status, headers, body = read_response(sock)
            assert status == 200 and json.loads(body)["available"] is True
            assert "connection" not in headers


def test_cached_read_spends_no_probe(node, provider):
    node.get("/api/accounts")
    before = provider.message_calls()
    first = node.get_json("/api/accounts")[1]
    second = node.get_json("/api/accounts")[1]
    assert first["probedAt"] == second["probedAt"] and second["cached"] is True
    assert provider.message_calls() == before


def test_tokens_appear_nowhere(node):
    node.get("/api/accounts?refresh=true", {"X-Svc-Refresh": "1"})
    texts = [node.get(p)[2].decode() for p in ("/api/accounts", "/metrics", "/", "/api/openapi.json")]
    texts.append(node.stderr_text())
    texts.append(node.stdout_text())
    texts.append(files_text(node.home / "svc"))
    with open("/proc/%d/environ" % node.proc.pid, "rb") as fh:
        texts.append(fh.read().decode("utf-8", "replace"))
    for text in texts:
        assert TOK1 not in text and TOK2 not in text
        assert "CANARY" not in text


def test_idle_sockets_do_not_block_a_read(node):
    idle = []
    try:
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", node.port), timeout=5)
            s.sendall(b"GET /api/accounts HTTP/1.1\r\n")  # half a request, then silence
            idle.append(s)
        started = time.monotonic()
        status, _, body = node.get("/api/accounts", timeout=5)
        assert status == 200 and json.loads(body)["available"] is True
        assert time.monotonic() - started < 5  # well under the 10 s read timeout
    finally:
        for s in idle:
            s.close()


def test_client_hang_ups_log_no_traceback(node):
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", node.port), timeout=5)
        s.sendall(b"GET /api/accounts HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()  # RST while the server writes
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", node.port), timeout=5)
        s.sendall(b"GET /api/accounts/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        s.recv(100)
        s.close()
    assert node.get("/healthz")[0] == 200
    assert wait_until(lambda: True, 0.3)
    text = node.stderr_text()
    assert "Traceback" not in text and "Exception occurred" not in text


def test_slowloris_connection_is_dropped(tmp_path, provider, monitors):
    env = node_env(tmp_path, provider.url, extra={"SVC_MONITOR_REQUEST_TIMEOUT_S": "1.5"})
    mon = monitors.start(env, ["--no-probe"])
    try:
        s = socket.create_connection(("127.0.0.1", mon.port), timeout=20)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        data = s.recv(1000)  # the server closes after its 10 s request timeout
        elapsed = time.monotonic() - started
        s.close()
        assert data == b"" or data.startswith(b"HTTP/1.1 408")
        assert 1.0 < elapsed < 9
    finally:
        assert mon.stop() == 0
    assert "Traceback" not in mon.stderr_text()


def test_sigterm_stops_cleanly_and_removes_monitor_json(tmp_path, provider, monitors):
    env = node_env(tmp_path, provider.url)
    mon = monitors.start(env, ["--no-probe"])
    path = tmp_path / "svc" / "run" / "monitor.json"
    assert path.exists()
    sse = socket.create_connection(("127.0.0.1", mon.port), timeout=5)
    sse.sendall(b"GET /api/accounts/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    sse.recv(200)
    started = time.monotonic()
    assert mon.stop() == 0
    assert time.monotonic() - started < 10
    sse.close()
    assert not path.exists()
    assert "Traceback" not in mon.stderr_text()


def test_port_from_environment_and_bad_ports(tmp_path, monitors):
    env = clean_env(tmp_path)
    env["SVC_MONITOR_PORT"] = "0"
    mon = monitors.start(env, ["--no-probe"], port=None)
    try:
        assert mon.port > 0 and mon.get("/healthz")[0] == 200
    finally:
        mon.stop()
    for args, extra in ((["--port", "70000"], {}), (["--port", "http"], {}), ([], {"SVC_MONITOR_PORT": "-1"}),
                        (["--port", "0"], {"SVC_MONITOR_MAX_STREAMS": "lots"}),
                        (["--port", "0"], {"SVC_MONITOR_TRUSTED_HOSTS": "user@evil"})):
        env2 = dict(env, **extra)
        env2.pop("SVC_MONITOR_PORT", None) if "SVC_MONITOR_PORT" not in extra else None
        proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--no-probe", *args], env=env2,
                              capture_output=True, timeout=20, cwd=str(REPO))
        assert proc.returncode == 2, (args, extra, proc.stderr)
        assert b"Traceback" not in proc.stderr and proc.stderr.startswith(b"svc-monitor: ")


def test_port_in_use_is_a_clear_error(tmp_path):
    env = clean_env(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--no-probe", "--port", str(port)],
                              env=env, capture_output=True, timeout=20)
    assert proc.returncode == 1
    assert b"cannot listen on 127.0.0.1:%d" % port in proc.stderr and b"Traceback" not in proc.stderr


def test_help_explains_itself():
    for args in (["--help"], ["hud", "--help"], ["demo", "--help"]):
        proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", *args], capture_output=True,
                              timeout=20, env=clean_env(REPO))
        assert proc.returncode == 0
        assert b"usage: svc-monitor" in proc.stdout
    out = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--help"], capture_output=True,
                         timeout=20, env=clean_env(REPO)).stdout.decode()
    for word in ("--bind", "--port", "--no-probe", "hud", "demo", "X-Svc-Refresh", "SVC_MONITOR_TRUSTED_HOSTS"):
        assert word in out


def test_ipv6_loopback_bind(tmp_path, monitors):
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no ::1 on this host")
    mon = monitors.start(clean_env(tmp_path), ["--no-probe", "--bind", "::1"])
    assert mon.url.startswith("http://[::1]:")
    status, _, body = raw_http(mon.port, get_request("/api/accounts", "[::1]:%d" % mon.port), host="::1")
    assert status == 200 and json.loads(body) == {"available": False, "node": json.loads(body)["node"]}


def test_run_wiring_cloud_env_liveness_and_latch(tmp_path, monitors):
    token = canary("cloud")
    cfg = tmp_path / ".config" / "svc"
    cfg.mkdir(parents=True)
    (cfg / "cluster-cloud.json").write_text(json.dumps({"svc": {"cloud": {"token": token}}}))
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "account-status-latch.json").write_text("{not json")
    mon = monitors.start(clean_env(tmp_path), ["--no-probe"])
    try:
        env_file = cfg / "cluster.env"
        assert wait_until(lambda: env_file.exists(), 10)
        assert oct(env_file.stat().st_mode & 0o777) == "0o600"
        assert token in env_file.read_text()
        assert [p.name for p in (tmp_path / "svc").iterdir() if "corrupt" in p.name]  # latch loaded, moved aside
        assert "liveness" in mon.stderr_text()  # the publisher was started (and said why it is off)
    finally:
        assert mon.stop() == 0
    assert token not in mon.stderr_text() + mon.stdout_text()


def test_cloud_env_failure_is_one_line_and_not_fatal(tmp_path, monitors):
    cfg = tmp_path / ".config" / "svc"
    cfg.mkdir(parents=True)
    (cfg / "cluster-cloud.json").write_text("{corrupt")
    mon = monitors.start(clean_env(tmp_path), ["--no-probe"])
    assert wait_until(lambda: "cloud env projection failed" in mon.stderr_text(), 10)
    assert mon.get("/healthz")[0] == 200
    line = [l for l in mon.stderr_text().splitlines() if "cloud env projection failed" in l]
    assert len(line) == 1 and "Traceback" not in mon.stderr_text()
