"""The durable per-account edge latch: exactly one account.status.changed per edge.

Order is emit first, then advance: the event is appended and fsynced, then the
latch file is replaced atomically. A crash between the two leaves an event the
latch does not know about; reconciling with the log at start repairs that, so a
restart neither re-emits nor loses the edge.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Dict, Optional

from .._files import CorruptFileError, move_aside, read_json, write_json_atomic
from .._names import OK, REJECTED, WINDOW_CLAIMS
from .._time import iso_now
from ..errors import FACE, SvcpostureError
from ..events import STATUS_CHANGED, EventLog, event_name, status_changed

LATCH_VERSION = 1
# How append() writes the kind name; lets reconciliation skip samples unparsed.
_STATUS_NEEDLE = ('"%s"' % STATUS_CHANGED).encode("ascii")

# Node statuses that move the latch; every other status holds it.
EDGE_REJECTED = REJECTED
EDGE_OK = OK


class LatchError(SvcpostureError, OSError):
    """The latch file could not be written; the edge stays pending in memory."""

    __module__ = FACE


class Latch:
    def __init__(self, path: "os.PathLike[str] | str", log: EventLog, node: str) -> None:
        self.path = Path(path)
        self.log = log
        self.node = node
        self._lock = threading.Lock()
        self._accounts: Dict[str, Dict[str, Any]] = {}
        self._dirty = False
        self._loaded = False
        self.moved_aside: Optional[Path] = None

    # ------------------------------------------------------------ reading

    def _read_file(self) -> Optional[Dict[str, Dict[str, Any]]]:
        """The accounts map, or None when the file is missing or corrupt.

        A corrupt file is renamed aside (never silently dropped) before None is
        returned, so the caller rebuilds from the log.
        """
        try:
            data = read_json(self.path)
        except CorruptFileError:
            self.moved_aside = move_aside(self.path)
            return None
        if data is None:
            return None
        if not _valid_latch(data):
            self.moved_aside = move_aside(self.path)
            return None
        return {label: dict(entry) for label, entry in data["accounts"].items()}

    def load(self) -> None:
        """Read the file and reconcile it with the log (start-up path)."""
        with self._lock:
            self._load_locked()

    def _load_locked(self, quiet: bool = False) -> None:
        accounts = self._read_file()
        full_scan = accounts is None
        if accounts is None:
            accounts = {}
        changed = self._reconcile(accounts, full_scan)
        self._accounts = accounts
        self._loaded = True
        if changed or full_scan or self._dirty:
            if quiet:
                self._write_quietly()
            else:
                self._write_locked()

    def _reconcile(self, accounts: Dict[str, Dict[str, Any]], full_scan: bool) -> bool:
        """Settle the latch against the log; where they disagree, the log wins.

        Reading newest first, the walk goes (a) past the newest event the latch
        recorded, so edges emitted but never advanced (a crash in between) are
        applied, and (b) far enough that every account in the latch has met its
        own newest event. A missing or corrupt latch is rebuilt from the whole log.
        """
        # Only string ids count: a hand-edited file may hold anything (even lists).
        known_ids = {e.get("eventId") for e in accounts.values() if isinstance(e.get("eventId"), str)}
        scan_all = full_scan or not known_ids
        unseen = set(accounts)
        passed_known = False
        seen: Dict[str, Dict[str, Any]] = {}
        for event in self.log.iter_newest_first(contains=_STATUS_NEEDLE):
            if not scan_all and passed_known and not unseen:
                break
            if event_name(event) != STATUS_CHANGED:
                continue
            event_id = event.get("id")
            if isinstance(event_id, str) and event_id in known_ids:
                passed_known = True
            attrs = event["attributes"]
            handle = attrs.get("account.handle")
            status = attrs.get("account.status")
            if not isinstance(handle, str) or status not in (EDGE_OK, EDGE_REJECTED) or handle in seen:
                continue
            seen[handle] = event
            unseen.discard(handle)
        changed = False
        for handle, event in seen.items():
            attrs = event["attributes"]
            window = attrs.get("account.binding_window")
            entry = {
                "latched": attrs["account.status"] == EDGE_REJECTED,
                "bindingWindow": window if isinstance(window, str) else None,
                "since": event.get("ts"),
                "eventId": event.get("id"),
            }
            if accounts.get(handle) != entry:
                accounts[handle] = entry
                changed = True
        return changed

    # ------------------------------------------------------------ state

    def is_latched(self, handle: str) -> bool:
        with self._lock:
            return bool(self._accounts.get(handle, {}).get("latched"))

    def snapshot(self) -> Dict[str, Dict[str, Any]]:
        with self._lock:
            return {k: dict(v) for k, v in self._accounts.items()}

    # ------------------------------------------------------------ edges

    def observe(self, handle: Optional[str], email: Optional[str], status: str,
                binding_window: Optional[str], provider: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """Feed the ACTIVE account's node status; returns the event emitted, if any.

        `rejected` with no latch emits `rejected` and latches; `ok` with a latch
        emits `ok` and unlatches. Anything else (degraded, error, unknown,
        disabled, or no active account) holds. If the append fails, nothing
        advances and EventLogError propagates: the edge is retried next tick.
        """
        if not handle:
            return None
        with self._lock:
            # The file is the durable truth; re-read it so that a latch deleted or
            # corrupted under a running monitor is rebuilt from the log.
            if not self._loaded:
                # A caller that skipped load() must not re-emit an edge the file
                # and the log already hold.
                self._load_locked(quiet=True)
            elif self._dirty:
                self._write_quietly()
            elif not self.path.exists() or self._read_file() is None:
                # Quietly: an unwritable latch must not stop the edge from being
                # emitted; the in-memory state still guards against repeats.
                self._load_locked(quiet=True)
            latched = bool(self._accounts.get(handle, {}).get("latched"))
            if status == EDGE_REJECTED and not latched:
                new_status = EDGE_REJECTED
            elif status == EDGE_OK and latched:
                new_status = EDGE_OK
            else:
                return None
            window = binding_window if binding_window in WINDOW_CLAIMS else None
            event = status_changed(self.node, handle, email, new_status, window, provider=provider)
            self.log.append(event)  # EventLogError: nothing advanced
            self._advance(handle, event, new_status == EDGE_REJECTED, window)
            return event

    def _advance(self, handle: str, event: Dict[str, Any], latched: bool, window: Optional[str]) -> None:
        self._accounts[handle] = {
            "latched": latched,
            "bindingWindow": window,
            "since": event.get("ts") or iso_now(),
            "eventId": event.get("id"),
        }
        self._dirty = True
        self._write_quietly()

    def _write_quietly(self) -> None:
        # The event is already durable: a failed latch write must not re-emit.
        # The in-memory state stays advanced and the write is retried next tick;
        # after a restart the log reconciliation covers the gap.
        try:
            self._write_locked()
        except OSError:
            pass

    def _write_locked(self) -> None:
        try:
            write_json_atomic(self.path, {"version": LATCH_VERSION, "accounts": self._accounts})
        except OSError as exc:
            self._dirty = True
            raise LatchError(exc.errno, "cannot write %s: %s" % (self.path, exc.strerror or exc)) from None
        self._dirty = False


def _valid_latch(data: Any) -> bool:
    if not isinstance(data, dict) or data.get("version") != LATCH_VERSION:
        return False
    accounts = data.get("accounts")
    if not isinstance(accounts, dict):
        return False
    for label, entry in accounts.items():
        if not isinstance(label, str) or not isinstance(entry, dict):
            return False
        if not isinstance(entry.get("latched"), bool):
            return False
    return True


def read_latch(path: "os.PathLike[str] | str") -> Dict[str, Any]:
    """The latch file for doctor and status views; raises CorruptFileError/ValueError."""
    data = read_json(path)
    if data is None:
        return {"version": LATCH_VERSION, "accounts": {}}
    if not _valid_latch(data):
        raise ValueError("%s: not a version-%d latch file" % (path, LATCH_VERSION))
    return data
