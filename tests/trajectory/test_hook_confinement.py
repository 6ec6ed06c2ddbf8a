"""A notify hook never outlives the monitor or its timeout: the real monitor runs a
CPU-bound hook whose grandchild starts a session of its own (setsid); after SIGTERM
to the monitor, /proc must show neither, polled with a deadline. Both Linux ways
of finding the grandchild are exercised: the cgroup (where this machine lets the
monitor write one) and the child-subreaper sweep (SVC_ALERT_HOOK_CGROUP=0)."""
from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from tests.support.home import canary, monitor_env
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("setsid") is None,
                                reason="Linux /proc and setsid(1)")
TOK = canary("hookcage")


def _alive(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as fh:
            raw = fh.read()
    except OSError:
        return False
    return raw[raw.rfind(")") + 2:].split()[0] not in ("Z", "X")


def _session(pid: int) -> int:
    with open("/proc/%d/stat" % pid) as fh:
        raw = fh.read()
    return int(raw[raw.rfind(")") + 2:].split()[3])


def _cgroup_usable() -> bool:
    from svcposture.trajectory import hookcage
    path, _ = hookcage._own_cgroup_dir()
    return path is not None and os.access(path, os.W_OK)


def _hook(tmp: Path) -> str:
    """CPU-bound, with a CPU-bound grandchild in a new session; both write their pids."""
    return ('echo $$ > "{d}/hook.pid"; '
            'setsid sh -c \'echo $$ > "{d}/grandchild.tmp"; mv "{d}/grandchild.tmp" "{d}/grandchild.pid"; '
            'while :; do :; done\' </dev/null >/dev/null 2>&1 & '
            'while :; do :; done').format(d=tmp)


def _pid(path: Path) -> int:
    return int(path.read_text().strip()) if path.exists() and path.read_text().strip() else 0


@pytest.fixture
def leftovers(tmp_path):
    """Whatever hook processes a failing run leaves are killed here, not left burning CPU."""
    yield
    for name in ("hook.pid", "grandchild.pid"):
        pid = _pid(tmp_path / name)
        if pid and _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.parametrize("mode", ["cgroup", "subreaper"])
def test_stopping_the_monitor_kills_a_running_hook_and_its_setsid_grandchild(tmp_path, mode, leftovers):
    if mode == "cgroup" and not _cgroup_usable():
        pytest.skip("no writable cgroup v2 here")
    home = tmp_path / "home"
    home.mkdir()
    with ProviderServer() as provider:
        # 93 % of the week: the first probe crosses the 80 and 90 thresholds and runs the hook.
        provider.set_account(TOK, five_hour=(0.10, "allowed"), seven_day=(0.93, "allowed_warning"))
        env = monitor_env(home, provider.url, accounts=[("ACCT1", TOK, "ada@example.com")], active="ACCT1",
                          SVC_ALERT_CMD=_hook(tmp_path), SVC_ALERT_HOOK_CGROUP="1" if mode == "cgroup" else "0")
        mon = start_monitor(env)
        try:
            wait_until(lambda: _pid(tmp_path / "grandchild.pid") and _pid(tmp_path / "hook.pid"), timeout=30,
                       message="the hook and its grandchild running")
            hook, grandchild = _pid(tmp_path / "hook.pid"), _pid(tmp_path / "grandchild.pid")
            assert _alive(hook) and _alive(grandchild)
            assert _session(grandchild) == grandchild != _session(hook)  # it left the hook's session
        finally:
            code = mon.stop()
        assert code == 0, mon.stderr_text()
        wait_until(lambda: not _alive(hook) and not _alive(grandchild), timeout=10,
                   message="hook %d and grandchild %d gone after the monitor stopped" % (hook, grandchild))
    log = mon.stderr_text()
    assert ("alert hooks run in cgroup" in log) is (mode == "cgroup"), log
    assert ("child subreaper" in log) is (mode == "subreaper"), log
    assert "Traceback" not in log


@pytest.mark.parametrize("mode", ["cgroup", "subreaper"])
def test_a_setsid_grandchild_does_not_outlive_its_hook(tmp_path, leftovers, mode):
    """With the monitor left running: the hook ends, and what it left in a session of its own goes too."""
    if mode == "cgroup" and not _cgroup_usable():
        pytest.skip("no writable cgroup v2 here")
    home = tmp_path / "home"
    home.mkdir()
    with ProviderServer() as provider:
        provider.set_account(TOK, five_hour=(0.10, "allowed"), seven_day=(0.93, "allowed_warning"))
        hook = ('if [ -e "{d}/grandchild.pid" ]; then exit 0; fi; '
                'setsid sh -c \'echo $$ > "{d}/grandchild.tmp"; mv "{d}/grandchild.tmp" "{d}/grandchild.pid"; '
                'exec sleep 300\' </dev/null >/dev/null 2>&1 & '
                'while [ ! -e "{d}/grandchild.pid" ]; do sleep 0.05; done; exit 0').format(d=tmp_path)
        env = monitor_env(home, provider.url, accounts=[("ACCT1", TOK, "ada@example.com")], active="ACCT1",
                          SVC_ALERT_CMD=hook, SVC_ALERT_HOOK_CGROUP="1" if mode == "cgroup" else "0")
        mon = start_monitor(env)
        try:
            wait_until(lambda: _pid(tmp_path / "grandchild.pid"), timeout=30, message="the grandchild started")
            grandchild = _pid(tmp_path / "grandchild.pid")
            # The hook itself exited at once; what it left behind is swept with it.
            wait_until(lambda: not _alive(grandchild), timeout=15, message="the escaped grandchild killed")
            assert mon.proc.poll() is None
        finally:
            mon.stop()


def _escaping_hook(tmp: Path, leave_cgroup: bool) -> str:
    """A hook whose grandchild drops every trace a sweep could follow: a session of its own
    (setsid), an empty environment (env -i: no tag), and, with `leave_cgroup`, the hook's cgroup
    (it writes itself into the parent's cgroup.procs). The hook exits once the grandchild runs."""
    move = ""
    if leave_cgroup:
        from svcposture.trajectory import hookcage
        mount = hookcage._own_cgroup_dir()[0]
        # The hook's cgroup is a child of the monitor's; the grandchild climbs one level.
        move = ('cg=$(sed -n "s/^0:://p" /proc/self/cgroup); '
                'echo $$ > "{m}$(dirname "$cg")/cgroup.procs"; ').format(m=mount.rstrip("/"))
    inner = move + 'echo $$ > "{d}/grandchild.tmp"; mv "{d}/grandchild.tmp" "{d}/grandchild.pid"; exec sleep 300'
    return ('if [ -e "{d}/grandchild.pid" ]; then exit 0; fi; '
            'setsid env -i PATH="$PATH" /bin/sh -c \'%s\' </dev/null >/dev/null 2>&1 & '
            'while [ ! -e "{d}/grandchild.pid" ]; do sleep 0.05; done; exit 0' % inner).format(d=tmp)


def _cgroup_of(pid: int) -> str:
    with open("/proc/%d/cgroup" % pid) as fh:
        return next(line.strip()[3:] for line in fh if line.startswith("0::"))


@pytest.mark.parametrize("mode", ["cgroup", "subreaper"])
def test_a_grandchild_that_drops_its_tag_and_its_cgroup_is_killed_too(tmp_path, leftovers, mode):
    """setsid env -i (and, under a cgroup, a move to the parent cgroup): what is left is an orphan
    the monitor adopted and did not start, and that is enough to kill it."""
    if mode == "cgroup" and not _cgroup_usable():
        pytest.skip("no writable cgroup v2 here")
    home = tmp_path / "home"
    home.mkdir()
    with ProviderServer() as provider:
        provider.set_account(TOK, five_hour=(0.10, "allowed"), seven_day=(0.93, "allowed_warning"))
        env = monitor_env(home, provider.url, accounts=[("ACCT1", TOK, "ada@example.com")], active="ACCT1",
                          SVC_ALERT_CMD=_escaping_hook(tmp_path, mode == "cgroup"),
                          SVC_ALERT_HOOK_CGROUP="1" if mode == "cgroup" else "0")
        mon = start_monitor(env)
        try:
            wait_until(lambda: _pid(tmp_path / "grandchild.pid"), timeout=30, message="the grandchild started")
            grandchild = _pid(tmp_path / "grandchild.pid")
            if mode == "cgroup" and _alive(grandchild):
                assert "svc-alert-hooks" not in _cgroup_of(grandchild), "the grandchild did not leave"
            wait_until(lambda: not _alive(grandchild), timeout=15, message="the escaped grandchild killed")
            # The monitor's own children are untouched: it still probes and serves.
            assert mon.proc.poll() is None
            assert mon.get_json("/api/accounts?refresh=true", {"X-Svc-Refresh": "1"})[0] == 200
        finally:
            mon.stop()
    assert "Traceback" not in mon.stderr_text()
