"""What a node watching five vendors costs beside one watching two: the second part of scripts/bench_probe.py.

Two real monitors run side by side, on the same machine and clock, each with two accounts per
vendor: the two-vendor node (Claude and Codex) and the five-vendor node (Claude, Codex, GitHub
Copilot, z.ai and Kimi), every vendor answered by its loopback stand-in with a captured reply.
Both probe every SVC_PROBE_INTERVAL_S; over each window the CPU a node spent (the monitor and its
reaped probe children: utime, stime, cutime, cstime) is divided by the sweeps it ran in it (its
Claude service's probe runs). Both are measured over the same windows, so a busy machine slows
both alike; the figures are the medians over the windows, with their spread, and the monitor's
resident set (VmRSS) at the end.
"""
from __future__ import annotations

import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from tests.support.codex import CodexServer, make_login, usage_reply
from tests.support.fieldsamples import plan_reply_ahead
from tests.support.home import accounts_path, monitor_env, set_host_name
from tests.support.keyservers import CopilotServer, KimiServer, ZaiServer
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer

INTERVAL_S = 1.0
KEY_REPLIES = {"copilot": "copilot-user-business-seat.json", "zai": "zai-quota-pro-live.json",
               "kimi": "kimi-usages-paste.json"}
KEY_LINES = {"copilot": ("COPILOT_TOKEN_", "COPILOT_GITHUB_TOKEN"), "zai": ("ZAI_API_KEY_", "ZAI_API_KEY"),
             "kimi": ("KIMI_API_KEY_", "KIMI_API_KEY")}


def cpu_s(pid: int) -> Tuple[float, float]:
    """(CPU seconds of a process alone, and with the children it has reaped)."""
    with open("/proc/%d/stat" % pid) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    own = (int(fields[11]) + int(fields[12])) / ticks
    return own, own + (int(fields[13]) + int(fields[14])) / ticks


def rss_mb(pid: int) -> Tuple[float, float]:
    """(VmRSS, VmHWM) of a process, MB."""
    found = {}
    with open("/proc/%d/status" % pid) as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                found[line.split(":")[0]] = int(line.split()[1]) / 1024.0
    return found["VmRSS"], found["VmHWM"]


def sweeps(mon: Any) -> int:
    """The node's sweeps so far: its Claude service's probe runs."""
    text = mon.get("/metrics")[2].decode()
    found = re.search(r"^svc_probe_runs_total (\d+)", text, re.M)
    return int(found.group(1)) if found else 0


def _home(root: Path, name: str, lines: List[str]) -> Path:
    home = root / name
    home.mkdir(mode=0o700)
    set_host_name(home, name)
    path = accounts_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    os.chmod(str(path), 0o600)
    return home


def _node_lines(root: Path, tag: str, servers: Dict[str, Any], five: bool) -> List[str]:
    lines = []
    for i in (1, 2):
        token = "bench-claude-%s-%d-%s" % (tag, i, os.urandom(4).hex())
        servers["claude"].set_account(token, five_hour=(0.3, "allowed"), seven_day=(0.2, "allowed"))
        lines.append('MODEL_TOKEN_A%d="%s"' % (i, token))
        login = root / ("codex-%s-%d" % (tag, i))
        codex_token = "bench-codex-%s-%d" % (tag, i)
        make_login(login, codex_token, account_id="acct-%s-%d" % (tag, i))
        servers["codex"].set_reply(codex_token, usage_reply(10, 20))
        lines.append('CODEX_HOME_C%d="%s"' % (i, login))
        for vendor in ("copilot", "zai", "kimi") if five else ():
            key = "bench-%s-%s-%d-%s" % (vendor, tag, i, os.urandom(4).hex())
            servers[vendor].set_reply(key, plan_reply_ahead(KEY_REPLIES[vendor], time.time()))
            lines.append('%sK%d="%s"' % (KEY_LINES[vendor][0], i, key))
    lines += ['export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_A1"', 'export CODEX_HOME="$CODEX_HOME_C1"']
    lines += ['export %s="$%sK1"' % (KEY_LINES[v][1], KEY_LINES[v][0]) for v in ("copilot", "zai", "kimi") if five]
    return lines


