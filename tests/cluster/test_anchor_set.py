"""`svc-cluster set-anchor`: validation, the Layer-2 write, and what it refuses to touch."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.support.cli import run_cluster, run_inproc, run_json
from tests.support.home import make_node, node_env


def secrets(home):
    return home / ".config" / "svc" / "cluster-secrets.json"


def test_writes_cluster_secrets_and_reports_restart(tmp_path):
    home = make_node(tmp_path, "a", ["a", "b"], anchor=None)
    env = node_env(home)
    code, out = run_json(env, "set-anchor", "OPS-12")
    assert code == 0
    assert out == {"key": "svc.cluster.livenessAnchorIssue", "value": "OPS-12", "previous": None,
                   "restartRequired": True}
    data = json.loads(secrets(home).read_text())
    assert data["svc"]["cluster"]["livenessAnchorIssue"] == "OPS-12"
    # The token already in the file survives the merge.
    assert data["svc"]["tracker"]["bot"]["orchestrator"]["accessToken"]
    assert stat.S_IMODE(os.stat(str(secrets(home))).st_mode) == 0o600
    code, out = run_json(env, "set-anchor", "ops2-7")
    assert out["previous"] == "OPS-12" and out["value"] == "ops2-7" and out["restartRequired"] is True


def test_previous_includes_the_config_json_fallback(tmp_path):
    home = make_node(tmp_path, "a", ["a", "b"], anchor=None)
    (home / ".config" / "svc" / "config.json").write_text(json.dumps(
        {"svc": {"cluster": {"livenessAnchorIssue": "OLD-1"}}}))
    code, out = run_json(node_env(home), "set-anchor", "NEW-2")
    assert code == 0 and out["previous"] == "OLD-1"


def test_creates_the_file_when_absent(tmp_path):
    home = tmp_path / "fresh"
    home.mkdir()
    code, out = run_json(node_env(home), "set-anchor", "A-1")
    assert code == 0 and json.loads(secrets(home).read_text()) == {
        "svc": {"cluster": {"livenessAnchorIssue": "A-1"}}}


@pytest.mark.parametrize("ticket", ["OPS", "OPS-", "-12", "1OPS-2", "OPS-12a", "OPS_1-2", "OPS 12", "OPS-12\n",
                                    "OPS-１２", "", "x" * 10000 + "-1-", "OPS-1; rm -rf /", "../OPS-1",
                                    '"OPS-1"'])
def test_bad_tickets_exit_2_and_write_nothing(tmp_path, monkeypatch, capsys, ticket):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="KEEP-1")
    before = secrets(home).read_bytes()
    code, out, err = run_inproc(monkeypatch, capsys, node_env(home), "set-anchor", "--", ticket)
    assert code == 2, out
    assert "not a ticket identifier" in err and len(err) < 400 and out == ""
    assert secrets(home).read_bytes() == before


def test_bad_ticket_as_a_real_command(tmp_path):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="KEEP-1")
    proc = run_cluster(node_env(home), "set-anchor", "OPS_1")
    assert proc.returncode == 2 and "not a ticket identifier" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("content", [b'{"svc": {', b"", b"[1, 2]", b"\xff\xfe", b'{"svc": {"cluster": 5}}'])
def test_corrupt_secrets_file_is_never_overwritten(tmp_path, monkeypatch, capsys, content):
    home = make_node(tmp_path, "a", ["a", "b"])
    secrets(home).write_bytes(content)
    code, out, err = run_inproc(monkeypatch, capsys, node_env(home), "set-anchor", "OPS-1")
    assert code == 2 and "config error" in err and out == ""
    assert secrets(home).read_bytes() == content


def test_help_explains_the_restart():
    proc = run_cluster(node_env(Path("/nonexistent")), "set-anchor", "--help")
    assert proc.returncode == 0 and "svc-stack restart" in proc.stdout
