"""The SVC_ALERT_CMD hook: real /bin/sh hooks that hang, flood, fail, read nothing or do not exist."""
from __future__ import annotations

import json
import logging
import os
import time

from svcposture.trajectory.notify import Notifier
from tests.support.waiting import wait_until


def _event(n: int) -> dict:
    return {"v": 2, "id": "%016x" % n, "attributes": {"event.name": "account.quota.threshold", "n": n}}


def _notifier(command: str, environ=None, **kw) -> Notifier:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}
    notifier = Notifier(command, dict(base, **(environ or {})), **kw)
    notifier.start()
    return notifier


def test_each_event_is_one_json_line_on_stdin_with_no_token_in_the_environment(tmp_path):
    out = tmp_path / "out.jsonl"
    env_out = tmp_path / "env.txt"
    notifier = _notifier('cat >> "%s"; env >> "%s"' % (out, env_out),
                         {"MODEL_CODE_OAUTH_TOKEN": "sk-secret-a", "MODEL_TOKEN_ACCT1": "sk-secret-b",
                          "SVC_CLOUD_TOKEN": "sk-secret-c"})
    try:
        for n in range(3):
            notifier.submit(_event(n))
        wait_until(lambda: out.exists() and len(out.read_text().splitlines()) == 3, message="three hook runs")
    finally:
        notifier.stop()
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["%016x" % n for n in range(3)]
    assert "sk-secret" not in env_out.read_text()


def test_a_hanging_hook_is_killed_with_its_group_and_the_next_event_still_runs(tmp_path, caplog):
    pids = tmp_path / "pids"
    done = tmp_path / "done"
    # The hook starts a grandchild in its group that would outlive it, then hangs.
    command = ('if [ ! -e "%s" ]; then (sleep 300 & echo $! > "%s"; wait) & touch "%s.started"; sleep 300; fi; '
               'touch "%s"' % (pids, pids, pids, done))
    caplog.set_level(logging.WARNING, logger="svcposture.notify")
    notifier = _notifier(command, timeout_s=0.5)
    try:
        start = time.monotonic()
        notifier.submit(_event(1))
        wait_until(lambda: pids.exists() and pids.read_text().strip(), message="the grandchild")
        grandchild = int(pids.read_text())
        notifier.submit(_event(2))
        wait_until(done.exists, message="the next event's hook")
        assert time.monotonic() - start < 30
        wait_until(lambda: not _alive(grandchild), message="the hung hook's group killed")
    finally:
        notifier.stop()
    assert notifier.failures == 1
    assert any("ran over" in r.getMessage() for r in caplog.records)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def test_flooding_failing_silent_and_missing_hooks_are_one_log_line_each(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="svcposture.notify")
    marker = tmp_path / "after"
    for command in ("head -c 20000000 /dev/zero", "exit 3", "exec 0<&-; true", "/no/such/hook --flag"):
        notifier = _notifier(command, timeout_s=20)
        try:
            notifier.submit(_event(1))
            notifier.submit({"v": 2, "id": "x", "attributes": {}})
            wait_until(notifier.idle, timeout=30, message="hook %r done" % command)
        finally:
            notifier.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("exited with status 3" in m for m in messages) == 2
    assert sum("exited with status 127" in m for m in messages) == 2  # the shell: command not found
    assert not any("Traceback" in m for m in messages)
    assert not marker.exists()


def test_the_queue_is_bounded_and_drops_the_oldest(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="svcposture.notify")
    gate = tmp_path / "gate"
    out = tmp_path / "out"
    started = tmp_path / "started"
    notifier = _notifier('touch "%s"; while [ ! -e "%s" ]; do sleep 0.05; done; cat >> "%s"' % (started, gate, out),
                         limit=5, timeout_s=30)
    try:
        notifier.submit(_event(0))
        wait_until(started.exists, message="the first hook running")
        for n in range(1, 12):
            notifier.submit(_event(n))  # never blocks, however slow the hook
        gate.touch()
        wait_until(lambda: notifier.idle() and out.exists(), message="the queue drained")
    finally:
        notifier.stop()
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    # The first was already running; of the rest the newest 5 stayed queued.
    assert ids == ["%016x" % n for n in [0, 7, 8, 9, 10, 11]]
    assert notifier.dropped == 6
    assert sum("dropped the oldest" in r.getMessage() for r in caplog.records) == 6


def test_no_command_means_no_notifier():
    assert Notifier.from_environ({}) is None
    assert Notifier.from_environ({"SVC_ALERT_CMD": "   "}) is None
    assert Notifier.from_environ({"SVC_ALERT_CMD": "true"}) is not None
