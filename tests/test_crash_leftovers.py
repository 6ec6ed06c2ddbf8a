"""Temp files of atomic writes killed with SIGKILL: removed at the next monitor start
when older than an hour, never before, and nothing that merely looks like one."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

from svcposture._files import STALE_TEMP_AGE_S, remove_stale_temps
from tests.support.home import REPO
from tests.support.monitor import start_monitor

# A real writer, killed with SIGKILL between writing its temp file and the
# os.replace that would publish it: exactly what a `kill -9` mid-write leaves.
KILLED_WRITER = """
import os, signal, sys
from svcposture import _files
os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)
_files.write_json_atomic(sys.argv[1], {"half": "written"})
"""


def killed_write(env, target: Path) -> Path:
    """Run a writer of `target` that is kill -9'ed mid-write; return the temp file it left."""
    before = set(target.parent.iterdir()) if target.parent.exists() else set()
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(target)], env=env, cwd=str(REPO),
                          capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    left = [p for p in set(target.parent.iterdir()) - before if p.name.startswith("." + target.name + ".")]
    assert len(left) == 1 and not target.exists(), left
    return left[0]


def age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(str(path), (stamp, stamp), follow_symlinks=False)


def start_and_stop(env) -> str:
    monitor = start_monitor(dict(env, SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0"), ["--no-probe"])
    monitor.stop()
    return monitor.stderr_text()


def test_leftovers_older_than_an_hour_go_at_the_next_start_and_younger_ones_stay(env, home):
    cfg, svc, run = home / ".config" / "svc", home / "svc", home / "svc" / "run"
    old: List[Path] = [killed_write(env, cfg / "node.json"), killed_write(env, svc / "account-status-latch.json"),
                       killed_write(env, run / "monitor.pid"), killed_write(env, home / ".zshenv"),
                       killed_write(env, svc / "cluster" / "cluster.json")]
    young = [killed_write(env, cfg / "cluster-secrets.json"), killed_write(env, svc / "alert-latch.json")]
    for path in old:
        age(path, STALE_TEMP_AGE_S + 60)
    for path in young:
        age(path, STALE_TEMP_AGE_S - 60)
    # Look-alikes that are not ours, all old: another program's file in HOME, a real
    # config file, a name that is not 12 hex digits, a directory, a symlink.
    decoys = [home / ".notes.txt.0123456789ab.tmp", cfg / "config.json", cfg / ".node.json.0123456789xy.tmp",
              cfg / ".node.json.tmp", svc / ".x.json.0123456789ab.tmp.bak"]
    for path in decoys:
        path.write_text("{}")
    adir = cfg / ".dir.json.0123456789ab.tmp"
    adir.mkdir()
    link = svc / ".link.json.0123456789ab.tmp"
    link.symlink_to(cfg / "config.json")
    for path in decoys + [adir, link]:
        age(path, 10 * STALE_TEMP_AGE_S)

    log = start_and_stop(env)
    assert [p for p in old if p.exists()] == []
    assert all(p.exists() for p in young + decoys + [adir]) and link.is_symlink()
    assert "removed %d temp file(s) left by interrupted writes" % len(old) in log
    assert (cfg / "config.json").read_text() == "{}"

    # Never before the hour: a start now leaves the young ones; once they are old, they go.
    start_and_stop(env)
    assert all(p.exists() for p in young)
    for path in young:
        age(path, STALE_TEMP_AGE_S + 1)
    start_and_stop(env)
    assert [p for p in young if p.exists()] == []
    assert all(p.exists() for p in decoys + [adir]) and link.is_symlink()


def test_a_corrupt_config_does_not_stop_the_sweep(env, home):
    cfg = home / ".config" / "svc"
    leftover = killed_write(env, cfg / "node.json")
    age(leftover, STALE_TEMP_AGE_S * 2)
    (cfg / "config.json").write_text('{"svc": {"cluster": {"repoPath": ')  # truncated
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--no-probe", "--port", "0"],
                          env=dict(env, SVC_QUOTA_SAMPLER="0"), cwd=str(REPO), capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    # The monitor refuses the corrupt file with one line; the leftover went first.
    assert proc.returncode == 2 and "config.json:1:" in proc.stderr and "Traceback" not in proc.stderr
    assert not leftover.exists()


@pytest.mark.parametrize("name,ours", [
    (".a\nb.0123456789ab.tmp", True), ("." + "n" * 200 + ".0123456789ab.tmp", True),
    (".0123456789ab.tmp", False), ("..0123456789ab.tmp", False), (".x.0123456789AB.tmp", False),
    (".x.0123456789ab.tmpx", False), ("x.0123456789ab.tmp", False), (".x.0123456789abc.tmp", False),
], ids=["newline", "long", "no-target", "empty-target", "upper-hex", "suffix", "no-dot", "13-hex"])
def test_hostile_names(tmp_path, name, ours):
    path = tmp_path / name
    path.write_text("x")
    age(path, STALE_TEMP_AGE_S * 2)
    assert (remove_stale_temps(tmp_path) == [path]) is ours
    assert path.exists() is not ours


def test_a_missing_or_unreadable_directory_removes_nothing(tmp_path):
    assert remove_stale_temps(tmp_path / "absent") == []
    (tmp_path / "file").write_text("x")
    assert remove_stale_temps(tmp_path / "file") == []
