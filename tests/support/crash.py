"""The crash test: kill -9 a monitor again and again while its active account
flips between ok and rejected, then check the event log against what the
provider really answered (no duplicate, no lost edge). Used by
tests/test_crash_edges.py (15 kill points) and scripts/crash_test.py (100).
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from .home import accounts_path, monitor_env, set_host_name, status_events, write_accounts
from .monitor import Monitor, SSEClient
from .provider import ProviderServer
from .waiting import wait_until


def edges_reachable(observations: Sequence[Tuple[str, bool]], initial: str = "ok") -> Set[int]:
    """Edge counts possible for a run of (status, definite) observations in order.

    A definite observation was certainly processed by the monitor; an ambiguous
    one (answered just before a kill) may or may not have been. The latch turns
    the processed subsequence into edges: each change of status is one edge.
    """
    states: Set[Tuple[str, int]] = {(initial, 0)}
    for status, definite in observations:
        moved = {(status, count + (status != state)) for state, count in states}
        states = moved if definite else states | moved
    return {count for _, count in states}


def alternation_faults(statuses: Sequence[str], initial: str = "ok") -> int:
    """Events that repeat the previous status (duplicates), counting the initial state."""
    faults = 0
    previous = initial
    for status in statuses:
        if status == previous:
            faults += 1
        previous = status
    return faults


class FrameWatcher(threading.Thread):
    """Follows a monitor's SSE stream from the moment it listens; keeps each frame's
    (probedAt, status). A frame is sent only after its probe was fully handled
    (latch advanced, events appended), so it is proof that the probe counted."""

    def __init__(self, monitor: Monitor) -> None:
        super().__init__(daemon=True)
        self.monitor = monitor
        self.frames: List[Tuple[int, str]] = []
        # (handle, resetsAt) of each 5-hour window a handled probe saw at >= 90 %:
        # its threshold alert must be in the log.
        self.highs: Set[Tuple[str, str]] = set()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.monitor.listening.wait(0.005):
            if self.stopped.is_set() or self.monitor.proc is None or self.monitor.proc.poll() is not None:
                return
        try:
            client = SSEClient(self.monitor.port, host=self.monitor.host, timeout=10.0)
        except (OSError, ValueError, IndexError):
            return
        with client:
            client.sock.settimeout(0.5)
            while not self.stopped.is_set():
                try:
                    event = client.next_event()
                except socket.timeout:
                    continue
                except OSError:
                    break
                if event is None:
                    break
                try:
                    body = json.loads(event["data"])
                except ValueError:
                    continue
                if isinstance(body, dict) and isinstance(body.get("probedAt"), int):
                    self.frames.append((body["probedAt"], str(body.get("status"))))
                    for account in body.get("accounts") or []:
                        five = account.get("fiveHour") or {}
                        if isinstance(five.get("pct"), (int, float)) and five["pct"] >= 90 and five.get("resetsAt"):
                            self.highs.add((account["label"], five["resetsAt"]))

    def stop(self) -> None:
        self.stopped.set()
        self.join(5)


def run_crash(workdir: Path, kills: int, seed: int, period: float = 1.0, max_delay: float = 2.5,
              log: Callable[[str], None] = lambda s: None, package_root: Optional[Path] = None) -> Dict[str, Any]:
    """kill -9 a monitor `kills` times while its account flips ok/rejected every `period` s.

    Each monitor instance gets its own token (the accounts env file is rewritten
    before each start), so the provider knows which instance each answered
    probe belongs to. An SSE frame proves a probe was handled; probes are single
    flight, so every probe of an instance up to its last proven one was handled
    too (*definite*). Answers after that are *ambiguous*: the probe in flight at
    the kill, or an orphaned child answering after it. Real edges are the status
    changes along the handled probes; an ambiguous answer may or may not be one
    of them. The log must match one of those possibilities exactly and never
    repeat a status (a duplicate).
    """
    import random

    rng = random.Random(seed)
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    set_host_name(home, "crash-node")
    logs = workdir / "monitor-logs"
    logs.mkdir(exist_ok=True)
    instances: List[Dict[str, Any]] = []
    emit_advance_gaps = 0
    tracebacks = 0
    with ProviderServer(flip_period=period) as provider:
        env = monitor_env(home, provider.url)
        if package_root is not None:
            # Run another copy of the package (used to check that the test catches a broken latch).
            env["PYTHONPATH"] = str(package_root)
        started = time.monotonic()
        for index in range(kills + 1):
            token = "tok-crash-%d-%s" % (index, os.urandom(4).hex())
            sibling = "tok-sibling-%d-%s" % (index, os.urandom(4).hex())
            provider.set_account(token, mode="flip")
            # A sibling flipping out of phase: only the ACTIVE account may move the latch.
            provider.set_account(sibling, mode="flip", inverted=True)
            write_accounts(accounts_path(home), [("ACCT1", token, "crash@example.com"),
                                                 ("ACCT2", sibling, "sibling@example.com")], active="ACCT1")
            # `python -m` imports from its working directory first.
            monitor = Monitor(env, cwd=str(package_root) if package_root is not None else None)
            final = index == kills
            monitor.start(logs / ("monitor-%03d.log" % index), wait=False)
            watcher = FrameWatcher(monitor)
            watcher.start()
            record: Dict[str, Any] = {"token": token, "start": monitor.started_at}
            if final:
                monitor.wait_ready()
                # After every crash the node must still see both kinds of edge.
                for status in ("rejected", "ok"):
                    provider.freeze(status)
                    wait_until(lambda: watcher.frames and watcher.frames[-1][1] == status
                               and (len(watcher.frames) >= 2 and watcher.frames[-2][1] == status), 30,
                               message="two handled probes under %s" % status)
                record["killed"] = time.monotonic()
                record["exit"] = monitor.stop()
            else:
                mode = index % 3
                if mode == 0:
                    time.sleep(rng.uniform(0.0, max_delay))
                elif mode == 1:
                    # Aim just after a flip, where the edge is being probed and emitted.
                    now = time.monotonic() - provider.flip_started
                    next_flip = (int(now / period) + 1) * period
                    time.sleep(next_flip - now + rng.uniform(0.0, 0.6))
                else:
                    # Kill the moment an event lands: between the append and the latch write.
                    _wait_for_append(home, max_delay + period * 2)
                record["killed"] = time.monotonic()
                monitor.kill9()
                if _latch_behind_log(home):
                    emit_advance_gaps += 1
            record["end"] = time.monotonic()
            watcher.stop()
            record["frames"] = list(watcher.frames)
            record["highs"] = set(watcher.highs)
            if "Traceback" in monitor.stderr_text():
                tracebacks += 1
            instances.append(record)
            log("instance %d: %.2f s, %d frames%s" % (index, record["end"] - record["start"],
                                                      len(record["frames"]), " (final)" if final else ""))
        elapsed = time.monotonic() - started
        active_tokens = {inst["token"] for inst in instances}
        served = [entry for entry in provider.served_snapshot() if entry[2] in active_tokens]

    # An answer given after its instance was killed (an orphaned child) was
    # certainly not handled. Of the rest, an answer is proven handled by an SSE
    # frame reporting it (the newest answer before the frame's probedAt) or by
    # an event appended after it (the newest answer before the event's ts);
    # probes are single flight, so every earlier answer of that instance was
    # handled too. A frame or event whose status differs from the answer it
    # belongs to is a mismatch: an event the provider never justified.
    all_events = status_events(home)
    events = [e for e in all_events if e["attributes"].get("account.handle") == "acct1"]
    other_events = len(all_events) - len(events)
    live: List[Tuple[float, int, int, str]] = []  # (wall, instance, index within instance, status)
    per_instance: List[List[Tuple[float, str]]] = []
    for number, inst in enumerate(instances):
        answers = sorted((wall, status) for mono, wall, token, status in served
                         if token == inst["token"] and mono <= inst["killed"])
        per_instance.append(answers)
        live.extend((wall, number, i, status) for i, (wall, status) in enumerate(answers))
    live.sort()
    proven = [-1] * len(instances)
    handled_errors = set()
    mismatches = 0

    def newest_before(ms: int, number: Optional[int] = None) -> Optional[Tuple[float, int, int, str]]:
        found = None
        for entry in live:
            if int(entry[0] * 1000) > ms:
                break
            if number is None or entry[1] == number:
                found = entry
        return found

    for number, inst in enumerate(instances):
        for probed_at, status in inst["frames"]:
            entry = newest_before(probed_at, number)
            if entry is None:
                continue
            if status in ("ok", "rejected"):
                mismatches += entry[3] != status
            else:
                handled_errors.add((number, entry[2]))  # handled as an error: it holds the latch
            proven[number] = max(proven[number], entry[2])
    for event in events:
        entry = newest_before(_iso_ms(event["ts"]))
        if entry is None or entry[3] != event["attributes"].get("account.status"):
            mismatches += 1
            continue
        proven[entry[1]] = max(proven[entry[1]], entry[2])
    observations: List[Tuple[float, str, bool]] = [
        (wall, status, i <= proven[number]) for wall, number, i, status in live
        if (number, i) not in handled_errors]
    observations.sort()
    definite = [status for _, status, sure in observations if sure]
    statuses = [e["attributes"].get("account.status") for e in events]
    reachable = edges_reachable([(status, sure) for _, status, sure in observations])
    real_edges = sum(1 for a, b in zip(["ok"] + definite, definite) if a != b)
    duplicates = alternation_faults(statuses)
    n = len(statuses)
    lost = 0 if n in reachable else max(0, min(reachable) - n)
    extra = 0 if n in reachable else max(0, n - max(reachable))
    alert_figures = _alert_figures(home, set().union(*(inst["highs"] for inst in instances)))
    return {
        **alert_figures,
        "kills": kills, "seconds": round(elapsed, 1), "answered_probes": len(served),
        "orphan_answers": len(served) - len(live),
        "proven_handled_probes": len(definite), "ambiguous_probes": len(observations) - len(definite),
        "frames": sum(len(i["frames"]) for i in instances), "status_mismatches": mismatches,
        "real_edges_proven": real_edges, "possible_edges": [min(reachable), max(reachable)],
        "events": n, "duplicates": duplicates, "lost": lost, "unexplained": extra,
        "consistent": n in reachable and duplicates == 0 and mismatches == 0 and other_events == 0,
        "kills_between_emit_and_advance": emit_advance_gaps, "tracebacks": tracebacks,
        "final_exit": instances[-1].get("exit"), "sibling_events": other_events, "statuses": statuses,
    }


def _alert_figures(home: Path, proven_highs: Set[Tuple[str, str]]) -> Dict[str, Any]:
    """Threshold, wall and usable alerts against the window cycles handled probes proved to be >= 90 %.

    A flip account's 5-hour window jumps from 40 % to 102 %, so each cycle it
    is rejected in owes exactly one threshold alert, at 90 (80 marked fired with it),
    and one wall alert, whatever number of rejected phases and kills the cycle saw;
    and an account's usable alerts never come twice without a wall alert between them.
    """
    alerts, walls, usable_faults, usables = [], [], 0, 0
    held: Dict[str, bool] = {}
    for attrs in _quota_alerts(home):
        name, handle = attrs.get("event.name"), attrs.get("account.handle")
        if name == "account.quota.threshold":
            alerts.append(attrs)
        elif name == "account.quota.wall":
            walls.append((handle, attrs.get("ratelimit.window"), attrs.get("ratelimit.resets_at")))
            held[handle] = True
        elif name == "account.quota.usable":
            usables += 1
            usable_faults += not held.get(handle)
            held[handle] = False
    keys = [(a.get("account.handle"), a.get("ratelimit.window"), a.get("ratelimit.threshold"),
             a.get("ratelimit.resets_at")) for a in alerts]
    fired = {(handle, resets) for handle, window, threshold, resets in keys if window == "five_hour"}
    walled = {(handle, resets) for handle, window, resets in walls if window == "five_hour"}
    return {"alerts": len(alerts), "alert_cycles_proven": len(proven_highs),
            "alert_duplicates": len(keys) - len(set(keys)),
            "alerts_lost": len(proven_highs - fired),
            "alerts_wrong_threshold": sum(1 for k in keys if k[2] != 90 or k[1] != "five_hour"),
            "walls": len(walls), "wall_duplicates": len(walls) - len(set(walls)),
            "walls_lost": len(proven_highs - walled), "usables": usables, "usable_faults": usable_faults}


def _quota_alerts(home: Path) -> List[Dict[str, Any]]:
    """The attributes of every account.quota.* event of the node's log, in the order appended."""
    found = []
    events_dir = home / "svc" / "events"
    for path in sorted(events_dir.glob("*.jsonl")) if events_dir.is_dir() else []:
        for raw in path.read_bytes().split(b"\n"):
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            attrs = event.get("attributes") if isinstance(event, dict) else None
            if isinstance(attrs, dict) and str(attrs.get("event.name")).startswith("account.quota."):
                found.append(attrs)
    return found


def _iso_ms(text: str) -> int:
    import datetime
    stamp = datetime.datetime.strptime(text[:23], "%Y-%m-%dT%H:%M:%S.%f")
    return int(stamp.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000 + 0.5)


def _log_size(home: Path) -> int:
    total = 0
    try:
        for entry in os.scandir(str(home / "svc" / "events")):
            total += entry.stat().st_size
    except OSError:
        pass
    return total


def _wait_for_append(home: Path, timeout: float) -> None:
    start = _log_size(home)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _log_size(home) != start:
            return
        time.sleep(0.0002)


def _latch_behind_log(home: Path) -> bool:
    """True when the newest logged edge is not yet in the latch file (killed mid-edge)."""
    events = [e for e in status_events(home) if e["attributes"].get("account.handle") == "acct1"]
    if not events:
        return False
    try:
        latch = json.loads((home / "svc" / "account-status-latch.json").read_text())
        entry = latch["accounts"]["acct1"]
    except (OSError, ValueError, KeyError, TypeError):
        return True
    return entry.get("eventId") != events[-1].get("id")
