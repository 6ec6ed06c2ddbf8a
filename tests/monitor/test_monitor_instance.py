"""One monitor per node HOME: a second one would emit every status edge twice."""
import subprocess

import pytest
import sys

from tests.support.home import REPO


def test_second_monitor_on_the_same_home_refuses_to_start(env, monitors):
    env = dict(env, SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0")
    first = monitors.start(env, ["--no-probe"])
    try:
        second = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--no-probe", "--port", "0"],
                                cwd=str(REPO), env=env, capture_output=True, text=True, timeout=60,
                                stdin=subprocess.DEVNULL)
        assert second.returncode == 1
        assert "another monitor is already running" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.stop()
    # The lock goes with the process: the next start succeeds.
    again = monitors.start(env, ["--no-probe"])
    again.stop()


def test_a_killed_monitor_does_not_block_the_next_one(env, monitors):
    env = dict(env, SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0")
    first = monitors.start(env, ["--no-probe"])
    first.proc.kill()
    first.proc.wait(timeout=30)
    first.stop()
    again = monitors.start(env, ["--no-probe"])
    again.stop()


def _run_monitor_once(env):
    return subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--no-probe", "--port", "0"],
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def _unusable_lock(home, how):
    import os
    run = home / "svc" / "run"
    if how == "run-is-a-file":
        run.parent.mkdir(mode=0o700, parents=True)
        run.write_text("not a directory\n")
        return "Not a directory"
    run.mkdir(mode=0o700, parents=True)
    lock = run / "monitor.instance.lock"
    if how == "lock-is-a-symlink":
        os.symlink(str(home / "elsewhere"), str(lock))
        return "symbolic link"
    if how == "lock-is-a-directory":
        lock.mkdir()
        return "directory"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["run-is-a-file", "lock-is-a-symlink", "lock-is-a-directory"])
def test_a_monitor_that_cannot_take_its_lock_refuses_to_start(env, home, how):
    env = dict(env, SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0")
    reason = _unusable_lock(home, how)
    done = _run_monitor_once(env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "monitor.instance.lock" in lines[0] and reason.lower() in lines[0].lower()
    assert "listening" not in done.stderr and "Traceback" not in done.stderr
    assert not (home / "elsewhere").exists()  # the link's target was never created


def test_no_second_monitor_serves_while_the_lock_is_unusable(env, home):
    env = dict(env, SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0")
    _unusable_lock(home, "run-is-a-file")
    procs = [subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "--no-probe", "--port", "0"],
                              cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True) for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
        assert "listening on" not in err
