"""Shared pieces of the hardening tests and scripts (crash, leak, soak, vendoring).

- FlipProvider: a provider on 127.0.0.1 whose accounts flip between ok and
  rejected on a fixed period, and which records the status it answered to every
  probe together with the token that asked (the token names the monitor
  instance, so an orphaned child of a killed monitor is attributed correctly).
- MonitorProcess: `python -m svcposture monitor` in its own process group, so a
  kill -9 takes the monitor and any probe child it had in flight.
- edge checks over the event log.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

REPO = Path(__file__).resolve().parent.parent
PREFIX = "anthropic-ratelimit-unified-"


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.02,
               message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, message))
        time.sleep(interval)


# ---------------------------------------------------------------- flipping provider

class _FlipHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, owner: "FlipProvider") -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _FlipHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, socket.timeout)):
            return
        super().handle_error(request, client_address)


class _FlipHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _FlipHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _reply(self, status: int, body: Dict[str, Any], headers: Dict[str, str]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.send_header("connection", "close")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(raw)
        self.close_connection = True

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        if length > 0:
            self.rfile.read(length)
        auth = self.headers.get("authorization") or ""
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        owner = self.server.owner
        status = owner.answer(token)
        if status is None:
            self._reply(401, {"type": "error", "error": {"type": "authentication_error", "message": "no"}}, {})
            return
        now = time.time()
        window = "rejected" if status == "rejected" else "allowed"
        headers = {
            PREFIX + "status": window,
            PREFIX + "representative-claim": "five_hour",
            PREFIX + "5h-utilization": "1.02" if status == "rejected" else "0.40",
            PREFIX + "5h-status": window,
            PREFIX + "5h-reset": str(int(now + 3600)),
            PREFIX + "7d-utilization": "0.30",
            PREFIX + "7d-status": "allowed",
            PREFIX + "7d-reset": str(int(now + 86400)),
        }
        body = {"type": "message", "content": []} if status == "ok" else \
            {"type": "error", "error": {"type": "rate_limit_error", "message": "limit"}}
        self._reply(200 if status == "ok" else 429, body, headers)

    def do_GET(self) -> None:  # noqa: N802
        self._reply(404, {"error": "not found"}, {})


class FlipProvider:
    """Answers every token in `tokens` with ok or rejected by wall-clock phase.

    `served` records (time.monotonic(), time.time(), token, status) per answered
    probe, taken under the same lock that decided the status, so it is exact.
    """

    def __init__(self, period: float = 1.0) -> None:
        self.period = period
        self.tokens: Set[str] = set()
        self.inverted: Set[str] = set()
        self.frozen: Optional[str] = None
        self.served: List[Tuple[float, float, str, str]] = []
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._httpd = _FlipHTTPServer(self)
        self.url = "http://127.0.0.1:%d" % self._httpd.server_address[1]
        self._thread: Optional[threading.Thread] = None

    def answer(self, token: str) -> Optional[str]:
        with self._lock:
            if token not in self.tokens:
                return None
            if self.frozen is not None:
                status = self.frozen
            else:
                phase = int((time.monotonic() - self._t0) / self.period)
                status = "rejected" if phase % 2 else "ok"
            if token in self.inverted:
                status = "ok" if status == "rejected" else "rejected"
            self.served.append((time.monotonic(), time.time(), token, status))
            return status

    def add_token(self, token: str, inverted: bool = False) -> None:
        """`inverted` answers the opposite status (a sibling flipping out of phase)."""
        with self._lock:
            self.tokens.add(token)
            if inverted:
                self.inverted.add(token)

    def freeze(self, status: Optional[str]) -> None:
        with self._lock:
            self.frozen = status

    def served_snapshot(self) -> List[Tuple[float, float, str, str]]:
        with self._lock:
            return list(self.served)

    def start(self) -> "FlipProvider":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="flip-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(5)
        self._httpd.server_close()

    def __enter__(self) -> "FlipProvider":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# ---------------------------------------------------------------- node files

def write_accounts_env(home: Path, entries: Sequence[Tuple[str, str, Optional[str]]],
                       active_suffix: Optional[str], mode: int = 0o600,
                       path: Optional[Path] = None) -> Path:
    """`MODEL_TOKEN_<SUFFIX>=<token>  # <email>` lines plus the active-account export."""
    target = path or home / ".config" / "svc" / "model-accounts.env"
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lines = ["# written by the hardening tests"]
    for suffix, token, email in entries:
        lines.append("export MODEL_TOKEN_%s=%s%s" % (suffix, token, "  # %s" % email if email else ""))
    if active_suffix:
        lines.append('export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_%s"' % active_suffix)
    tmp = target.with_name(target.name + ".tmp")
    fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.chmod(str(tmp), mode)
    os.replace(str(tmp), str(target))
    return target


def status_events(home: Path) -> List[Dict[str, Any]]:
    """Every account.status.changed in the node's log, oldest first (bad lines skipped)."""
    out: List[Dict[str, Any]] = []
    events_dir = home / "svc" / "events"
    if not events_dir.is_dir():
        return out
    for path in sorted(events_dir.glob("*.jsonl")):
        for raw in path.read_bytes().split(b"\n"):
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("attributes"), dict) \
                    and event["attributes"].get("event.name") == "account.status.changed":
                out.append(event)
    return out


# ---------------------------------------------------------------- monitor process

