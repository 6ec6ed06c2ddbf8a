"""The monitor's side of steering (docs/steering.md): it notices a switch, tells the
notify hook, and switches by itself when the operator opts in.

- The accounts env file is watched by `stat` alone on a short tick (the
  monitor never opens it): when it changes (a switch renamed a new file into
  place, or an editor saved it), the posture service probes again at once,
  so the new active account shows within about a second.
- `account.switched` events are appended by the switch process; the tail of
  the event log is followed and each one goes to the notify hook.
- `SVC_AUTO_SWITCH_AT` (a percentage, off by default): when any window of the
  active account reaches it, or the account is rejected, the monitor takes
  the advice (svcposture.advice) with the threshold as its limit, so that the
  target is below it too. Only on `switch` does it run `svc-monitor switch
  --best --reason auto` in a short-lived child, the posture it judged and that
  advice on the child's stdin; otherwise it stays and says so once in the log.
  The child reads the env file; the monitor still holds no token. Hysteresis
  and the fleet spread are the switch's own (svcposture.switching,
  svcposture.headroom); the monitor only spares itself a child when that
  choice would come out empty.

The node builds one `Steering` before its posture services (each is built with
its vendor's `observer()`), then `start()`s it.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import _time
from .._text import pct_text
from ..events import ACCOUNT_SWITCHED, EventLog, parse_line, event_name
from .advice import DEFAULT_WAIT_S, advise, candidates_of, windows_of
from .advisor import reserve_of
from ..paths import Paths
from ..vendors import DEFAULT_PROVIDER
from ..settings import AUTO_SWITCH_ENV, Settings

log = logging.getLogger("svcposture.steering")

TICK_S = 0.25
# However often the file changes, the provider is asked at most this often.
MIN_REPROBE_S = 1.0
CHILD_TIMEOUT_S = 30.0
_NEEDLE = ('"%s"' % ACCOUNT_SWITCHED).encode("ascii")


def _stat_key(path: str) -> Optional[Tuple[int, int, int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class SwitchNotices:
    """Follows the end of this month's event log; hands each `account.switched` to `submit`."""

    def __init__(self, paths: Paths, submit: Any) -> None:
        self.log = EventLog.for_paths(paths)
        self.submit = submit
        self._path = self.log.path_for(_time.now_ms())
        self._offset = self._size(self._path)

    @staticmethod
    def _size(path: Any) -> int:
        try:
            return os.stat(str(path)).st_size
        except OSError:
            return 0

    def poll(self) -> None:
        path = self.log.path_for(_time.now_ms())
        if path != self._path:
            self._path, self._offset = path, 0
        size = self._size(path)
        if size < self._offset:
            self._offset = size  # truncated back after a failed append
        if size == self._offset:
            return
        try:
            with open(str(path), "rb") as fh:
                fh.seek(self._offset)
                data = fh.read(min(size - self._offset, 4 * 1024 * 1024))
        except OSError:
            return
        complete = data.rfind(b"\n") + 1  # a line still being written waits for the next tick
        self._offset += complete
        for raw in data[:complete].split(b"\n"):
            if _NEEDLE in raw:
                event = parse_line(raw)
                if event is not None and event_name(event) == ACCOUNT_SWITCHED:
                    self.submit(event)


