"""svc-monitor statusline: this node's posture in the coding agent's own status line (docs/monitor.md).

The agent runs the command on every render, so it asks the local monitor (a
plain cached read, never the provider) and gives up after a fixed budget:

1. GET /api/accounts, then GET /api/trajectory for the forecast (a 404 or
   any failure means no forecast), on one deadline 250 ms after the process
   started ($SVC_STATUSLINE_BUDGET_MS; at least 100 ms after the imports, on
   a machine slow to start);
2. only when the monitor gave no numbers: the agent's statusLine JSON from
   stdin (at most 64 KB, until the same deadline; anything unparseable is
   ignored, and a terminal is not read);
3. one line out: the monitor's answer, else the payload's own `rate_limits`
   marked `(local)`, else `svc: monitor not running at URL (start it: svc-monitor)`.

It always exits 0 and prints exactly one line, whatever happens: a status
line must never break the agent. The monitor is read over a plain socket
(svcposture._http), so a render costs little more than the interpreter's start.
"""
from __future__ import annotations

import os
import sys
import time

# The monitor is read through _http's plain-socket client: it imports the C socket
# module alone, not the wrapper, whose enums and selectors would cost several times
# the rest of a render's imports. (An https monitor URL loads `socket` and `ssl`.)
from .._http import get_json, parse_url
from .._text import loads_bounded, printable
from ..settings import DEFAULT_PORT, statusline_budget_ms
from ..settings import monitor_url as settings_monitor_url
from ..vendors import DEFAULT_PROVIDER, provider_of_payload, with_provider
from . import line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Mapping, Optional, Sequence, Tuple

# The budget (settings.statusline_budget_ms: 250 ms, or $SVC_STATUSLINE_BUDGET_MS, e.g. for
# a monitor behind a remote proxy) counts from the start of the process, interpreter
# start-up included where /proc says when that was: what the agent waits for is the
# whole command. However slow the start on a loaded machine, a monitor that is up still gets
# this long after the imports, and stdin this long after the monitor, before
# the fallback is printed.
MIN_MONITOR_S = 0.10
MIN_STDIN_S = 0.02
# How long the vendor of the calling agent is looked for on stdin before the monitor is asked.
VENDOR_LOOK_S = 0.05
MAX_PAYLOAD = 64 * 1024
DEFAULT_URL = "http://127.0.0.1:%d" % DEFAULT_PORT

HELP = """\
usage: svc-monitor statusline [--url URL] [--provider {names}] [--no-color]

Print one line for the coding agent's status line: the active account, its
5h and 7d utilization with the time to each reset, the wall forecast when it
beats the reset, and the sibling with headroom when the status is not ok, e.g.

  acct1 5h 61% 1h 2m | 7d 41% 3d 6h | 100% in 48m! | next acct2

It asks the local monitor (a cached read; it never calls the provider) within
250 ms of its start ($SVC_STATUSLINE_BUDGET_MS changes that). When the monitor does not answer, it prints the agent's own
rate_limits from the statusLine JSON on stdin, marked (local); with neither,
`svc: monitor not running at URL (start it: svc-monitor)`. It always exits 0 and prints
exactly one line.

options:
  --url URL     monitor base URL (default: 127.0.0.1 at $SVC_MONITOR_PORT and
                $SVC_MONITOR_BIND when either is set, else the url in
                ~/svc/run/monitor.json, else {default_url})
  --provider P  whose accounts: {names_text} (default: the vendor of the
                agent that runs the command, told by its statusLine JSON on
                stdin, else {default})
  --no-color    no ANSI colours (also when NO_COLOR is set)
  -h, --help    show this help

agent setting (e.g. ~/.claude/settings.json):
  {"statusLine": {"type": "command", "command": "svc-monitor statusline"}}
""".replace("{default_url}", DEFAULT_URL)


