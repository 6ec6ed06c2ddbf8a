"""A neighbour who can plant symlinks or loosen directories under HOME.

Every path the package writes gets a symlink planted at it pointing out of
HOME: appends and lock files refuse it, atomic writes replace the link itself,
and the link's target is never touched. Directories another user could write
in are refused with one line (or tightened when the package made them), and
the doctor FAILs on them.
"""
from __future__ import annotations

import datetime
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from svcposture import _dirs, _files
from svcposture.paths import Paths
from tests.support.home import REPO, accounts_path, clean_env, monitor_env, status_events, write_accounts
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

ORIGINAL = b"the neighbour's bait, must stay as it is\n"


def _outside(tmp_path: Path, name: str) -> Path:
    target = tmp_path / "outside" / name
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(ORIGINAL)
    return target


def _plant(link: Path, target: Path) -> None:
    link.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.symlink(str(target), str(link))


def _month_log(paths: Paths) -> Path:
    return paths.events_dir / (datetime.datetime.utcnow().strftime("%Y-%m") + ".jsonl")


def _day_history(paths: Paths) -> Path:
    return paths.history_dir / (datetime.datetime.utcnow().strftime("%Y-%m-%d") + ".jsonl")


ATOMIC = ["latch", "monitor_json", "monitor_pid", "node_json", "config_json", "cluster_secrets",
          "cluster_cloud", "cluster_env"]


@pytest.mark.parametrize("name", ATOMIC)
def test_atomic_writes_replace_a_planted_link_and_never_write_its_target(home, tmp_path, name):
    paths = Paths(home, environ={"HOME": str(home)})
    link = getattr(paths, name)
    target = _outside(tmp_path, name)
    _plant(link, target)
    _files.write_json_atomic(link, {"fresh": True})
    assert target.read_bytes() == ORIGINAL
    assert not link.is_symlink() and json.loads(link.read_text()) == {"fresh": True}
    assert stat.S_IMODE(link.stat().st_mode) == 0o600


@pytest.mark.parametrize("where", ["event-log", "history"])
def test_appends_refuse_a_planted_link(home, tmp_path, where):
    paths = Paths(home, environ={"HOME": str(home)})
    link = _month_log(paths) if where == "event-log" else _day_history(paths)
    target = _outside(tmp_path, where)
    _plant(link, target)
    with pytest.raises(_dirs.UnsafePathError) as caught:
        _files.append_line(link, '{"event": 1}')
    assert str(caught.value) == "refusing to use %s: it is a symbolic link" % link
    with pytest.raises(OSError):
        _files.append_lines(link, ['{"a": 1}', '{"b": 2}'])
    assert target.read_bytes() == ORIGINAL


@pytest.mark.parametrize("rel", ["svc/run/monitor.lock", ".config/svc/.cluster-env.lock"])
def test_lock_files_refuse_a_planted_link_and_create_nothing(home, tmp_path, rel):
    link = home / rel
    target = tmp_path / "outside" / "created-by-the-link"
    target.parent.mkdir()
    _plant(link, target)
    with pytest.raises(_dirs.UnsafePathError):
        with _files.lock_file(link):
            pass
    assert not target.exists()


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_appends_refuse_what_is_not_a_regular_file(home, kind):
    path = home / "svc" / "events" / "2026-01.jsonl"
    path.parent.mkdir(mode=0o700, parents=True)
    if kind == "fifo":
        os.mkfifo(str(path))
    else:
        path.mkdir()
    with pytest.raises(OSError):
        _files.append_line(path, "{}")  # never blocks on the FIFO


# ---------------------------------------------------------------- directories

