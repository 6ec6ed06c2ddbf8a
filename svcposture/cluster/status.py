"""`svc-cluster status`: every roster host as live, stale or missing, and the heartbeat interval in force.

The text is the fleet page's (docs/fleet.md): its words, its way of writing durations and
percents, and its order (a host with an exhausted account first, then the soonest wall, then
the hosts that are not live); `--json` is the report itself."""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

from .._http import DeadlineExceeded
from .._http import get as deadline_get
from .._text import duration, is_number, loads_bounded, pct_text, printable
from .._time import parse_iso_ms
from .._version import __version__
from ..paths import Paths
from ..settings import Settings
from ..vendors import block_keys, registered
from ._common import print_json
from .liveness import collect_status


# Where the heartbeats came from, in the fleet page's words (the report's `source`).
SOURCE_WORDS = {"demo": "of the demo's simulated fleet", "tracker": "from the tracker", "prometheus": "from Prometheus",
                "mirror": "from the mirror", "loki": "from Loki"}
# Problems first, as on the fleet page: a host that is not live is what an operator looks for.
STATE_ORDER = {"missing": 0, "stale": 1, "unknown": 2, "live": 3}
STATES = ("live", "stale", "missing", "unknown")
_FAR = float("inf")


def _ms(stamp: Any) -> Optional[int]:
    if not isinstance(stamp, str):
        return None
    try:
        return parse_iso_ms(stamp)
    except (ValueError, OverflowError):
        return None


def active_blocks(row: Mapping[str, Any]) -> List[Tuple[str, Mapping[str, Any]]]:
    """(provider, block) of each vendor's active account on the host, the default vendor's first."""
    found = []
    for provider, field in block_keys():
        block = row.get(field)
        if isinstance(block, Mapping) and isinstance(block.get("label"), str):
            found.append((provider, block))
    return found


def host_urgency(row: Mapping[str, Any]) -> Tuple[int, float, int, str]:
    """Sort key, most urgent first, as the fleet page sorts: a host with an exhausted account,
    then the soonest wall of its accounts, then a host that is not live, then its name."""
    most = (1, _FAR)
    for _provider, block in active_blocks(row):
        wall = _ms(block.get("wall_at"))
        most = min(most, (0 if block.get("status") == "rejected" else 1, float(wall) if wall is not None else _FAR))
    return most + (STATE_ORDER.get(str(row.get("state")), 9), str(row.get("host")))


def _window(pct: Any, resets_at: Any, now_ms: int) -> str:
    """`100%+ · 35m 12s`: the pct and the time to its reset, as the fleet page writes a window."""
    if not is_number(pct):
        return "-"
    reset = _ms(resets_at)
    return pct_text(pct) + (" · %s" % duration(reset - now_ms) if reset is not None else "")


def _wall(block: Mapping[str, Any], now_ms: int) -> str:
    """When the account reaches 100 %, in the fleet page's words."""
    wall = _ms(block.get("wall_at"))
    if wall is None:
        return "no forecast"
    resets = [r for r in (_ms(block.get("five_hour_resets_at")), _ms(block.get("seven_day_resets_at")))
              if r is not None]
    if resets and wall >= min(resets):
        return "not before its reset"
    return "at 100% now" if wall <= now_ms else "100% in " + duration(wall - now_ms)


def _account(block: Mapping[str, Any], vendor: Optional[str], now_ms: int) -> List[str]:
    """The account cells of one active account: who (and whose, for another vendor), 5h, 7d, wall."""
    who = printable(block["label"])[:64]
    status = block.get("status")
    who += " " + (printable(status)[:12] if isinstance(status, str) else "unknown")
    if vendor is not None:
        who = "%s: %s" % (vendor, who)
    if block.get("stale") is True and is_number(block.get("age_s")):
        who += " (last reading %s ago)" % duration(block["age_s"] * 1000)
    return [who, _window(block.get("five_hour_pct"), block.get("five_hour_resets_at"), now_ms),
            _window(block.get("seven_day_pct"), block.get("seven_day_resets_at"), now_ms), _wall(block, now_ms)]


