"""The monitor's memory of its Codex logins between sweeps (the monitor side; no token).

After each sweep the monitor hands the child's `codex` block to `absorb`;
before the next it builds the child's environment with `child_environ`, which
carries SVC_CODEX_STATE: per label, the newest sample held (the session path
takes only a newer log line) and the instant before which no usage request may
go out. That instant is the last request plus the usage floor (180 s: the
endpoint's budget is shared by every machine polling the login, docs/posture.md),
or, after a 429, the usage poll's backoff from its retry-after.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Mapping, Optional

from .. import _time
from ..probe.backoff import backoff_delay
from .report import clean_codex_block
from .state import STATE_ENV, encode_state

CODEX_USAGE_FLOOR_S = 180.0

__all__ = ["CODEX_USAGE_FLOOR_S", "STATE_ENV", "CodexPollState"]


class CodexPollState:
    """Per label: lastSampleMs, notBeforeMs and the count of 429s in a row. Thread-safe."""

    def __init__(self, floor_s: float = CODEX_USAGE_FLOOR_S) -> None:
        self.floor_s = max(CODEX_USAGE_FLOOR_S, float(floor_s))
        self._lock = threading.Lock()
        self._accounts: Dict[str, Dict[str, Any]] = {}

    def snapshot(self) -> Dict[str, Dict[str, Optional[int]]]:
        """{label: {"lastSampleMs", "notBeforeMs"}}: what the next child is told."""
        with self._lock:
            return {label: {"lastSampleMs": m.get("lastSampleMs"), "notBeforeMs": m.get("notBeforeMs")}
                    for label, m in self._accounts.items()}

    def child_environ(self, environ: Mapping[str, str], node: Optional[str], hosts: Optional[List[str]] = None,
                      live: Optional[List[str]] = None) -> Dict[str, str]:
        """`environ` plus SVC_CODEX_STATE. `hosts` None: this host polls every login (a lone host)."""
        out = dict(environ)
        out[STATE_ENV] = encode_state(node, hosts, live, self.snapshot())
        return out

    def absorb(self, block: Any, now_ms: Optional[int] = None) -> None:
        """Remember a sweep's `codex` block (raw or cleaned). A missing block changes nothing:
        a node-level error says nothing about the logins."""
        clean = clean_codex_block(block)
        if clean is None:
            return
        now = _time.now_ms() if now_ms is None else now_ms
        with self._lock:
            kept: Dict[str, Dict[str, Any]] = {}
            for row in clean["accounts"]:
                memory = dict(self._accounts.get(row["label"]) or {"lastSampleMs": None, "notBeforeMs": None,
                                                                   "limited": 0})
                sampled = row["sampledAt"] if row["source"] is not None else None
                if sampled is not None and sampled > (memory["lastSampleMs"] or 0):
                    memory["lastSampleMs"] = sampled
                polled = row["polledAt"]
                if polled is not None:
                    err = row["error"] or {}
                    # A 429: the endpoint rate limiting the login, or the login's limit reached until
                    # a reset (a sample with retryAfterS): either way, ask again no sooner than it says.
                    if err.get("httpStatus") == 429 or row["retryAfterS"] is not None:
                        memory["limited"] += 1
                        delay = backoff_delay(self.floor_s, row["retryAfterS"], memory["limited"])
                    else:
                        memory["limited"] = 0
                        delay = self.floor_s
                    memory["notBeforeMs"] = min(polled, now) + int(delay * 1000)
                kept[row["label"]] = memory
            self._accounts = kept
