"""Off the loopback: the scrape listener (SVC_METRICS_BIND), the bearer token file, TLS, and the main
listener kept on the loopback unless --allow-remote, all through real `svc-monitor` processes.

- Start-up refusals: each bad address, token file, certificate or key is exit 2 with one line that
  names the file and the fix, before anything listens.
- One monitor off the loopback with plain HTTP said aloud and --allow-remote (the module's `plain`),
  one with TLS (`tls`): the routes, the 401s, the Authorization headers a client may send, the token
  kept out of every log, environment, argument and reply.
- The token file's life: swapped between its open and its read (a test hook), changed while the
  monitor runs (read at start-up only), on the loopback (asked for only when it exists).
- `svc-monitor init --metrics-token` and the doctor's `metrics-token` and `scrape-tls` checks.
"""
from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from svcposture.monitor.bearer import BearerCheck
from svcposture.monitor.request import RequestHeaders
from svcposture.remote.certificate import server_context, validity
from svcposture.settings import InvalidSetting, Settings
from tests.support.cli import cli, run_inproc
from tests.support.home import REPO, canary, clean_env, node_env
from tests.support.hooks import hooked
from tests.support.monitor import Monitor, get_request, raw_http, read_response
from tests.support.provider import ProviderServer
from tests.support.tlscerts import Certs, make_certs
from tests.support.waiting import wait_until

TOK1 = canary("scrape1")
EMAIL = "scraped-one@example.com"
SCRAPE_RE = re.compile(r"svc-monitor scrape listener on (https?)://(\S+):(\d+):")
TOKEN = "Scr4pe-T0ken_of.the~fleet+/" + "x" * 20  # every b64token character class, 47 characters


# ---------------------------------------------------------------- helpers

def write_token(home: Path, data: bytes, mode: int = 0o600) -> Path:
    path = home / ".config" / "svc" / "metrics-token"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_bytes(data)
    os.chmod(str(path), mode)
    return path


def new_home(root: Path, name: str) -> Path:
    home = root / name
    home.mkdir(mode=0o700)
    return home


def scrape_port(mon: Monitor) -> Tuple[str, int]:
    """(scheme, port) of the scrape listener, from its start-up line."""
    match = wait_until(lambda: SCRAPE_RE.search(mon.stderr_text()), timeout=20,
                       message="the scrape listener's start-up line")
    return match.group(1), int(match.group(3))


def start(env: Dict[str, str], args: List[str], timeout: float = 30) -> Monitor:
    """A monitor without probing (use as a context manager: stopped and checked at the end)."""
    return Monitor(env, ["--no-probe", *args]).start(timeout=timeout)


def refused(env: Dict[str, str], *args: str) -> str:
    """Run `svc-monitor --port 0 ARGS`, which must refuse to start: exit 2 and one line, no traceback."""
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--port", "0", "--no-probe", *args],
                          env=env, capture_output=True, text=True, timeout=30, cwd=str(REPO))
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "listening on" not in done.stderr
    return lines[0]