def test_a_directory_the_package_creates_is_private_even_under_umask_0(home):
    old = os.umask(0)
    try:
        _dirs.ensure_dir(home / "svc" / "events")
    finally:
        os.umask(old)
    for directory in (home / "svc", home / "svc" / "events"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


@pytest.mark.parametrize("rel", ["svc", "svc/events", ".config/svc"])
def test_an_existing_directory_writable_by_others_is_refused_not_tightened(home, rel):
    loose = home / rel
    loose.mkdir(parents=True)
    os.chmod(str(loose), 0o777)
    with pytest.raises(_dirs.UnsafePathError) as caught:
        _dirs.ensure_dir(home / rel / "sub")
    assert str(caught.value).startswith("refusing to use %s: it is writable by group or others (mode 0777)" % loose)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o777  # the user's directory is theirs to fix
    assert not (home / rel / "sub").exists()


def test_a_directory_owned_by_another_user_is_refused(home):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a directory to another uid")
    theirs = home / "svc"
    theirs.mkdir(mode=0o700)
    os.chown(str(theirs), 4242, 4242)
    with pytest.raises(_dirs.UnsafePathError) as caught:
        _dirs.ensure_dir(theirs / "events")
    assert "owned by uid 4242" in str(caught.value)


def test_a_symlinked_directory_the_user_owns_is_followed(home, tmp_path):
    # ~/svc on a bigger disk is a common layout; the check applies to the target.
    real = tmp_path / "disk" / "svc"
    real.mkdir(parents=True, mode=0o700)
    os.symlink(str(real), str(home / "svc"))
    _files.append_line(home / "svc" / "events" / "2026-01.jsonl", "{}")
    assert (real / "events" / "2026-01.jsonl").read_bytes() == b"{}\n"


def _doctor(env):
    done = subprocess.run([sys.executable, "-m", "svcposture", "cluster", "doctor", "--json"], cwd=str(REPO),
                          env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    return done.returncode, {c["name"]: c for c in report["checks"]}


@pytest.mark.parametrize("rel", ["svc", "svc/events", ".config/svc"])
def test_doctor_fails_on_a_directory_writable_by_others(home, rel):
    env = dict(clean_env(home), SVC_TRACKER_URL="http://127.0.0.1:9/graphql")
    for directory in ("svc/events", ".config/svc"):
        (home / directory).mkdir(parents=True, mode=0o700, exist_ok=True)
    code, checks = _doctor(env)
    assert checks["directories"]["status"] == "PASS", checks["directories"]
    os.chmod(str(home / rel), 0o777)
    code, checks = _doctor(env)
    assert code == 1
    assert checks["directories"]["status"] == "FAIL"
    assert str(home / rel) in checks["directories"]["detail"]
    assert stat.S_IMODE((home / rel).stat().st_mode) == 0o777  # the doctor changes nothing


# ---------------------------------------------------------------- through the real monitor

def test_monitor_refuses_to_start_on_a_svc_directory_others_can_write(home):
    (home / "svc").mkdir(mode=0o700)
    os.chmod(str(home / "svc"), 0o777)
    env = dict(clean_env(home), SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0")
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--no-probe", "--port", "0"],
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "writable by group or others" in lines[0] and str(home / "svc") in lines[0]


def test_monitor_never_writes_through_links_at_its_event_log_and_history(home, tmp_path, monitors):
    paths = Paths(home, environ={"HOME": str(home)})
    log_target = _outside(tmp_path, "events")
    history_target = _outside(tmp_path, "history")
    _plant(_month_log(paths), log_target)
    _plant(_day_history(paths), history_target)
    with ProviderServer() as provider:
        provider.set_account("tok-rejected", status="rejected", five_hour=(1.02, "rejected"))
        write_accounts(accounts_path(home), [("A", "tok-rejected", "a@example.com")], active="A")
        mon = monitors.start(monitor_env(home, provider.url))
        try:
            # The ok -> rejected edge is due on every probe, and every append is refused.
            wait_until(lambda: mon.stderr_text().count("could not append account.status.changed") >= 2,
                       message="two refused edge appends")
            status, body = mon.get_json("/api/accounts")
            assert status == 200 and body["status"] == "rejected"
        finally:
            mon.stop()
    assert log_target.read_bytes() == ORIGINAL
    assert history_target.read_bytes() == ORIGINAL
    assert _month_log(paths).is_symlink() and status_events(home) == []


def test_stack_start_refuses_a_link_at_the_monitor_log(home, tmp_path):
    target = _outside(tmp_path, "monitor.log")
    _plant(home / "svc" / "logs" / "monitor.log", target)
    env = dict(clean_env(home), SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0")
    done = subprocess.run([sys.executable, "-m", "svcposture", "stack", "start"], cwd=str(REPO), env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "symbolic link" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert target.read_bytes() == ORIGINAL
    assert not (home / "svc" / "run" / "monitor.pid").exists()
