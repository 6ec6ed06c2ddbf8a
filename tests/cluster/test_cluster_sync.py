"""svc-cluster sync: git pull --ff-only, decrypt with a real executable stub, merge, write, project."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import assert_clean, cli
from tests.support.home import (CANARY_CLOUD, CANARY_ORCH, CANARY_WORKER, git, make_cluster_repo, mode,
                                push_from_seed, snapshot, write_json)

# The stand-in for `sops --decrypt`: "encrypted" files are base64, the path comes last.
# It records its argv so the test can check how it was called.
STUB = """#!/bin/sh
printf '%s\\n' "$@" > "$(dirname "$0")/argv.txt"
[ "$1" = "--decrypt" ] || { echo "expected --decrypt" >&2; exit 64; }
for last; do :; done
exec base64 -d "$last"
"""

# A failing tool that, like a real one might, echoes secret material on its way down.
FAILING_STUB = """#!/bin/sh
echo "CANARY-stdout-plaintext"
echo "CANARY-stderr-plaintext" >&2
exit 3
"""

GARBAGE_STUB = """#!/bin/sh
echo "CANARY-not-json-plaintext"
"""

BOTS = {"svc": {"tracker": {"bot": {
    "orchestrator": {"accessToken": CANARY_ORCH, "refreshToken": "CANARY-orch-refresh"},
    "worker": {"accessToken": CANARY_WORKER, "CANARY key name with spaces": "x"}}}},
    "comment": "not a bot key", "CANARY-secret-as-key": "x"}
CLOUD = {"svc": {"cloud": {"token": CANARY_CLOUD}}}


def _enc(obj) -> bytes:
    return base64.b64encode(json.dumps(obj).encode("utf-8")) + b"\n"


def _stub(tmp_path: Path, body: str = STUB, dirname: str = "bin dir") -> Path:
    d = tmp_path / dirname
    d.mkdir(exist_ok=True)
    path = d / "fake sops"
    path.write_text(body)
    os.chmod(str(path), 0o755)
    return path


def _env(env, stub: Path):
    # shlex-split: the quoted path with spaces must survive as one argument.
    return dict(env, SVC_DECRYPT_CMD="'%s' --decrypt" % stub)


def _cfg(home: Path) -> Path:
    return home / ".config" / "svc"


SECRETS = ["CANARY-orch-refresh", "CANARY key name", "CANARY-secret-as-key", CANARY_ORCH, CANARY_WORKER, CANARY_CLOUD, "CANARY-stdout-plaintext",
           "CANARY-stderr-plaintext", "CANARY-not-json-plaintext"]


def test_sync_pulls_decrypts_merges_and_projects(env, home, tmp_path):
    bare, seed, checkout = make_cluster_repo(tmp_path, home)
    write_json(_cfg(home) / "cluster-secrets.json", {"svc": {"cluster": {"livenessAnchorIssue": "OPS-3"}}})
    # The secrets arrive on the remote after this node cloned: only a pull brings them.
    head = push_from_seed(seed, {"secrets/cluster-bots.json": _enc(BOTS),
                                 "secrets/cluster-cloud.json": _enc(CLOUD)})
    (home / ".zshenv").write_text("export EDITOR=vi\n")
    stub = _stub(tmp_path)
    done = cli(_env(env, stub), "cluster", "sync", "--json")
    assert done.returncode == 0, done.stderr
    assert_clean(done, *SECRETS)
    report = json.loads(done.stdout)
    assert report["pulled"] is True and report["head"] == head
    assert report["bots"]["status"] == "merged"
    assert report["bots"]["ignoredKeyCount"] == 3
    assert report["cloud"]["status"] == "written" and report["cloud"]["token"] == "present"
    assert report["projection"]["ok"] is True and report["projection"]["token"] == "present"
    assert (stub.parent / "argv.txt").read_text().splitlines() == [
        "--decrypt", str(checkout / "secrets" / "cluster-cloud.json")]

    secrets = json.loads((_cfg(home) / "cluster-secrets.json").read_text())
    assert secrets["svc"]["cluster"]["livenessAnchorIssue"] == "OPS-3"
    assert secrets["svc"]["tracker"]["bot"] == {
        "orchestrator": {"accessToken": CANARY_ORCH, "refreshToken": "CANARY-orch-refresh"},
        "worker": {"accessToken": CANARY_WORKER}}
    assert "comment" not in secrets and "CANARY-secret-as-key" not in secrets
    assert mode(_cfg(home) / "cluster-secrets.json") == 0o600
    assert json.loads((_cfg(home) / "cluster-cloud.json").read_text()) == CLOUD
    assert mode(_cfg(home) / "cluster-cloud.json") == 0o600
    assert mode(_cfg(home) / "cluster.env") == 0o600
    out = subprocess.run(["sh", "-c", '. "$1"; printf %s "$SVC_CLOUD_TOKEN"', "sh",
                          str(_cfg(home) / "cluster.env")], capture_output=True, text=True)
    assert out.stdout == CANARY_CLOUD
    assert (home / ".zshenv").read_text().startswith("export EDITOR=vi\n")

    # Again: nothing to change, and the text report is token-free too.
    before = snapshot(_cfg(home))
    again = cli(_env(env, stub), "cluster", "sync")
    assert again.returncode == 0, again.stderr
    assert_clean(again, *SECRETS)
    assert "0 changed" in again.stdout and "unchanged" in again.stdout
    assert {k: v for k, v in snapshot(_cfg(home)).items() if not k.startswith(".")} == \
        {k: v for k, v in before.items() if not k.startswith(".")}


@pytest.mark.parametrize("body,phrase", [
    (FAILING_STUB, "failed (exit 3)"),
    (GARBAGE_STUB, "not JSON"),
], ids=["tool-fails", "tool-prints-garbage"])
def test_failed_decryption_touches_nothing_and_shows_no_plaintext(env, home, tmp_path, body, phrase):
    _, seed, _ = make_cluster_repo(tmp_path, home, files={
        "secrets/cluster-bots.json": _enc(BOTS), "secrets/cluster-cloud.json": _enc(CLOUD)})
    write_json(_cfg(home) / "cluster-secrets.json", {"svc": {"cluster": {"livenessAnchorIssue": "OPS-3"}}})
    write_json(_cfg(home) / "cluster-cloud.json", {"svc": {"cloud": {"token": "old"}}})
    before = snapshot(home)
    done = cli(_env(env, _stub(tmp_path, body)), "cluster", "sync", "--no-pull")
    assert done.returncode == 1
    assert_clean(done, *SECRETS)
    assert phrase in done.stderr
    assert done.stdout == ""
    assert snapshot(home) == before


def test_missing_decrypt_tool_is_a_clear_error(env, home, tmp_path):
    make_cluster_repo(tmp_path, home, files={"secrets/cluster-bots.json": _enc(BOTS)})
    before = snapshot(home)
    done = cli(dict(env, SVC_DECRYPT_CMD="/nonexistent/sops --decrypt"), "cluster", "sync", "--no-pull")
    assert done.returncode == 1
    assert "not found" in done.stderr and "SVC_DECRYPT_CMD" in done.stderr
    assert_clean(done, *SECRETS)
    assert snapshot(home) == before


@pytest.mark.skipif(shutil.which("sops") is not None, reason="sops is installed here")
def test_default_decrypt_command_is_sops(env, home, tmp_path):
    make_cluster_repo(tmp_path, home, files={"secrets/cluster-cloud.json": _enc(CLOUD)})
    env = dict(env, PATH="/usr/bin:/bin")
    done = cli(env, "cluster", "sync", "--no-pull")
    assert done.returncode == 1
    assert "'sops' not found" in done.stderr


def test_corrupt_existing_secrets_is_never_overwritten(env, home, tmp_path):
    make_cluster_repo(tmp_path, home, files={"secrets/cluster-bots.json": _enc(BOTS)})
    secrets = _cfg(home) / "cluster-secrets.json"
    secrets.parent.mkdir(parents=True)
    secrets.write_text('{"svc": ')
    before = snapshot(home)
    done = cli(_env(env, _stub(tmp_path)), "cluster", "sync", "--no-pull")
    assert done.returncode == 2
    assert "cluster-secrets.json" in done.stderr
    assert_clean(done, *SECRETS)
    assert snapshot(home) == before


def test_pull_that_is_not_fast_forward_fails_before_any_write(env, home, tmp_path):
    _, seed, checkout = make_cluster_repo(tmp_path, home)
    push_from_seed(seed, {"secrets/cluster-bots.json": _enc(BOTS)}, "remote change")
    (checkout / "local.txt").write_text("diverge")
    git(checkout, "add", "local.txt")
    git(checkout, "commit", "-q", "-m", "local change")
    before = snapshot(_cfg(home))
    done = cli(_env(env, _stub(tmp_path)), "cluster", "sync")
    assert done.returncode == 1
    assert "git pull" in done.stderr
    assert_clean(done, *SECRETS)
    assert snapshot(_cfg(home)) == before


def test_absent_encrypted_files_leave_local_files_alone(env, home, tmp_path):
    make_cluster_repo(tmp_path, home)
    write_json(_cfg(home) / "cluster-cloud.json", CLOUD)
    done = cli(_env(env, _stub(tmp_path)), "cluster", "sync", "--json")
    assert done.returncode == 0, done.stderr
    assert_clean(done, *SECRETS)
    report = json.loads(done.stdout)
    assert report["bots"]["status"] == "absent" and report["cloud"]["status"] == "absent"
    assert json.loads((_cfg(home) / "cluster-cloud.json").read_text()) == CLOUD
    # The projection still ran from the local cloud file.
    assert report["projection"]["token"] == "present"


def test_cloud_file_without_token_removes_the_env_file(env, home, tmp_path):
    _, seed, _ = make_cluster_repo(tmp_path, home, files={"secrets/cluster-cloud.json": _enc(CLOUD)})
    stub = _stub(tmp_path)
    assert cli(_env(env, stub), "cluster", "sync").returncode == 0
    assert (_cfg(home) / "cluster.env").exists()
    push_from_seed(seed, {"secrets/cluster-cloud.json": _enc({"svc": {"cloud": {}}})}, "rotate out")
    done = cli(_env(env, stub), "cluster", "sync", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["cloud"]["token"] == "absent"
    assert report["projection"]["envFileAction"] == "removed"
    assert not (_cfg(home) / "cluster.env").exists()


def test_sync_without_checkout(env, home):
    done = cli(env, "cluster", "sync")
    assert done.returncode == 1 and "not found" in done.stderr
    assert_clean(done)


# ---------------------------------------------------------------- revocation: sync owns svc.tracker.bot.*

def _bots(home: Path):
    return json.loads((_cfg(home) / "cluster-secrets.json").read_text())


def test_a_bot_key_revoked_at_the_source_disappears_and_nothing_else_moves(env, home, tmp_path):
    _, seed, _ = make_cluster_repo(tmp_path, home, files={"secrets/cluster-bots.json": _enc(BOTS)})
    # Keys sync does not own: the anchor, a PER-NODE value someone keeps here, a sibling of bot.
    write_json(_cfg(home) / "cluster-secrets.json", {
        "svc": {"cluster": {"livenessAnchorIssue": "OPS-3"}, "host": {"name": "node-a"},
                "tracker": {"teamKey": "ENG", "bot": {"legacy": {"accessToken": "CANARY-legacy-token"}}}}})
    stub = _stub(tmp_path)
    first = cli(_env(env, stub), "cluster", "sync", "--json")
    assert first.returncode == 0, first.stderr
    # A hand-written key under the owned subtree that the source never held goes too.
    assert json.loads(first.stdout)["bots"]["removed"] == ["svc.tracker.bot.legacy.accessToken"]
    assert _bots(home)["svc"]["tracker"]["bot"] == {
        "orchestrator": {"accessToken": CANARY_ORCH, "refreshToken": "CANARY-orch-refresh"},
        "worker": {"accessToken": CANARY_WORKER}}

    # The worker token is revoked and the refresh token dropped at the source.
    revoked = {"svc": {"tracker": {"bot": {"orchestrator": {"accessToken": CANARY_ORCH + "-rotated"}}}}}
    push_from_seed(seed, {"secrets/cluster-bots.json": _enc(revoked)}, "revoke the worker token")
    done = cli(_env(env, stub), "cluster", "sync", "--json")
    assert done.returncode == 0, done.stderr
    assert_clean(done, *SECRETS, CANARY_ORCH + "-rotated", "CANARY-legacy-token")
    report = json.loads(done.stdout)["bots"]
    assert report["removed"] == ["svc.tracker.bot.orchestrator.refreshToken", "svc.tracker.bot.worker.accessToken"]
    assert report["changed"] == ["svc.tracker.bot.orchestrator.accessToken"]
    assert _bots(home) == {"svc": {"cluster": {"livenessAnchorIssue": "OPS-3"}, "host": {"name": "node-a"},
                                   "tracker": {"teamKey": "ENG", "bot": {
                                       "orchestrator": {"accessToken": CANARY_ORCH + "-rotated"}}}}}
    assert mode(_cfg(home) / "cluster-secrets.json") == 0o600

    # Every bot key revoked: the subtree goes, each removal named in the text report, no value shown.
    push_from_seed(seed, {"secrets/cluster-bots.json": _enc({"comment": "no bots"})}, "revoke all")
    text = cli(_env(env, stub), "cluster", "sync")
    assert text.returncode == 0, text.stderr
    assert_clean(text, *SECRETS, CANARY_ORCH + "-rotated")
    assert "removed svc.tracker.bot.orchestrator.accessToken" in text.stdout
    assert _bots(home) == {"svc": {"cluster": {"livenessAnchorIssue": "OPS-3"}, "host": {"name": "node-a"},
                                   "tracker": {"teamKey": "ENG"}}}

    # A bots file removed from the repo is not a revocation signal: nothing is touched.
    git(seed, "rm", "-q", "secrets/cluster-bots.json")
    git(seed, "commit", "-q", "-m", "drop the bots file")
    git(seed, "push", "-q")
    write_json(_cfg(home) / "cluster-secrets.json", {"svc": {"tracker": {"bot": {"worker": {"accessToken": "x"}}}}})
    before = (_cfg(home) / "cluster-secrets.json").read_bytes()
    done = cli(_env(env, stub), "cluster", "sync", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["bots"]["status"] == "absent"
    assert (_cfg(home) / "cluster-secrets.json").read_bytes() == before


@pytest.mark.parametrize("existing", [
    {"svc": {"tracker": "not an object"}},
    {"svc": "not an object"},
], ids=["tracker-not-object", "svc-not-object"])
def test_a_local_file_of_the_wrong_shape_is_refused_not_overwritten(env, home, tmp_path, existing):
    make_cluster_repo(tmp_path, home, files={"secrets/cluster-bots.json": _enc(BOTS)})
    write_json(_cfg(home) / "cluster-secrets.json", existing)
    before = snapshot(_cfg(home))
    done = cli(_env(env, _stub(tmp_path)), "cluster", "sync", "--no-pull")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "not an object" in done.stderr and "Traceback" not in done.stderr
    assert_clean(done, *SECRETS)
    assert snapshot(_cfg(home)) == before


def test_a_bot_subtree_that_is_a_bare_value_is_replaced(env, home, tmp_path):
    make_cluster_repo(tmp_path, home, files={"secrets/cluster-bots.json": _enc(BOTS)})
    write_json(_cfg(home) / "cluster-secrets.json", {"svc": {"tracker": {"bot": "CANARY-bare-value"}}})
    done = cli(_env(env, _stub(tmp_path)), "cluster", "sync", "--no-pull", "--json")
    assert done.returncode == 0, done.stderr
    assert_clean(done, *SECRETS, "CANARY-bare-value")
    assert json.loads(done.stdout)["bots"]["removed"] == ["svc.tracker.bot"]
    assert _bots(home)["svc"]["tracker"]["bot"]["worker"] == {"accessToken": CANARY_WORKER}
