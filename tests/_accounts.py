"""Test helpers for accounts env files, canary tokens and polling."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence, Tuple


def canary(name: str) -> str:
    """A token value that must never appear outside the env file and the provider."""
    return "sk-ant-oat01-CANARY%s%s" % (name.upper(), os.urandom(6).hex())


def write_accounts(path: Path, entries: Sequence[Tuple[str, str, Optional[str]]],
                   active: Optional[str] = None, mode: int = 0o600, extra: str = "") -> Path:
    """entries: (SUFFIX, token value, email or None). `active` names a SUFFIX."""
    lines: List[str] = ["# model accounts"]
    for suffix, token, email in entries:
        comment = "  # %s" % email if email else ""
        lines.append('export MODEL_TOKEN_%s="%s"%s' % (suffix, token, comment))
    if active:
        lines.append('export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_%s"' % active)
    text = "\n".join(lines) + "\n" + extra
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.chmod(str(path), mode)
    return path


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def files_text(root: Path) -> str:
    """Every regular file under `root` (event log, latch, ...) as one string."""
    out: List[str] = []
    for dirpath, _dirs, names in os.walk(str(root)):
        for name in names:
            p = Path(dirpath) / name
            try:
                out.append(p.read_bytes().decode("utf-8", "replace"))
            except OSError:
                pass
    return "\n".join(out)


def assert_no_canary(texts: Iterable[str], tokens: Iterable[str]) -> None:
    joined = "\n".join(texts)
    for token in tokens:
        assert token not in joined, "a token leaked"
        # Any long slice of it is as bad as the whole.
        assert token[-16:] not in joined, "part of a token leaked"
