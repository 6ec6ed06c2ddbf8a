"""What the cluster commands share: the ticket and host-name shapes, what may
be shown of a config value, JSON output, and the one-line error report.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any, Callable

from .._text import printable
from ..config import BOT_ORCHESTRATOR_PREFIX, BOT_WORKER_PREFIX
from ..errors import SvcpostureError

# A tracker ticket identifier like OPS-12 (docs/liveness.md).
TICKET_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*-[0-9]+$")
HOST_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62})$")
_SECRET_PREFIXES = (BOT_ORCHESTRATOR_PREFIX + ".", BOT_WORKER_PREFIX + ".")
_URL_USERINFO_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")

Command = Callable[[argparse.Namespace], int]


class ClusterError(SvcpostureError):
    """A cluster command failed in a way it reports in one line; it exits `exit_code`."""

    exit_code = 1


def valid_ticket(ticket: str) -> bool:
    # fullmatch: `$` alone would accept a trailing newline.
    return isinstance(ticket, str) and TICKET_RE.fullmatch(ticket) is not None


# ---------------------------------------------------------------- display

def is_secret_key(key: str) -> bool:
    return key.startswith(_SECRET_PREFIXES)


def redact_url(text: str) -> str:
    return _URL_USERINFO_RE.sub(r"\1***@", text)


def display_value(key: str, value: Any) -> Any:
    """What may be shown of a value: never a token, never URL credentials."""
    if is_secret_key(key):
        return "<secret>"
    if isinstance(value, str):
        return printable(redact_url(value))
    if isinstance(value, list):
        return [display_value(key, v) for v in value]
    return value


def print_json(obj: Any, *, ensure_ascii: bool = True, indent: Any = 2) -> None:
    # The config-mirror commands print ASCII-escaped JSON, the liveness ones
    # (status, doctor, owner, set-anchor) print host names as they are.
    print(json.dumps(obj, indent=indent, ensure_ascii=ensure_ascii))


# ---------------------------------------------------------------- commands

def usage_command(parser: argparse.ArgumentParser) -> Command:
    """The handler of a command group run without its ACTION: its help on stderr, exit 2."""
    def run(ns: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2
    return run


def guarded(func: Command) -> Command:
    """Run a config-mirror command; a ClusterError or OSError becomes one line on stderr."""
    def run(ns: argparse.Namespace) -> int:
        try:
            return func(ns)
        except ClusterError as exc:
            print("svc-cluster: %s: %s" % (ns.command, exc), file=sys.stderr)
            return exc.exit_code
        except OSError as exc:
            print("svc-cluster: %s: %s: %s" % (ns.command, exc.filename or "I/O error", exc.strerror or exc),
                  file=sys.stderr)
            return 1
    return run
