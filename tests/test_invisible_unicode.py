"""Invisible Unicode never reaches the terminal: the status line and the HUD, as real
children, against a monitor stand-in that puts every kind of invisible character in
the words they show; and the agent's own payload cannot print a percentage outside 0..100."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import unicodedata
from typing import Any, Dict

from tests.support.home import clean_env
from tests.support.rawserver import RawServer, http_reply

# Right-to-left and other bidi overrides and isolates, zero-width space, joiner and
# non-joiner, word joiner, BOM, soft hyphen, an Arabic number sign, a tag character,
# and the line and paragraph separators.
INVISIBLE = "\u202e\u202a\u2066\u2069\u200b\u200c\u200d\u2060\ufeff\u00ad\u0600\U000e0041\u2028\u2029"
SLOW = {"SVC_STATUSLINE_BUDGET_MS": "5000"}


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".000Z"


def _posture() -> Dict[str, Any]:
    now = int(time.time() * 1000)
    active = {"label": "ac" + INVISIBLE + "ct1", "email": "a" + INVISIBLE + "@x.io", "active": True,
              "overallStatus": "allowed", "representativeClaim": "five_hour", "bindingWindow": "five_hour",
              "bindingStatus": "allowed",
              "fiveHour": {"pct": 85.0, "resetsAt": _iso(now + 2 * 3600_000), "status": "allowed_warning"},
              "sevenDay": {"pct": 41.0, "resetsAt": _iso(now + 3 * 86400_000), "status": "allowed"}, "error": None}
    return {"available": True, "node": "n" + INVISIBLE + "1", "generatedAt": _iso(now), "probedAt": now,
            "cached": True, "status": "rejected", "active": active, "accounts": [active],
            "siblingWithHeadroom": {"label": "ev" + INVISIBLE + "il", "email": "b@x.io"}}


def _invisible(text: str) -> list:
    return [hex(ord(ch)) for ch in text if unicodedata.category(ch) in ("Cf", "Zl", "Zp", "Cc") and ch != "\x1b"
            and ch != "\n"]


def _run(env: Dict[str, str], *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "svcposture", "monitor", *args], env=env, input=stdin,
                          capture_output=True, timeout=30)


def test_statusline_drops_format_characters_and_separators(tmp_path):
    with RawServer({"/api/accounts": http_reply(200, _posture())}) as server:
        proc = _run(dict(clean_env(tmp_path), **SLOW), "statusline", "--url", server.url, "--no-color")
    assert proc.returncode == 0 and proc.stderr == b"", proc
    out = proc.stdout.decode("utf-8")
    assert out.count("\n") == 1 and _invisible(out) == [], ascii(out)
    assert out.startswith("ac??ct1 5h 85% ") and "ev??il" in out, ascii(out)


def test_hud_drops_format_characters_and_separators(tmp_path):
    with RawServer({"/api/accounts": http_reply(200, _posture()),
                    "/api/trajectory": http_reply(404, {"error": "not_found"})}) as server:
        proc = _run(clean_env(tmp_path), "hud", "--once", "--url", server.url)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode("utf-8")
    assert _invisible(out) == [], ascii(out)
    assert out.startswith("svc n??1 | ac??ct1 <a??@x.io> | REJECTED") and "switch to ev??il" in out, ascii(out)


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "http://127.0.0.1:%d" % s.getsockname()[1]


def test_the_payload_fallback_writes_percentages_as_every_surface_does(tmp_path):
    # Past the limit `100%+`, as the pages, HUD and guard write it; nothing below 0.
    now = time.time()
    payload = {"rate_limits": {"five_hour": {"used_percentage": 250.5, "resets_at": int(now + 3 * 3600 + 300)},
                               "seven_day": {"used_percentage": -5, "resets_at": int(now + 4 * 86400 + 300)}}}
    proc = _run(clean_env(tmp_path), "statusline", "--url", _dead_url(), "--no-color",
                stdin=json.dumps(payload).encode())
    assert proc.returncode == 0 and proc.stderr == b""
    out = proc.stdout.decode()
    assert out.startswith("5h 100%+ 3h ") and "| 7d 0% 4d (local)" in out, out
    assert "-5%" not in out and "250" not in out
