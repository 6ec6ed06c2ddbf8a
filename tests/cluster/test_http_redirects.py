"""A service this node talks to with a token never gets the token sent on by a redirect.

urllib follows a 301/302/303 by re-sending the request, Authorization header
included, to wherever Location points. A tracker (or anything in front of it)
answering with a redirect to another host would so receive the node's bearer
token. Every exchange under a Deadline refuses to follow.
"""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from svcposture.cluster import tracker
from tests.support.home import BEARER


class _Recorder(BaseHTTPRequestHandler):
    seen: list = []

    def _any(self) -> None:
        self.seen.append((self.command, self.path, self.headers.get("Authorization")))
        body = b'{"data": {"issue": null}}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _any

    def log_message(self, *args) -> None:
        pass


def _serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirecting_tracker_never_forwards_the_token(code):
    _Recorder.seen = []
    elsewhere = _serve(_Recorder)
    target = "http://127.0.0.1:%d/steal" % elsewhere.server_address[1]

    class _Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(code)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    front = _serve(_Redirect)
    try:
        client = tracker.TrackerClient("http://127.0.0.1:%d/graphql" % front.server_address[1],
                                       tracker.TrackerAuth(BEARER, "bot"), timeout=5.0)
        with pytest.raises(tracker.TrackerError):
            client.fetch_issue("OPS-1")
    finally:
        front.shutdown()
        elsewhere.shutdown()
    assert _Recorder.seen == [], "the redirect was followed: %r" % (_Recorder.seen,)
