"""The child's vendor lines: one JSON line per vendor, written as soon as that vendor is done.

A header child that sweeps several vendors (`--vendor a --vendor b`) prints,
for each of them, the moment its exchanges are done or cut by its own
exchange deadline,

    {"vendor":"<name>","report":<that vendor's report>}

where the report is what a child run for that vendor alone would have
answered: `{"available": true, "<name>": block}`, or `{"available": false}`
when the file has no account of it to probe. Its last line is the whole
report of the run, as before (docs/posture.md), so a reader that wants one
report reads the last line and ignores these.

The parent reads the child's stdout as it comes (`VendorLines.feed`) and
hands each vendor's report on at once, so no vendor's rows wait for another's
endpoint. Only JSON objects of exactly this shape are read, for a vendor the
parent asked for, once each: nothing of any other line, never raw text. The
shell sends the sourced file's own output to /dev/null (runner.child_command),
so what reaches the pipe is the Python child's. Nothing here does I/O.
"""
from __future__ import annotations

import json
import threading
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional

# How a vendor line starts as the child writes it (compact separators, "vendor" first).
PREFIX = b'{"vendor":'
# The longest line read; a longer one is skipped to its end (a block of a few accounts is a few KB).
MAX_LINE_BYTES = 4 * 1024 * 1024

Deliver = Callable[[str, Dict[str, Any]], None]


def vendor_line(name: str, report: Mapping[str, Any]) -> str:
    """The child's line for one vendor's report (no newline)."""
    return json.dumps({"vendor": name, "report": report}, separators=(",", ":"))


def one_vendor_report(result: Any, name: str) -> Dict[str, Any]:
    """What a whole run's report says for one vendor: a node-level error (the env file refused, the
    child crashed or timed out) is every vendor's; otherwise the vendor's block, when it has one."""
    if not isinstance(result, Mapping):
        return {"error": {"kind": "internal"}}
    if result.get("error") is not None:
        return dict(result)
    if result.get(name) is not None:
        return {"available": True, name: result[name]}
    return {"available": False}


class VendorLines:
    """The parent's reading of one child's stdout: each asked-for vendor's line handed to `deliver`
    as soon as it is complete, at most once per vendor.

    `feed` is called by the one thread that drains the pipe, with each chunk read; a partial line is
    kept until its end comes, up to MAX_LINE_BYTES (past that, the line is dropped to its newline).
    """

    def __init__(self, vendors: Collection[str], deliver: Deliver) -> None:
        self._lock = threading.Lock()
        self._waiting = set(vendors)
        self._deliver = deliver
        self._partial = bytearray()
        self._skipping = False

    def pending(self) -> List[str]:
        """The asked-for vendors whose line has not come (yet)."""
        with self._lock:
            return sorted(self._waiting)

    def feed(self, data: bytes) -> None:
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                self._keep(data[start:])
                return
            self._keep(data[start:end])
            line, self._partial, skipped = bytes(self._partial), bytearray(), self._skipping
            self._skipping = False
            if not skipped:
                self._line(line)
            start = end + 1

    def _keep(self, piece: bytes) -> None:
        if self._skipping:
            return
        if len(self._partial) + len(piece) > MAX_LINE_BYTES:
            self._partial, self._skipping = bytearray(), True
            return
        self._partial.extend(piece)

    def _line(self, line: bytes) -> None:
        line = line.strip()
        if not line.startswith(PREFIX):
            return
        obj = _json_object(line)
        name = obj.get("vendor") if obj is not None else None
        report = obj.get("report") if obj is not None else None
        if not isinstance(name, str) or not isinstance(report, dict):
            return
        with self._lock:
            if name not in self._waiting:
                return
            self._waiting.discard(name)
        self._deliver(name, report)


def _json_object(line: bytes) -> Optional[Dict[str, Any]]:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None
