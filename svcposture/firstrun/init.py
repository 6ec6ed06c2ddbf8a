"""svc-monitor init: what a fresh machine needs to become a node, never overwriting anything.

It creates `~/.config/svc/` (0700), an accounts env file (0600) of
placeholder lines to paste tokens into, and `svc.host.name` in node.json when
no host name is set; everything already there is left alone and reported as
such, so a second run changes nothing. The placeholder lines are the default
vendor's; each registered vendor with a `setup_help` (docs/vendors.md) says
where its credential comes from, the others in a commented example each. The accounts env file is only ever
`lstat`ed, never read: once tokens are pasted in, it holds secrets.

With `--metrics-token` it also creates the bearer token file a listener off
the loopback asks for (remote/token.py): random, 0600, never over one that
exists. The token is never printed; the next steps say how to copy the file
to Prometheus and to the fleet's other nodes without showing it.
"""
from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._dirs import ensure_dir
from .._files import create_new_atomic
from .._text import printable
from ..envfile.entries import PLACEHOLDER_EMAIL
from ..cluster._common import HOST_RE
from ..config import HOST_NAME_KEY, host_name, write_layer
from ..remote.token import create_token_file, token_file_problem
from ..settings import monitor_url
from ..paths import Paths
from ..vendor import optional_member
from ..vendors import default_vendor, registered

DEFAULT_ACCOUNTS = 2
MAX_ACCOUNTS = 20
STATUSLINE_SETTING = '{"statusLine": {"type": "command", "command": "svc-monitor statusline"}}'
# The placeholder entries' names: ACCT1, ACCT2, ...
ENTRY_STEM = "ACCT"


def _setup_helps() -> List[Tuple[Any, Any]]:
    """(vendor, its SetupHelp) of every registered vendor that has one, in registration order."""
    found = [(vendor, optional_member(vendor, "setup_help")) for vendor in registered()]
    return [(vendor, help_) for vendor, help_ in found if help_ is not None]


def value_placeholder() -> str:
    """What a placeholder entry holds until the operator pastes a credential over it."""
    return default_vendor().lines.placeholders[0]


def accounts_env_text(count: int) -> str:
    """The accounts env file init writes: `count` placeholder entries of the default vendor, the
    first one active, then a commented example of every other vendor that offers one."""
    default = default_vendor()
    lines, placeholder = default.lines, value_placeholder()
    help_ = optional_member(default, "setup_help")
    text = [
        "# The model-provider accounts of this node, sourced as POSIX sh by the monitor's probe child.",
        "# Replace each %s with the account's token and %s with its email." % (placeholder, PLACEHOLDER_EMAIL),
    ]
    text += list(help_.comment) if help_ is not None else []
    text += [
        "# The active account is the one %s names. Keep this file mode 0600:" % lines.active_var,
        "# a file that group or others can write is refused.",
    ]
    text += ["%s%s%d=%s  # %s" % (lines.entry_prefix, ENTRY_STEM, k, placeholder, PLACEHOLDER_EMAIL)
             for k in range(1, count + 1)]
    text.append(lines.export_line(ENTRY_STEM + "1"))
    for vendor, other in _setup_helps():
        if vendor is not default:
            # Commented out: a node shows nothing about a vendor it has no line of.
            text += ["#"] + list(other.example)
    return "\n".join(text) + "\n"


def os_short_host_name() -> str:
    return (os.uname().nodename or "").split(".")[0]


def valid_host_name(name: str) -> bool:
    return isinstance(name, str) and HOST_RE.fullmatch(name) is not None


def _item(path: Any, what: str, detail: str) -> Dict[str, str]:
    return {"path": str(path), "what": what, "detail": detail}


def _accounts_env_state(path: Any) -> Optional[str]:
    """Why an existing accounts env file is left alone (None: nothing there)."""
    try:
        st = os.lstat(str(path))
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return "exists but is not a regular file; the monitor refuses it"
    if st.st_mode & 0o022:
        return ("exists with mode %04o: group or others can write it, so the monitor refuses it; chmod 600 it"
                % stat.S_IMODE(st.st_mode))
    return "exists (not read: it holds tokens)"