class MonitorProcess:
    """`python -m svcposture monitor --port 0` in its own session (process group)."""

    def __init__(self, env: Dict[str, str], args: Sequence[str] = (), python: str = sys.executable,
                 module: str = "svcposture", cwd: Optional[str] = None) -> None:
        self.env = env
        self.args = list(args)
        self.python = python
        self.module = module
        self.cwd = cwd or str(REPO)
        self.proc: Optional[subprocess.Popen] = None
        self.started_at = 0.0
        self.stderr_path: Optional[Path] = None
        self.url: Optional[str] = None

    def start(self, stderr_path: Path, wait_ready: bool = True, timeout: float = 20.0) -> "MonitorProcess":
        self.stderr_path = stderr_path
        err = open(str(stderr_path), "ab")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            [self.python, "-m", self.module, "monitor", "--bind", "127.0.0.1", "--port", "0"] + self.args,
            cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
            start_new_session=True)
        err.close()
        if wait_ready:
            self.wait_ready(timeout)
        return self

    def _listening_url(self) -> Optional[str]:
        assert self.stderr_path is not None
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return None
        marker = "svc-monitor listening on "
        for line in reversed(text.splitlines()):
            if marker in line:
                return line.split(marker, 1)[1].split()[0].rstrip("/")
        return None

    def wait_ready(self, timeout: float = 20.0) -> str:
        def ready() -> Optional[str]:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError("monitor exited with %s:\n%s" % (self.proc.returncode, self.stderr()))
            url = self._listening_url()
            if url and _healthz(url):
                return url
            return None
        self.url = wait_until(ready, timeout, message="monitor /healthz")
        return self.url

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace") if self.stderr_path else ""
        except OSError:
            return ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill9(self) -> None:
        """SIGKILL the whole group: the monitor and every probe child in flight."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def stop(self, timeout: float = 10.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError("monitor ignored SIGTERM for %.0f s:\n%s" % (timeout, self.stderr()))


def _healthz(url: str) -> bool:
    import http.client
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    try:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=2)
        conn.request("GET", "/healthz")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False


def http_get(url: str, path: str, headers: Optional[Dict[str, str]] = None,
             timeout: float = 15.0) -> Tuple[int, Dict[str, str], bytes]:
    import http.client
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


# ---------------------------------------------------------------- edge accounting

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


# ---------------------------------------------------------------- the crash run

def monitor_env(home: Path, provider_url: str, **overrides: str) -> Dict[str, str]:
    """A node environment with short timings; no token anywhere in it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SVC_", "MODEL_", "EXECUTION_CORE_"))}
    env["HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update({
        "SVC_PROVIDER_URL": provider_url,
        "SVC_PROBE_INTERVAL_S": "0.2",
        "SVC_POSTURE_TTL_S": "0.2",
        "SVC_REFRESH_FLOOR_S": "0.05",
        "SVC_PROBE_DEADLINE_S": "5",
        "SVC_PROBE_TIMEOUT_S": "3",
        "SVC_QUOTA_SAMPLER": "0",
        # Nothing in these runs may leave the machine, even if a test configures an anchor.
        "SVC_TRACKER_URL": "http://127.0.0.1:9/graphql",
        "SVC_LOKI_URL": "http://127.0.0.1:9",
    })
    env.update(overrides)
    return env


def set_host_name(home: Path, name: str) -> None:
    target = home / ".config" / "svc" / "node.json"
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    target.write_text(json.dumps({"svc": {"host": {"name": name}}}))
    os.chmod(str(target), 0o600)


class FrameWatcher(threading.Thread):
    """Follows a monitor's SSE stream from the moment it listens; keeps each frame's
    (probedAt, status). A frame is sent only after its probe was fully handled
    (latch advanced, events appended), so it is proof that the probe counted."""

    def __init__(self, monitor: "MonitorProcess") -> None:
        super().__init__(daemon=True)
        self.monitor = monitor
        self.frames: List[Tuple[int, str]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        url = None
        while url is None and not self.stopped.is_set():
            url = self.monitor._listening_url()
            if url is None:
                if self.monitor.proc is None or self.monitor.proc.poll() is not None:
                    return
                time.sleep(0.005)
        if url is None:
            return
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        try:
            sock = socket.create_connection((host, int(port)), timeout=0.5)
            sock.sendall(b"GET /api/accounts/stream HTTP/1.1\r\nHost: localhost\r\n\r\n")
        except OSError:
            return
        buffer = b""
        with sock:
            while not self.stopped.is_set():
                try:
                    block = sock.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not block:
                    break
                buffer += block
                while b"\n\n" in buffer:
                    frame, buffer = buffer.split(b"\n\n", 1)
                    for line in frame.split(b"\n"):
                        if line.startswith(b"data:"):
                            try:
                                body = json.loads(line[5:])
                            except ValueError:
                                continue
                            if isinstance(body, dict) and isinstance(body.get("probedAt"), int):
                                self.frames.append((body["probedAt"], str(body.get("status"))))

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
    with FlipProvider(period=period) as provider:
        env = monitor_env(home, provider.url)
        if package_root is not None:
            # Run another copy of the package (used to check that the test catches a broken latch).
            env["PYTHONPATH"] = str(package_root)
        started = time.monotonic()
        for index in range(kills + 1):
            token = "tok-crash-%d-%s" % (index, os.urandom(4).hex())
            sibling = "tok-sibling-%d-%s" % (index, os.urandom(4).hex())
            provider.add_token(token)
            # A sibling flipping out of phase: only the ACTIVE account may move the latch.
            provider.add_token(sibling, inverted=True)
            write_accounts_env(home, [("ACCT1", token, "crash@example.com"),
                                      ("ACCT2", sibling, "sibling@example.com")], "ACCT1")
            # `python -m` imports from its working directory first.
            monitor = MonitorProcess(env, cwd=str(package_root) if package_root is not None else None)
            final = index == kills
            monitor.start(logs / ("monitor-%03d.log" % index), wait_ready=False)
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
                    now = time.monotonic() - provider._t0
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
            if "Traceback" in monitor.stderr():
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
    return {
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
