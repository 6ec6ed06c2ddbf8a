"""Fuzz the HUD, the monitor's own client: posture bodies, SSE bytes, and whole
replies from a broken or hostile server. It must never crash, never hang, and
never copy a control character from the wire onto the operator's terminal."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.home import REPO, clean_env
from svcposture.term import hud

PURE = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
PROC = settings(max_examples=10, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

nasty_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["\x1b[2J", "\x1b]0;pwned\x07", "\r", "\n", "line1\nline2", "\x00", "\u202e", "\x9b31m",
                     "acct1", "ok", "rejected"]),
)
leaf = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 15, 10 ** 15), st.floats(allow_nan=True),
                 nasty_text, st.sampled_from(["2030-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z",
                                              "0001-01-01T00:00:00Z", "2030-02-30T00:00:00Z"]))
json_value = st.recursive(leaf, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=8), kids, max_size=3)), max_leaves=15)
window = st.one_of(leaf, st.fixed_dictionaries({}, optional={"pct": leaf, "resetsAt": leaf, "status": leaf}))
account = st.one_of(leaf, st.fixed_dictionaries({}, optional={
    "label": nasty_text, "email": nasty_text, "fiveHour": window, "sevenDay": window,
    "error": st.one_of(leaf, st.fixed_dictionaries({"kind": nasty_text}))}))
body = st.one_of(json_value, st.fixed_dictionaries({}, optional={
    "available": st.one_of(st.just(True), leaf), "node": nasty_text, "status": nasty_text,
    "active": account, "siblingWithHeadroom": account, "error": st.one_of(
        leaf, st.fixed_dictionaries({"kind": nasty_text}))}))


def _control_free(line: str) -> bool:
    return not any((ord(c) < 32 or 0x7f <= ord(c) < 0xa0) for c in line)


@PURE
@given(data=body)
def test_format_line_never_fails_and_prints_no_control_characters(data: Any) -> None:
    line = hud.format_line(data, colour=False, now=1_800_000_000_000)
    assert isinstance(line, str)
    assert _control_free(line), repr(line)
    coloured = hud.format_line(data, colour=True, now=1_800_000_000_000)
    # Colour adds at most one SGR sequence in front and one reset at the end.
    inner = coloured
    if inner.startswith("\x1b[") and inner.endswith("\x1b[0m"):
        inner = inner[inner.index("m") + 1:-len("\x1b[0m")]
    assert _control_free(inner), repr(coloured)


@PURE
@given(chunks=st.lists(st.one_of(st.binary(max_size=40), st.sampled_from([
    b"event: account\n", b"data: {}\n", b"\n", b"\r\n", b": keepalive\n", b"id: 1\x00\n", b"retry: x\n",
    b"\xef\xbb\xbfdata: x\n", b"data\n", b"event:account\r\n", b"data:  two spaces\n"])), max_size=20))
def test_sse_parser_accepts_any_bytes(chunks: List[bytes]) -> None:
    lines = b"".join(chunks).splitlines(keepends=True)
    for event, data, last_id, retry in hud.iter_sse(iter(lines)):
        assert isinstance(event, str) and isinstance(data, str) and event
        assert last_id is None or "\0" not in last_id
        assert retry is None or retry >= 0


class _Hostile(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.reply: bytes = b""
        super().__init__(("127.0.0.1", 0), _HostileHandler)
        self.url = "http://127.0.0.1:%d" % self.server_address[1]


class _HostileHandler(BaseHTTPRequestHandler):
    server: _Hostile

    def log_message(self, *args: Any) -> None:
        pass

    def handle(self) -> None:
        # Read the request line and headers, then write the raw reply verbatim.
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        try:
            self.wfile.write(self.server.reply)
        except OSError:
            pass


_servers: Dict[str, _Hostile] = {}
_lock = threading.Lock()


def hostile() -> _Hostile:
    with _lock:
        if "s" not in _servers:
            server = _Hostile()
            threading.Thread(target=server.serve_forever, daemon=True).start()
            _servers["s"] = server
        return _servers["s"]


reply_bodies = st.one_of(body.map(lambda b: json.dumps(b).encode()), st.binary(max_size=100))
replies = st.one_of(
    st.tuples(st.sampled_from([b"200 OK", b"404 Not Found", b"500 Oops", b"301 Moved", b"200"]), reply_bodies,
              st.booleans()).map(lambda t: b"HTTP/1.1 " + t[0] + b"\r\nContent-Type: application/json\r\n" + (
                  b"Content-Length: %d\r\n" % len(t[1]) if t[2] else b"") + b"Connection: close\r\n\r\n" + t[1]),
    st.binary(max_size=200),
)


@PROC
@given(reply=replies)
def test_hud_once_against_a_hostile_server(reply: bytes) -> None:
    server = hostile()
    server.reply = reply
    import tempfile
    from pathlib import Path
    home = Path(tempfile.mkdtemp(prefix="svcfuzz-"))
    env = clean_env(home)
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--url", server.url, "--once"],
                          cwd=str(REPO), env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert proc.returncode in (0, 1), (proc.returncode, out, err)
    if proc.returncode == 0:
        assert out.endswith("\n") and out.count("\n") == 1 and _control_free(out[:-1]), repr(out)
    else:
        assert err.startswith("svc-monitor hud: ") and out == "", (out, err)
        assert _control_free(err.rstrip("\n")), repr(err)
