"""docs/codex.md: its examples run and its fences use the README's languages."""
from __future__ import annotations

import re
import subprocess
import sys

from tests.support.home import REPO

DOC = REPO / "docs" / "codex.md"
FENCE_RE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks():
    return [(m.group(1), m.group(2)) for m in FENCE_RE.finditer(DOC.read_text())]


def test_fences_use_known_languages():
    assert _blocks() and all(lang in ("sh", "bash", "python", "json", "text") for lang, _ in _blocks())


def test_examples_run(env):
    ran = 0
    for lang, body in _blocks():
        if lang == "python":
            cmd = [sys.executable, "-c", body]
        elif lang in ("sh", "bash"):
            cmd = ["bash", "-c", body]
        else:
            continue
        done = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (body, done.stdout, done.stderr)
        ran += 1
    assert ran >= 2