class AutoSwitcher:
    """Runs `switch --best --reason auto` in a child when the active account reaches the threshold."""

    def __init__(self, paths: Paths, environ: Mapping[str, str], node: str, at_pct: float,
                 provider: str = DEFAULT_PROVIDER, trajectory: Any = None, wait_s: int = DEFAULT_WAIT_S) -> None:
        self.paths = paths
        self.environ = environ
        self.node = node
        self.at_pct = at_pct
        # One switcher per vendor's posture service: each observes its own results.
        self.provider = provider
        # The forecasts the advice reads (the node's trajectory service), and SVC_ADVICE_WAIT_S.
        self.trajectory = trajectory
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._running = False
        self._said: Optional[str] = None
        self.runs = 0

    def _say(self, text: str, about: Optional[str] = None) -> None:
        """One log line per change of what the automatic switch has to say: `about` (else the
        text) is what must change, so a countdown inside the text does not repeat the line."""
        key = text if about is None else about
        if key != self._said:
            self._said = key
            log.info("auto switch: %s", text)

    def due(self, summary: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
        """The active account's view when any of its windows (extra windows included) has
        reached the threshold, or it is rejected, or its credential was refused (waiting never
        brings a refused token back: only a healthy sibling, or a person, can)."""
        if summary.get("available") is not True or "error" in summary:
            return None
        active = summary.get("active")
        if isinstance(active, dict) and active.get("health") == "refused":
            return active
        if not isinstance(active, dict) or active.get("error"):
            return None
        if active.get("bindingStatus") == "rejected":
            return active
        windows, _doubt = windows_of(active)
        return active if any(pct >= self.at_pct or status == "rejected" for _n, pct, _r, status in windows) else None

    def advice(self, summary: Mapping[str, Any]) -> Dict[str, Any]:
        """The advice with this threshold as the limit: the target must be below it too."""
        trajectory = self.trajectory.body() if self.trajectory is not None else None
        reserve = reserve_of(trajectory, str(self.paths.home))
        now = summary.get("probedAt") if isinstance(summary.get("probedAt"), int) else _time.now_ms()
        return advise(summary, trajectory, provider=self.provider, reserve=reserve, wait_s=self.wait_s, now_ms=now,
                      ceiling=self.at_pct)

    def observe(self, summary: Mapping[str, Any], edge: Any = None) -> None:
        """A probe-result observer: decides in memory, and starts the child off the probe's thread."""
        active = self.due(summary)
        if active is None:
            self._said = None
            return
        from .switching import auto_gap_ms, auto_limits
        limits = auto_limits(self.paths, self.provider)
        now = _time.now_ms()
        last = limits.get("lastAutoMs")
        if isinstance(last, int) and now - last < auto_gap_ms():
            self._say("%s needs a switch; waiting, at most one switch per %d s per host"
                      % (active["label"], auto_gap_ms() // 1000))
            return
        advice = self.advice(summary)
        if advice["advice"] != "switch":
            self._say("%s stays (advice %s): %s" % (active["label"], advice["advice"], advice["reason"]),
                      about="stays %s %s %s" % (active["label"], advice["advice"], (advice.get("to") or {}).get("label")))
            return
        avoid = limits.get("avoid") or {}
        if all(isinstance(avoid.get(r["label"]), int) and avoid[r["label"]] > now for r in candidates_of(advice)):
            self._say("%s needs a switch, but no other account has headroom below %s that it may go back to yet"
                      % (active["label"], pct_text(self.at_pct)))
            return
        from ..summary import reply
        self.spawn(["switch", "--best", "--reason", "auto", "--provider", self.provider, "--posture-stdin",
                    "--json"], json.dumps(dict(reply(summary, cached=True), advice=advice)).encode("utf-8"))

    def spawn(self, args: List[str], stdin: bytes = b"") -> bool:
        """Run `svc-monitor ARGS` in a child on its own thread; False when one is still running."""
        with self._lock:
            if self._running:
                return False
            self._running = True
        threading.Thread(target=self._run_child, args=(args, stdin), name="svc-auto-switch", daemon=True).start()
        return True

    def _run_child(self, args: List[str], stdin: bytes) -> None:
        import subprocess
        from .._spawn import child_env, module_command, run
        try:
            self.runs += 1
            done = run(module_command("", "monitor", *args), input=stdin, env=child_env(self.environ),
                       timeout=CHILD_TIMEOUT_S)
            self._report(args, done.returncode, done.stdout, done.stderr)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("auto switch: the switch child failed: %s", type(exc).__name__)
        finally:
            with self._lock:
                self._running = False

    def _report(self, args: List[str], code: int, out: bytes, err: bytes) -> None:
        if "--reconcile" in args:
            return
        try:
            result = json.loads(out.decode("utf-8").strip().splitlines()[-1]) if out.strip() else {}
        except (ValueError, IndexError):
            result = {}
        if code == 0 and result.get("switched"):
            self._say("switched %s -> %s" % (result.get("from"), result.get("to")))
        else:
            reason = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["exit %d" % code]
            self._say("no switch: %s" % reason[0][:300])


class Steering:
    """The watcher thread: env file changes, switch notices, and each vendor's automatic switch.

    Built before the posture services, so that each service is built with its
    vendor's `observer()`; `reprobe` asks every posture service to probe again.
    """

    def __init__(self, paths: Paths, settings: Settings, node: str, *, trajectory: Any, notifier: Any,
                 providers: Sequence[str], reprobe: Callable[[], None], probing: bool = True) -> None:
        self.paths = paths
        self.notices = SwitchNotices(paths, notifier.submit) if notifier is not None else None
        self._reprobe = reprobe
        for note in settings.notes_on(AUTO_SWITCH_ENV):
            log.warning("%s", note)
        at_pct = settings.auto_switch_at
        # The children (switch --reconcile, switch --best) get the node's token-free environment.
        self.reconciler = AutoSwitcher(paths, paths.environ, node, at_pct if at_pct is not None else 100.0)
        self.auto: Dict[str, AutoSwitcher] = {}
        if at_pct is not None and probing:
            self.auto = {provider: AutoSwitcher(paths, paths.environ, node, at_pct, provider, trajectory,
                                                settings.advice_wait_s) for provider in providers}
            log.info("auto switch on: at %s of the active account's binding window", pct_text(at_pct))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="svc-steering", daemon=True)

    def observer(self, provider: str) -> Optional[Callable[..., None]]:
        """The posture observer of `provider`'s automatic switch, None while it is off."""
        auto = self.auto.get(provider)
        return auto.observe if auto is not None else None

    def start(self) -> None:
        from .switching import has_pending
        if has_pending(self.paths):
            # A switch was killed half-way: record it before anything switches again.
            self.reconciler.spawn(["switch", "--reconcile"])
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        env_path = str(self.paths.accounts_env)
        key = _stat_key(env_path)
        changed_at: Optional[float] = None
        last_reprobe = 0.0
        while not self._stop.wait(TICK_S):
            try:
                now_key = _stat_key(env_path)
                if now_key != key:
                    key, changed_at = now_key, time.monotonic()
                if changed_at is not None and time.monotonic() - last_reprobe >= MIN_REPROBE_S:
                    changed_at, last_reprobe = None, time.monotonic()
                    self._reprobe()
                if self.notices is not None:
                    self.notices.poll()
            except Exception:  # noqa: BLE001 - the watcher must survive anything
                log.exception("steering tick failed")
