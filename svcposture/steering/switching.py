"""A switch of the active account as one transaction: exactly one `account.switched` per switch.

The env file's rename is the action and the event records it; a kill -9 may
fall between any two steps, so the switch runs as an intent (docs/steering.md, in
the manner of the latch (docs/events.md)):

1. under the switch lock, finish any switch a killed process left (reconcile);
2. write the intent `{from, to, reason, atMs}` to `~/svc/switch-state.json`;
3. rename the rewritten env file into place;
4. append `account.switched` (fsynced);
5. clear the intent and record the automatic switch's hysteresis.

A log that refuses the append in step 4 (read-only, disk full) leaves the switch
made and reported, with its event pending: the intent stays for the next switch
or the monitor's start, and a switch is refused while an earlier one's event
cannot be appended. The lock is given up on after LOCK_WAIT_S, naming its holder.

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

import contextlib
import os
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from .. import _time
from .._files import (
    CorruptFileError, LockBusyError, lock_file, move_aside, read_json, remove_stale_temps, write_json_atomic,
)
from .._text import is_int, printable
from ..events import ACCOUNT_SWITCHED, EventLog, EventLogError, account_switched
from ..paths import Paths
from ..vendors import provider_names, vendor_named
from ..envfile.exportline import (
    MAX_ENV_BYTES, SwitchError, active_label, entries, read_env_file, refusal, replace_env_file, rewrite_export,
    shell_problem,
)

STATE_VERSION = 1
# At most one automatic switch per host in this long (docs/steering.md).
MIN_AUTO_GAP_MS = 10 * 60 * 1000
# How long an account left without a known reset time is not gone back to.
AVOID_WITHOUT_RESET_MS = 60 * 60 * 1000
# A switch takes milliseconds under its lock; one that waits this long is stuck behind something else.
LOCK_WAIT_S = 10.0
# Under the lock no other switch is writing, so a temporary copy of the env file this old was
# left by a killed one (it holds the tokens); a younger one may be another writer's (svc-monitor init).
STALE_ENV_TEMP_S = 60.0


def state_path(paths: Paths) -> Path:
    return paths.svc_dir / "switch-state.json"


def lock_path(paths: Paths) -> Path:
    return paths.run_dir / "switch.lock"


def auto_gap_ms() -> int:
    """The least time between two automatic switches of one vendor on this host, in ms.

    Looked up when asked, not bound where it is used: the watcher and the
    switch command both ask here, so they never disagree."""
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
    for vendor in provider_names():
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

def _unfilled(provider: str) -> str:
    """What an unfilled value of the vendor's lines looks like, for a refusal."""
    vendor = vendor_named(provider)
    return " or ".join(vendor.lines.placeholders) if vendor is not None else "a placeholder"


def perform(paths: Paths, *, provider: str, to_label: str, reason: str, node: str, email: Optional[str] = None,
            avoid_until_ms: Optional[int] = None, dry_run: bool = False,
            check: Optional[Callable[[Dict[str, Any], Optional[str]], None]] = None,
            shell_active: Optional[Tuple[Optional[str], int]] = None) -> Dict[str, Any]:
    """Make `to_label` the active `provider` account; the result as the command prints it.

    `check(vendor_state, current)` runs under the lock before anything is written
    (`current`: the label the file makes active now) and may raise SwitchError
    (the automatic switch's hysteresis). `shell_active` is (label, probedAt ms)
    of the monitor's posture: what the shell made active when it last sourced
    the file; a posture probed after the file's last change that names another
    account than the text is refused. SwitchError for an account that is not
    in the file or not usable, and for a file that cannot be read safely or
    changed under the switch; the file is then untouched. An event that cannot
    be appended after the rename leaves the switch made and its event pending
    (`eventPending`), for the next switch or the monitor's start to record.
    """
    env_path = str(paths.accounts_env)
    with _switch_lock(paths):
        reconcile_locked(paths, node)
        _sweep_env_temps(env_path)
        snap = read_env_file(env_path)
        current = active_label(snap.data, provider)
        # The monitor's shell has spoken on this very text: its account is named before any refusal of the text.
        _agrees_with_shell(current, shell_active, snap, env_path)
        target = _target(snap.data, provider, to_label, env_path)
        result: Dict[str, Any] = {"switched": False, "provider": provider, "from": current, "to": to_label,
                                  "reason": reason, "dryRun": dry_run, "file": env_path, "eventId": None}
        if current == to_label:
            result["note"] = "%s is already the active account" % to_label
            return result
        state = load_state(state_path(paths))
        if check is not None:
            check(vendor_state(state, provider), current)
        data = _rewritten(snap.data, provider, target.name, env_path)
        if dry_run:
            _still_shell(snap.data, env_path, data=data)
            _sources_to(paths, provider, to_label, env_path, data=data)
            return result
        pending = {"from": current, "to": to_label, "reason": reason, "email": email,
                   "atMs": _time.now_ms(), "avoidUntilMs": avoid_until_ms}
        _write_intent(paths, state, provider, pending)
        _rename(paths, state, provider, snap, data, to_label)
        result["switched"] = True
        return _record(paths, node, provider, pending, result)


