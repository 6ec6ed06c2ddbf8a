"""The doctor's `account-health` check: what the running monitor's last probe says of each account.

The monitor (its URL recorded in ~/svc/run/monitor.json, found as every
terminal client finds it) already judges each account's health (docs/posture.md)
and says what to do in its advice (docs/steering.md); the doctor reads that
advice, a cached read that never calls a provider, for every registered vendor:

- FAIL: the active account's credential was refused (nothing works until a new
  one is pasted: the detail is the advice's fix, with the file's line);
- WARN: a sibling's credential was refused, or the active account was not
  read lately for another reason (rate-limited, unreachable, stale, unread);
- PASS: every account's last reading is good;
- INFO: no monitor runs here, or it does not answer: nothing to judge.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Tuple

from .._http import get_json, parse_url
from .._names import HEALTH_OK, REFUSED
from .._text import printable
from ..paths import Paths
from ..settings import monitor_url
from ..vendors import registered, with_provider

NAME = "account-health"
READ_TIMEOUT_S = 2.0
_RANK = {"PASS": 0, "INFO": 1, "WARN": 2, "FAIL": 3}


def _result(status: str, detail: str) -> Dict[str, str]:
    return {"name": NAME, "status": status, "detail": detail}


def _said(entry: Mapping[str, Any]) -> str:
    note = entry.get("note")
    label = entry.get("label")
    if isinstance(note, str) and note:
        return printable(note)[:600]
    return "%s: %s" % (printable(label)[:80], printable(entry.get("health"))[:20])


def findings(advice: Any) -> List[Tuple[str, str]]:
    """[(status, sentence)] of one vendor's advice body: its accounts whose health is not `ok`."""
    if not isinstance(advice, dict) or advice.get("available") is not True:
        return []
    found: List[Tuple[str, str]] = []
    active = advice.get("active")
    if isinstance(active, dict) and active.get("health") not in (None, HEALTH_OK):
        found.append(("FAIL" if active["health"] == REFUSED else "WARN", "active: " + _said(active)))
    for entry in advice.get("ranked") or []:
        if isinstance(entry, dict) and entry.get("health") == REFUSED:
            found.append(("WARN", "sibling: " + _said(entry)))
    return found


def check_account_health(paths: Paths) -> Dict[str, str]:
    """The check: the worst finding over every vendor's advice, each finding in the detail."""
    if not paths.monitor_json.exists():
        return _result("INFO", "no monitor runs here (no %s): start svc-monitor, and the doctor reads what "
                               "its last probe says of each account" % paths.monitor_json)
    url = monitor_url(paths.environ)
    target = parse_url(url)
    deadline = time.monotonic() + READ_TIMEOUT_S
    answers = [get_json(target, with_provider("/api/advice", vendor.name), deadline) if target else None
               for vendor in registered()]
    if all(answer is None for answer in answers):
        return _result("INFO", "the monitor recorded in %s does not answer at %s (svc-stack status): no "
                               "account to judge" % (paths.monitor_json, printable(url)[:200]))
    found = [item for answer in answers for item in findings(answer)]
    if not found:
        shown = sum(1 for answer in answers if isinstance(answer, dict) and answer.get("available") is True)
        return _result("PASS", "the monitor at %s read every account of %d vendor(s) well on its last probe"
                       % (printable(url)[:200], shown))
    worst = max((status for status, _ in found), key=_RANK.__getitem__)
    return _result(worst, "; ".join(sentence for _, sentence in found))