def _symlink_note(path: Any) -> Optional[str]:
    """Why init leaves `path` alone when it is a symbolic link, dangling or not (None: it is not one).

    A link there was made by someone else (a dotfile manager, say): writing
    the host name would replace the link with a file, and writing through it
    would change a file init never chose, so it does neither, and does not
    read through it either.
    """
    try:
        target = os.readlink(str(path))
    except OSError:  # not a link, or nothing there
        return None
    state = "" if os.path.exists(str(path)) else "dangling "
    return ("is a %ssymbolic link to %s; init neither follows nor replaces a link it did not make: set %s "
            "in the file it points to, or replace the link with a file, yourself"
            % (state, printable(target), HOST_NAME_KEY))


def run_init(paths: Paths, *, host: Optional[str] = None, accounts: int = DEFAULT_ACCOUNTS,
             os_host: Optional[str] = None, metrics_token: bool = False) -> Dict[str, Any]:
    """Create what the node at `paths` lacks; the report of what was created and left alone.

    Config files are read before anything is created, so a corrupt one
    (ConfigError) stops init with nothing done. OSError from a home that
    cannot be written propagates.
    """
    link = _symlink_note(paths.node_json)
    current = None if link else host_name(paths)
    created: List[Dict[str, str]] = []
    left: List[Dict[str, str]] = []
    if paths.config_dir.is_dir():
        left.append(_item(paths.config_dir, "config directory", "exists"))
    else:
        ensure_dir(paths.config_dir)
        created.append(_item(paths.config_dir, "config directory", "mode 0700"))
    why = _accounts_env_state(paths.accounts_env)
    if why is None and create_new_atomic(paths.accounts_env, accounts_env_text(accounts).encode("ascii")):
        created.append(_item(paths.accounts_env, "accounts env file",
                             "mode 0600, %d placeholder account%s" % (accounts, "" if accounts == 1 else "s")))
    else:
        left.append(_item(paths.accounts_env, "accounts env file", why or "exists"))
    if link:
        left.append(_item(paths.node_json, "host name", link))
        effective = None
    else:
        effective = _host_name_step(paths, current, host, os_host, created, left)
    steps = next_steps(paths)
    if metrics_token:
        _metrics_token_step(paths, created, left)
        steps += metrics_token_steps(paths)
    return {"home": str(paths.home), "changed": bool(created), "created": created, "leftAlone": left,
            "hostName": effective, "accountsEnv": str(paths.accounts_env),
            "url": dashboard_url(paths.environ), "nextSteps": steps}


# Where the next steps suggest the Prometheus host keeps its copy (its scrape job's credentials_file).
PROMETHEUS_TOKEN_PATH = "/etc/prometheus/svc-metrics-token"


def _metrics_token_step(paths: Paths, created: List[Dict[str, str]], left: List[Dict[str, str]]) -> None:
    """The bearer token file: made when nothing is there, else left alone with the monitor's verdict on it."""
    path = paths.metrics_token
    if create_token_file(path):
        created.append(_item(path, "metrics token", "mode 0600, a random 256-bit token, not shown"))
        return
    problem = token_file_problem(path)
    left.append(_item(path, "metrics token", "exists (never overwritten); " + (problem or "the monitor accepts it")))


def metrics_token_steps(paths: Paths) -> List[str]:
    """How the same token reaches Prometheus and the other nodes, never through a terminal or a log."""
    return [
        "Give Prometheus the same token without showing it: on the Prometheus host run `ssh THIS-NODE cat "
        "%s | sudo install -m 0640 -g prometheus /dev/stdin %s`, and name %s in the scrape job's "
        "authorization.credentials_file (docs/fleet-prometheus.md)"
        % (_home_relative(paths, paths.metrics_token), PROMETHEUS_TOKEN_PATH, PROMETHEUS_TOKEN_PATH),
        "One token serves the fleet (Prometheus sends one per scrape job): copy this file, mode 0600, to "
        "~/.config/svc/metrics-token on every other node rather than making a new one there",
    ]


def _home_relative(paths: Paths, path: Any) -> str:
    try:
        return str(path.relative_to(paths.home))  # what `ssh HOST cat` reads from the home directory
    except ValueError:
        return str(path)


