"""`svc-cluster status`: every roster host as live, stale or missing, and the heartbeat interval in force."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, Optional

from .._text import is_number, printable
from ..paths import Paths
from ..settings import Settings
from ._common import print_json
from .liveness import collect_status


def _format_quota(quota: Optional[Dict[str, Any]]) -> str:
    if not quota:
        return "-"
    parts = []
    for key, label in (("five_hour_pct", "5h"), ("seven_day_pct", "7d"), ("seven_day_large_pct", "7d-large")):
        value = quota.get(key)
        if is_number(value):
            parts.append("%s %g%%" % (label, value))
    return " ".join(parts) or "-"


def interval_line(report: Dict[str, Any], configured_ms: int) -> str:
    """The heartbeat interval in force, and whether the tracker's budget stretched it."""
    in_force = report.get("publishIntervalMs")
    if not isinstance(in_force, int) or isinstance(in_force, bool):
        in_force = configured_ms
    text = "interval: %g s in force" % (in_force / 1000.0)
    if report.get("source") != "tracker":
        return text + " (live = seen within two intervals; no heartbeats are published)"
    if in_force > configured_ms:
        return text + " (stretched from %g s to keep the roster's heartbeats within 60 %% of the tracker's " \
                      "limit; svc-cluster doctor, check tracker-budget)" % (configured_ms / 1000.0)
    return text


def cmd_status(ns: argparse.Namespace) -> int:
    settings = Settings.from_environ(os.environ, strict=False)
    report = collect_status(Paths(environ=os.environ), settings)
    if ns.json:
        print_json(report, ensure_ascii=False)
        return status_exit_code(report)
    print("source: %s   anchor: %s" % (report["source"], report["anchor"] or "(unset)"))
    print(interval_line(report, settings.liveness_interval_ms))
    # Roster names come from a shared repo: never let one drive the terminal.
    names = [printable(h["host"]) for h in report["hosts"]]
    width = max([len(n) for n in names] + [4])
    print("%-*s  %-7s  %8s  %s" % (width, "HOST", "STATE", "AGE", "QUOTA"))
    for name, row in zip(names, report["hosts"]):
        age = "-" if row["ageS"] is None else "%gs" % row["ageS"]
        print("%-*s  %-7s  %8s  %s" % (width, name, row["state"], age, _format_quota(row["quota"])))
    if not report["hosts"]:
        print("(the roster is empty)")
    if report.get("warning"):
        print("warning: %s" % report["warning"], file=sys.stderr)
    if report.get("error"):
        print("svc-cluster status: %s" % report["error"], file=sys.stderr)
    return status_exit_code(report)


def status_exit_code(report: Dict[str, Any]) -> int:
    """1 when liveness is unknown, 3 when any roster host is stale or missing, else 0
    (an empty roster has no host that is not live)."""
    if report.get("error"):
        return 1
    if any(row.get("state") != "live" for row in report.get("hosts", [])):
        return 3
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "status", help="show every roster host as live, stale or missing",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read every roster host's heartbeat from the liveness anchor, from Loki\n"
                    "($SVC_LOKI_URL) when SVC_LIVENESS_READ_SOURCE=loki, or from Prometheus\n"
                    "($SVC_PROMETHEUS_URL, at most 3 queries) when SVC_LIVENESS_READ_SOURCE=prometheus.\n\n"
                    "  live     heartbeat (or successful scrape) at most two publish intervals old\n"
                    "  stale    older than that\n"
                    "  missing  no heartbeat on the anchor (no Loki lines, no Prometheus series)\n"
                    "  unknown  the anchor is unset or the source unreadable\n\n"
                    "Exit status: 0 when every host is live, 3 when any is stale or missing,\n"
                    "1 when liveness is unknown (anchor unset, tracker, Loki or Prometheus unreadable).\n\n"
                    "The interval is EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS (120000), stretched\n"
                    "so the roster's heartbeats need at most 60 % of the tracker's hourly limit;\n"
                    "the interval in force is printed (publishIntervalMs in --json).")
    p.add_argument("--json", action="store_true", help="print {source, anchor, publishIntervalMs, hosts[]} as JSON")
    p.set_defaults(func=cmd_status)
