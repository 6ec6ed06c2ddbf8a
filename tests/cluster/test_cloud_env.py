"""Cloud-token projection: cluster.env (0600, safely quoted) and exactly one ~/.zshenv guard line."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import assert_clean, cli
from tests.support.home import CANARY_CLOUD, mode, snapshot, write_json

from svcposture.cluster.cloudenv import GUARD_MARKER, project_cloud_env


def _set_token(paths, token) -> None:
    write_json(paths.cluster_cloud, {"svc": {"cloud": {"token": token}}})


def _sourced(env_file: Path) -> str:
    done = subprocess.run(["sh", "-c", '. "$1"; printf %s "$SVC_CLOUD_TOKEN"', "sh", str(env_file)],
                          capture_output=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode("utf-8")


@pytest.mark.parametrize("token", [
    CANARY_CLOUD,
    "it's",
    "'",
    "''''",
    "$HOME $(id) `id` ${X:-y} \\n \\",
    'a"b\'c$d`e\\f!g',
    "multi\nline\ttoken",
    "ünïcødé-токен-🔑",
    " leading and trailing ",
])
def test_token_round_trips_through_sh(paths, token):
    _set_token(paths, token)
    report = project_cloud_env(paths)
    assert report["ok"] is True and report["token"] == "present"
    assert token not in json.dumps(report)
    assert mode(paths.cluster_env) == 0o600
    assert _sourced(paths.cluster_env) == token


def test_cli_projection_is_token_free_and_sources_via_zshenv_guard(env, home, paths):
    _set_token(paths, CANARY_CLOUD)
    done = cli(env, "stack", "sync-cloud-env", "--json")
    assert done.returncode == 0, done.stderr
    assert_clean(done, CANARY_CLOUD, "cloud-'tok'")
    report = json.loads(done.stdout)
    assert report["envFileAction"] == "written" and report["guardAction"] == "added"
    assert report["envFileMode"] == "0600"
    text = cli(env, "stack", "sync-cloud-env")
    assert text.returncode == 0 and "unchanged" in text.stdout
    assert_clean(text, CANARY_CLOUD)
    # The guard line is plain POSIX sh, so any login shell picks the token up.
    out = subprocess.run(["sh", "-c", '. "$HOME/.zshenv"; printf %s "$SVC_CLOUD_TOKEN"'],
                         env=env, capture_output=True, text=True, timeout=10)
    assert out.stdout == CANARY_CLOUD
    # The guard line itself holds no secret.
    assert CANARY_CLOUD not in (home / ".zshenv").read_text()


def test_guard_line_is_idempotent_across_10_runs(paths, home):
    zshenv = home / ".zshenv"
    user = b"# my zshenv\nexport PATH=\"$HOME/bin:$PATH\"\n\nalias ll='ls -l'\n"
    zshenv.write_bytes(user)
    os.chmod(str(zshenv), 0o640)
    _set_token(paths, "t0")
    actions = []
    for i in range(10):
        if i == 5:
            _set_token(paths, "t1")
        report = project_cloud_env(paths)
        assert report["ok"], report
        actions.append(report["guardAction"])
    assert actions == ["added"] + ["unchanged"] * 9
    data = zshenv.read_bytes()
    assert data.count(GUARD_MARKER) == 1
    assert data.startswith(user)
    assert data[len(user):].count(b"\n") == 1
    assert mode(zshenv) == 0o640
    assert _sourced(paths.cluster_env) == "t1"


def test_duplicated_or_stale_guard_lines_collapse_to_one_in_place(paths, home):
    zshenv = home / ".zshenv"
    old = b". ~/.old-cluster-env  " + GUARD_MARKER
    zshenv.write_bytes(b"first\n" + old + b"\nmiddle\n" + old + b"\nlast")  # no final newline
    _set_token(paths, "t")
    assert project_cloud_env(paths)["guardAction"] == "updated"
    lines = zshenv.read_bytes().split(b"\n")
    assert lines[0] == b"first" and lines[2] == b"middle" and lines[3] == b"last"
    assert GUARD_MARKER in lines[1] and b"cluster.env" in lines[1]
    assert zshenv.read_bytes().count(GUARD_MARKER) == 1
    assert project_cloud_env(paths)["guardAction"] == "unchanged"


def test_zshenv_without_trailing_newline_gets_the_guard_on_its_own_line(paths, home):
    (home / ".zshenv").write_bytes(b"export A=1")
    _set_token(paths, "t")
    project_cloud_env(paths)
    lines = (home / ".zshenv").read_bytes().split(b"\n")
    assert lines[0] == b"export A=1" and GUARD_MARKER in lines[1]


def test_symlinked_zshenv_keeps_the_link(paths, home):
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "zshenv").write_text("export B=2\n")
    os.chmod(str(dotfiles / "zshenv"), 0o600)
    os.symlink(str(dotfiles / "zshenv"), str(home / ".zshenv"))
    _set_token(paths, "t")
    assert project_cloud_env(paths)["guardAction"] == "added"
    assert (home / ".zshenv").is_symlink()
    assert GUARD_MARKER in (dotfiles / "zshenv").read_bytes()
    assert mode(dotfiles / "zshenv") == 0o600


def test_no_token_removes_the_env_file_and_leaves_zshenv_alone(paths, home):
    _set_token(paths, "t")
    project_cloud_env(paths)
    zshenv_before = (home / ".zshenv").read_bytes()
    write_json(paths.cluster_cloud, {"svc": {"cloud": {}}})
    report = project_cloud_env(paths)
    assert report["ok"] and report["token"] == "absent" and report["envFileAction"] == "removed"
    assert not paths.cluster_env.exists()
    assert (home / ".zshenv").read_bytes() == zshenv_before
    paths.cluster_cloud.unlink()
    report = project_cloud_env(paths)
    assert report["envFileAction"] == "absent" and report["changed"] is False


def test_nothing_configured_touches_no_shell_file(paths, home):
    report = project_cloud_env(paths)
    assert report == dict(report, ok=True, token="absent", envFileAction="absent", guardAction="not-needed",
                          changed=False)
    assert not (home / ".zshenv").exists()


def test_loose_mode_on_existing_env_file_is_repaired(paths):
    _set_token(paths, "t")
    project_cloud_env(paths)
    os.chmod(str(paths.cluster_env), 0o644)
    report = project_cloud_env(paths)
    assert report["envFileAction"] == "updated"
    assert mode(paths.cluster_env) == 0o600


def test_flat_dotted_cloud_file_is_accepted(paths):
    write_json(paths.cluster_cloud, {"svc.cloud.token": "flat"})
    assert project_cloud_env(paths)["token"] == "present"
    assert _sourced(paths.cluster_env) == "flat"


@pytest.mark.parametrize("content,phrase", [
    (b'{"svc": {"cloud": {"token": ', "cluster-cloud.json"),
    (b"", "empty"),
    (b'["x"]', "object"),
    (b'{"svc": {"cloud": {"token": 42}}}', "must be a string"),
    (b'{"svc": {"cloud": {"token": "a\\u0000b"}}}', "NUL"),
], ids=["truncated", "empty", "array", "number", "nul"])
def test_bad_cloud_file_reports_error_and_keeps_existing_env(paths, home, content, phrase):
    _set_token(paths, "good")
    project_cloud_env(paths)
    before = snapshot(home)
    paths.cluster_cloud.write_bytes(content)
    before[str(paths.cluster_cloud.relative_to(home))] = None  # we just changed it ourselves
    report = project_cloud_env(paths)
    assert report["ok"] is False and phrase in report["error"]
    after = snapshot(home)
    after[str(paths.cluster_cloud.relative_to(home))] = None
    assert {k: v for k, v in after.items() if not k.endswith(".lock")} == \
        {k: v for k, v in before.items() if not k.endswith(".lock")}
    assert _sourced(paths.cluster_env) == "good"


def test_cli_error_exit_code(env, paths):
    paths.cluster_cloud.parent.mkdir(parents=True)
    paths.cluster_cloud.write_text("{nope")
    done = cli(env, "stack", "sync-cloud-env")
    assert done.returncode == 1
    assert "cluster-cloud.json" in done.stderr
    assert_clean(done)


def test_huge_zshenv_is_not_edited(paths, home):
    big = b"# pad\n" * (1024 * 1024 // 6 + 10)
    (home / ".zshenv").write_bytes(big)
    _set_token(paths, "t")
    report = project_cloud_env(paths)
    assert report["ok"] is False and "larger than" in report["error"]
    assert (home / ".zshenv").read_bytes() == big


def test_concurrent_projections_leave_exactly_one_guard_line(paths, home):
    import threading
    (home / ".zshenv").write_text("export KEEP=1\n")
    _set_token(paths, "t")
    errors = []

    def worker():
        for _ in range(10):
            report = project_cloud_env(paths)
            if not report["ok"]:
                errors.append(report)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    data = (home / ".zshenv").read_bytes()
    assert data.startswith(b"export KEEP=1\n") and data.count(GUARD_MARKER) == 1
    assert _sourced(paths.cluster_env) == "t"
