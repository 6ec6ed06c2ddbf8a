"""svc-monitor mcp: the Model Context Protocol server on stdio (docs/mcp.md).

    claude mcp add svcposture -- svc-monitor mcp

stdout carries JSON-RPC and nothing else: the protocol writes go to a
duplicate of the descriptor, and descriptor 1 itself is pointed at stderr
before any tool runs, so a stray print anywhere in the package lands in the
client's log instead of corrupting the stream.
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Optional, Sequence, Tuple

HELP = """\
usage: svc-monitor mcp [--url URL] [--allow-switch]

A Model Context Protocol server on stdin/stdout (JSON-RPC 2.0, one message per
line; protocol versions 2024-11-05, 2025-03-26, 2025-06-18 and 2025-11-25) for
the coding agents whose accounts this node watches. It reads the local monitor
(cached reads; it never calls the provider and holds no token). Register it with

  claude mcp add svcposture -- svc-monitor mcp

or, for Codex, in ~/.codex/config.toml:

  [mcp_servers.svcposture]
  command = "svc-monitor"
  args = ["mcp"]

tools:
  posture {provider?}                  the posture body (/api/accounts)
  advice {provider?}                   which account to use now (/api/advice)
  guard {provider?, account?, reserve?}  go, hold or unavailable, as
                                       `svc-monitor guard --json`; never waits
  fleet_accounts {}                    the fleet by account (/api/fleet/accounts);
                                       listed only where the node reads a fleet
  fleet_owner {ticket, provider?}      which host takes a ticket, around hosts
                                       without headroom (/api/fleet/owner); as
                                       fleet_accounts, where the node reads one
  switch {to}                          as `svc-monitor switch --to`; only with
                                       --allow-switch
resources: {resources}

options:
  --url URL       {url_help}
  --allow-switch  offer the switch tool: the agent may then change which account
                  new sessions on this node use (off by default)
  -h, --help      show this help

Logs go to stderr. docs/mcp.md has the details.
"""


def parse_args(argv: "Sequence[str]") -> "Tuple[dict, Optional[str]]":
    opts = {"url": None, "allow_switch": False, "help": False}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if arg in ("-h", "--help"):
            opts["help"] = True
        elif arg == "--allow-switch":
            opts["allow_switch"] = True
        elif name == "--url":
            if not eq:
                if not args:
                    return opts, "--url needs a value"
                value = args.pop(0)
            opts["url"] = value
        else:
            from .._text import printable
            return opts, "unknown argument %r" % printable(arg[:40])
    if opts["url"] is not None:
        from .._http import parse_url
        if parse_url(opts["url"]) is None:
            return opts, "--url must be http[s]://host[:port]"
    return opts, None


def keep_stdout_for_protocol() -> int:
    """A private descriptor for the protocol's stdout; descriptor 1 becomes stderr's."""
    import fcntl
    # Above 2: with stdin closed, a plain dup would take descriptor 0 and the server would read its own output.
    out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(2, 1)
    return out


def write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data):]
        except InterruptedError:
            continue


def _reexec_without_tokens(argv: "Sequence[str]", environ: "Mapping[str, str]") -> None:
    """Start afresh without the agent's token variables: a process started with a token in its
    environment holds it in memory and in /proc/<pid>/environ for as long as it runs, and this
    one runs as long as the agent's session. The server needs none."""
    from .._spawn import child_env, is_token_var, module_command
    if not any(is_token_var(name) for name in environ):
        return
    try:
        os.execve(sys.executable, module_command("", "monitor", "mcp", *argv), child_env(environ))
    except OSError as exc:
        raise SystemExit("svc-monitor mcp: cannot start without the token variables (%s)" % exc.strerror)


def run(argv: "Sequence[str]", environ: "Mapping[str, str]") -> int:
    opts, error = parse_args(argv)
    if opts["help"]:
        import textwrap
        from ..settings import MONITOR_URL_RULE
        url_help = textwrap.fill("monitor base URL (default: %s)" % MONITOR_URL_RULE, 78,
                                 initial_indent=" " * 18, subsequent_indent=" " * 18).lstrip()
        from ..vendors import provider_names
        from .tools import RESOURCE_PREFIX
        resources = textwrap.fill(", ".join(RESOURCE_PREFIX + name for name in provider_names()), 78,
                                  initial_indent=" " * 11, subsequent_indent=" " * 11).lstrip()
        sys.stdout.write(HELP.replace("{url_help}", url_help).replace("{resources}", resources))
        return 0
    if error is not None:
        sys.stderr.write("svc-monitor mcp: %s (see svc-monitor mcp --help)\n" % error)
        return 2
    _reexec_without_tokens(argv, environ)
    from ..settings import monitor_url
    from . import session, wire
    from .tools import Toolbox
    url = opts["url"] or monitor_url(environ)
    try:
        out = keep_stdout_for_protocol()
    except OSError as exc:
        sys.stderr.write("svc-monitor mcp: stdout is not open (%s)\n" % exc.strerror)
        return 1
    toolbox = Toolbox(url, allow_switch=opts["allow_switch"], environ=environ)
    session.stderr_log("serving on stdio; monitor %s; switch %s"
                       % (url, "allowed" if opts["allow_switch"] else "off"))
    try:
        session.serve(wire.LineReader(0), lambda data: write_all(out, data),
                      session.Session(toolbox, session.stderr_log))
    except BrokenPipeError:
        return 0  # the client went away
    return 0


def main(argv: "Optional[Sequence[str]]" = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv, os.environ)
    except KeyboardInterrupt:
        return 130