def monitor_url(environ: "Mapping[str, str]") -> str:
    """Where the monitor is when no --url is given: settings.monitor_url's one rule, every
    client's; a recorded URL that is not a monitor base URL gives the default."""
    url = settings_monitor_url(environ)
    return url if parse_url(url) is not None else DEFAULT_URL


# ---------------------------------------------------------------- stdin

def read_payload(fd: int, deadline: float) -> "Any":
    """The agent's statusLine JSON from `fd`, or None: a terminal, nothing sent, more than
    64 KB, not closed by the deadline, not UTF-8 JSON."""
    import select
    try:
        if os.isatty(fd):
            return None
    except OSError:
        return None
    chunks: "List[bytes]" = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
        except (OSError, ValueError):
            return None
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_PAYLOAD:
            return None
        chunks.append(chunk)
    try:
        return loads_bounded(b"".join(chunks), MAX_PAYLOAD)
    except ValueError:
        return None


# ---------------------------------------------------------------- the line

# The short form of settings.MONITOR_START_HINT: a status line has little room.
START_IT = " (start it: svc-monitor)"


def not_running(url: "Optional[str]") -> str:
    """`svc: monitor not running at URL (start it: svc-monitor)`: the one line when the monitor
    did not answer, with where it looked and how to start one."""
    return line.NOT_RUNNING + (" at %s" % printable(url)[:120] if url else "") + START_IT


def render(body: "Any", trajectory: "Any", payload: "Any", *, colour: bool, now: int, stale_ms: int,
           url: "Optional[str]" = None, advice: "Any" = None) -> bytes:
    """The one line (UTF-8, ending in a newline) for what the monitor and stdin gave;
    with nothing from either, it names the monitor URL it tried."""
    if isinstance(body, dict) and body.get("available") is True:
        text = line.status_line(body, trajectory, colour=colour, now=now, stale_ms=stale_ms, advice=advice)
    else:
        text = line.local_line(payload, colour=colour, now=now)
        if text is None:
            text = (line.status_line(body, colour=colour, now=now) if isinstance(body, dict)
                    else not_running(url))
    return text.encode("utf-8", "replace") + b"\n"


def is_posture(body: "Any") -> bool:
    """A posture body or the disabled body; anything else is as good as no answer."""
    return isinstance(body, dict) and isinstance(body.get("available"), bool)


def help_text() -> str:
    """HELP with the registered vendors' names (the registry is loaded for the help only)."""
    from ..vendors import names_text, provider_names
    return HELP.replace("{names}", "|".join(provider_names())).replace("{names_text}", names_text()).replace(
        "{default}", DEFAULT_PROVIDER)


def parse_args(argv: "Sequence[str]") -> "Tuple[Optional[str], bool, bool, Optional[str], Optional[str]]":
    """(url, no_color, help, error, provider) of the command line (provider None: not given)."""
    url: "Optional[str]" = None
    provider: "Optional[str]" = None
    no_color = False
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-h", "--help"):
            return url, no_color, True, None, provider
        if arg == "--no-color":
            no_color = True
        elif arg in ("--url", "--provider") and args:
            value = args.pop(0)
            url, provider = (value, provider) if arg == "--url" else (url, value)
        elif arg.startswith(("--url=", "--provider=")):
            name, _, value = arg.partition("=")
            url, provider = (value, provider) if name == "--url" else (url, value)
        else:
            return url, no_color, False, "svc: statusline: bad argument %r (see svc-monitor statusline --help)" \
                % arg[:40], provider
    if url is not None and parse_url(url) is None:
        return url, no_color, False, "svc: statusline: --url must be http[s]://host[:port]", provider
    if provider is not None:
        from ..vendors import names_text, provider_names
        if provider not in provider_names():
            return url, no_color, False, "svc: statusline: --provider must be " + names_text(), provider
    return url, no_color, False, None, provider


def stdin_ready(fd: int) -> bool:
    """Whether the agent has already written to `fd` (a pipe with data or at its end); never waits."""
    import select
    try:
        if fd < 0 or os.isatty(fd):
            return False
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


