"""The token-scoped child: what runs after /bin/sh has sourced the accounts env file.

`python -m svcposture.probe headers|usage|check --json --child` lands here
(docs/posture.md). The child takes tokens from its own environment only, probes the
provider and returns token-free data; the command line (`command`) prints it. The sweep
loops over the registered vendors, or those named by `--vendor` (docs/vendors.md): each
vendor's block is under its name in the report, and each vendor's own report is also
printed as its own line the moment that vendor is done (`vendorlines`). Every error it
reports comes from the fixed vocabulary, and anything unexpected becomes
`internal`, never a traceback, which could quote a token.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Tuple

from ..envfile.lint import line_problems, opened_quote_line
from ..envfile.entries import MAX_ENV_FILE_BYTES
from ..errors import MESSAGES, error
# The sweep deadline is a knob of the monitor (which kills the child then) as of the child (which answers
# a little before it): its reader lives with the monitor's settings.
from ..settings import sweep_deadline_at, sweep_deadline_s

# Header probes in flight at once (docs/posture.md).
MAX_IN_FLIGHT = 4
# A report names at most this many line problems; a file with more has one mistake made everywhere.
MAX_LINE_PROBLEMS = 50

# Called with (vendor name, that vendor's report) once per vendor, as soon as it is done.
Emit = Callable[[str, Dict[str, Any]], None]


def main(subcommand: str, environ: Mapping[str, str], env_fd: Optional[int] = None,
         vendors: Optional[Collection[str]] = None, emit: Optional[Emit] = None) -> Dict[str, Any]:
    """The child's report for `headers`, `usage`, `login`, `check` or `lines`; never raises.

    `vendors` (registered names) limits `headers` to those vendors' accounts; `emit`, when given,
    gets each vendor's own report as soon as that vendor is done (probe.vendorlines)."""
    try:
        if subcommand == "lines":
            return lines(env_fd)
        if subcommand in ("usage", "login"):
            return login_command(subcommand, environ)
        return headers(environ, check_only=(subcommand == "check"), env_fd=env_fd, only=vendors, emit=emit)
    except Exception:  # noqa: BLE001 - never a traceback, it could quote a token
        return {"error": error("internal")}


def login_command(subcommand: str, environ: Mapping[str, str]) -> Dict[str, Any]:
    """`usage` or `login` of the interactive login, by the vendor whose `child_commands` has it."""
    from ..vendor import optional_member
    from ..vendors import registered

    for vendor in registered():
        command = (optional_member(vendor, "child_commands") or {}).get(subcommand)
        if command is not None:
            return command(environ)
    return {"ok": False, "error": error("config")}


# ---------------------------------------------------------------- header sweep

def _sweep_budget(environ: Mapping[str, str], started: float) -> float:
    """Seconds left for the probes: the parent's kill instant less a margin."""
    deadline = sweep_deadline_s(environ)
    # Answer a little before the parent's kill so that the accounts that did
    # finish are not lost with the ones that did not.
    margin = min(2.0, deadline * 0.2)
    deadline_at = sweep_deadline_at(environ)
    if deadline_at > 0:
        return deadline_at - margin - time.time()
    return deadline - margin - (time.monotonic() - started)


def _env_text(env_fd: Optional[int]) -> str:
    """The accounts env file's text, read from the descriptor the parent checked
    and the shell sourced (pread: the shell may have moved its offset)."""
    if env_fd is None:
        raise OSError("no accounts env file descriptor")
    return os.pread(env_fd, MAX_ENV_FILE_BYTES + 1, 0).decode("utf-8", "replace")


def _sweeps(text: str, environ: Mapping[str, str], only: Optional[Collection[str]]) -> List[Tuple[Any, Any]]:
    """(vendor, its sweep) of every registered vendor (or only those named), in registration order."""
    from ..vendors import registered

    return [(v, v.sweep(text, environ)) for v in registered() if only is None or v.name in only]


def line_problems_of(text: str) -> List[Dict[str, Any]]:
    """The account and export lines of every vendor that the shell takes wrongly (envlint), at most 50."""
    from ..vendors import registered

    vendors = registered()
    prefixes = [(v.lines.entry_prefix, v.lines.label_prefix) for v in vendors]
    return line_problems(text, prefixes, tuple(v.lines.active_var for v in vendors))[:MAX_LINE_PROBLEMS]


