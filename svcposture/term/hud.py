"""svc-monitor hud: the posture strip in a terminal, one line updated in place."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable, Dict, IO, Iterator, Mapping, Optional, Sequence, Tuple

from .._text import loads_bounded, printable
from .._time import now_ms
from ..errors import SvcpostureError
from ..paths import Paths
from ..settings import DEFAULT_PORT, MONITOR_START_HINT, MONITOR_URL_RULE, monitor_url, terminal_columns
from ..vendors import DEFAULT_PROVIDER, provider_names, with_provider
from . import line

DEFAULT_URL = "http://127.0.0.1:%d" % DEFAULT_PORT
READ_TIMEOUT_S = 60.0  # well above the 15 s keepalive: silence this long means a dead stream
TRAJECTORY_TIMEOUT_S = 5.0


class HudError(SvcpostureError, OSError):
    """The monitor could not be reached or answered something that is not a posture."""


def default_url(paths: Paths) -> str:
    """Where every client looks without --url (settings.monitor_url)."""
    return monitor_url(paths.environ)


def format_line(body: Any, colour: bool = False, now: Optional[int] = None, trajectory: Any = None,
                stale_ms: Optional[int] = None, advice: Any = None, width: Optional[int] = None) -> str:
    """One HUD line for a posture body (or the disabled body) and, when the monitor
    has them, its trajectory body (the forecast) and advice, in at most `width` columns;
    see line.hud_line."""
    return line.hud_line(body, trajectory, colour=colour, now=now_ms() if now is None else now,
                         stale_ms=stale_ms, advice=advice, width=width)


def use_colour(stream: IO[str], environ: Mapping[str, str]) -> bool:
    return "NO_COLOR" not in environ and hasattr(stream, "isatty") and stream.isatty()


def _open(url: str, timeout: float, headers: Optional[Dict[str, str]] = None) -> Any:
    import urllib.request
    # Loopback must never be routed through an HTTP proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers=headers or {})
    return opener.open(request, timeout=timeout)


def _read_once(url: str, timeout: float, limit: int) -> bytes:
    """At most `limit` bytes of the body at `url`, the whole exchange within `timeout`:
    a monitor (or something else on its port) that trickles cannot hold the HUD."""
    import urllib.request

    from .._http import Deadline
    with Deadline(timeout) as deadline:
        # Never through a proxy from the environment: the monitor is this node's own.
        with deadline.open(urllib.request.Request(url), urllib.request.ProxyHandler({})) as resp:
            return deadline.read(resp, limit)


def accounts_path(provider: str = DEFAULT_PROVIDER) -> str:
    """The posture route of a vendor: the default vendor's is the contract's, unchanged (docs/codex.md)."""
    return with_provider("/api/accounts", provider)


def fetch_once(base: str, timeout: float = 20.0, provider: str = DEFAULT_PROVIDER) -> Dict[str, Any]:
    import http.client
    import urllib.error
    try:
        raw = _read_once(base.rstrip("/") + accounts_path(provider), timeout, 4 * 1024 * 1024)
    except urllib.error.HTTPError as exc:
        raise HudError("monitor answered HTTP %d" % exc.code) from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise HudError("cannot reach the monitor at %s: %s; %s" % (base, getattr(exc, "reason", exc),
                                                                   MONITOR_START_HINT)) from None
    try:
        body = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise HudError("the monitor at %s did not answer JSON" % base) from None
    if not isinstance(body, dict):
        raise HudError("the monitor at %s answered something that is not a posture" % base)
    return body


def fetch_trajectory(base: str, timeout: float = TRAJECTORY_TIMEOUT_S,
                     path: str = "/api/trajectory") -> Optional[Dict[str, Any]]:
    """The monitor's /api/trajectory body (docs/trajectory.md), or None: a monitor without the
    route (404), an error or anything that is not a JSON object means no forecast."""
    import http.client
    try:
        raw = _read_once(base.rstrip("/") + path, timeout, MAX_TRAJECTORY + 1)
        body = loads_bounded(raw, MAX_TRAJECTORY)
    except (OSError, ValueError, http.client.HTTPException):
        return None
    return body if isinstance(body, dict) else None


def fetch_advice(base: str, provider: str = DEFAULT_PROVIDER) -> Optional[Dict[str, Any]]:
    """The monitor's /api/advice body (docs/steering.md), or None (a monitor without it: the
    strip names siblingWithHeadroom instead)."""
    return fetch_trajectory(base, path=with_provider("/api/advice", provider))


def fetch_login(base: str, timeout: float = TRAJECTORY_TIMEOUT_S) -> Optional[Dict[str, Any]]:
    """The monitor's /api/login body (this machine's Claude Code login, docs/first-look.md), or
    None: a monitor without the route, an error or anything not a JSON object."""
    import http.client
    try:
        raw = _read_once(base.rstrip("/") + "/api/login", timeout, 64 * 1024 + 1)
        body = loads_bounded(raw, 64 * 1024)
    except (OSError, ValueError, http.client.HTTPException):
        return None
    return body if isinstance(body, dict) else None


def _wants_login(body: Mapping[str, Any], provider: str) -> bool:
    # The login view (GET /api/login) stands in for the default vendor's posture only.
    return provider == DEFAULT_PROVIDER and body.get("available") is False


def _wants_trajectory(body: Mapping[str, Any]) -> bool:
    return body.get("available") is True and isinstance(body.get("active"), dict)


def iter_sse(lines: Iterator[bytes], comments: bool = False
             ) -> Iterator[Tuple[str, str, Optional[str], Optional[int]]]:
    """(event, data, id, retry) per dispatched event, per the WHATWG parsing rules.

    With `comments`, each comment line also comes out, as ("", text, id, retry): a
    keepalive says the stream is alive even when no frame comes."""
    event, data, last_id, retry = "", [], None, None  # type: str, List[str], Optional[str], Optional[int]
    first = True
    for raw in lines:
        text = raw.decode("utf-8", "replace")
        if first:
            text = text.lstrip("\ufeff")
            first = False
        text = text.rstrip("\r\n")
        if text == "":
            if data:
                yield (event or "message", "\n".join(data), last_id, retry)
            event, data = "", []
            continue
        if text.startswith(":"):
            if comments:
                yield ("", text[1:].strip(), last_id, retry)
            continue
        field, colon, value = text.partition(":")
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


def stream_bodies(base: str, provider: str = DEFAULT_PROVIDER) -> Iterator[Optional[Dict[str, Any]]]:
    """Each `account` body of the stream, and None for each keepalive comment."""
    path = accounts_path(provider).replace("/api/accounts", "/api/accounts/stream", 1)
    resp = _open(base.rstrip("/") + path, READ_TIMEOUT_S, {"Accept": "text/event-stream"})
    with resp:
        # Bounded lines: a broken server cannot grow one line without end.
        for event, data, _id, _retry in iter_sse(iter(lambda: resp.readline(MAX_SSE_LINE), b""), comments=True):
            if event == "":
                yield None
                continue
            if event != "account":
                continue
            try:
                body = json.loads(data)
            except ValueError:
                continue
            if isinstance(body, dict):
                yield body


MAX_SSE_LINE = 1024 * 1024
MAX_TRAJECTORY = 4 * 1024 * 1024


# On a terminal the strip is drawn again this often, so its countdowns tick between readings.
TICK_S = 1.0


class Strip:
    """What the HUD shows: the newest bodies of the monitor, or why it has none, drawn as one line.

    On a terminal the line is rewritten in place, fitted to its width (the email goes first, then
    the clock times), at every change and every TICK_S: each countdown counts from its resetsAt,
    so it moves between readings and an old probe turns stale without a frame. Piped output gets
    one line per change of what a frame says."""

    def __init__(self, out: IO[str], colour: bool, tty: bool, stale_ms: Optional[int],
                 columns: Callable[[], Optional[int]]) -> None:
        import threading
        self.out, self.colour, self.tty, self.stale_ms, self.columns = out, colour, tty, stale_ms, columns
        self._lock = threading.Lock()
        self._bodies: Optional[Tuple[Any, Any, Any, Any]] = None  # posture, trajectory, advice, login
        self._message: Optional[str] = None
        self._shown = ""

    def text(self) -> str:
        width = self.columns()
        # One column short of the width: a line that fills the last column wraps on some terminals.
        width = max(20, width - 1) if width is not None and self.tty else width
        if self._message is not None:
            return line.paint(self._message[:width] if width else self._message, "unknown", self.colour)
        if self._bodies is None:
            return ""
        body, trajectory, advice, login = self._bodies
        return (line.login_line(login, hud=True, colour=self.colour, width=width) if login is not None else None) \
            or format_line(body, self.colour, trajectory=trajectory, stale_ms=self.stale_ms, advice=advice,
                           width=width)

    def show(self, bodies: Optional[Tuple[Any, Any, Any, Any]] = None, message: Optional[str] = None) -> None:
        with self._lock:
            self._bodies = bodies if bodies is not None else self._bodies
            self._message = message
            self._draw()

    def tick(self) -> None:
        with self._lock:
            if self.tty and (self._bodies is not None or self._message is not None):
                self._draw()

    def _draw(self) -> None:
        text = self.text()
        if self.tty:
            self.out.write("\r\x1b[2K" + text)
        elif text != self._shown:
            self.out.write(text + "\n")
        self._shown = text
        self.out.flush()


def _bodies(base: str, body: Dict[str, Any], provider: str) -> Tuple[Any, Any, Any, Any]:
    """The posture body with what the strip shows beside it: the trajectory and the advice, or
    this machine's login when the posture is unavailable."""
    wanted = _wants_trajectory(body)
    return (body, fetch_trajectory(base) if wanted else None, fetch_advice(base, provider) if wanted else None,
            fetch_login(base) if _wants_login(body, provider) else None)


