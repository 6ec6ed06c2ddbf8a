"""Entry points: svc-monitor, svc-cluster, svc-stack and `python -m svcposture`.

Each command family lives in its own module; this file only dispatches, and
imports those modules lazily so that `--help` of one family stays fast.
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
    """Whether $HOME gives node paths inside a home; if not, says so on stderr. The commands
    that skip _run's imports (guard, mcp, statusline) refuse such a HOME like every other."""
    from .paths import HomeError, home_of
    try:
        home_of(os.environ)
    except HomeError as exc:
        print("svc-monitor: error: %s" % exc, file=sys.stderr)
        return False
    return True


def monitor_main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not _vendors_loaded("svc-monitor"):
        return 2
    if args[:1] == ["guard"]:
        # As fast as the status line: a dispatcher asks before every run.
        if not _home_usable():
            return 2
        from .term import guard
        return guard.main(args[1:])
    if args[:1] == ["mcp"]:
        # Past the monitor's imports too: an agent starts the server with each session.
        if not _home_usable():
            return 2
        from .mcp import main as mcp
        return mcp.main(args[1:])
    if args[:1] == ["statusline"]:
        # Straight there, past _run's imports: it handles every other error
        # itself and exits 0, but a HOME that would put node paths outside any
        # home is refused like everywhere else.
        if not _home_usable():
            return 2
        from .term import statusline
        return statusline.main(args[1:])

    def go() -> int:
        from .monitor import main as monitor
        return monitor.main(argv)
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