def _rewritten(data: bytes, provider: str, name: str, env_path: str) -> bytes:
    """The env file with its export line naming `name`; SwitchError past the size limit."""
    rewritten = rewrite_export(data, provider, name)
    if len(rewritten) > MAX_ENV_BYTES:
        raise SwitchError("the switch would make %s %d bytes, past the %d-byte limit of an accounts file; "
                          "nothing written: remove what it does not need" % (env_path, len(rewritten), MAX_ENV_BYTES))
    return rewritten


def _write_intent(paths: Paths, state: Dict[str, Any], provider: str, pending: Dict[str, Any]) -> None:
    """Step 2: the intent, on disk before the file changes."""
    vendor_state(state, provider)["pending"] = pending
    write_json_atomic(state_path(paths), state)


def _rename(paths: Paths, state: Dict[str, Any], provider: str, snap: Any, data: bytes, to_label: str) -> None:
    """Step 3: the checked rewrite renamed into place: valid shell, and sourced by a token-scoped child
    it makes `to_label` active. When it is refused, the intent is dropped again."""
    env_path = str(paths.accounts_env)

    def verify(tmp: str) -> None:
        _still_shell(snap.data, env_path, tmp=tmp)
        _sources_to(paths, provider, to_label, env_path, tmp=tmp)
    try:
        replace_env_file(env_path, snap, data, verify=verify)
    except BaseException:
        vendor_state(state, provider)["pending"] = None
        write_json_atomic(state_path(paths), state)
        raise


def _record(paths: Paths, node: str, provider: str, pending: Dict[str, Any],
            result: Dict[str, Any]) -> Dict[str, Any]:
    """Steps 4 and 5: the event appended, then the intent cleared; `result` with the event's id."""
    try:
        event = _emit(paths, node, provider, pending)
    except EventLogError as exc:
        # The file is switched: that is the fact to report. The intent stays, so the
        # next switch or the monitor's start appends the event once the log takes it.
        result.update(eventPending=True, warning="switched, but its account.switched event is pending (%s); "
                                                 "the next switch or the monitor's start records it"
                                                 % (exc.strerror or exc))
        return result
    _finish(paths, provider, pending)
    result["eventId"] = event["id"]
    return result


def _target(data: bytes, provider: str, to_label: str, env_path: str) -> Any:
    """The entry to switch to; SwitchError when the text says the switch would not hold, or when
    the file has no such account (the refusal lists the ones it has)."""
    why_not = refusal(data, provider, to_label)
    if why_not is not None:
        raise SwitchError("%s cannot be made active: %s, %s" % (to_label, env_path, why_not))
    found = {e.label: e for e in entries(data, provider)}
    target = found.get(to_label)
    if target is None:
        vendor = vendor_named(provider)
        known = ", ".join(e.label + ("" if e.usable else " (no value yet)") for e in found.values())
        raise SwitchError("%s is not an account in %s; the %s accounts there: %s" % (
            printable(to_label)[:80], env_path, vendor.display_name if vendor is not None else provider,
            known or "none"))
    if not target.usable:
        raise SwitchError("%s has no usable value in %s (empty or %s)"
                          % (to_label, env_path, _unfilled(provider)))
    return target


@contextlib.contextmanager
def _switch_lock(paths: Paths) -> Iterator[None]:
    """The switch lock, given up on after LOCK_WAIT_S with the holder named."""
    try:
        with lock_file(lock_path(paths), wait_s=LOCK_WAIT_S):
            yield
    except LockBusyError as exc:
        raise SwitchError("the switch lock %s; nothing changed, run it again when that process is done"
                          % exc) from None


