"""svc-stack start/stop/restart/status: the real monitor, detached, with its pidfile and log."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support.cli import assert_clean, cli
from tests.support.home import REPO, mode


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            raw = fh.read()
        return raw[raw.rfind(b")") + 2:][:1] == b"Z"
    except OSError:
        return True


def _wait_gone(pid: int, deadline_s: float = 10.0) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.02)
    return _gone(pid)


def _stack_env(env):
    # Loopback only, no probing, nothing reaches out.
    return dict(env, SVC_PROVIDER_URL="http://127.0.0.1:9", SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0")


def _json(done):
    assert done.returncode in (0, 3), (done.stdout, done.stderr)
    return json.loads(done.stdout)


def _healthz(url: str) -> int:
    with urllib.request.urlopen(url + "/healthz", timeout=10) as resp:
        return resp.status


@pytest.fixture
def stack_env(env, home):
    env = _stack_env(env)
    yield env
    # Never leave a monitor behind, whatever the test did.
    pidfile = home / "svc" / "run" / "monitor.pid"
    if pidfile.exists():
        cli(env, "stack", "stop", "--timeout", "2")


@pytest.mark.parametrize("argv,word", [
    (("start",), "--port"), (("restart",), "previous"), (("stop",), "SIGKILL"),
    (("status",), "exit"), (("sync-cloud-env",), "0600"),
])
def test_subcommand_help(capsys, argv, word):
    from svcposture.cluster.stack import main
    with pytest.raises(SystemExit) as info:
        main(list(argv) + ["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "usage" in out and word in out


def test_help_and_usage(env):
    done = cli(env, "stack", "--help")
    assert done.returncode == 0 and "monitor.pid" in done.stdout
    for word in ("start", "stop", "restart", "status", "sync-cloud-env"):
        assert word in done.stdout
    done = cli(env, "stack")
    assert done.returncode == 2 and "usage" in done.stderr
    done = cli(env, "stack", "start", "--port", "99999")
    assert done.returncode == 2 and "port" in done.stderr
    assert_clean(done)


def test_start_status_restart_stop_lifecycle(stack_env, home):
    env = stack_env
    run_dir = home / "svc" / "run"
    status = cli(env, "stack", "status", "--json")
    assert status.returncode == 3 and _json(status)["running"] is False

    # A stale pidfile left by a crash: a pid that has exited.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_dir.mkdir(parents=True)
    (run_dir / "monitor.pid").write_text("%d\n" % dead.pid)
    status = cli(env, "stack", "status", "--json")
    assert status.returncode == 3 and _json(status)["stalePidfile"] is True

    # An operator shell may carry tokens; the monitor must not inherit them.
    shell = dict(env, MODEL_CODE_OAUTH_TOKEN="CANARY-active", MODEL_TOKEN_ACCT1="CANARY-acct1",
                 SVC_CLOUD_TOKEN="CANARY-cloud")
    started = cli(shell, "stack", "start", "--port", "0", "--no-probe", "--json")
    assert started.returncode == 0, started.stderr
    first = _json(started)
    with open("/proc/%d/environ" % first["pid"], "rb") as fh:
        environ = fh.read()
    assert b"CANARY" not in environ
    assert ("HOME=%s" % home).encode() in environ.split(b"\0")
    assert first["started"] is True and first["ready"] is True
    pid, url = first["pid"], first["url"]
    assert url.startswith("http://127.0.0.1:")
    assert _healthz(url) == 200
    assert (run_dir / "monitor.pid").read_text().strip() == str(pid)
    assert mode(run_dir / "monitor.pid") == 0o600
    log = home / "svc" / "logs" / "monitor.log"
    assert mode(log) == 0o600
    assert "listening" in log.read_text()

    status = cli(env, "stack", "status", "--json")
    assert status.returncode == 0
    st = _json(status)
    assert st["running"] is True and st["pid"] == pid and st["url"] == url
    assert st["args"] == ["--port", "0", "--no-probe"]
    text = cli(env, "stack", "status")
    assert "running" in text.stdout and str(pid) in text.stdout

    again = _json(cli(env, "stack", "start", "--json"))
    assert again["alreadyRunning"] is True and again["pid"] == pid

    # The monitor crashed (SIGKILL, no clean-up): restart still reuses its options.
    os.kill(pid, signal.SIGKILL)
    assert _wait_gone(pid)
    assert _json(cli(env, "stack", "status", "--json"))["stalePidfile"] is True
    restarted = cli(env, "stack", "restart", "--json")
    assert restarted.returncode == 0, restarted.stderr
    second = _json(restarted)
    assert second["previous"]["stalePidfileRemoved"] is True
    assert second["pid"] != pid and second["ready"] is True
    assert _healthz(second["url"]) == 200
    assert _json(cli(env, "stack", "status", "--json"))["args"] == ["--port", "0", "--no-probe"]

    restarted = cli(env, "stack", "restart", "--json")
    assert restarted.returncode == 0, restarted.stderr
    third = _json(restarted)
    assert third["previous"]["stopped"] is True and third["previous"]["pid"] == second["pid"]
    # restart returns only after the old process is gone.
    assert _gone(second["pid"])
    assert third["pid"] != second["pid"] and third["ready"] is True
    assert _healthz(third["url"]) == 200
    second = third

    stopped = cli(env, "stack", "stop", "--json")
    assert stopped.returncode == 0
    assert _json(stopped)["stopped"] is True
    assert _gone(second["pid"])
    assert not (run_dir / "monitor.pid").exists()
    assert cli(env, "stack", "status").returncode == 3
    again = cli(env, "stack", "stop")
    assert again.returncode == 0 and "not running" in again.stdout


def test_two_concurrent_starts_launch_one_monitor(stack_env, home):
    cmd = [sys.executable, "-m", "svcposture", "stack", "start", "--port", "0", "--no-probe", "--json"]
    procs = [subprocess.Popen(cmd, env=stack_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert sorted(r["alreadyRunning"] for r in results) == [False, True]
    assert results[0]["pid"] == results[1]["pid"]
    assert (home / "svc" / "run" / "monitor.pid").read_text().strip() == str(results[0]["pid"])


def test_pidfile_of_a_foreign_process_is_stale_and_never_signalled(stack_env, home):
    run_dir = home / "svc" / "run"
    run_dir.mkdir(parents=True)
    foreign = subprocess.Popen(["sleep", "30"])
    try:
        (run_dir / "monitor.pid").write_text("%d\n" % foreign.pid)
        st = _json(cli(stack_env, "stack", "status", "--json"))
        assert st["running"] is False and st["stalePidfile"] is True
        done = cli(stack_env, "stack", "stop")
        assert done.returncode == 0 and "stale pidfile removed" in done.stdout
        assert foreign.poll() is None, "svc-stack signalled a process that is not its monitor"
        assert not (run_dir / "monitor.pid").exists()
    finally:
        foreign.kill()
        foreign.wait()


@pytest.mark.parametrize("content", [b"", b"garbage", b"-5", b"0", b"\xff\xfe", b"99999999999999999999",
                                     b"1" * 100000])
def test_garbage_pidfile_is_stale(paths, content):
    from svcposture.cluster.stack import status, stop
    paths.run_dir.mkdir(parents=True)
    paths.monitor_pid.write_bytes(content)
    assert status(paths)["stalePidfile"] is True
    assert stop(paths, 1.0) == {"stopped": False, "wasRunning": False, "stalePidfileRemoved": True}
    assert not paths.monitor_pid.exists()


def test_garbage_pidfile_via_cli(stack_env, home):
    run_dir = home / "svc" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "monitor.pid").write_bytes(b"garbage\n")
    done = cli(stack_env, "stack", "status", "--json")
    assert done.returncode == 3
    assert_clean(done)
    assert _json(done)["stalePidfile"] is True


def test_stop_escalates_to_sigkill_when_sigterm_is_ignored(stack_env, home):
    # Looks like our monitor on the command line, but ignores SIGTERM.
    code = "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); open(%r,'w').close(); time.sleep(60)"
    ready = home / "ready"
    stubborn = subprocess.Popen([sys.executable, "-c", code % str(ready), "-m", "svcposture", "monitor"])
    try:
        deadline = time.monotonic() + 10
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        run_dir = home / "svc" / "run"
        run_dir.mkdir(parents=True)
        (run_dir / "monitor.pid").write_text("%d\n" % stubborn.pid)
        done = cli(stack_env, "stack", "stop", "--timeout", "0.5", "--json")
        assert done.returncode == 0, done.stderr
        result = _json(done)
        assert result["stopped"] is True and result["killed"] is True
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
    finally:
        if stubborn.poll() is None:
            stubborn.kill()
            stubborn.wait()


def test_start_failure_is_reported_with_the_log(stack_env, home):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = cli(stack_env, "stack", "start", "--port", str(port), "--no-probe")
    assert done.returncode == 1
    assert_clean(done)
    assert "exited with status" in done.stderr and "monitor.log" in done.stderr
    assert "cannot listen" in done.stderr
    assert not (home / "svc" / "run" / "monitor.pid").exists()


def test_vendored_copy_starts_itself(stack_env, home, tmp_path):
    vendor = tmp_path / "proj" / "_vendor"
    shutil.copytree(str(REPO / "svcposture"), str(vendor / "svcposture"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(stack_env)
    env["PYTHONPATH"] = str(tmp_path)  # the repo copy is not importable
    done = subprocess.run([sys.executable, "-m", "proj._vendor.svcposture", "stack", "start", "--port", "0",
                           "--no-probe", "--json"], env=env, capture_output=True, text=True, timeout=60,
                          cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    try:
        assert result["ready"] is True
        with open("/proc/%d/cmdline" % result["pid"], "rb") as fh:
            argv = fh.read().split(b"\0")
        assert b"proj._vendor.svcposture" in argv
        st = subprocess.run([sys.executable, "-m", "proj._vendor.svcposture", "stack", "status", "--json"],
                            env=env, capture_output=True, text=True, timeout=30, cwd=str(tmp_path))
        assert st.returncode == 0 and json.loads(st.stdout)["pid"] == result["pid"]
    finally:
        subprocess.run([sys.executable, "-m", "proj._vendor.svcposture", "stack", "stop"], env=env,
                       capture_output=True, timeout=30, cwd=str(tmp_path))
    assert _wait_gone(result["pid"])


def test_service_unit_files_are_well_formed():
    import configparser
    import plistlib
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # systemd keys are case-sensitive
    unit.read_string((REPO / "scripts" / "svc-monitor.service").read_text())
    assert "-m svcposture monitor" in unit["Service"]["ExecStart"]
    assert "127.0.0.1" in unit["Service"]["ExecStart"]
    assert unit["Install"]["WantedBy"] == "default.target"
    assert int(unit["Service"]["LimitNOFILE"]) >= 4096  # systemd's default soft limit is 1024
    with open(str(REPO / "scripts" / "com.svc.monitor.plist"), "rb") as fh:
        plist = plistlib.load(fh)
    assert plist["Label"] == "com.svc.monitor"
    assert plist["ProgramArguments"][1:4] == ["-m", "svcposture", "monitor"]
    assert "127.0.0.1" in plist["ProgramArguments"]
    assert plist["RunAtLoad"] is True
    assert plist["SoftResourceLimits"]["NumberOfFiles"] >= 4096  # launchd's default is 256
