"""`python -m svcposture.probe`: the probe's command line, for people and for the token-scoped child.

Run by a person (`headers|usage|login|check|lines [--json] [--vendor NAME]`),
it does the parent's half (`runner`): it starts the child and prints what the
monitor would see. Run by the parent with the hidden `--child` (and
`--env-fd N`), it is the child (`child`): it prints each vendor's own line as
that vendor finishes (`vendorlines`), then the whole report as its last line.

The child's path imports neither the runner nor the text module: it starts no
process of its own, and each module less is start-up time the node pays on
every sweep.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional


def _parser() -> Any:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m svcposture.probe",
        description="Probe the model-provider accounts of this node without exposing a token. "
                    "'headers' probes every usable account of the accounts env file "
                    "($SVC_ACCOUNTS_ENV, default ~/.config/svc/model-accounts.env) for its rate-limit "
                    "headers; 'usage' reads the interactive login's usage; 'login' names the "
                    "interactive login's email (no network); 'check' lists usable "
                    "entries, the active one, duplicate active tokens and the lines the shell takes "
                    "wrongly (no network); 'lines' names those lines without sourcing the file. "
                    "The file is sourced in a child shell; the output is token-free.")
    parser.add_argument("subcommand", choices=("headers", "usage", "check", "login", "lines"))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    # Set by the parent on the child's command line, where the sourced file cannot
    # change it: the child probes with the tokens of its own environment.
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    # The descriptor of the accounts env file the parent checked; the child reads it, never the path.
    parser.add_argument("--env-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--vendor", action="append", default=None, metavar="NAME",
                        help="only this vendor's accounts (headers); repeat it, or separate names with "
                             "commas, for several")
    return parser


def vendor_names(values: Optional[List[str]]) -> Optional[List[str]]:
    """The names `--vendor` gave (repeated, or comma-separated), in order and once each; None when absent."""
    if values is None:
        return None
    names: List[str] = []
    for value in values:
        names += [name for name in value.split(",") if name and name not in names]
    return names


def main(argv: Optional[List[str]] = None) -> int:
    """`python -m svcposture.probe headers|usage|login|check|lines [--json]`; 1 when the probe failed."""
    from ..paths import HomeError, home_of
    from ..vendor import InvalidVendor
    from ..settings import VENDORS_ENV, vendor_modules
    from ..vendors import load_vendor_modules, vendor_named

    args = _parser().parse_args(argv)
    environ = os.environ
    try:
        home_of(environ)
        load_vendor_modules(vendor_modules(environ), VENDORS_ENV)
    except (HomeError, InvalidVendor) as exc:
        print("svcposture.probe: error: %s" % exc, file=sys.stderr)
        return 2
    vendors = vendor_names(args.vendor)
    if vendors is not None and (not vendors or args.subcommand != "headers"
                                or any(vendor_named(name) is None for name in vendors)):
        print("svcposture.probe: error: --vendor takes registered vendors, with headers", file=sys.stderr)
        return 2
    if args.child:
        from . import child
        emit = _print_vendor_line if args.subcommand == "headers" else None
        result = child.main(args.subcommand, environ, env_fd=args.env_fd, vendors=vendors, emit=emit)
    else:
        result = _parent(args.subcommand, environ, vendors)
    _print_result(args, result, environ)
    failed = bool(result.get("error")) or (args.subcommand in ("usage", "login") and not result.get("ok"))
    return 1 if failed else 0


def _parent(subcommand: str, environ: Any, vendors: Optional[List[str]]) -> Dict[str, Any]:
    """The parent's half for a person: the same run the monitor makes."""
    from ..paths import Paths
    from . import runner

    if subcommand == "headers":
        return runner.run_headers(Paths(environ=environ), environ, vendors=vendors)
    run = {"check": runner.run_check, "usage": runner.run_usage, "login": runner.run_login,
           "lines": runner.run_lines}[subcommand]
    return run(Paths(environ=environ), environ)


def _print_vendor_line(name: str, report: Dict[str, Any]) -> None:
    from .vendorlines import vendor_line

    sys.stdout.write(vendor_line(name, report) + "\n")
    sys.stdout.flush()


def _print_result(args: Any, result: Dict[str, Any], environ: Any) -> None:
    import json

    if args.json:
        sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    else:
        from ..paths import Paths
        from .text import accounts_notes, human

        notes = [] if args.child else accounts_notes(result, Paths(environ=environ).accounts_env)
        sys.stdout.write("\n".join([human(args.subcommand, result)] + notes) + "\n")
    sys.stdout.flush()