def _sources_to(paths: Paths, provider: str, to_label: str, env_path: str, tmp: Optional[str] = None,
                data: Optional[bytes] = None) -> None:
    """Refuse a rewritten file (the temporary `tmp`, else `data`) that, sourced as the monitor
    sources it, does not make `to_label` the active account: whatever the text checks missed
    decides otherwise. Only a token-scoped child sources it (docs/design.md, "Why the probe runs in
    a child"): `probe check`, which prints labels and no value, so no token reaches this process."""
    report = _checked_by_child(paths, tmp, data)
    if report is None:
        return  # no way to look on this system without writing the tokens to disk: the text checks stand
    block = report.get(provider) if isinstance(report.get(provider), dict) else {}
    active = block.get("active")
    twins = block.get("duplicateActive") if isinstance(block.get("duplicateActive"), list) else []
    if active == to_label or to_label in twins:
        return
    if isinstance(report.get("error"), dict):
        line = report.get("line")
        raise SwitchError("sourcing the rewritten %s stopped the shell before it told the active account (%s%s)%s; "
                          "nothing written" % (env_path, report["error"].get("message") or "error",
                                               ", line %d" % line if is_int(line) else "", _crlf_note(data, tmp)))
    raise SwitchError("sourcing the rewritten %s makes %s active, not %s: something in the file or what it runs "
                      "decides the active account besides the export line%s; nothing written"
                      % (env_path, active if isinstance(active, str) else "no account", to_label,
                         _crlf_note(data, tmp)))


def _crlf_note(data: Optional[bytes], tmp: Optional[str]) -> str:
    """Why a file the text checks let through may still read wrong: CRLF line ends, whose CR /bin/sh
    keeps in each line's last word (a value, or the export line's)."""
    if data is None and tmp is not None:
        with open(tmp, "rb") as fh:
            data = fh.read()
    return " (the file has CRLF line ends, and /bin/sh keeps each CR: convert it to LF)" \
        if data is not None and b"\r\n" in data else ""


def _checked_by_child(paths: Paths, tmp: Optional[str], data: Optional[bytes]) -> Optional[Dict[str, Any]]:
    """The `probe check` child's report over the file at `tmp`, or over `data` held in an anonymous
    in-memory file (never on disk); None where there is no such file (no memfd_create)."""
    from pathlib import Path as _Path
    from .._files import memory_file
    from ..probe.runner import run_child
    if tmp is not None:
        fd: Optional[int] = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    else:
        fd = memory_file(data or b"", "svc-switch-dry-run")
    if fd is None:
        return None
    try:
        return run_child("check", paths.environ, accounts_env=_Path(str(paths.accounts_env)), env_fd=fd)
    finally:
        os.close(fd)


def _still_shell(before: bytes, env_path: str, tmp: Optional[str] = None, data: Optional[bytes] = None) -> None:
    """Refuse a rewritten file (the temporary `tmp`, else `data`) that `/bin/sh -n` rejects:
    the file was not valid shell already, or the rewrite misread a value."""
    if tmp is not None:
        with open(tmp, "rb") as source:
            broken = shell_problem(source=source)
    else:
        broken = shell_problem(data)
    if broken is None:
        return
    already = shell_problem(before)
    if already is not None:
        raise SwitchError("%s is not valid shell (%s); nothing written: fix that first" % (env_path, already))
    raise SwitchError("the rewritten export line would not be valid shell (%s); nothing written: make the "
                      "export line's value a plain reference such as \"$MODEL_TOKEN_ACCT1\"" % broken)


def _sweep_env_temps(env_path: str) -> None:
    """Remove temporary copies of the env file that a killed switch left beside it."""
    remove_stale_temps(os.path.dirname(os.path.abspath(env_path)), targets=(os.path.basename(env_path),),
                       max_age_s=STALE_ENV_TEMP_S)


def _agrees_with_shell(current: Optional[str], shell_active: Optional[Tuple[Optional[str], int]],
                       snap: Any, env_path: str) -> None:
    """SwitchError when the monitor's posture, probed after the file's last change, has another account
    active than the export line names: some later line, or a file it sources, decides instead."""
    if shell_active is None:
        return
    label, probed_ms = shell_active
    if not isinstance(label, str) or current is None or label == current:
        return
    if probed_ms * 1_000_000 < snap.key[3]:
        return  # the posture predates the file: it says nothing of the text read now
    raise SwitchError("the monitor's posture has %s active but the export line of %s names %s: something after "
                      "it decides; make that line the last to set the active account" % (label, env_path, current))


def reconcile(paths: Paths, node: str) -> int:
    """Finish what a killed switch left; returns the number of events it appended."""
    with _switch_lock(paths):
        return reconcile_locked(paths, node)


def reconcile_locked(paths: Paths, node: str) -> int:
    state = load_state(state_path(paths))
    emitted = 0
    for provider in provider_names():
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
            try:
                _emit(paths, node, provider, pending)
            except EventLogError as exc:
                raise SwitchError("the account.switched event of the earlier switch %s -> %s is still pending "
                                  "(%s); nothing changed: make the event log writable, then run it again"
                                  % (pending.get("from") or "(none)", pending["to"], exc.strerror or exc)) from None
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

