"""svc-cluster roster list/add/remove against a real git checkout with a bare remote."""
from __future__ import annotations

import json

from tests.support.cli import assert_clean, cli
from tests.support.home import git, make_cluster_repo, mode, write_json


def _head(repo) -> str:
    return git(repo, "rev-parse", "HEAD").stdout.strip()


def _remote_head(bare) -> str:
    return git(bare, "rev-parse", "main").stdout.strip()


def _roster_file(checkout) -> dict:
    return json.loads((checkout / "cluster.json").read_text())


def test_list_reads_cluster_json_live(env, home, tmp_path):
    _, _, checkout = make_cluster_repo(tmp_path, home, roster=("node-a", "node-b"))
    done = cli(env, "cluster", "roster", "list")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["node-a", "node-b"]
    js = json.loads(cli(env, "cluster", "roster", "list", "--json").stdout)
    assert js == {"repo": str(checkout), "roster": ["node-a", "node-b"], "duplicates": []}


def test_add_commits_and_pushes_only_with_push(env, home, tmp_path, paths):
    bare, _, checkout = make_cluster_repo(tmp_path, home)
    remote_before = _remote_head(bare)
    # A fresh node has no git identity (HOME is empty): the commit must still happen.
    env = {k: v for k, v in env.items() if not k.startswith(("GIT_AUTHOR", "GIT_COMMITTER"))}
    done = cli(env, "cluster", "roster", "add", "node-b")
    assert done.returncode == 0, done.stderr
    assert_clean(done)
    assert "not pushed" in done.stdout
    assert _roster_file(checkout) == {"roster": ["node-a", "node-b"], "note": "kept"}
    assert mode(checkout / "cluster.json") == 0o644
    assert git(checkout, "log", "-1", "--format=%s").stdout.strip() == "roster: add node-b"
    assert git(checkout, "status", "--porcelain").stdout == ""
    assert git(checkout, "log", "-1", "--format=%ae").stdout.strip() == "svc-cluster@localhost"
    assert _remote_head(bare) == remote_before
    # The getter reads the roster live: no restart, no cache.
    from svcposture.config import roster
    assert roster(paths) == ["node-a", "node-b"]

    done = cli(env, "cluster", "roster", "add", "node-c", "--push", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["pushed"] is True and result["roster"] == ["node-a", "node-b", "node-c"]
    assert _remote_head(bare) == _head(checkout) == result["commit"]


def test_names_are_unique_case_insensitively(env, home, tmp_path):
    _, _, checkout = make_cluster_repo(tmp_path, home, roster=("node-a",))
    head = _head(checkout)
    for name in ("node-a", "NODE-A"):
        done = cli(env, "cluster", "roster", "add", name)
        assert done.returncode == 1
        assert "already in the roster" in done.stderr
    assert _head(checkout) == head
    assert _roster_file(checkout)["roster"] == ["node-a"]


def test_remove_commits_and_absent_name_is_an_error(env, home, tmp_path):
    bare, _, checkout = make_cluster_repo(tmp_path, home, roster=("node-a", "node-b"))
    done = cli(env, "cluster", "roster", "remove", "node-a", "--push")
    assert done.returncode == 0, done.stderr
    assert _roster_file(checkout)["roster"] == ["node-b"]
    assert git(checkout, "log", "-1", "--format=%s").stdout.strip() == "roster: remove node-a"
    assert _remote_head(bare) == _head(checkout)
    head = _head(checkout)
    done = cli(env, "cluster", "roster", "remove", "node-zz")
    assert done.returncode == 1 and "not in the roster" in done.stderr
    assert _head(checkout) == head


def test_invalid_name_is_rejected(env, home, tmp_path):
    _, _, checkout = make_cluster_repo(tmp_path, home)
    head = _head(checkout)
    done = cli(env, "cluster", "roster", "add", "bad name")
    assert done.returncode == 2 and "invalid host name" in done.stderr
    assert _head(checkout) == head


def test_uncommitted_cluster_json_is_not_swept_into_a_commit(env, home, tmp_path):
    _, _, checkout = make_cluster_repo(tmp_path, home)
    write_json(checkout / "cluster.json", {"roster": ["node-a", "hand-edit"]}, 0o644)
    head = _head(checkout)
    done = cli(env, "cluster", "roster", "add", "node-b")
    assert done.returncode == 1
    assert "uncommitted changes" in done.stderr
    assert _head(checkout) == head
    assert _roster_file(checkout)["roster"] == ["node-a", "hand-edit"]


def test_push_failure_keeps_the_local_commit_and_says_so(env, home, tmp_path):
    _, _, checkout = make_cluster_repo(tmp_path, home)
    git(checkout, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    done = cli(env, "cluster", "roster", "add", "node-b", "--push")
    assert done.returncode == 1
    assert_clean(done)
    assert "push failed" in done.stderr and "stays local" in done.stderr
    assert git(checkout, "log", "-1", "--format=%s").stdout.strip() == "roster: add node-b"


def test_missing_checkout_and_non_repo_are_clear_errors(env, home, tmp_path):
    done = cli(env, "cluster", "roster", "list")
    assert done.returncode == 1 and "not found" in done.stderr
    assert_clean(done)
    plain = home / "svc" / "cluster"
    plain.mkdir(parents=True)
    done = cli(env, "cluster", "roster", "add", "node-b")
    assert done.returncode == 1 and "not the top of a git checkout" in done.stderr
    assert_clean(done)


def test_corrupt_cluster_json_is_a_config_error(env, home, tmp_path):
    _, seed, checkout = make_cluster_repo(tmp_path, home)
    (checkout / "cluster.json").write_text('{"roster": "node-a"}')
    git(checkout, "commit", "-q", "-am", "broken")
    for argv in (("roster", "list"), ("roster", "add", "node-b")):
        done = cli(env, "cluster", *argv)
        assert done.returncode == 2, done.stderr
        assert "roster must be an array" in done.stderr
        assert_clean(done)
    assert (checkout / "cluster.json").read_text() == '{"roster": "node-a"}'


def test_duplicates_in_the_file_are_reported(env, home, tmp_path):
    make_cluster_repo(tmp_path, home, roster=("node-a", "Node-A"))
    done = cli(env, "cluster", "roster", "list")
    assert done.returncode == 1 and "duplicate" in done.stderr


def test_legacy_hosts_json_is_never_read(env, home, tmp_path):
    make_cluster_repo(tmp_path, home, roster=("node-a",))
    project = tmp_path / "project"
    (project / ".svc").mkdir(parents=True)
    (project / ".svc" / "hosts.json").write_text('{"hosts": ["legacy-1"], "roster": ["legacy-2"]}')
    env = dict(env, SVC_REPO_ROOT=str(project))
    done = cli(env, "cluster", "roster", "list", "--json")
    assert json.loads(done.stdout)["roster"] == ["node-a"]
    # Even garbage there changes nothing.
    (project / ".svc" / "hosts.json").write_text("{garbage")
    done = cli(env, "cluster", "roster", "add", "node-b")
    assert done.returncode == 0, done.stderr
    assert "legacy" not in done.stdout


def test_repo_path_from_layer2(env, home, tmp_path):
    _, _, checkout = make_cluster_repo(tmp_path, home, roster=("node-x",))
    moved = tmp_path / "elsewhere"
    checkout.rename(moved)
    write_json(home / ".config" / "svc" / "node.json", {"svc": {"cluster": {"repoPath": str(moved)}}})
    done = cli(env, "cluster", "roster", "list")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["node-x"]
