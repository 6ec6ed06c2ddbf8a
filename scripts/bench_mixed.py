#!/usr/bin/env python3
"""A mixed node (3 Claude + 3 Codex accounts) keeps the cached-read floor (docs/codex.md).

The real monitor (a subprocess) probes the built-in simulated provider, which
answers both Claude's header probe and the Codex usage route, for a node with
three `MODEL_TOKEN_*` and three `CODEX_HOME_*` accounts, with a TTL long
enough that every request is a cached read. Alternating rounds of wrk
(32 keep-alive connections) measure:

- cached GET /api/accounts (Claude's contract body) on the mixed node;
- cached GET /api/accounts?provider=codex on the same node;
- baseline: a stdlib ThreadingHTTPServer whose do_GET writes status line,
  headers and a constant body of the same size in ONE write (one per body size).

Each ratio is the median of per-round ratios against the one-write baseline
of the same body size, measured in the same run (target >= 0.8x for both).

Loopback only. Installs wrk (apt-get) and prometheus_client (pip) when missing.
Usage: python3 -m scripts.bench_mixed [--quick] [--duration S] [--rounds N]   (default 5 rounds of 3 s)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Dict, List

from scripts.bench_server import BASELINE_A, ensure_tools, start_baseline, wrk
from svcposture._files import write_json_atomic, write_text_atomic
from svcposture._dirs import ensure_dir
from svcposture.demo import main as demo
from tests.support.home import REPO
from tests.support.monitor import start_monitor
from tests.support.waiting import wait_until

CODEX_NAMES = ("WORK", "SIDE", "SPARE")


def add_codex_accounts(node: "demo.DemoNode") -> None:
    """Three Codex logins (the demo's token, which the simulated provider accepts) beside the three Claude ones."""
    _, token, account_id, _ = demo.DEMO_CODEX
    lines = [line for line in node.paths.accounts_env.read_text().splitlines() if "CODEX_HOME" not in line]
    for name in CODEX_NAMES:
        home = node.root / ("codex-" + name.lower())
        ensure_dir(home)
        write_json_atomic(home / "auth.json", {"tokens": {"access_token": token, "account_id": account_id}})
        lines.append("export CODEX_HOME_%s='%s'  # %s@demo.invalid" % (name, home, name.lower()))
    lines.append('export CODEX_HOME="$CODEX_HOME_%s"' % CODEX_NAMES[0])
    write_text_atomic(node.paths.accounts_env, "\n".join(lines) + "\n")


def measure(duration: float, rounds: int) -> Dict[str, object]:
    """Alternating wrk rounds against a mixed node and the one-write baselines of the same sizes."""
    provider = demo.SimulatedProvider().start()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("SVC_", "MODEL_", "CODEX_"))}
    base_env["PYTHONPATH"] = str(REPO)
    node = demo.DemoNode(provider.url, base_environ=base_env)
    add_codex_accounts(node)
    environ = dict(node.environ, SVC_POSTURE_TTL_S="3600", SVC_PROBE_INTERVAL_S="3600", SVC_REFRESH_FLOOR_S="0",
                   SVC_QUOTA_SAMPLER="0")
    mon = start_monitor(environ, timeout=30)
    procs = []
    try:
        claude = mon.get("/api/accounts", timeout=60)[2]
        wait_until(lambda: len(json.loads(mon.get("/api/accounts?provider=codex", timeout=60)[2])
                               .get("accounts") or []) == len(CODEX_NAMES), timeout=60, message="codex accounts")
        codex = mon.get("/api/accounts?provider=codex", timeout=60)[2]
        if len(json.loads(claude)["accounts"]) != 3:
            raise RuntimeError("the mixed node does not show three Claude accounts")
        base_claude, port_claude, _ = start_baseline(BASELINE_A, len(claude))
        base_codex, port_codex, _ = start_baseline(BASELINE_A, len(codex))
        procs += [base_claude, base_codex]
        targets = {"claude": mon.url + "/api/accounts", "one-write (claude size)": "http://127.0.0.1:%d/" % port_claude,
                   "codex": mon.url + "/api/accounts?provider=codex",
                   "one-write (codex size)": "http://127.0.0.1:%d/" % port_codex}
        for url in targets.values():  # warm-up
            wrk(url, 1)
        rates: Dict[str, List[float]] = {k: [] for k in targets}
        for _ in range(rounds):
            for name, url in targets.items():
                rates[name].append(wrk(url, duration))
        for path in ("/api/accounts", "/api/accounts?provider=codex"):
            if json.loads(mon.get(path, timeout=60)[2]).get("cached") is not True:
                raise RuntimeError("the benchmarked reads of %s were not cached reads" % path)
    finally:
        mon.stop(timeout=20, check=False)
        for p in procs:
            p.terminate()
        provider.stop()
        node.remove()
    return {"rates": rates, "sizes": (len(claude), len(codex))}


def _figure(name: str, value: float, baseline: float, ratio: float) -> Dict[str, object]:
    return {"figure": name, "value": round(value), "unit": "req/s", "baseline": round(baseline),
            "baseline_label": "one-write stdlib ThreadingHTTPServer", "ratio": round(ratio, 3),
            "target": ">= 0.8x", "ok": ratio >= 0.8}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs (2 s, 1 round) for a smoke check")
    parser.add_argument("--duration", type=float, default=None, help="seconds per wrk run (default 3; quick 2)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="alternating rounds (default 5; quick 1): short rounds follow a shared machine's load")
    args = parser.parse_args()
    duration = args.duration or (2.0 if args.quick else 3.0)
    rounds = args.rounds or (1 if args.quick else 5)
    ensure_tools()
    found = measure(duration, rounds)
    rates: Dict[str, List[float]] = found["rates"]  # type: ignore[assignment]
    med = {k: statistics.median(v) for k, v in rates.items()}
    # Rounds alternate, so each round's ratio compares runs made under the same machine load.
    ratio_claude = statistics.median(m / a for m, a in zip(rates["claude"], rates["one-write (claude size)"]))
    ratio_codex = statistics.median(m / a for m, a in zip(rates["codex"], rates["one-write (codex size)"]))
    print("mixed node: 3 Claude + 3 Codex accounts; bodies %d (claude) and %d (codex) bytes; wrk -t2 -c32, "
          "%d x %.0f s rounds, alternating; all runs (req/s): %s"
          % (found["sizes"] + (rounds, duration, {k: [round(x) for x in v] for k, v in rates.items()})))
    print("cached GET /api/accounts on the mixed node: %.0f req/s, one-write %.0f req/s: ratio %.2fx (target >= 0.8x)"
          % (med["claude"], med["one-write (claude size)"], ratio_claude))
    print("cached GET /api/accounts?provider=codex: %.0f req/s, one-write %.0f req/s: ratio %.2fx (target >= 0.8x)"
          % (med["codex"], med["one-write (codex size)"], ratio_codex))
    figures = [
        _figure("mixed node (3+3): cached GET /api/accounts vs one-write stdlib", med["claude"],
                med["one-write (claude size)"], ratio_claude),
        _figure("mixed node (3+3): cached GET /api/accounts?provider=codex vs one-write stdlib", med["codex"],
                med["one-write (codex size)"], ratio_codex),
    ]
    print(json.dumps({"figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
