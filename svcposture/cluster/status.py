"""`svc-cluster status`: every roster host as live, stale or missing, and the heartbeat interval in force."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, Optional

from .._http import DeadlineExceeded
from .._http import get as deadline_get
from .._text import is_number, loads_bounded, pct_text, printable
from .._version import __version__
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
            parts.append("%s %s" % (label, pct_text(value)))
    return " ".join(parts) or "-"


def _format_row(row: Dict[str, Any]) -> str:
    """The active account and its windows, else the heartbeat's quota block."""
    account = row.get("account")
    if isinstance(account, dict) and isinstance(account.get("label"), str):
        text = _format_quota(account)
        status = account.get("status")
        return "%s %s%s" % (printable(account["label"])[:64], "" if text == "-" else text + " ",
                            printable(status)[:12] if isinstance(status, str) else "")
    quota = row.get("quota")
    return _format_quota(quota if isinstance(quota, dict) else None)


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


MAX_INDENTED = 1000
# A monitor's /api/fleet of 10,000 hosts is a few MiB; anything past this is not a fleet report.
MAX_REPORT_BYTES = 64 * 1024 * 1024
READ_TIMEOUT_S = 10.0


def monitor_report(url: str, timeout_s: float = READ_TIMEOUT_S) -> Dict[str, Any]:
    """The fleet report a running monitor serves at `url`/api/fleet (the demo's simulated one
    included); a report with `error` when it cannot be read or is not one."""
    import urllib.parse

    base = url.strip().rstrip("/")
    where = base + "/api/fleet"
    failed: Dict[str, Any] = {"source": None, "anchor": None, "hosts": []}
    if urllib.parse.urlsplit(base).scheme not in ("http", "https") or not urllib.parse.urlsplit(base).netloc:
        return dict(failed, error="--url must be a monitor's http(s) URL, like http://127.0.0.1:7400")
    try:
        status, raw = deadline_get(where, timeout_s, MAX_REPORT_BYTES, "svcposture/%s" % __version__)
        report = loads_bounded(raw, MAX_REPORT_BYTES)
    except DeadlineExceeded:
        return dict(failed, error="%s did not answer within %g s" % (where, timeout_s))
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return dict(failed, error="cannot read %s: %s" % (where, printable(str(reason))[:200]))
    rows = report.get("hosts") if isinstance(report, dict) else None
    if status != 200 or not isinstance(rows, list) or not all(
            isinstance(r, dict) and isinstance(r.get("host"), str) and isinstance(r.get("state"), str)
            and (r.get("ageS") is None or is_number(r.get("ageS"))) for r in rows):
        return dict(failed, error="%s did not answer with a fleet report (HTTP %d)" % (where, status))
    return report


def cmd_status(ns: argparse.Namespace) -> int:
    settings = Settings.from_environ(os.environ, strict=False)
    if ns.url:
        report = monitor_report(ns.url)
    else:
        report = collect_status(Paths(environ=os.environ), settings)
    if ns.json:
        # Past 1,000 hosts on one line: indenting is done by Python's slow encoder, and costs more
        # than reading 10,000 hosts does.
        print_json(report, ensure_ascii=False, indent=2 if len(report.get("hosts") or ()) <= MAX_INDENTED else None)
        return status_exit_code(report)
    print("source: %s   anchor: %s" % (printable(str(report.get("source"))),
                                       printable(str(report.get("anchor") or "(unset)"))))
    if ns.url:
        print("read from: %s/api/fleet" % printable(ns.url.strip().rstrip("/")))
    else:
        print(interval_line(report, settings.liveness_interval_ms))
    # Roster names come from a shared repo: never let one drive the terminal.
    names = [printable(h["host"]) for h in report["hosts"]]
    width = max([len(n) for n in names] + [4])
    print("%-*s  %-7s  %8s  %s" % (width, "HOST", "STATE", "AGE", "ACTIVE ACCOUNT (else QUOTA)"))
    for name, row in zip(names, report["hosts"]):
        age = "-" if row.get("ageS") is None else "%gs" % row["ageS"]
        print("%-*s  %-7s  %8s  %s" % (width, name, printable(row["state"])[:12], age, _format_row(row)))
    if not report["hosts"]:
        print("(the roster is empty: svc-cluster roster add NAME, or read a running monitor's fleet view "
              "with --url URL)")
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
                    "($SVC_PROMETHEUS_URL, at most 4 queries) when SVC_LIVENESS_READ_SOURCE=prometheus.\n\n"
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
    p.add_argument("--url", metavar="URL", help="read the fleet view of the monitor at URL (its /api/fleet, "
                                                "the demo's included) instead of the cluster")
    p.set_defaults(func=cmd_status)
