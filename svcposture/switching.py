"""A switch of the active account as one transaction: exactly one `account.switched` per switch.

The env file's rename is the action and the event records it; a kill -9 may
fall between any two steps, so the switch runs as an intent (docs/steering.md, in
the manner of the latch (docs/events.md)):

1. under the switch lock, finish any switch a killed process left (reconcile);
2. write the intent `{from, to, reason, atMs}` to `~/svc/switch-state.json`;
3. rename the rewritten env file into place;
4. append `account.switched` (fsynced);
5. clear the intent and record the automatic switch's hysteresis.

Reconciling an intent: an `account.switched` for it in the log since `atMs`
means only step 5 is missing; otherwise the env file says whether the rename
happened (its export line names `to`: emit now) or not (drop the intent). So
no switch goes unrecorded and none is recorded twice.

The state file also keeps, per vendor, the hysteresis of the automatic switch:
when it last switched (at most one per 10 min per host) and, for each account
it left, when that account's binding window resets (it never goes back
before). It holds labels and times, never a token.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from . import _time
from ._files import CorruptFileError, lock_file, move_aside, read_json, write_json_atomic
from ._text import is_int
from .events import ACCOUNT_SWITCHED, EventLog, account_switched
from .paths import Paths
from .exportline import (CLAUDE, PROVIDERS, SwitchError, active_label, entries, read_env_file, replace_env_file,
                     rewrite_export)

STATE_VERSION = 1
MIN_AUTO_GAP_MS = 10 * 60 * 1000
# Tests shorten the gap between automatic switches with this (seconds); nothing else reads it.
TEST_GAP_ENV = "_SVC_TEST_AUTO_SWITCH_GAP_S"
# How long an account left without a known reset time is not gone back to.
AVOID_WITHOUT_RESET_MS = 60 * 60 * 1000
# Test hook: a path; after the temporary file is written the switch waits (up to
# 30 s) until it exists, so a test can change the env file in between.
TEST_GATE_ENV = "_SVC_TEST_SWITCH_GATE"
# Test hook: `STEP:SECONDS` holds the switch that long after STEP (intent, rename or
# append), so the crash test can kill -9 it exactly there.
TEST_PAUSE_ENV = "_SVC_TEST_SWITCH_PAUSE"


def state_path(paths: Paths) -> Path:
    return paths.svc_dir / "switch-state.json"


def lock_path(paths: Paths) -> Path:
    return paths.run_dir / "switch.lock"


def auto_gap_ms(environ: Any) -> int:
    raw = environ.get(TEST_GAP_ENV, "") if environ is not None else ""
    try:
        return max(0, int(float(raw) * 1000)) if raw else MIN_AUTO_GAP_MS
    except ValueError:
        return MIN_AUTO_GAP_MS


# ---------------------------------------------------------------- the state file

def _fresh_vendor() -> Dict[str, Any]:
    return {"lastAutoMs": None, "avoid": {}, "pending": None}


def _valid_vendor(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    last = entry.get("lastAutoMs")
    avoid = entry.get("avoid")
    pending = entry.get("pending")
    return ((last is None or is_int(last))
            and isinstance(avoid, dict)
            and all(isinstance(k, str) and is_int(v) for k, v in avoid.items())
            and (pending is None or (isinstance(pending, dict) and isinstance(pending.get("to"), str)
                                     and is_int(pending.get("atMs")))))


def load_state(path: Path) -> Dict[str, Any]:
    """`{"version": 1, "providers": {vendor: {lastAutoMs, avoid, pending}}}`; a corrupt
    file is moved aside (never silently dropped) and a fresh state returned."""
    try:
        data = read_json(path)
    except CorruptFileError:
        move_aside(path)
        data = None
    state: Dict[str, Any] = {"version": STATE_VERSION, "providers": {}}
    if data is None:
        return state
    providers = data.get("providers") if isinstance(data, dict) and data.get("version") == STATE_VERSION else None
    if not isinstance(providers, dict):
        move_aside(path)
        return state
    for vendor in PROVIDERS:
        entry = providers.get(vendor)
        if _valid_vendor(entry):
            state["providers"][vendor] = entry
    return state


def vendor_state(state: Dict[str, Any], provider: str) -> Dict[str, Any]:
    return state["providers"].setdefault(provider, _fresh_vendor())


def auto_limits(paths: Paths, provider: str) -> Dict[str, Any]:
    """The automatic switch's hysteresis for `provider`: {lastAutoMs, avoid, pending}."""
    try:
        return dict(vendor_state(load_state(state_path(paths)), provider))
    except OSError:
        return _fresh_vendor()


def has_pending(paths: Paths) -> bool:
    try:
        state = load_state(state_path(paths))
    except OSError:
        return False
    return any(entry.get("pending") for entry in state["providers"].values())


# ---------------------------------------------------------------- the transaction

