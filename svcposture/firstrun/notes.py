"""What a first run gets wrong, named with its cause: the monitor's start-up notes,
the hint when its port is taken, and the answer to a mistyped subcommand.

Each note says which file, line or key is at fault and what to do, because a
new operator sees only the message: "no usable account" or "error: internal"
leaves them guessing.
"""
from __future__ import annotations

import errno
import logging
import os
import sys
import threading
from typing import Any, Mapping, Sequence

from .._text import printable
from ..paths import Paths

log = logging.getLogger("svcposture.monitor")


def log_start_notes(paths: Paths, environ: Mapping[str, str], probe_enabled: bool) -> None:
    """Log the unknown keys of node.json now, and the accounts env file's problems
    (its entry check runs a child, so off the caller's thread)."""
    from ..config import ConfigError, unknown_node_keys

    try:
        notes = unknown_node_keys(paths)
    except ConfigError as exc:
        notes = [str(exc)]
    for note in notes:
        log.warning("%s", printable(note))
    if probe_enabled:
        threading.Thread(target=_log_accounts_notes, args=(paths, environ), name="svc-accounts-check",
                         daemon=True).start()


def _log_accounts_notes(paths: Paths, environ: Mapping[str, str]) -> None:
    from ..probe.runner import run_check
    from ..probe.text import accounts_notes

    try:
        result = run_check(paths, environ)
    except Exception as exc:  # noqa: BLE001 - a hint, never a reason to stop
        log.debug("accounts env check failed: %s", type(exc).__name__)
        return
    for note in accounts_notes(result, paths.accounts_env):
        log.warning("%s", note)


def listen_hint(paths: Paths, exc: OSError) -> str:
    """What to do when the port is taken: `--port 0`, or the monitor already serving."""
    if exc.errno != errno.EADDRINUSE:
        return ""
    hint = "; start with --port 0 to take any free port (or set SVC_MONITOR_PORT)"
    url = _running_monitor_url(paths)
    if url:
        hint += "; a monitor recorded in %s is running at %s" % (paths.monitor_json, url)
    return hint


def _running_monitor_url(paths: Paths) -> str:
    from .._files import read_json

    try:
        record = read_json(paths.monitor_json)
    except (OSError, ValueError):
        return ""
    if not isinstance(record, dict):
        return ""
    pid, url = record.get("pid"), record.get("url")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or not isinstance(url, str):
        return ""
    if not url.startswith(("http://", "https://")) or len(url) > 300 or printable(url) != url:
        return ""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ""  # the record of a monitor that is gone
    except OSError:
        pass  # alive, but another user's
    return url


def unknown_subcommand(prog: str, word: str, commands: Sequence[str], parser: Any) -> int:
    """Usage, then the subcommands to choose from (and the closest one), as argparse words them; exit 2."""
    import difflib

    close = difflib.get_close_matches(word, commands, n=1, cutoff=0.6)
    parser.print_usage(sys.stderr)
    print("%s: error: unknown subcommand %r (choose from %s)%s" % (
        prog, printable(word), ", ".join(repr(c) for c in commands),
        "; did you mean %r?" % close[0] if close else ""), file=sys.stderr)
    return 2
