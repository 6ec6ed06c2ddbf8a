"""`svc-monitor init` never replaces or follows a node.json symlink it did not make,
dangling or not: the real command as a child, the link and its target checked after."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import assert_clean, cli
from tests.support.home import clean_env


@pytest.mark.parametrize("target_kind", ["file", "file-with-a-host-name", "dangling", "directory"])
def test_a_symlinked_node_json_is_left_alone_and_said_so(tmp_path: Path, target_kind: str) -> None:
    home = tmp_path / "home"
    cfg = home / ".config" / "svc"
    cfg.mkdir(parents=True, mode=0o700)
    os.chmod(str(home / ".config"), 0o700)
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "node.json"
    before = None
    if target_kind == "file":
        before = b'{"svc": {"cluster": {"repoPath": "~/elsewhere"}}}\n'
    elif target_kind == "file-with-a-host-name":
        before = b'{"svc": {"host": {"name": "from-dotfiles"}}}\n'
    elif target_kind == "directory":
        target.mkdir()
    if before is not None:
        target.write_bytes(before)
    link = cfg / "node.json"
    link.symlink_to(target)
    env = clean_env(home)

    done = cli(env, "monitor", "init", "--host-name", "node-a")
    assert_clean(done)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(str(link)) == str(target)
    if before is not None:
        assert target.read_bytes() == before
    elif target_kind == "dangling":
        assert not os.path.lexists(str(target))
    out = done.stdout
    assert "created     %s" % link not in out
    line = next(l for l in out.splitlines() if str(link) in l)
    assert line.strip().startswith("left alone") and "symbolic link to %s" % target in line, out
    assert ("dangling symbolic link" in line) is (target_kind == "dangling")
    # the accounts file and the config directory are still made; a second run changes nothing more
    assert (cfg / "model-accounts.env").is_file()
    report = json.loads(cli(env, "monitor", "init", "--json").stdout)
    assert report["changed"] is False and report["hostName"] is None
    assert [i["path"] for i in report["leftAlone"] if "symbolic link" in i["detail"]] == [str(link)]
    assert link.is_symlink() and os.readlink(str(link)) == str(target)