budget_ms = statusline_budget_ms


def run(argv: "Sequence[str]", environ: "Mapping[str, str]", stdin_fd: int, started: float) -> bytes:
    """Everything but the write: the bytes to print."""
    url, no_color, wants_help, error, provider = parse_args(argv)
    if wants_help:
        return help_text().encode("utf-8")
    if error is not None:
        return printable(error).encode("utf-8") + b"\n"
    colour = not no_color and "NO_COLOR" not in environ
    deadline = max(started + budget_ms(environ) / 1000.0, time.monotonic() + MIN_MONITOR_S)
    url = url or monitor_url(environ)
    target = parse_url(url)
    payload = None
    payload_read = False
    if provider is None and stdin_ready(stdin_fd):
        # The agent writes its JSON before it waits for the line, so when it is
        # there already it says which vendor's accounts to show (else Claude's).
        # A pipe left open gets a short look only: the monitor keeps its budget.
        payload = read_payload(stdin_fd, min(deadline, time.monotonic() + VENDOR_LOOK_S))
        payload_read = payload is not None
        provider = provider_of_payload(payload)
        deadline = max(deadline, time.monotonic() + MIN_MONITOR_S)
    body = get_json(target, with_provider("/api/accounts", provider), deadline) if target is not None else None
    if not is_posture(body):
        body = None
    trajectory = advice = None
    if body is not None and body.get("available") is True:
        if isinstance(body.get("active"), dict):
            trajectory = get_json(target, "/api/trajectory", deadline)  # type: ignore[arg-type]
        if body.get("status") != "ok" or line.forecast_walls(trajectory, (body.get("active") or {}).get("label")):
            # What to do next is the monitor's advice, asked only when there is something to do.
            advice = get_json(target, with_provider("/api/advice", provider), deadline)  # type: ignore[arg-type]
    elif body is not None and provider in (None, DEFAULT_PROVIDER) and line.local_line(payload, colour=False) is None:
        # No usable accounts file: this machine's own login, from the quota sampler (the login view
        # stands in for the default vendor's posture only).
        login = get_json(target, "/api/login", deadline)  # type: ignore[arg-type]
        text = line.login_line(login, hud=False, colour=colour, now=int(time.time() * 1000))
        if text is not None:
            return text.encode("utf-8", "replace") + b"\n"
    if (body is None or body.get("available") is not True) and stdin_fd >= 0 and not payload_read:
        # Only a line without the monitor's numbers needs the agent's own. By now the
        # agent has had the whole wait to write them, so they are normally in the pipe.
        payload = read_payload(stdin_fd, max(deadline, time.monotonic() + MIN_STDIN_S))
    return render(body, trajectory, payload, colour=colour, now=int(time.time() * 1000),
                  stale_ms=line.stale_after_ms(environ), url=url, advice=advice)


def _write(data: bytes) -> None:
    while data:
        try:
            written = os.write(1, data)
        except InterruptedError:
            continue
        except OSError:
            return  # the agent stopped listening; nothing to tell it
        data = data[written:]


def process_age_s() -> float:
    """How long ago this process started (Linux /proc); 0.0 where that cannot be told."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read(4096)
        # Field 22, starttime in clock ticks since boot; the name before it may hold spaces.
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError, IndexError):
        return 0.0
    return age if 0.0 <= age < 10.0 else 0.0


def main(argv: "Optional[Sequence[str]]" = None) -> int:
    started = time.monotonic() - process_age_s()
    try:
        stdin_fd = sys.stdin.fileno() if sys.stdin is not None else -1
    except (AttributeError, OSError, ValueError):
        stdin_fd = -1
    try:
        out = run(sys.argv[1:] if argv is None else argv, os.environ, stdin_fd, started)
    except BaseException:  # noqa: BLE001 - a status line must never show a traceback
        out = line.NOT_RUNNING.encode("ascii") + b"\n"
    _write(out)
    return 0