def https(port: int, path: str, certs: Certs, headers: Optional[Dict[str, str]] = None,
          method: str = "GET") -> Tuple[int, Dict[str, str], bytes, str]:
    """One request over TLS, the certificate checked against the test CA: (status, headers, body, TLS version)."""
    context = ssl.create_default_context(cafile=str(certs.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=15, context=context)
    try:
        conn.request(method, path, headers=dict(headers or {}))
        resp = conn.getresponse()
        version = conn.sock.version()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read(), version
    finally:
        conn.close()


def plain(port: int, path: str, fields: Tuple[str, ...] = (), method: str = "GET") -> Tuple[int, Dict[str, str], bytes]:
    """One request on a raw socket: the header fields exactly as given (repeats included)."""
    return raw_http(port, get_request(path, "127.0.0.1:%d" % port, list(fields), method=method))


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def bearer(token: str = TOKEN) -> str:
    return "Authorization: Bearer " + token


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def provider():
    with ProviderServer() as p:
        p.set_account(TOK1, five_hour=(0.37, "allowed"), seven_day=(0.12, "allowed"))
        yield p


@pytest.fixture(scope="module")
def plain_node(tmp_path_factory, provider, module_monitors):
    """Main listener on 0.0.0.0 with --allow-remote; scrape listener on 0.0.0.0, plain HTTP said aloud;
    the token file written with a CR LF ending (a file made on Windows)."""
    home = new_home(tmp_path_factory.mktemp("plain"), "home")
    write_token(home, TOKEN.encode() + b"\r\n")
    env = node_env(home, provider.url, [("ACCT1", TOK1, EMAIL)], active="ACCT1",
                   extra={"SVC_METRICS_BIND": "0.0.0.0:0", "SVC_METRICS_PLAIN_HTTP": "1"})
    mon = module_monitors.start(env, ["--allow-remote"], bind="0.0.0.0")
    mon.home = home
    mon.scrape = scrape_port(mon)[1]
    wait_until(lambda: b"acct1" in plain(mon.scrape, "/metrics", [bearer()])[2], timeout=30,
               message="the first probe in /metrics")
    return mon


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory, certs, provider, module_monitors):
    """The scrape listener on 0.0.0.0 over TLS; requests must arrive within 2 s."""
    home = new_home(tmp_path_factory.mktemp("tls-node"), "home")
    write_token(home, TOKEN.encode() + b"\n")
    env = node_env(home, provider.url, [("ACCT1", TOK1, EMAIL)], active="ACCT1",
                   extra={"SVC_METRICS_BIND": "0.0.0.0:0", "SVC_METRICS_TLS_CERT": str(certs.cert),
                          "SVC_METRICS_TLS_KEY": str(certs.key), "SVC_MONITOR_REQUEST_TIMEOUT_S": "2"})
    mon = module_monitors.start(env)
    mon.home = home
    scheme, mon.scrape = scrape_port(mon)
    assert scheme == "https"
    wait_until(lambda: b"acct1" in mon.get("/metrics")[2], timeout=30, message="the first probe in /metrics")
    return mon


# ---------------------------------------------------------------- pure parts

def test_the_scrape_settings_and_their_refusals():
    settings = Settings.from_environ({"SVC_METRICS_BIND": "[::]:7401", "SVC_METRICS_TLS_CERT": "/c.pem",
                                      "SVC_METRICS_TLS_KEY": "/k.pem", "SVC_METRICS_PLAIN_HTTP": "1"})
    assert (settings.metrics_bind, settings.metrics_tls_cert, settings.metrics_tls_key,
            settings.metrics_plain_http) == (("::", 7401), "/c.pem", "/k.pem", True)
    assert Settings.from_environ({"SVC_METRICS_PLAIN_HTTP": "yes"}).metrics_plain_http is False
    for bad in ("7401", ":7401", "::1:7401", "0.0.0.0:x", "0.0.0.0:70000", "[::1:7401", "a b:1"):
        with pytest.raises(InvalidSetting, match="SVC_METRICS_BIND"):
            Settings.from_environ({"SVC_METRICS_BIND": bad})
        assert Settings.from_environ({"SVC_METRICS_BIND": bad}, strict=False).metrics_bind is None
    with pytest.raises(InvalidSetting, match="SVC_METRICS_TLS_KEY is not"):
        Settings.from_environ({"SVC_METRICS_TLS_CERT": "/c.pem"})


def test_the_check_holds_a_digest_alone_and_reads_one_bearer_field():
    check = BearerCheck(hashlib.sha256(TOKEN.encode()).digest())
    assert not hasattr(check, "__dict__") and check.__slots__ == ("_digest",)

    def allows(*values: str) -> bool:
        return check.allows(RequestHeaders.of([("Authorization", v) for v in values]))
    assert allows("Bearer " + TOKEN) and allows("bearer " + TOKEN) and allows("BEARER   " + TOKEN)
    assert not allows() and not allows("Bearer " + TOKEN.upper()) and not allows("Bearer " + TOKEN[:-1])
    assert not allows("Bearer " + TOKEN, "Bearer " + TOKEN) and not allows("Bearer") and not allows("Bearer ")
    assert not allows("Basic " + base64.b64encode(("u:" + TOKEN).encode()).decode())
    assert not allows("Bearer " + TOKEN + "x" * 5000) and not allows("Token " + TOKEN)
    with pytest.raises(ValueError):
        BearerCheck(TOKEN.encode())  # a token is never what it holds


