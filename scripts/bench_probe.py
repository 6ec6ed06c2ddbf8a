#!/usr/bin/env python3
"""Header-probe sweep: the token-scoped child vs the common sequential loop.

Both run in the same process run against the same loopback provider test
server, which answers every request after a fixed latency (200 ms):

- ours: `probe.run_headers` -- /bin/sh sources the accounts env file, the
  Python child probes up to 4 accounts at once, prints token-free JSON;
- baseline: one request per account in turn, sleeping 500 ms between accounts
  (how hand-written probe loops space their calls), in-process, no child.

Also measured: the child's start-up overhead (a sweep over a file with no
usable entry: fork + sh + source + Python start + package import) next to a
bare `python -c pass`; and what a node watching five vendors costs beside one
watching two, in CPU per sweep and resident set (scripts/vendor_nodes.py).

Prints the figures, then one JSON line `{"figures": [...]}` (see bench_all.py).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from svcposture.probe import runner as probe
from svcposture.claude import provider as wire
from svcposture.claude.knobs import DEFAULT_PROBE_MODEL
from svcposture.paths import Paths
from scripts.vendor_nodes import figures as vendor_figures
from tests.support.provider import ProviderServer

ACCOUNTS = 4
LATENCY_S = 0.2
GAP_S = 0.5
TARGET_RATIO = 0.3


def sequential_sweep(url: str, tokens) -> None:
    body = json.dumps({"model": DEFAULT_PROBE_MODEL, "max_tokens": 1,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for i, token in enumerate(tokens):
        if i:
            time.sleep(GAP_S)
        req = urllib.request.Request(url + "/v1/messages", data=body, method="POST", headers={
            "authorization": "Bearer " + token, "anthropic-version": "2023-06-01",
            "anthropic-beta": "oauth-2025-04-20", "content-type": "application/json"})
        with opener.open(req, timeout=10) as resp:
            resp.read()
            wire.parse_unified_headers({k.lower(): v for k, v in resp.headers.items()})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (CI)")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 7)

    with tempfile.TemporaryDirectory() as tmp, ProviderServer() as provider:
        home = Path(tmp)
        tokens = ["bench-token-%d-%s" % (i, os.urandom(4).hex()) for i in range(ACCOUNTS)]
        for t in tokens:
            provider.set_account(t, delay=LATENCY_S)
        env_file = home / "model-accounts.env"
        env_file.write_text("".join('MODEL_TOKEN_ACCT%d="%s"  # a%d@example.com\n' % (i + 1, t, i + 1)
                                    for i, t in enumerate(tokens))
                            + 'MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n')
        os.chmod(str(env_file), 0o600)
        empty_file = home / "none.env"
        empty_file.write_text("MODEL_TOKEN_ACCT1=PASTE_TOKEN_HERE\n")
        os.chmod(str(empty_file), 0o600)
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("SVC_", "MODEL_"))}
        environ.update({"HOME": str(home), "SVC_PROVIDER_URL": provider.url, "SVC_ACCOUNTS_ENV": str(env_file)})
        empty_environ = dict(environ, SVC_ACCOUNTS_ENV=str(empty_file))

        ours, base, startup, bare = [], [], [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            report = probe.run_headers(Paths(home, environ=environ), environ)
            ours.append(time.perf_counter() - t0)
            rows = (report.get("claude") or {}).get("accounts") or []
            assert report.get("available") and rows and all(a["error"] is None for a in rows), report
            t0 = time.perf_counter()
            sequential_sweep(provider.url, tokens)
            base.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert probe.run_headers(Paths(home, environ=empty_environ), empty_environ) == {"available": False}
            startup.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            bare.append(time.perf_counter() - t0)

    ours_ms = statistics.median(ours) * 1000
    base_ms = statistics.median(base) * 1000
    start_ms = statistics.median(startup) * 1000
    bare_ms = statistics.median(bare) * 1000
    ratio = ours_ms / base_ms
    print("sweep of %d accounts, provider latency %d ms, %d rounds (medians)"
          % (ACCOUNTS, LATENCY_S * 1000, rounds))
    print("  token-scoped child, 4 in flight: %8.1f ms" % ours_ms)
    print("  sequential, 500 ms between:      %8.1f ms" % base_ms)
    print("  ratio: %.3fx (target <= %.1fx): %s" % (ratio, TARGET_RATIO, "PASS" if ratio <= TARGET_RATIO else "MISS"))
    print("child start-up (sh + source + python + import, no request): %.1f ms; bare python -c pass: %.1f ms"
          % (start_ms, bare_ms))
    figures = [
        {"figure": "probe sweep, 4 accounts @200 ms", "value": round(ours_ms, 1), "unit": "ms",
         "baseline": round(base_ms, 1), "baseline_label": "sequential with 500 ms gaps",
         "ratio": round(ratio, 3), "target": "<= %.1fx" % TARGET_RATIO, "ok": ratio <= TARGET_RATIO},
        {"figure": "probe child start-up overhead", "value": round(start_ms, 1), "unit": "ms",
         "baseline": round(bare_ms, 1), "baseline_label": "python -c pass",
         "ratio": round(start_ms / bare_ms, 2) if bare_ms else None, "target": None, "ok": None},
    ]
    figures += vendor_figures(args.quick)
    print(json.dumps({"figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
