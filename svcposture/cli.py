"""Entry points: svc-monitor, svc-cluster, svc-stack and `python -m svcposture`.

Each command family lives in its own module; this file only dispatches, and
imports those modules lazily so that `--help` of one family stays fast.
`svc-monitor`'s subcommands are one table here (MONITOR_COMMANDS), as
`svc-cluster`'s are in cluster/commands.py.
"""
from __future__ import annotations

import os
import sys

# typing, argparse and the config layers are imported where they are used:
# `svc-monitor statusline` runs on every render of the agent's status line and
# must cost little more than the interpreter's own start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, List, Optional, Sequence


def _run(prog: str, func: Callable[[], int], argv: Optional[Sequence[str]] = None) -> int:
    from ._files import CorruptFileError
    from .config import ConfigError
    from .paths import HomeError, home_of
    try:
        # Before anything runs: with an empty, relative or missing HOME every node
        # path would land outside any home (`~/svc` as `/svc`). Help needs no home.
        words = list(sys.argv[1:] if argv is None else argv)
        if "-h" not in words and "--help" not in words:
            home_of(os.environ)
        return func()
    except HomeError as exc:
        print("%s: error: %s" % (prog, exc), file=sys.stderr)
        return 2
    except ConfigError as exc:
        print("%s: config error: %s" % (prog, exc), file=sys.stderr)
        return 2
    except CorruptFileError as exc:
        print("%s: error: %s" % (prog, exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `svc-cluster classify | head` must not end in a traceback, not even
        # the "Exception ignored" one the interpreter prints when it flushes
        # the dead pipe at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except OSError as exc:
        # A full disk or an unwritable state directory: one clear line, exit 1.
        print("%s: error: %s" % (prog, exc.strerror or exc if not exc.filename else exc), file=sys.stderr)
        return 1


def _vendors_loaded(prog: str) -> bool:
    """Register the vendors $SVC_VENDORS names (docs/vendors.md); False (said on stderr) when one cannot be."""
    from .settings import VENDORS_ENV, vendor_modules
    names = vendor_modules(os.environ)
    if not names:
        return True
    from .vendor import InvalidVendor
    from .vendors import load_vendor_modules
    try:
        load_vendor_modules(names, VENDORS_ENV)
    except InvalidVendor as exc:
        print("%s: error: %s" % (prog, exc), file=sys.stderr)
        return False
    return True


def _home_usable() -> bool:
    """Whether $HOME gives node paths inside a home; if not, says so on stderr. The fast
    commands, which skip _run's imports, refuse such a HOME like every other."""
    from .paths import HomeError, home_of
    try:
        home_of(os.environ)
    except HomeError as exc:
        print("svc-monitor: error: %s" % exc, file=sys.stderr)
        return False
    return True


class Command:
    """One `svc-monitor` subcommand: its name, where its `main(argv) -> int` is (a module
    under svcposture and a function in it), the arguments and the one line `--help` shows,
    and whether it starts fast."""

    __slots__ = ("name", "module", "function", "arguments", "summary", "fast")

    def __init__(self, name: str, module: str, function: str, arguments: str, summary: str, fast: bool) -> None:
        self.name, self.module, self.function = name, module, function
        self.arguments, self.summary, self.fast = arguments, summary, fast


# svc-monitor's subcommands, in `svc-monitor --help` order. `--help`, the dispatch and the
# lazy import all read this table: a subcommand is one row, and running it imports its
# module alone. A fast one goes straight there, past _run's imports: the agent renders its
# status line, a dispatcher asks the guard and an agent starts the MCP server every time,
# so they must cost little more than the interpreter's start; each handles its own errors,
# but a HOME that would put node paths outside any home is refused as everywhere else. The
# others run under _run, which turns the package's errors into one line and an exit code.
MONITOR_COMMANDS = (
    Command("init", "firstrun.init", "main", "[--host-name NAME] [--accounts N] [--metrics-token] [--json]",
            "make this host a node", fast=False),
    Command("hud", "term.hud", "main", "[--url URL] [--once]",
            "one-line terminal HUD fed by the stream", fast=False),
    Command("statusline", "term.statusline", "main", "[--url URL] [--no-color]",
            "one status line for the coding agent", fast=True),
    Command("guard", "term.guard", "main",
            "[--provider P] [--account LABEL] [--reserve PCT] [--wait S] [--fail-open] [--json] [--url URL]",
            "may automation start a run now? exit 0 go, 1 hold, 69 unavailable (svc-monitor guard && run-agent)",
            fast=True),
    Command("switch", "term.switch", "main", "(--to LABEL | --best) [--provider P] [--dry-run] [--json] [--url URL]",
            "make another account the active one", fast=False),
    Command("reserve", "term.reserve", "main", "[PCT] [--json]",
            "show or set the human reserve: the share of every account automation leaves for people", fast=False),
    Command("mcp", "mcp.main", "main", "[--url URL] [--allow-switch]",
            "a Model Context Protocol server on stdio for coding agents (posture, advice, guard tools)", fast=True),
    Command("demo", "monitor.main", "demo_main", "[--port PORT]",
            "simulated provider + 3 demo accounts + a real monitor", fast=False),
)


def monitor_command(word: Optional[str]) -> Optional[Command]:
    """The row of the subcommand `word` names, or None."""
    for command in MONITOR_COMMANDS:
        if command.name == word:
            return command
    return None


def _call(command: Command, args: List[str]) -> int:
    # __import__ rather than importlib: importlib is not loaded at the interpreter's start.
    module = __import__("%s.%s" % (__package__, command.module), fromlist=(command.function,))
    return int(getattr(module, command.function)(args))


def monitor_main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not _vendors_loaded("svc-monitor"):
        return 2
    command = monitor_command(args[0] if args else None)
    if command is not None and command.fast:
        if not _home_usable():
            return 2
        return _call(command, args[1:])

    def go() -> int:
        if command is not None:
            return _call(command, args[1:])
        from .monitor import main as monitor
        return monitor.main(args, MONITOR_COMMANDS)
    return _run("svc-monitor", go, argv)


def cluster_main(argv: Optional[Sequence[str]] = None) -> int:
    # The fleet readers (status, /api/fleet's command twin) show each registered vendor's block.
    if not _vendors_loaded("svc-cluster"):
        return 2

    def go() -> int:
        import argparse

        from .cluster import commands
        parser = argparse.ArgumentParser(
            prog="svc-cluster",
            description="Cluster config mirror and liveness anchor for this node.",
        )
        sub = parser.add_subparsers(dest="command", metavar="COMMAND")
        words = list(sys.argv[1:] if argv is None else argv)
        commands.add_commands(sub, words)
        args = parser.parse_args(words)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return 2
        return int(args.func(args))
    return _run("svc-cluster", go, argv)


def stack_main(argv: Optional[Sequence[str]] = None) -> int:
    def go() -> int:
        from .cluster import stack
        return stack.main(argv)
    return _run("svc-stack", go, argv)


_FAMILIES = {"monitor": monitor_main, "cluster": cluster_main, "stack": stack_main}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m svcposture monitor|cluster|stack ARGS`."""
    args: List[str] = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or args[0] not in _FAMILIES:
        stream = sys.stdout if args and args[0] in ("-h", "--help") else sys.stderr
        print("usage: python -m svcposture {monitor,cluster,stack} [ARGS...]\n\n"
              "  monitor   same as svc-monitor: the posture monitor, HUD and demo\n"
              "  cluster   same as svc-cluster: config mirror, roster, liveness anchor, doctor\n"
              "  stack     same as svc-stack: start/stop the monitor, cloud env projection",
              file=stream)
        if args and args[0] not in ("-h", "--help"):
            print("error: unknown command %r" % args[0], file=sys.stderr)
        return 0 if stream is sys.stdout else 2
    return _FAMILIES[args[0]](args[1:])