def measure(windows: int, window_s: float) -> Dict[str, Any]:
    """The two nodes' CPU per sweep over `windows` windows, and their resident sets."""
    with tempfile.TemporaryDirectory() as tmp, ProviderServer() as claude, CodexServer() as codex, \
            CopilotServer() as copilot, ZaiServer() as zai, KimiServer() as kimi:
        root = Path(tmp)
        servers = {"claude": claude, "codex": codex, "copilot": copilot, "zai": zai, "kimi": kimi}
        urls = {"SVC_CODEX_URL": codex.url, "SVC_COPILOT_URL": copilot.url, "SVC_ZAI_URL": zai.url,
                "SVC_KIMI_URL": kimi.url, "SVC_PROBE_INTERVAL_S": str(INTERVAL_S), "SVC_POSTURE_TTL_S": "0.5",
                "SVC_REFRESH_FLOOR_S": "0.2", "SVC_PROBE_DEADLINE_S": "10"}
        nodes = {}
        for name, five in (("two", False), ("five", True)):
            home = _home(root, name, _node_lines(root, name, servers, five))
            nodes[name] = start_monitor(monitor_env(home, claude.url, **urls))
        try:
            time.sleep(3 * INTERVAL_S)  # the first probes and the services' start, not measured
            per_sweep: Dict[str, List[float]] = {name: [] for name in nodes}
            monitor_only: Dict[str, List[float]] = {name: [] for name in nodes}
            for _ in range(windows):
                start = {name: (cpu_s(mon.proc.pid), sweeps(mon)) for name, mon in nodes.items()}
                time.sleep(window_s)
                for name, mon in nodes.items():
                    (own0, all0), runs0 = start[name]
                    (own1, all1), runs = cpu_s(mon.proc.pid), sweeps(mon) - runs0
                    if runs > 0:
                        per_sweep[name].append((all1 - all0) / runs * 1000.0)
                        monitor_only[name].append((own1 - own0) / runs * 1000.0)
            rss = {name: rss_mb(mon.proc.pid) for name, mon in nodes.items()}
        finally:
            for mon in nodes.values():
                mon.stop()
    return {"perSweepMs": per_sweep, "monitorPerSweepMs": monitor_only, "rssMb": rss}


def summary(values: List[float]) -> Tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


TARGET_RATIO = 2.0
TARGET_RSS_MB = 40.0


def figures(quick: bool) -> List[Dict[str, Any]]:
    """The part's figures, in bench_all's convention, after printing them for a person."""
    windows, window_s = (3, 8.0) if quick else (7, 12.0)
    got = measure(windows, window_s)
    rows = []
    print("five vendors vs two, two accounts each, %d windows of %g s side by side (median, min-max):"
          % (windows, window_s))
    for key, what in (("perSweepMs", "node CPU per sweep (monitor + probe children)"),
                      ("monitorPerSweepMs", "monitor CPU per sweep (the process alone)")):
        five, two = summary(got[key]["five"]), summary(got[key]["two"])
        ratio = five[0] / two[0]
        print("  %s: five %.1f ms (%.1f-%.1f), two %.1f ms (%.1f-%.1f), ratio %.2fx (target <= %.1fx)"
              % ((what,) + five + two + (ratio, TARGET_RATIO)))
        rows.append({"figure": "five-vendor " + what, "value": round(five[0], 1), "unit": "ms",
                     "baseline": round(two[0], 1), "baseline_label": "two-vendor node, same windows",
                     "ratio": round(ratio, 2), "target": "<= %.1fx" % TARGET_RATIO, "ok": ratio <= TARGET_RATIO})
    rss, hwm = got["rssMb"]["five"]
    print("  five-vendor monitor RSS %.1f MB (peak %.1f), two-vendor %.1f MB (target <= %.0f MB)"
          % (rss, hwm, got["rssMb"]["two"][0], TARGET_RSS_MB))
    rows.append({"figure": "five-vendor monitor RSS", "value": round(rss, 1), "unit": "MB",
                 "baseline": round(got["rssMb"]["two"][0], 1), "baseline_label": "two-vendor node",
                 "ratio": round(rss / got["rssMb"]["two"][0], 2), "target": "<= %.0f MB" % TARGET_RSS_MB,
                 "ok": hwm <= TARGET_RSS_MB})
    return rows
