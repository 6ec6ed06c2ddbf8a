#!/usr/bin/env python3
"""How long `import svcposture` takes, measured with `python -X importtime`.

Each round runs, alternating, a fresh interpreter importing svcposture and one
importing a stdlib baseline (`json`), and reads the cumulative microseconds of
the top-level module from the importtime report. The medians are compared in
the same run, so the ratio holds on any machine; the absolute target (< 10 ms)
is printed beside it. It also checks that `http.server`, `http.client` and
`urllib.request` and `subprocess` are not imported, and lists the most expensive modules.
`--python` measures another interpreter (e.g. the oldest supported, 3.9).

The last stdout line is the bench_all JSON: {"figures": [...]}.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
TARGET_MS = 10.0
# The network, server and process modules `import svcposture` must leave out.
WATCHED = ("http.server", "urllib.request", "http.client", "subprocess")


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # Cached bytecode is what a real user has after the first run; keep it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def importtime(python: str, module: str) -> Tuple[float, List[Tuple[str, int, int]]]:
    """(cumulative ms of `module`, [(name, self us, cumulative us)] of everything it pulled in)."""
    proc = subprocess.run([python, "-X", "importtime", "-c", "import %s" % module],
                          cwd=str(REPO), env=_env(), capture_output=True, text=True, check=True)
    rows: List[Tuple[str, int, int]] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        self_us, cum_us, name = line.split(":", 1)[1].split("|", 2)
        # The name keeps its leading spaces: they give the nesting depth.
        rows.append((name[1:].rstrip(), int(self_us), int(cum_us)))
    # Rows are printed in completion order: the module's own row closes its subtree.
    for index, (name, _self, cum) in enumerate(rows):
        if name.strip() == module and not name.startswith(" "):
            start = index
            while start > 0 and rows[start - 1][0].startswith(" "):
                start -= 1
            return cum / 1000.0, rows[start:index + 1]
    raise RuntimeError("no importtime row for %s:\n%s" % (module, proc.stderr[-2000:]))


def pulled_in(python: str) -> Dict[str, bool]:
    # Only what svcposture itself adds counts: site hooks may load urllib before it.
    # urllib.parse is harmless (pathlib imports it on 3.9); the network and server
    # modules are what must stay out.
    code = ("import sys; before = set(sys.modules); import svcposture; "
            "m = set(sys.modules) - before; "
            "print(*(int(name in m) for name in %r))" % (WATCHED,))
    out = subprocess.run([python, "-c", code], cwd=str(REPO), env=_env(),
                         capture_output=True, text=True, check=True).stdout.split()
    return {name: flag == "1" for name, flag in zip(WATCHED, out)}


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of 21")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure")
    parser.add_argument("--baseline", default="json", help="stdlib module to compare with (json)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (5 if args.quick else 21)

    importtime(args.python, "svcposture")  # warm the bytecode cache and the page cache
    importtime(args.python, args.baseline)
    ours: List[float] = []
    base: List[float] = []
    last_rows: List[Tuple[str, int, int]] = []
    for _ in range(rounds):
        ms, last_rows = importtime(args.python, "svcposture")
        ours.append(ms)
        base.append(importtime(args.python, args.baseline)[0])
    ours_ms = statistics.median(ours)
    base_ms = statistics.median(base)
    ratio = ours_ms / base_ms if base_ms else None
    modules = pulled_in(args.python)

    print("import svcposture: median %.2f ms over %d rounds (min %.2f, max %.2f)"
          % (ours_ms, rounds, min(ours), max(ours)))
    print("import %s (baseline): median %.2f ms; ratio %.2fx" % (args.baseline, base_ms, ratio or 0))
    print("target < %.0f ms: %s" % (TARGET_MS, "PASS" if ours_ms < TARGET_MS else "OVER"))
    for name, present in modules.items():
        print("%s newly imported: %s" % (name, "YES (bad)" if present else "no"))
    print("most expensive modules (self time, last round):")
    for name, self_us, cum_us in sorted(last_rows, key=lambda r: -r[1])[:8]:
        print("  %7.2f ms self  %7.2f ms cumulative  %s" % (self_us / 1000, cum_us / 1000, name.strip()))

    figures = [
        {"figure": "import svcposture (-X importtime)", "value": round(ours_ms, 2), "unit": "ms",
         "baseline": round(base_ms, 2), "baseline_label": "import %s" % args.baseline,
         "ratio": round(ratio, 2) if ratio else None, "target": "< %g ms" % TARGET_MS,
         "ok": ours_ms < TARGET_MS},
        {"figure": "http.server/http.client/urllib.request/subprocess imported by import svcposture",
         "value": "yes" if any(modules.values()) else "no", "unit": "",
         "baseline": None, "ratio": None, "target": "no", "ok": not any(modules.values())},
    ]
    print(json.dumps({"figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