def test_certificate_dates_are_read_from_der_as_openssl_reads_them(certs):
    for path in (certs.cert, certs.expired, certs.ca):
        dates = []
        for which in ("-startdate", "-enddate"):
            done = subprocess.run(["openssl", "x509", "-in", str(path), "-noout", which], capture_output=True,
                                  text=True, check=True)
            dates.append(float(ssl.cert_time_to_seconds(done.stdout.strip().split("=", 1)[1])))
        assert validity(path.read_bytes()) == tuple(dates), path
    with pytest.raises(ValueError):
        validity(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    context, _ = server_context(str(certs.cert), str(certs.key), time.time())
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


# ---------------------------------------------------------------- start-up refusals

def test_the_main_listener_stays_on_the_loopback(tmp_path):
    env = clean_env(new_home(tmp_path, "home"))
    line = refused(env, "--bind", "0.0.0.0")
    assert line.startswith("svc-monitor: --bind 0.0.0.0 is not a loopback address")
    for words in ("SVC_METRICS_BIND=0.0.0.0:7401", "SSH tunnel", "reverse proxy", "--allow-remote", "metrics-token"):
        assert words in line, words
    line = refused(dict(env, SVC_MONITOR_BIND="10.0.0.7"))
    assert "SVC_MONITOR_BIND=10.0.0.7 is not a loopback address" in line and "SVC_METRICS_BIND=10.0.0.7:7401" in line
    # --allow-remote without the token file: refused too, naming the file and how to make it.
    line = refused(env, "--bind", "0.0.0.0", "--allow-remote")
    assert "--allow-remote needs the bearer token" in line and "svc-monitor init --metrics-token" in line
    assert str(env["HOME"]) + "/.config/svc/metrics-token" in line


def _token_cases(home: Path) -> List[Tuple[str, str]]:
    """Set up each bad token file in turn; (what, the words the refusal must carry)."""
    return [("missing", "does not exist"), ("empty", "is empty"), ("mode 0644", "mode 0644"),
            ("mode 0604", "mode 0604"), ("symlink", "symbolic link"), ("fifo", "not a regular file"),
            ("10 MB", "longer than 4096 bytes"), ("two lines", "more than one line"),
            ("a space", "characters a bearer token cannot carry"), ("short", "fewer than 16"),
            ("foreign owner", "owned by uid 65534"), ("directory", "not a regular file"),
            ("open directory", "another user can change")]


def _make_bad_token(home: Path, what: str) -> None:
    path = home / ".config" / "svc" / "metrics-token"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(str(path.parent), 0o700)
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    elif os.path.lexists(str(path)):
        path.unlink()
    if what == "missing":
        return
    good = home / "elsewhere-token"
    good.write_bytes(TOKEN.encode() + b"\n")
    os.chmod(str(good), 0o600)
    contents = {"empty": b"", "mode 0644": TOKEN.encode(), "mode 0604": TOKEN.encode(),
                "10 MB": b"A" * (10 * 1024 * 1024), "two lines": TOKEN.encode() + b"\n" + TOKEN.encode() + b"\n",
                "a space": TOKEN.encode() + b" \n", "short": b"abc123\n", "foreign owner": TOKEN.encode(),
                "open directory": TOKEN.encode()}
    if what in contents:
        write_token(home, contents[what], {"mode 0644": 0o644, "mode 0604": 0o604}.get(what, 0o600))
        if what == "foreign owner":
            os.chown(str(path), 65534, 65534)
        if what == "open directory":
            os.chmod(str(path.parent), 0o777)
    elif what == "symlink":
        os.symlink(str(good), str(path))
    elif what == "fifo":
        os.mkfifo(str(path), 0o600)
    elif what == "directory":
        path.mkdir(mode=0o700)


def test_a_bad_token_file_stops_the_start_with_one_sentence(tmp_path):
    home = new_home(tmp_path, "home")
    env = dict(clean_env(home), SVC_METRICS_BIND="0.0.0.0:0", SVC_METRICS_PLAIN_HTTP="1")
    for what, words in _token_cases(home):
        if what == "foreign owner" and os.geteuid() != 0:
            continue  # only root can give a file away; the rule is the same for any other owner
        _make_bad_token(home, what)
        started = time.monotonic()
        line = refused(env)
        assert time.monotonic() - started < 20, what  # a FIFO never stalls the start
        assert line.startswith("svc-monitor: SVC_METRICS_BIND=0.0.0.0:0 (off the loopback) needs the bearer "
                               "token, and the metrics token file %s" % (home / ".config/svc/metrics-token")), line
        assert words in line, (what, line)
        assert TOKEN not in line
    os.chmod(str(home / ".config" / "svc"), 0o700)


def test_tls_or_plain_http_said_out_loud(tmp_path, certs):
    home = new_home(tmp_path, "home")
    write_token(home, TOKEN.encode() + b"\n")
    env = dict(clean_env(home), SVC_METRICS_BIND="0.0.0.0:0")
    line = refused(env)
    assert "off the loopback, and without TLS" in line
    assert "SVC_METRICS_TLS_CERT and SVC_METRICS_TLS_KEY" in line and "SVC_METRICS_PLAIN_HTTP=1" in line
    cases = [
        (certs.cert, certs.other_key, "is not the key of the certificate %s" % certs.cert),
        (certs.expired, certs.key, "the TLS certificate %s expired on 2020-01-02 00:00:00 UTC: renew it" % certs.expired),
        (certs.key, certs.key, "holds no PEM certificate"),
        (certs.cert, certs.cert.parent / "missing.key", "cannot be read (No such file or directory)"),
        # An encrypted key would make OpenSSL ask a terminal for its passphrase: refused instead, at once.
        (certs.cert, certs.encrypted, "is encrypted, and the monitor has no passphrase to give it"),
    ]
    for cert, key, words in cases:
        line = refused(dict(env, SVC_METRICS_TLS_CERT=str(cert), SVC_METRICS_TLS_KEY=str(key)))
        assert words in line, line
    line = refused(dict(env, SVC_METRICS_TLS_CERT=str(certs.cert)))
    assert "SVC_METRICS_TLS_CERT is set but SVC_METRICS_TLS_KEY is not" in line
    for bad in ("7401", "::1:7401", "0.0.0.0:70000"):
        assert "SVC_METRICS_BIND" in refused(dict(env, SVC_METRICS_BIND=bad))


# ---------------------------------------------------------------- the plain listener, and --allow-remote

def test_start_up_lines_say_what_is_exposed(plain_node):
    text = plain_node.stderr_text()
    assert text.count("WARNING: the scrape listener on http://0.0.0.0:%d speaks plain HTTP off the loopback "
                      "(SVC_METRICS_PLAIN_HTTP=1)" % plain_node.scrape) == 1
    assert "scrape listener on http://0.0.0.0:%d: /metrics and /healthz only; /metrics needs the bearer token of " \
           "%s" % (plain_node.scrape, plain_node.home / ".config/svc/metrics-token") in text
    listening = [line for line in text.splitlines() if "svc-monitor listening on" in line]
    assert len(listening) == 1 and "--allow-remote: every route but /healthz needs the bearer token" in listening[0]
    assert "reverse proxy that adds the header Authorization: Bearer <token>" in listening[0]


def test_metrics_need_the_token_and_carry_the_main_listeners_body(plain_node):
    status, headers, body = plain(plain_node.scrape, "/metrics")
    assert status == 401 and headers["www-authenticate"] == "Bearer" and headers["cache-control"] == "no-store"
    assert b"acct1" not in body and EMAIL.encode() not in body
    status, headers, body = plain(plain_node.scrape, "/metrics", [bearer()])
    assert status == 200 and headers["content-type"].startswith("text/plain") and b'account="acct1"' in body

    def same() -> bool:
        main = plain(plain_node.port, "/metrics", [bearer()])[2]
        return main == plain(plain_node.scrape, "/metrics", [bearer()])[2]
    wait_until(same, timeout=10, message="the same /metrics body on both listeners")
    status, headers, head_body = plain(plain_node.scrape, "/metrics", [bearer()], method="HEAD")
    assert status == 200 and head_body == b"" and int(headers["content-length"]) > 100
    assert plain(plain_node.scrape, "/metrics", method="HEAD")[0] == 401


def test_the_scrape_listener_serves_two_routes_and_two_methods(plain_node):
    status, headers, body = plain(plain_node.scrape, "/healthz")
    assert (status, json.loads(body)) == (200, {"ok": True})  # open, and naming no account, node or version
    assert plain(plain_node.scrape, "/healthz?verbose=1")[0] == 200
    for path in ("/", "/api/accounts", "/api/accounts/stream", "/api/fleet", "/fleet", "/api/openapi.json",
                 "/metrics/", "/static/dashboard.js", "/api/login"):
        for fields in ([], [bearer()]):
            status, _, body = plain(plain_node.scrape, path, fields)
            assert status == 404 and EMAIL.encode() not in body, (path, fields)
    for method in ("POST", "PUT", "DELETE", "OPTIONS"):
        status, headers, _ = plain(plain_node.scrape, "/metrics", [bearer(), "Content-Length: 0"], method=method)
        assert status == 405 and headers["allow"] == "GET, HEAD", method


def test_authorization_headers_a_client_may_send(plain_node):
    port = plain_node.scrape
    ok = [bearer(), "Authorization: bearer " + TOKEN, "Authorization: BEARER  " + TOKEN,
          "Authorization:Bearer " + TOKEN + "  "]
    for field in ok:
        assert plain(port, "/metrics", [field])[0] == 200, field
    basic = base64.b64encode(("prometheus:" + TOKEN).encode()).decode()
    refused_fields = [
        [bearer(TOKEN.upper())], [bearer(TOKEN.swapcase())], [bearer(TOKEN[:-1])], [bearer(TOKEN + "x")],
        ["Authorization: Basic " + basic], ["Authorization: Bearer"], ["Authorization: Bearer "],
        ["Authorization: " + TOKEN], [bearer(), bearer()], [bearer(), "Authorization: Bearer nope"],
        ["Authorization: Bearer nope", bearer()], [bearer("A" * 20000)], ["X-Authorization: Bearer " + TOKEN],
    ]
    for fields in refused_fields:
        status, headers, body = plain(port, "/metrics", fields)
        assert status == 401 and headers["www-authenticate"] == "Bearer", [f[:60] for f in fields]
        assert TOKEN.encode() not in body
    # A header block past the request limits is refused before the check: 431, the connection closed.
    assert plain(port, "/metrics", [bearer("A" * 40000)])[0] == 431


def test_keep_alive_requests_each_pass_the_check(plain_node):
    with socket.create_connection(("127.0.0.1", plain_node.scrape), timeout=10) as sock:
        for fields, status in (([bearer()], 200), ([], 401), ([bearer()], 200), ([bearer(TOKEN.upper())], 401)):
            head = "GET /metrics HTTP/1.1\r\nHost: x\r\n%s\r\n" % "".join(f + "\r\n" for f in fields)
            sock.sendall(head.encode())
            assert read_response(sock)[0] == status


def test_allow_remote_puts_every_route_but_healthz_behind_the_token(plain_node):
    port = plain_node.port
    status, _, body = plain(port, "/healthz")
    assert status == 200 and json.loads(body)["ok"] is True
    for path in ("/", "/api/accounts", "/api/accounts?provider=claude", "/api/advice", "/api/trajectory",
                 "/api/accounts/stream", "/metrics", "/api/fleet", "/api/openapi.json", "/no-such-route"):
        status, headers, body = plain(port, path)
        assert status == 401 and headers["www-authenticate"] == "Bearer", path
        assert EMAIL.encode() not in body
    status, _, body = plain(port, "/api/accounts", [bearer()])
    assert status == 200 and EMAIL in body.decode()
    # The fast lane answers cached reads itself: pipelined on one connection, none may pass unchecked.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /api/accounts HTTP/1.1\r\nHost: x\r\n\r\n" * 4
                     + b"GET /api/accounts HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        replies = read_all(sock)
    assert replies.count(b"HTTP/1.1 401 Unauthorized\r\n") == 5 and b" 200 OK" not in replies


def test_the_token_stays_out_of_logs_environment_arguments_and_replies(plain_node):
    pid = plain_node.pid
    for name in ("environ", "cmdline"):
        with open("/proc/%d/%s" % (pid, name), "rb") as fh:
            assert TOKEN.encode() not in fh.read(), name
    assert TOKEN not in plain_node.stderr_text() + plain_node.stdout_text()
    for path, fields in (("/metrics", []), ("/metrics", [bearer()]), ("/healthz", [bearer()]), ("/x", [bearer()])):
        status, headers, body = plain(plain_node.scrape, path, fields)
        assert TOKEN.encode() not in body and TOKEN not in json.dumps(headers), (path, status)


def test_a_token_file_changed_while_running_counts_from_the_next_start(plain_node):
    path = plain_node.home / ".config" / "svc" / "metrics-token"
    write_token(plain_node.home, b"a-brand-new-token-0123456789\n")
    assert plain(plain_node.scrape, "/metrics", [bearer("a-brand-new-token-0123456789")])[0] == 401
    assert plain(plain_node.scrape, "/metrics", [bearer()])[0] == 200  # the digest read at start-up
    os.chmod(str(path), 0o644)  # a file gone bad meanwhile changes nothing until the next start either
    assert plain(plain_node.scrape, "/metrics", [bearer()])[0] == 200
    write_token(plain_node.home, TOKEN.encode() + b"\r\n")


# ---------------------------------------------------------------- TLS

def test_the_tls_listener_speaks_tls_12_or_later_with_the_token(tls_node, certs):
    assert "TLS 1.2 or later, the certificate valid until" in tls_node.stderr_text()
    assert "speaks plain HTTP" not in tls_node.stderr_text()
    status, headers, body, version = https(tls_node.scrape, "/metrics", certs, {"Authorization": "Bearer " + TOKEN})
    assert status == 200 and b'account="acct1"' in body and version in ("TLSv1.2", "TLSv1.3")
    status, headers, _, _ = https(tls_node.scrape, "/metrics", certs)
    assert status == 401 and headers["www-authenticate"] == "Bearer" and headers["cache-control"] == "no-store"
    assert https(tls_node.scrape, "/healthz", certs)[:1] == (200,)
    assert https(tls_node.scrape, "/api/accounts", certs, {"Authorization": "Bearer " + TOKEN})[0] == 404
    # The main listener stays where it was: the loopback, plain, every route open there.
    assert tls_node.get("/api/accounts")[0] == 200


def test_no_plaintext_answer_on_the_tls_port_and_old_tls_refused(tls_node, certs):
    with socket.create_connection(("127.0.0.1", tls_node.scrape), timeout=10) as sock:
        sock.sendall(get_request("/metrics", "127.0.0.1", [bearer()]))
        try:
            data = read_all(sock)
        except ConnectionResetError:
            data = b""
        assert not data.startswith(b"HTTP/") and TOKEN.encode() not in data
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(str(certs.ca))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # what is tested: that the server refuses it
            old.minimum_version = ssl.TLSVersion.TLSv1
            old.maximum_version = ssl.TLSVersion.TLSv1_1
        old.set_ciphers("DEFAULT:@SECLEVEL=0")
    except (ValueError, ssl.SSLError):
        pytest.skip("this Python's OpenSSL cannot offer TLS 1.1 at all")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with socket.create_connection(("127.0.0.1", tls_node.scrape), timeout=10) as raw:
            with old.wrap_socket(raw, server_hostname="127.0.0.1"):
                pass


def test_a_trickled_or_silent_handshake_holds_no_one_up(tls_node, certs):
    # SVC_MONITOR_REQUEST_TIMEOUT_S=2 for this monitor: the handshake must be done 2 s after the connection.
    silent = socket.create_connection(("127.0.0.1", tls_node.scrape), timeout=10)
    trickle = socket.create_connection(("127.0.0.1", tls_node.scrape), timeout=10)
    try:
        assert https(tls_node.scrape, "/healthz", certs)[0] == 200  # others are served meanwhile
        hello = bytes.fromhex("160301") + b"\x02\x00" + b"\x01" * 40  # a ClientHello that never ends
        started = time.monotonic()
        closed = None
        for byte in hello:
            try:
                trickle.sendall(bytes([byte]))
            except OSError:
                closed = time.monotonic() - started
                break
            trickle.settimeout(0.25)
            try:
                if trickle.recv(1024) == b"":
                    closed = time.monotonic() - started
                    break
            except socket.timeout:
                continue
            except OSError:
                closed = time.monotonic() - started
                break
        assert closed is not None and closed < 8, closed
        silent.settimeout(10)
        try:
            assert silent.recv(1) == b""  # closed, unanswered
        except ConnectionResetError:
            pass
    finally:
        silent.close()
        trickle.close()


# ---------------------------------------------------------------- the token file's life

def test_a_file_swapped_between_its_open_and_its_read_is_not_the_one_read(tmp_path, provider):
    home = new_home(tmp_path, "home")
    write_token(home, TOKEN.encode() + b"\n")
    other = home / "swapped-in"
    other.write_bytes(b"the-other-token-anyone-can-read\n")
    os.chmod(str(other), 0o644)
    env = hooked(dict(clean_env(home), SVC_METRICS_BIND="127.0.0.1:0"), token_swap=str(other))
    with start(env, []) as mon:
        port = scrape_port(mon)[1]
        token_file = home / ".config" / "svc" / "metrics-token"
        assert token_file.read_bytes() == b"the-other-token-anyone-can-read\n" and not other.exists()
        # Every check was made on the descriptor the token was read from: the file opened, not the one now there.
        assert plain(port, "/metrics", [bearer()])[0] == 200
        assert plain(port, "/metrics", [bearer("the-other-token-anyone-can-read")])[0] == 401


def test_on_the_loopback_the_token_is_asked_for_only_when_its_file_exists(tmp_path):
    home = new_home(tmp_path, "home")
    env = dict(clean_env(home), SVC_METRICS_BIND="127.0.0.1:0")
    with start(env, []) as mon:
        port = scrape_port(mon)[1]
        assert "/metrics open (the loopback, and no token file at" in mon.stderr_text()
        assert "WARNING" not in mon.stderr_text()
        assert plain(port, "/metrics")[0] == 200
    write_token(home, TOKEN.encode())
    with start(env, []) as mon:
        port = scrape_port(mon)[1]
        assert plain(port, "/metrics")[0] == 401 and plain(port, "/metrics", [bearer()])[0] == 200
    _make_bad_token(home, "mode 0644")  # one that exists is judged, on the loopback too
    assert "mode 0644" in refused(env)


# ---------------------------------------------------------------- init and the doctor

def test_init_makes_the_token_file_and_never_shows_or_overwrites_it(tmp_path):
    home = new_home(tmp_path, "home")
    env = clean_env(home)
    done = cli(env, "monitor", "init", "--metrics-token", "--host-name", "node-a")
    assert done.returncode == 0, done.stderr
    path = home / ".config" / "svc" / "metrics-token"
    token = path.read_text().strip()
    assert path.stat().st_mode & 0o777 == 0o600 and len(token) >= 43 and path.read_text().count("\n") == 1
    assert token not in done.stdout + done.stderr
    assert "created     %s  (metrics token: mode 0600" % path in done.stdout
    assert "authorization.credentials_file" in done.stdout and "/etc/prometheus/svc-metrics-token" in done.stdout
    assert "ssh THIS-NODE cat .config/svc/metrics-token | sudo install -m 0640" in done.stdout
    again = cli(env, "monitor", "init", "--metrics-token", "--json")
    report = json.loads(again.stdout)
    assert path.read_text().strip() == token and token not in again.stdout
    assert [i["detail"] for i in report["leftAlone"] if i["what"] == "metrics token"] == [
        "exists (never overwritten); the monitor accepts it"]
    # A link planted there is neither followed nor replaced.
    path.unlink()
    target = home / "target"
    target.write_text("untouched\n")
    os.symlink(str(target), str(path))
    done = cli(env, "monitor", "init", "--metrics-token")
    assert done.returncode == 0 and target.read_text() == "untouched\n" and path.is_symlink()
    assert "is a symbolic link" in done.stdout
    # The token init made is one the monitor takes.
    path.unlink()
    assert cli(env, "monitor", "init", "--metrics-token").returncode == 0
    with start(dict(env, SVC_METRICS_BIND="127.0.0.1:0"), []) as mon:
        assert plain(scrape_port(mon)[1], "/metrics", [bearer(path.read_text().strip())])[0] == 200


def _doctor(monkeypatch, capsys, env: Dict[str, str]) -> Dict[str, Dict[str, str]]:
    code, out, _ = run_inproc(monkeypatch, capsys, env, "doctor", "--json")
    return {c["name"]: c for c in json.loads(out)["checks"]}


def test_the_doctor_checks_the_token_file_and_the_scrape_tls(tmp_path, certs, monkeypatch, capsys):
    home = new_home(tmp_path, "home")
    env = clean_env(home)
    checks = _doctor(monkeypatch, capsys, env)
    assert (checks["metrics-token"]["status"], checks["scrape-tls"]["status"]) == ("INFO", "INFO")
    remote = dict(env, SVC_METRICS_BIND="0.0.0.0:7401")
    checks = _doctor(monkeypatch, capsys, remote)
    assert checks["metrics-token"]["status"] == "FAIL" and "svc-monitor init --metrics-token" in \
        checks["metrics-token"]["detail"]
    assert checks["scrape-tls"]["status"] == "FAIL" and "refuses to start" in checks["scrape-tls"]["detail"]
    write_token(home, TOKEN.encode() + b"\n", 0o640)
    checks = _doctor(monkeypatch, capsys, dict(remote, SVC_METRICS_PLAIN_HTTP="1"))
    assert checks["metrics-token"]["status"] == "FAIL" and "mode 0640" in checks["metrics-token"]["detail"]
    assert checks["scrape-tls"]["status"] == "WARN" and "plain HTTP off the loopback" in checks["scrape-tls"]["detail"]
    os.chmod(str(home / ".config" / "svc" / "metrics-token"), 0o600)
    tls = dict(remote, SVC_METRICS_TLS_CERT=str(certs.cert), SVC_METRICS_TLS_KEY=str(certs.key))
    checks = _doctor(monkeypatch, capsys, tls)
    assert checks["metrics-token"]["status"] == "PASS" and TOKEN not in json.dumps(checks)
    assert checks["scrape-tls"]["status"] == "PASS" and "match; valid until" in checks["scrape-tls"]["detail"]
    for cert, key, status, words in ((certs.short, certs.key, "WARN", "renew it"),
                                     (certs.expired, certs.key, "FAIL", "expired on 2020-01-02"),
                                     (certs.cert, certs.other_key, "FAIL", "is not the key of the certificate")):
        check = _doctor(monkeypatch, capsys, dict(tls, SVC_METRICS_TLS_CERT=str(cert),
                                                  SVC_METRICS_TLS_KEY=str(key)))["scrape-tls"]
        assert check["status"] == status and words in check["detail"], check
    os.chmod(str(certs.key), 0o644)
    try:
        check = _doctor(monkeypatch, capsys, tls)["scrape-tls"]
        assert check["status"] == "WARN" and "readable by every user" in check["detail"]
    finally:
        os.chmod(str(certs.key), 0o600)