def host_lines(row: Mapping[str, Any], now_ms: int, names: Mapping[str, str]) -> List[List[str]]:
    """The table's rows of one host: its own, then one per other vendor's active account."""
    age = row.get("ageS")
    head = [printable(row.get("state"))[:12], printable(row.get("host")), "-" if not is_number(age) else
            "%s ago" % duration(age * 1000)]
    blocks = active_blocks(row)
    if not blocks:
        quota = row.get("quota") if isinstance(row.get("quota"), Mapping) else {}
        login = "login 5h %s" % pct_text(quota["five_hour_pct"]) if is_number(quota.get("five_hour_pct")) else ""
        return [head + [login or ("no account data" if row.get("state") in ("live", "stale") else "-"), "-", "-", ""]]
    lines = []
    for index, (provider, block) in enumerate(blocks):
        vendor = names.get(provider) if index or len(blocks) > 1 else None
        lines.append((head if index == 0 else ["", "", ""]) + _account(block, vendor, now_ms))
    return lines


def summary_lines(report: Mapping[str, Any], where: Optional[str]) -> List[str]:
    """The lines above the table: whose fleet, from where and when; how many hosts in each state."""
    source = report.get("source")
    words = SOURCE_WORDS.get(str(source), "from %s" % printable(source) if source else "")
    anchor = report.get("anchor")
    if source == "tracker" and isinstance(anchor, str) and anchor:
        words += " (its issue %s)" % printable(anchor)[:64]
    read = _ms(report.get("generatedAt"))
    if read is not None:
        words += ", read at %s" % time.strftime("%H:%M:%S", time.localtime(read / 1000.0))
    head = ("Fleet of the monitor at %s: heartbeats %s" % (printable(where)[:200], words) if where
            else "Fleet: heartbeats %s" % words)
    hosts = report.get("hosts") or []
    # A state no host is in goes unsaid: a fleet whose liveness is unknown has no host called missing.
    counts = ["%d %s" % (n, state) for n, state in ((sum(1 for h in hosts if h.get("state") == s), s)
                                                    for s in STATES) if n]
    unlisted = report.get("unlisted") if isinstance(report.get("unlisted"), list) else []
    if unlisted:
        counts.append("%d not in roster" % len(unlisted))
    return [head, "%d hosts: %s" % (len(hosts), ", ".join(counts))]


def interval_line(report: Dict[str, Any], configured_ms: int) -> str:
    """How often hosts beat and when one counts as live, and whether the tracker's budget stretched it."""
    in_force = report.get("publishIntervalMs")
    if not isinstance(in_force, int) or isinstance(in_force, bool):
        in_force = configured_ms
    live = "a host is live when seen within %s" % duration(2 * in_force)
    if report.get("source") != "tracker":
        return "No heartbeats are published; %s." % live
    text = "A heartbeat every %s; %s" % (duration(in_force), live)
    if in_force > configured_ms:
        return text + " (stretched from %s to keep the roster's heartbeats within 60 %% of the tracker's " \
                      "limit; svc-cluster doctor, check tracker-budget)." % duration(configured_ms)
    return text + "."


def table(report: Mapping[str, Any], now_ms: int) -> List[str]:
    """The hosts, most urgent first, in aligned columns under the fleet page's headings."""
    names = {vendor.name: vendor.display_name for vendor in registered()}
    rows = [["STATE", "HOST", "HEARTBEAT", "ACTIVE ACCOUNT", "5H · RESETS IN", "7D · RESETS IN", "REACHES 100 %"]]
    for row in sorted(report.get("hosts") or [], key=host_urgency):
        rows.extend(host_lines(row, now_ms, names))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(r, widths)).rstrip() for r in rows]


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
    where = ns.url.strip().rstrip("/") if ns.url else None
    for text in summary_lines(report, where):
        print(text)
    if not ns.url:
        print(interval_line(report, settings.liveness_interval_ms))
    print()
    for text in table(report, int(time.time() * 1000)):
        print(text)
    if not report["hosts"]:
        print("(the roster is empty: svc-cluster roster add NAME, or read a running monitor's fleet view "
              "with --url URL)")
    unlisted = [u for u in report.get("unlisted") or [] if isinstance(u, Mapping) and isinstance(u.get("host"), str)]
    if unlisted:
        print("Heartbeats from hosts not in the roster: %s" % ", ".join(
            printable(u["host"]) + (" (heartbeat %s ago)" % duration(u["ageS"] * 1000) if is_number(u.get("ageS"))
                                    else "") for u in unlisted))
    if report.get("warning"):
        print("warning: %s" % report["warning"], file=sys.stderr)
    if report.get("error"):
        print("svc-cluster status: liveness is unknown, so every host shows unknown: %s" % report["error"],
              file=sys.stderr)
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