def run(base: str, out: IO[str], colour: bool, tty: bool, stale_ms: Optional[int] = None,
        sleep: Callable[[float], None] = time.sleep, provider: str = DEFAULT_PROVIDER,
        columns: Callable[[], Optional[int]] = lambda: None) -> int:
    """Draw the strip from the stream until interrupted, reconnecting with backoff."""
    import http.client
    import threading
    strip = Strip(out, colour, tty, stale_ms, columns)
    stop = threading.Event()
    ticker = threading.Thread(target=lambda: _tick(strip, stop), name="hud-tick", daemon=True)
    ticker.start()
    backoff = 1.0
    try:
        while True:
            try:
                for item in stream_bodies(base, provider):
                    if item is not None:
                        backoff = 1.0
                        strip.show(_bodies(base, item, provider))
            except (OSError, ValueError, http.client.HTTPException) as exc:
                strip.show(message=printable("svc: no monitor answers at %s (%s); %s; retrying"
                                             % (base, getattr(exc, "reason", exc), MONITOR_START_HINT)))
            sleep(backoff)
            backoff = min(backoff * 2, 30.0)
    finally:
        stop.set()


def _tick(strip: Strip, stop: Any) -> None:
    while not stop.wait(TICK_S):
        try:
            strip.tick()
        except (OSError, ValueError):
            return  # the terminal went away; the stream loop ends the command


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="svc-monitor hud",
        description=("One terminal line with this node's account posture (active account, status, "
                     "5h/7d utilization with reset countdowns and local reset times, the wall forecast "
                     "when it beats the reset, exhausted banner), updated in place from the monitor's SSE "
                     "stream. A probe older than twice $SVC_PROBE_INTERVAL_S (default 300 s) is shown "
                     "as stale with its age. Colour is off when stdout is not a TTY or NO_COLOR is set."))
    parser.add_argument("--url", default=None,
                        help="monitor base URL (default: %s)" % MONITOR_URL_RULE)
    parser.add_argument("--once", action="store_true", help="print one line from a plain read and exit")
    parser.add_argument("--provider", choices=provider_names(), default=DEFAULT_PROVIDER,
                        help="whose accounts: %s (default %s)" % (" or ".join(provider_names()), DEFAULT_PROVIDER))
    args = parser.parse_args(argv)
    base = args.url or default_url(Paths())
    if not base.startswith(("http://", "https://")):
        print("svc-monitor hud: --url must start with http:// or https://", file=sys.stderr)
        return 2
    out = sys.stdout
    tty = hasattr(out, "isatty") and out.isatty()
    colour = use_colour(out, os.environ)
    stale_ms = line.stale_after_ms(os.environ)

    def columns() -> Optional[int]:
        # Asked at every draw: a terminal resized under the strip gets the new width.
        try:
            return terminal_columns(os.environ, out.fileno())
        except (AttributeError, OSError, ValueError):
            return None
    if args.once:
        try:
            body = fetch_once(base, provider=args.provider)
        except HudError as exc:
            print(printable("svc-monitor hud: %s" % exc), file=sys.stderr)
            return 1
        strip = Strip(out, colour, False, stale_ms, columns)
        strip.show(_bodies(base, body, args.provider))
        return 0
    try:
        return run(base, out, colour, tty, stale_ms, provider=args.provider, columns=columns)
    except KeyboardInterrupt:
        if tty:
            out.write("\n")
        return 0