def perform(paths: Paths, *, provider: str, to_label: str, reason: str, node: str, email: Optional[str] = None,
            avoid_until_ms: Optional[int] = None, dry_run: bool = False,
            check: Optional[Callable[[Dict[str, Any], Optional[str]], None]] = None) -> Dict[str, Any]:
    """Make `to_label` the active `provider` account; the result as the command prints it.

    `check(vendor_state, current)` runs under the lock before anything is written
    (`current`: the label the file makes active now) and may raise SwitchError
    (the automatic switch's hysteresis). SwitchError for an
    account that is not in the file or not usable, and for a file that cannot
    be read safely or changed under the switch; the file is then untouched.
    """
    env_path = str(paths.accounts_env)
    with lock_file(lock_path(paths)):
        reconcile_locked(paths, node)
        snap = read_env_file(env_path)
        found = {e.label: e for e in entries(snap.data, provider)}
        target = found.get(to_label)
        if target is None:
            raise SwitchError("%s is not an account in %s" % (to_label, env_path))
        if not target.usable:
            raise SwitchError("%s has no usable value in %s (empty or %s)"
                              % (to_label, env_path, "PASTE_TOKEN_HERE" if provider == CLAUDE else "no directory"))
        current = active_label(snap.data, provider)
        result: Dict[str, Any] = {"switched": False, "provider": provider, "from": current, "to": to_label,
                                  "reason": reason, "dryRun": dry_run, "file": env_path, "eventId": None}
        if current == to_label:
            result["note"] = "%s is already the active account" % to_label
            return result
        state = load_state(state_path(paths))
        if check is not None:
            check(vendor_state(state, provider), current)
        data = rewrite_export(snap.data, provider, target.name)
        if dry_run:
            return result
        pending = {"from": current, "to": to_label, "reason": reason, "email": email,
                   "atMs": _time.now_ms(), "avoidUntilMs": avoid_until_ms}
        vendor_state(state, provider)["pending"] = pending
        write_json_atomic(state_path(paths), state)
        _test_pause("intent")
        try:
            replace_env_file(env_path, snap, data, before_rename=_test_gate())
        except BaseException:
            vendor_state(state, provider)["pending"] = None
            write_json_atomic(state_path(paths), state)
            raise
        _test_pause("rename")
        event = _emit(paths, node, provider, pending)
        _test_pause("append")
        _finish(paths, provider, pending)
        result.update(switched=True, eventId=event["id"])
        return result


def reconcile(paths: Paths, node: str) -> int:
    """Finish what a killed switch left; returns the number of events it appended."""
    with lock_file(lock_path(paths)):
        return reconcile_locked(paths, node)


def reconcile_locked(paths: Paths, node: str) -> int:
    state = load_state(state_path(paths))
    emitted = 0
    for provider in PROVIDERS:
        pending = state["providers"].get(provider, {}).get("pending")
        if not pending:
            continue
        if _logged(paths, provider, pending):
            _finish(paths, provider, pending)
            continue
        try:
            now_active = active_label(read_env_file(str(paths.accounts_env)).data, provider)
        except SwitchError:
            now_active = None
        if now_active == pending["to"]:
            _emit(paths, node, provider, pending)
            emitted += 1
            _finish(paths, provider, pending)
        else:
            # The rename never happened (or someone has since chosen another account).
            _finish(paths, provider, None)
    return emitted


def _logged(paths: Paths, provider: str, pending: Dict[str, Any]) -> bool:
    for event in EventLog.for_paths(paths).read(ACCOUNT_SWITCHED, since_ms=pending["atMs"]):
        attrs = event["attributes"]
        if attrs.get("account.provider") == provider and attrs.get("account.to") == pending["to"] \
                and attrs.get("account.from") == pending.get("from"):
            return True
    return False


def _emit(paths: Paths, node: str, provider: str, pending: Dict[str, Any]) -> Dict[str, Any]:
    email = pending.get("email")
    event = account_switched(node, provider, pending.get("from"), pending["to"], pending.get("reason") or "manual",
                             email if isinstance(email, str) else None)
    EventLog.for_paths(paths).append(event)
    return event


def _finish(paths: Paths, provider: str, pending: Optional[Dict[str, Any]]) -> None:
    """Clear the intent; an automatic switch that happened also records its hysteresis."""
    state = load_state(state_path(paths))
    entry = vendor_state(state, provider)
    entry["pending"] = None
    if pending is not None and pending.get("reason") == "auto":
        entry["lastAutoMs"] = pending["atMs"]
        left = pending.get("from")
        if isinstance(left, str):
            until = pending.get("avoidUntilMs")
            entry["avoid"][left] = until if isinstance(until, int) else pending["atMs"] + AVOID_WITHOUT_RESET_MS
        now = _time.now_ms()
        entry["avoid"] = {k: v for k, v in entry["avoid"].items() if v > now}
    # Not fsynced: a state that loses this write in a power cut still holds the
    # intent, and reconciling it finds the event in the (fsynced) log and finishes.
    write_json_atomic(state_path(paths), state, fsync=False)


def _test_gate() -> Optional[Callable[[], None]]:
    gate = os.environ.get(TEST_GATE_ENV)
    if not gate:
        return None

    def wait() -> None:
        import time
        deadline = time.monotonic() + 30
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
    return wait


def _test_pause(step: str) -> None:
    wanted, _, seconds = os.environ.get(TEST_PAUSE_ENV, "").partition(":")
    if wanted == step:
        import time
        time.sleep(min(float(seconds or 0), 30.0))
