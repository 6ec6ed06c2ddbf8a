"""`svc-cluster roster sd`: the roster's monitors as a Prometheus file_sd target list.

Prometheus is the engine for fleets that outgrow the /fleet page (docs/fleet.md):
its file_sd_configs re-reads the file this command writes, so a host added
to the roster with `svc-cluster roster add` is scraped after the next run.
One target group per host, `<host>:<port>` with the label `node`, so an alert
names the host as the roster does.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Tuple

from .._files import write_text_atomic
from .._text import printable
from ..config import ConfigError, roster
from ..paths import Paths
from ..settings import DEFAULT_PORT, InvalidSetting, parse_port
from ._common import HOST_RE

# Prometheus reads the file: it need not be private, and holds no secret.
SD_FILE_MODE = 0o644


def file_sd(hosts: List[str], port: int) -> Tuple[List[Dict[str, Any]], List[str]]:
    """(target groups, skipped names): a roster name that is not a host name cannot be a target."""
    groups: List[Dict[str, Any]] = []
    skipped: List[str] = []
    for host in dict.fromkeys(hosts):
        if HOST_RE.fullmatch(host) is None:
            skipped.append(host)
            continue
        groups.append({"targets": ["%s:%d" % (host, port)], "labels": {"node": host}})
    return groups, skipped


def cmd_roster_sd(ns: argparse.Namespace) -> int:
    try:
        port = parse_port(ns.port, "--port")
        if port == 0:
            raise InvalidSetting("--port: 0 is not a port a monitor listens on")
        hosts = roster(Paths())
    except (InvalidSetting, ConfigError) as exc:
        print("svc-cluster: roster sd: %s" % exc, file=sys.stderr)
        return 2
    groups, skipped = file_sd(hosts, port)
    text = json.dumps(groups, indent=2) + "\n"
    for name in skipped:
        print("svc-cluster: roster sd: skipped %r: not a host name" % printable(name)[:80], file=sys.stderr)
    if ns.out:
        try:
            write_text_atomic(ns.out, text, SD_FILE_MODE)
        except OSError as exc:
            print("svc-cluster: roster sd: cannot write %s: %s" % (ns.out, exc.strerror or exc), file=sys.stderr)
            return 1
        print("svc-cluster: roster sd: %d target(s) written to %s" % (len(groups), ns.out), file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def add_roster_sd(roster_sub: Any) -> None:
    r = roster_sub.add_parser(
        "sd", help="print the roster's monitors as Prometheus file_sd JSON",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Print (or write with --out, atomically) a Prometheus file_sd target list:\n"
                    "one group per roster host, target HOST:PORT, label node=HOST.\n\n"
                    "  file_sd_configs:\n"
                    "    - files: [/etc/prometheus/svc-fleet.json]\n\n"
                    "Monitors listen on loopback unless started with --bind (or behind a proxy).\n"
                    "Roster names that are not host names are skipped with a warning.\n"
                    "Exit 2 on a bad --port or an unreadable roster.")
    r.add_argument("--port", default=str(DEFAULT_PORT), help="the monitors' port (default %d)" % DEFAULT_PORT)
    r.add_argument("--out", metavar="F", help="write the JSON to F (atomic replace) instead of stdout")
    r.set_defaults(func=cmd_roster_sd)