def _host_name_step(paths: Paths, current: Optional[str], host: Optional[str], os_host: Optional[str],
                    created: List[Dict[str, str]], left: List[Dict[str, str]]) -> Optional[str]:
    if current:
        detail = "%s is already %r" % (HOST_NAME_KEY, printable(current))
        if host is not None and host != current:
            detail += "; --host-name %r was not written (a host name is never overwritten)" % host
        left.append(_item(paths.node_json, "host name", detail))
        return current
    name = host if host is not None else (os_short_host_name() if os_host is None else os_host)
    if not valid_host_name(name):
        left.append(_item(paths.node_json, "host name",
                          "not set: the OS host name %r is not a usable node name; run init again with "
                          "--host-name NAME" % printable(name)))
        return None
    changes = write_layer(paths.node_json, {HOST_NAME_KEY: name}, only_if_absent=True)
    if HOST_NAME_KEY in changes:
        created.append(_item(paths.node_json, "host name", "%s = %r" % (HOST_NAME_KEY, name)))
        return name
    left.append(_item(paths.node_json, "host name", "%s was set meanwhile" % HOST_NAME_KEY))
    return host_name(paths)


def dashboard_url(environ: Mapping[str, str]) -> str:
    """Where the dashboard is: the monitor as every client finds it (settings.monitor_url)."""
    return monitor_url(environ) + "/"


def next_steps(paths: Paths) -> List[str]:
    """What to do after init; the first step says where each vendor's credential comes from."""
    clauses = [help_.next_step for _vendor, help_ in _setup_helps()]
    steps = ["Get a long-lived token " + "; ".join(clauses)] if clauses else []
    return steps + [
        "Paste each account's token over %s, and its email over %s, in %s (keep it mode 0600)"
        % (value_placeholder(), PLACEHOLDER_EMAIL, paths.accounts_env),
        "Start the monitor: svc-monitor  (or: python3 -m svcposture monitor)",
        "Open %s for the dashboard (svc-monitor hud for one terminal line)" % dashboard_url(paths.environ),
        "Show it in the coding agent's status line, in its settings.json: %s" % STATUSLINE_SETTING,
    ]


def format_report(report: Mapping[str, Any]) -> str:
    out = ["svc-monitor init: node home %s" % printable(report["home"])]
    for verb, key in (("created", "created"), ("left alone", "leftAlone")):
        for item in report[key]:
            out.append("  %-10s  %s  (%s: %s)" % (verb, printable(item["path"]), item["what"],
                                                  printable(item["detail"])))
    if not report["changed"]:
        out.append("Nothing changed: this node already has everything init creates.")
    out.append("")
    out.append("Next steps:")
    out += ["  %d. %s" % (i, printable(step)) for i, step in enumerate(report["nextSteps"], start=1)]
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="svc-monitor init",
        description=("Make this host a node: create ~/.config/svc/ (0700), the accounts env file "
                     "(0600, $SVC_ACCOUNTS_ENV or ~/.config/svc/model-accounts.env) with placeholder "
                     "entries to paste tokens into, and svc.host.name in node.json when no host name is "
                     "set. Nothing that exists is overwritten; a second run changes nothing. Prints what "
                     "it created, what it left alone, and the next steps."))
    parser.add_argument("--host-name", metavar="NAME", default=None,
                        help="this node's name when none is set (default: the OS short host name)")
    parser.add_argument("--accounts", metavar="N", default=str(DEFAULT_ACCOUNTS),
                        help="placeholder accounts in a new accounts env file, 1..%d (default %d)"
                             % (MAX_ACCOUNTS, DEFAULT_ACCOUNTS))
    parser.add_argument("--metrics-token", action="store_true",
                        help="also create ~/.config/svc/metrics-token (0600, random, never over one that exists), "
                             "the bearer token a listener off the loopback asks for; it is never printed")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        count = int(args.accounts)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_ACCOUNTS:
        print("svc-monitor init: --accounts must be a number in 1..%d" % MAX_ACCOUNTS, file=sys.stderr)
        return 2
    if args.host_name is not None and not valid_host_name(args.host_name):
        print("svc-monitor init: --host-name %r: use letters, digits, '.', '_' or '-' (at most 63, "
              "starting with a letter or digit)" % printable(args.host_name), file=sys.stderr)
        return 2
    paths = Paths(environ=os.environ)
    try:
        report = run_init(paths, host=args.host_name, accounts=count, metrics_token=args.metrics_token)
    except OSError as exc:
        print("svc-monitor init: cannot create %s: %s" % (printable(exc.filename or paths.home),
                                                          exc.strerror or exc), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return 0
