#!/usr/bin/env python3
"""The login's profile read by streaming costs about what loading it does: jsonscan vs json.loads, 32 MB.

Three profiles of 32 MB in the shape of Claude Code's `~/.claude.json`, each
with its `oauthAccount` last: one long string before it (the shape a scan that
started a cut string again at each chunk paid for quadratically), a project
history of many small strings and objects (the common shape), and a history
whose project paths hold escapes. Each is read from a file on disk, as the
probe child reads it: `top_level_member(..., "oauthAccount")` against
`json.loads(fh.read())`, best of N runs, side by side in this run.
Target: the scan within 3x of json.loads on every profile.

The last stdout line is the bench_all JSON {"figures": [...]}.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from svcposture.claude.child import MAX_PROFILE_BYTES
from svcposture.claude.jsonscan import top_level_member

SIZE = 32 * 1024 * 1024 - 4096
ACCOUNT = {"accountUuid": "00000000-0000-0000-0000-000000000000", "emailAddress": "me@example.com",
           "organizationUuid": "00000000-0000-0000-0000-000000000001", "displayName": "me"}
TARGET = 3.0


def long_string() -> Dict[str, Any]:
    overhead = len(json.dumps({"cachedNote": "", "oauthAccount": ACCOUNT}))
    return {"cachedNote": "x" * (SIZE - overhead), "oauthAccount": ACCOUNT}


def history(escaped: bool) -> Dict[str, Any]:
    projects: Dict[str, Any] = {}
    entry = {"display": "fix the failing test in the parser " * 3, "pastedContents": {}}
    size, i = 0, 0
    while size < SIZE - 4096:
        path = ("/work/\u00e9t\u00e9\\\"%06d" if escaped else "/work/project-%06d") % i
        project = {"allowedTools": [], "history": [entry] * 8, "mcpServers": {}, "hasTrustDialogAccepted": True,
                   "lastCost": 0.25, "lastDuration": 12345}
        projects[path] = project
        size += len(json.dumps({path: project}))
        i += 1
    return {"numStartups": 42, "projects": projects, "oauthAccount": ACCOUNT}


def best_of(runs: int, fn: Callable[[], object]) -> float:
    fn()
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def scan(path: Path) -> Any:
    with open(str(path), "rb") as fh:
        return top_level_member(fh, "oauthAccount", limit=MAX_PROFILE_BYTES)


def load(path: Path) -> Any:
    with open(str(path), "rb") as fh:
        return json.loads(fh.read()).get("oauthAccount")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args()
    runs = 2 if args.quick else 5
    work = Path(tempfile.mkdtemp(prefix="bench-jsonscan-"))
    figures: List[Dict[str, Any]] = []
    try:
        for name, build in (("one long string", long_string), ("project history", lambda: history(False)),
                            ("history with escapes", lambda: history(True))):
            path = work / "claude.json"
            path.write_bytes(json.dumps(build(), ensure_ascii=False).encode("utf-8"))
            size = path.stat().st_size
            assert scan(path) == load(path) == ACCOUNT, name
            scan_s, load_s = best_of(runs, lambda: scan(path)), best_of(runs, lambda: load(path))
            ratio = scan_s / load_s
            print("%s, %.1f MB: jsonscan %.0f ms, json.loads %.0f ms, ratio %.2fx (target <= %gx), best of %d"
                  % (name, size / 1048576.0, scan_s * 1000, load_s * 1000, ratio, TARGET, runs))
            figures.append({"figure": "oauthAccount from a 32 MB profile (%s)" % name,
                            "value": round(scan_s * 1000, 1), "unit": "ms", "baseline": round(load_s * 1000, 1),
                            "baseline_label": "json.loads of the file", "ratio": round(ratio, 2),
                            "target": "<= %gx" % TARGET, "ok": ratio <= TARGET})
    finally:
        shutil.rmtree(str(work), ignore_errors=True)
    print(json.dumps({"figures": figures}))
    return 0 if all(f["ok"] for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
