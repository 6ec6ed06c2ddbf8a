"""SVC_CODEX_STATE: what the monitor tells the child about each Codex login, never a token.

`{"node": <this host>, "hosts": [roster] | null, "live": [live hosts] | null,
"accounts": {<label>: {"lastSampleMs": <ms> | null, "notBeforeMs": <ms> | null}}}`.
The child reads it on every sweep; absent or malformed, it is a lone host
with no history (a sweep run by hand), which polls every login once.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional

from .._time import read_ms
from ..settings import knob_value
from .knobs import STATE

# The variable the monitor sets for its child (pollstate) and the child reads (read_state, through settings).
STATE_ENV = STATE.name
MAX_STATE_BYTES = 64 * 1024
MAX_HOSTS = 4096
_HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_LABEL_RE = re.compile(r"^codex-[a-z0-9_]{1,64}$")


def is_host(value: Any) -> bool:
    return isinstance(value, str) and _HOST_RE.match(value) is not None


def is_label(value: Any) -> bool:
    return isinstance(value, str) and _LABEL_RE.match(value) is not None


def _hosts(value: Any) -> Optional[List[str]]:
    if not isinstance(value, list):
        return None
    return [h for h in value[:MAX_HOSTS] if is_host(h)]


def empty_state() -> Dict[str, Any]:
    return {"node": None, "hosts": None, "live": None, "accounts": {}}


def decode_state(raw: Optional[str]) -> Dict[str, Any]:
    """The state as the child uses it; anything unreadable is left out."""
    state = empty_state()
    if not raw or len(raw) > MAX_STATE_BYTES:
        return state
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return state
    if not isinstance(obj, dict):
        return state
    state["node"] = obj.get("node") if is_host(obj.get("node")) else None
    state["hosts"] = _hosts(obj.get("hosts"))
    state["live"] = _hosts(obj.get("live"))
    accounts = obj.get("accounts")
    if isinstance(accounts, dict):
        for label, entry in list(accounts.items())[:MAX_HOSTS]:
            if is_label(label) and isinstance(entry, dict):
                state["accounts"][label] = {"lastSampleMs": read_ms(entry.get("lastSampleMs")),
                                            "notBeforeMs": read_ms(entry.get("notBeforeMs"))}
    return state


def read_state(environ: Mapping[str, str]) -> Dict[str, Any]:
    return decode_state(knob_value(environ, STATE))


def encode_state(node: Optional[str], hosts: Optional[List[str]], live: Optional[List[str]],
                 accounts: Mapping[str, Mapping[str, Optional[int]]]) -> str:
    return json.dumps({"node": node, "hosts": None if hosts is None else list(hosts),
                       "live": None if live is None else list(live),
                       "accounts": {k: dict(v) for k, v in accounts.items()}}, separators=(",", ":"))
