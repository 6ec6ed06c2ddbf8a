"""svc-monitor hud: the posture strip in a terminal, one line updated in place."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable, Dict, IO, Iterator, Mapping, Optional, Sequence, Tuple

from .._files import read_json
from .._text import printable
from .._time import now_ms, parse_iso_ms
from ..errors import SvcpostureError
from ..paths import Paths

DEFAULT_URL = "http://127.0.0.1:7400"
READ_TIMEOUT_S = 60.0  # well above the 15 s keepalive: silence this long means a dead stream

_COLOURS = {"ok": "32", "degraded": "33", "rejected": "1;31", "error": "35", "unknown": "90",
            "unavailable": "90"}


class HudError(SvcpostureError, OSError):
    """The monitor could not be reached or answered something that is not a posture."""


def default_url(paths: Paths) -> str:
    """The running monitor's URL from ~/svc/run/monitor.json, else the default."""
    try:
        record = read_json(paths.monitor_json)
    except (ValueError, OSError):
        record = None
    if isinstance(record, dict) and isinstance(record.get("url"), str) and record["url"].startswith("http"):
        return record["url"]
    return DEFAULT_URL


def duration(ms: float) -> str:
    if ms <= 0:
        return "now"
    s = int(ms // 1000)
    d, h, m = s // 86400, s % 86400 // 3600, s % 3600 // 60
    if d:
        return "%dd%dh" % (d, h)
    if h:
        return "%dh%02dm" % (h, m)
    if m:
        return "%dm" % m
    return "%ds" % s


def _window(name: str, view: Any, now: int) -> str:
    if not isinstance(view, dict):
        return "%s —" % name
    pct = view.get("pct")
    text = "%s %s" % (name, ("%g%%" % pct) if isinstance(pct, (int, float)) and not isinstance(pct, bool) else "—")
    stamp = view.get("resetsAt")
    if isinstance(stamp, str):
        try:
            text += " (%s)" % duration(parse_iso_ms(stamp) - now)
        except ValueError:
            pass
    return text


def format_line(body: Any, colour: bool = False, now: Optional[int] = None) -> str:
    """One HUD line for a posture body (or the disabled body)."""
    now = now_ms() if now is None else now
    if not isinstance(body, dict):
        return "svc: no posture"
    node = str(body.get("node") or "?")
    if body.get("available") is not True:
        status, text = "unavailable", "svc %s: posture unavailable" % node
        return _paint(text, status, colour)
    status = str(body.get("status") or "unknown")
    active = body.get("active") if isinstance(body.get("active"), dict) else None
    parts = ["svc %s" % node]
    if active:
        who = str(active.get("label") or "?")
        if active.get("email"):
            who += " <%s>" % active["email"]
        parts.append(who)
    else:
        parts.append("no active account")
    parts.append(status.upper())
    if active:
        parts.append(_window("5h", active.get("fiveHour"), now))
        parts.append(_window("7d", active.get("sevenDay"), now))
    if status == "rejected":
        sibling = body.get("siblingWithHeadroom")
        if isinstance(sibling, dict) and sibling.get("label"):
            parts.append("EXHAUSTED -> switch to %s%s" % (
                sibling["label"], " <%s>" % sibling["email"] if sibling.get("email") else ""))
        else:
            parts.append("EXHAUSTED, no sibling with headroom")
    error = body.get("error") or (active or {}).get("error")
    if isinstance(error, dict) and error.get("kind"):
        parts.append("error: %s" % error["kind"])
    return _paint(" | ".join(parts), status, colour)


def _paint(text: str, status: str, colour: bool) -> str:
    # C0, DEL and C1 controls from a hostile or broken monitor must never reach the
    # terminal: an escape sequence in a label could rewrite the operator's screen.
    text = printable(text)
    if not colour:
        return text
    return "\x1b[%sm%s\x1b[0m" % (_COLOURS.get(status, "0"), text)


def use_colour(stream: IO[str], environ: Mapping[str, str]) -> bool:
    return "NO_COLOR" not in environ and hasattr(stream, "isatty") and stream.isatty()


def _open(url: str, timeout: float, headers: Optional[Dict[str, str]] = None) -> Any:
    import urllib.request
    # Loopback must never be routed through an HTTP proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers=headers or {})
    return opener.open(request, timeout=timeout)


def fetch_once(base: str, timeout: float = 20.0) -> Dict[str, Any]:
    import http.client
    import urllib.error
    try:
        with _open(base.rstrip("/") + "/api/accounts", timeout) as resp:
            raw = resp.read(4 * 1024 * 1024)
    except urllib.error.HTTPError as exc:
        raise HudError("monitor answered HTTP %d" % exc.code) from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise HudError("cannot reach the monitor at %s: %s" % (base, getattr(exc, "reason", exc))) from None
    try:
        body = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise HudError("the monitor at %s did not answer JSON" % base) from None
    if not isinstance(body, dict):
        raise HudError("the monitor at %s answered something that is not a posture" % base)
    return body


def iter_sse(lines: Iterator[bytes]) -> Iterator[Tuple[str, str, Optional[str], Optional[int]]]:
    """(event, data, id, retry) per dispatched event, per the WHATWG parsing rules."""
    event, data, last_id, retry = "", [], None, None  # type: str, List[str], Optional[str], Optional[int]
    first = True
    for raw in lines:
        line = raw.decode("utf-8", "replace")
        if first:
            line = line.lstrip("\ufeff")
            first = False
        line = line.rstrip("\r\n")
        if line == "":
            if data:
                yield (event or "message", "\n".join(data), last_id, retry)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            if "\0" not in value:
                last_id = value
        elif field == "retry":
            if value.isdigit():
                retry = int(value)


def stream_bodies(base: str) -> Iterator[Dict[str, Any]]:
    resp = _open(base.rstrip("/") + "/api/accounts/stream", READ_TIMEOUT_S, {"Accept": "text/event-stream"})
    with resp:
        # Bounded lines: a broken server cannot grow one line without end.
        for event, data, _id, _retry in iter_sse(iter(lambda: resp.readline(MAX_SSE_LINE), b"")):
            if event != "account":
                continue
            try:
                body = json.loads(data)
            except ValueError:
                continue
            if isinstance(body, dict):
                yield body


MAX_SSE_LINE = 1024 * 1024


def run(base: str, out: IO[str], colour: bool, tty: bool,
        sleep: Callable[[float], None] = time.sleep) -> int:
    import http.client
    backoff = 1.0
    shown = ""
    while True:
        try:
            for body in stream_bodies(base):
                backoff = 1.0
                line = format_line(body, colour)
                if tty:
                    out.write("\r\x1b[2K" + line)
                elif line != shown:
                    out.write(line + "\n")
                shown = line
                out.flush()
        except (OSError, ValueError, http.client.HTTPException) as exc:
            message = printable("svc: monitor unreachable at %s (%s); retrying"
                                % (base, getattr(exc, "reason", exc)))
            if tty:
                out.write("\r\x1b[2K" + _paint(message, "unknown", colour))
            elif message != shown:
                out.write(message + "\n")
            shown = message
            out.flush()
        sleep(backoff)
        backoff = min(backoff * 2, 30.0)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="svc-monitor hud",
        description=("One terminal line with this node's account posture (active account, status, "
                     "5h/7d utilization with reset countdowns, exhausted banner), updated in place "
                     "from the monitor's SSE stream. Colour is off when stdout is not a TTY or NO_COLOR is set."))
    parser.add_argument("--url", default=None,
                        help="monitor base URL (default: the url in ~/svc/run/monitor.json, else %s)" % DEFAULT_URL)
    parser.add_argument("--once", action="store_true", help="print one line from a plain read and exit")
    args = parser.parse_args(argv)
    base = args.url or default_url(Paths())
    if not base.startswith(("http://", "https://")):
        print("svc-monitor hud: --url must start with http:// or https://", file=sys.stderr)
        return 2
    out = sys.stdout
    tty = hasattr(out, "isatty") and out.isatty()
    colour = use_colour(out, os.environ)
    if args.once:
        try:
            body = fetch_once(base)
        except HudError as exc:
            print(printable("svc-monitor hud: %s" % exc), file=sys.stderr)
            return 1
        out.write(format_line(body, colour) + "\n")
        return 0
    try:
        return run(base, out, colour, tty)
    except KeyboardInterrupt:
        if tty:
            out.write("\n")
        return 0