def lines(env_fd: Optional[int]) -> Dict[str, Any]:
    """What the text of a file the shell stopped in says, read without sourcing it: the
    line problems, the first line that opens a quote it does not close, the number of lines."""
    try:
        text = _env_text(env_fd)
    except OSError:
        return {"error": error("config", MESSAGES["config"].unreadable)}
    return {"lineProblems": line_problems_of(text), "quoteLine": opened_quote_line(text),
            "lineCount": text.count("\n") + (0 if text.endswith("\n") or not text else 1)}


def headers(environ: Mapping[str, str], check_only: bool = False, env_fd: Optional[int] = None,
            only: Optional[Collection[str]] = None, emit: Optional[Emit] = None) -> Dict[str, Any]:
    """Probe every usable entry of the accounts env file (or only list them, `check_only`).

    The report holds each vendor's block under its name, there only when the
    file has a line of that vendor, and `available`: whether any vendor has
    an account to probe. Each vendor's exchanges run on their own pool and are
    waited for until that vendor's own deadline (at most the sweep's), so one
    vendor's slow endpoint never holds another's rows; `emit` gets each
    vendor's own report the moment it is done."""
    started = time.monotonic()
    try:
        text = _env_text(env_fd)
    except OSError:
        return {"error": error("config", MESSAGES["config"].unreadable)}
    sweeps = _sweeps(text, environ, only)
    if check_only:
        listed = [(v, s.check()) for v, s in sweeps]
        report: Dict[str, Any] = {"available": any(s.present for _v, s in sweeps),
                                  "lineProblems": line_problems_of(text)}
        return _with_blocks(report, listed)
    if not any(s.present for _v, s in sweeps):
        return {"available": False}
    secrets = [secret for _v, s in sweeps for secret in s.secrets]
    budget = _sweep_budget(environ, started)
    begun = time.monotonic()
    from .workers import Workers

    # One pool per vendor: each keeps its pace whatever another's endpoint does.
    pools = [Workers(MAX_IN_FLIGHT) for _ in sweeps]
    futures = [s.submit(pool, v.request_timeout_s(environ), secrets) if s.present else []
               for (v, s), pool in zip(sweeps, pools)]
    limits = [min(budget, v.exchange_deadline_s(environ)) for v, _s in sweeps]
    blocks = _blocks_as_done(sweeps, futures, limits, budget, begun, emit)
    # Exchanges still running are abandoned: their threads are daemons, which never hold the exit.
    return _with_blocks({"available": True}, [(v, block) for (v, _s), block in zip(sweeps, blocks)])


def _blocks_as_done(sweeps: List[Tuple[Any, Any]], futures: List[List[Any]], limits: List[float], budget_s: float,
                    begun: float, emit: Optional[Emit]) -> List[Optional[Dict[str, Any]]]:
    """Each vendor's block, taken the moment its exchanges are all done or its own limit (seconds
    after `begun`) has passed, and emitted then: no vendor's block waits for another's endpoint.
    An exchange still running at its limit is cut by 'exchange' (the vendor's own deadline) when
    that limit is under the sweep's budget, else by 'sweep'."""
    from concurrent.futures import FIRST_COMPLETED, wait

    blocks: Dict[int, Optional[Dict[str, Any]]] = {}
    while True:
        elapsed = time.monotonic() - begun
        for i, (vendor, sweep) in enumerate(sweeps):
            if i in blocks or (elapsed < limits[i] and not all(f.done() for f in futures[i])):
                continue
            blocks[i] = sweep.block("exchange" if limits[i] < budget_s else "sweep")
            if emit is not None:
                emit(vendor.name, _alone(vendor, sweep, blocks[i]))
        waiting = [i for i in range(len(sweeps)) if i not in blocks]
        if not waiting:
            return [blocks[i] for i in range(len(sweeps))]
        running = [f for i in waiting for f in futures[i] if not f.done()]
        if running:  # (none left: they finished since the look above, so look again at once)
            next_limit = min(limits[i] for i in waiting)
            wait(running, timeout=max(0.0, next_limit - (time.monotonic() - begun)), return_when=FIRST_COMPLETED)


def _alone(vendor: Any, sweep: Any, block: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The report a child run for this vendor alone would answer."""
    if not sweep.present:
        return {"available": False}
    return _with_blocks({"available": True}, [(vendor, block)])


def _with_blocks(report: Dict[str, Any], blocks: List[Tuple[Any, Optional[Dict[str, Any]]]]) -> Dict[str, Any]:
    """The report with each vendor's block under its name, there only when the file has its lines."""
    for vendor, block in blocks:
        if block is not None:
            report[vendor.name] = block
    return report
