#!/usr/bin/env python3
"""Run every scripts/bench_*.py, then scripts/crash_test.py and scripts/soak.py,
and print one table of figures.

    python3 -m scripts.bench_all [--quick]      (from the repository root)

Each script runs as a module from the repository root (`python3 -m
scripts.bench_server`), which is how it imports the package and the test
harness (tests.support) without touching sys.path.

Convention: each bench accepts `--quick` (a short run for CI) and prints, as
its LAST stdout line, one JSON object

    {"figures": [{"figure": str, "value": number|str, "unit": str,
                  "baseline": number|null, "baseline_label": str (optional),
                  "baseline_unit": str (optional, defaults to unit),
                  "ratio": number|null, "target": str|null, "ok": bool|null}, ...]}

`ratio` is value/baseline measured side by side in the same run; `target` is
a human-readable goal such as ">= 0.8x" or "< 25 ms"; `ok` says whether the
figure met it. A bench that prints no such line still runs: its raw output is
shown below the table.

Exit status: 0 when every bench ran, 1 when one failed or timed out, and with
`--strict` also 1 when a figure missed its target.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent


# Not benches by name, but their figures belong in the same table.
LONG_RUNS = ("crash_test.py", "soak.py")


def discover(only: List[str], skip: List[str]) -> List[Path]:
    found = sorted(p for p in SCRIPTS.glob("bench_*.py") if p.name != Path(__file__).name)
    found += [SCRIPTS / name for name in LONG_RUNS if (SCRIPTS / name).is_file()]
    if only:
        found = [p for p in found if any(o in p.stem for o in only)]
    return [p for p in found if not any(s in p.stem for s in skip)]


def parse_figures(stdout: str) -> Optional[List[Dict[str, Any]]]:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except ValueError:
            return None
        if isinstance(data, dict) and isinstance(data.get("figures"), list):
            return [f for f in data["figures"] if isinstance(f, dict)]
        return None
    return None


def module_of(path: Path) -> str:
    return "%s.%s" % (SCRIPTS.name, path.stem)


def run_bench(path: Path, quick: bool, timeout: float, extra: List[str]) -> Dict[str, Any]:
    env = dict(os.environ)
    cmd = [sys.executable, "-m", module_of(path)] + (["--quick"] if quick else []) + extra
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        if quick and proc.returncode == 2 and "unrecognized arguments: --quick" in proc.stderr:
            cmd.remove("--quick")
            proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        code: Optional[int] = proc.returncode
        stdout, stderr = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code = None
        stdout = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    return {"bench": path.stem, "command": " ".join(["python3", "-m", module_of(path)] + cmd[3:]),
            "exit": code, "seconds": round(time.monotonic() - started, 1),
            "figures": parse_figures(stdout), "stdout": stdout, "stderr": stderr}


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = ("%.3g" % value) if abs(value) < 10 else ("%.1f" % value if abs(value) < 1000 else "%.0f" % value)
    else:
        text = str(value)
    return (text + " " + unit).strip() if unit else text


def table(results: List[Dict[str, Any]]) -> str:
    rows = [("figure", "value", "baseline", "ratio", "target", "met", "bench")]
    for result in results:
        for fig in result["figures"] or []:
            baseline = _fmt(fig.get("baseline"), fig.get("baseline_unit", fig.get("unit", "")))
            if fig.get("baseline_label") and fig.get("baseline") is not None:
                baseline += " (%s)" % fig["baseline_label"]
            ratio = fig.get("ratio")
            ok = fig.get("ok")
            rows.append((str(fig.get("figure", "?")), _fmt(fig.get("value"), fig.get("unit", "")), baseline,
                         "-" if ratio is None else _fmt(ratio) + "x", str(fig.get("target") or "-"),
                         "-" if ok is None else ("yes" if ok else "NO"), result["bench"]))
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("---" for _ in rows[0]) + "|")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Run every scripts/bench_*.py and print one table.",
                                     epilog="Each bench prints {\"figures\": [...]} as its last stdout line.")
    parser.add_argument("--quick", action="store_true", help="pass --quick to every bench (CI-sized runs)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only benches whose name contains NAME (repeatable)")
    parser.add_argument("--skip", action="append", default=[], metavar="NAME",
                        help="skip benches whose name contains NAME (repeatable)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per bench (default 300 with --quick, 1800 otherwise)")
    parser.add_argument("--json", metavar="FILE", help="also write every result as JSON to FILE")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a figure misses its target")
    parser.add_argument("--verbose", action="store_true", help="echo every bench's own output")
    args = parser.parse_args(argv)
    timeout = args.timeout or (300.0 if args.quick else 1800.0)

    benches = discover(args.only, args.skip)
    if not benches:
        print("bench_all: no scripts/bench_*.py matched", file=sys.stderr)
        return 1
    results = []
    for path in benches:
        print("running %s%s ..." % (module_of(path), " --quick" if args.quick else ""), file=sys.stderr, flush=True)
        result = run_bench(path, args.quick, timeout, [])
        state = "timed out" if result["exit"] is None else "exit %d" % result["exit"]
        print("  %s in %.1f s, %s" % (state, result["seconds"],
                                      "%d figures" % len(result["figures"]) if result["figures"] is not None
                                      else "no JSON figures line"), file=sys.stderr, flush=True)
        if args.verbose:
            sys.stderr.write(result["stdout"] + result["stderr"])
        results.append(result)

    print(table(results))
    failed = [r for r in results if r["exit"] != 0]
    missed = [f for r in results for f in (r["figures"] or []) if f.get("ok") is False]
    for result in results:
        if result["figures"] is None or result["exit"] != 0:
            print("\n### %s (%s, %s)" % (result["bench"], result["command"],
                                         "timed out" if result["exit"] is None else "exit %s" % result["exit"]))
            print("```")
            print("\n".join(result["stdout"].rstrip().splitlines()[-40:]))
            if result["exit"] != 0 and result["stderr"].strip():
                print("--- stderr ---")
                print("\n".join(result["stderr"].rstrip().splitlines()[-20:]))
            print("```")
    print("\n%d benches, %d failed, %d figures, %d missed their target; reproduce with: python3 -m scripts.bench_all%s"
          % (len(results), len(failed), sum(len(r["figures"] or []) for r in results), len(missed),
             " --quick" if args.quick else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    if failed:
        return 1
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
