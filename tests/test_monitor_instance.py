"""One monitor per node HOME: a second one would emit every status edge twice."""
import subprocess
import sys

from tests.support.home import REPO
from tests.support.monitor import start_monitor


def test_second_monitor_on_the_same_home_refuses_to_start(env):
    env = dict(env, SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0")
    first = start_monitor(env, ["--no-probe"])
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
    again = start_monitor(env, ["--no-probe"])
    again.stop()


def test_a_killed_monitor_does_not_block_the_next_one(env):
    env = dict(env, SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0")
    first = start_monitor(env, ["--no-probe"])
    first.proc.kill()
    first.proc.wait(timeout=30)
    first.stop()
    again = start_monitor(env, ["--no-probe"])
    again.stop()
