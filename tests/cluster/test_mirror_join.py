"""svc-cluster join: verbatim SHARED writes, the host name rule, the PER-NODE checklist, hostile bundles."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import assert_clean, cli
from tests.support.home import CANARY_ORCH, CANARY_PERSONAL, CANARY_WORKER, mode, snapshot, write_json

SHARED = {
    "svc.tracker.bot.orchestrator.accessToken": CANARY_ORCH,
    "svc.tracker.bot.orchestrator.scopes": ["read", "write"],
    "svc.tracker.bot.worker.accessToken": CANARY_WORKER,
    "svc.cluster.livenessAnchorIssue": "OPS-7",
    "svc.cluster.repoUrl": "https://deploy:CANARY-url-pw@git.example.invalid/ops/cluster.git",
    "svc.plugin.sourceUrl": "https://example.invalid/plugin.git",
}


def _bundle(tmp_path: Path, shared=None, name: str = "bundle.json", **fields) -> Path:
    doc = {"kind": "svc.cluster.bundle", "version": 1, "createdAt": "2026-11-22T00:00:00.000Z",
           "createdBy": "node-a", "shared": dict(SHARED if shared is None else shared)}
    doc.update(fields)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    os.chmod(str(path), 0o600)
    return path


def _cfg(home: Path) -> Path:
    return home / ".config" / "svc"


def test_join_writes_shared_verbatim_and_host_name(env, home, tmp_path):
    done = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--host-name", "node-b")
    assert done.returncode == 0, done.stderr
    assert_clean(done, CANARY_ORCH, CANARY_WORKER, "CANARY-url-pw")
    secrets = _cfg(home) / "cluster-secrets.json"
    node = _cfg(home) / "node.json"
    assert mode(secrets) == 0o600 and mode(node) == 0o600
    data = json.loads(secrets.read_text())
    assert data["svc"]["tracker"]["bot"]["orchestrator"] == {"accessToken": CANARY_ORCH, "scopes": ["read", "write"]}
    assert data["svc"]["tracker"]["bot"]["worker"]["accessToken"] == CANARY_WORKER
    assert data["svc"]["cluster"]["livenessAnchorIssue"] == "OPS-7"
    assert data["svc"]["cluster"]["repoUrl"] == SHARED["svc.cluster.repoUrl"]
    assert json.loads(node.read_text()) == {"svc": {"host": {"name": "node-b"}}}
    assert "node-b" in done.stdout and "add" in done.stdout
    assert "https://***@git.example.invalid" in done.stdout
    assert "<secret>" in done.stdout


def test_join_merges_into_existing_secrets_without_dropping_keys(env, home, tmp_path):
    write_json(_cfg(home) / "cluster-secrets.json",
               {"svc": {"cluster": {"livenessAnchorIssue": "OPS-1"}}, "other": {"keep": True}}, 0o644)
    done = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    actions = {i["key"]: i["action"] for i in report["shared"]}
    assert actions["svc.cluster.livenessAnchorIssue"] == "update"
    assert actions["svc.tracker.bot.worker.accessToken"] == "add"
    data = json.loads((_cfg(home) / "cluster-secrets.json").read_text())
    assert data["other"] == {"keep": True}
    assert data["svc"]["cluster"]["livenessAnchorIssue"] == "OPS-7"
    assert mode(_cfg(home) / "cluster-secrets.json") == 0o600
    assert report["hostName"]["action"] == "missing"


def test_second_run_reports_every_item_unchanged_and_writes_nothing(env, home, tmp_path):
    bundle = _bundle(tmp_path)
    assert cli(env, "cluster", "join", str(bundle), "--host-name", "node-b").returncode == 0
    before = snapshot(_cfg(home))
    done = cli(env, "cluster", "join", str(bundle), "--host-name", "node-b", "--json")
    assert done.returncode == 0
    assert_clean(done, CANARY_ORCH, CANARY_WORKER, "CANARY-url-pw")
    report = json.loads(done.stdout)
    assert {i["action"] for i in report["shared"]} == {"unchanged"}
    assert report["hostName"]["action"] == "unchanged"
    assert report["changed"] is False
    assert snapshot(_cfg(home)) == before
    text = cli(env, "cluster", "join", str(bundle), "--host-name", "node-b")
    assert "nothing changed" in text.stdout
    assert snapshot(_cfg(home)) == before


def test_existing_host_name_is_kept_and_the_conflict_reported(env, home, tmp_path):
    write_json(_cfg(home) / "node.json", {"svc": {"host": {"name": "node-old"}}})
    done = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--host-name", "node-new", "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["hostName"] == {"action": "conflict", "value": "node-new", "existing": "node-old",
                                  "file": str(_cfg(home) / "node.json")}
    assert json.loads((_cfg(home) / "node.json").read_text())["svc"]["host"]["name"] == "node-old"
    # The SHARED half still happened.
    assert (_cfg(home) / "cluster-secrets.json").exists()
    text = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--host-name", "node-new")
    assert text.returncode == 1 and "conflict" in text.stdout and "node-old" in text.stdout


def test_host_name_from_config_json_fallback_counts_as_existing(env, home, tmp_path):
    write_json(_cfg(home) / "config.json", {"svc": {"host": {"name": "node-b"}}})
    done = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--host-name", "node-b", "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["hostName"]["action"] == "unchanged"
    assert not (_cfg(home) / "node.json").exists()


def test_dry_run_writes_nothing_and_shows_the_plan(env, home, tmp_path):
    write_json(_cfg(home) / "cluster-secrets.json", {"svc": {"cluster": {"livenessAnchorIssue": "OPS-1"}}})
    before = snapshot(_cfg(home))
    done = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--host-name", "node-b", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert_clean(done, CANARY_ORCH, CANARY_WORKER, "CANARY-url-pw")
    assert "would add" in done.stdout and "would update" in done.stdout
    assert "nothing was written" in done.stdout
    assert snapshot(_cfg(home)) == before
    js = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--host-name", "node-b", "--dry-run", "--json")
    report = json.loads(js.stdout)
    assert report["dryRun"] is True and report["changed"] is False and report["wouldChange"] is True
    assert report["hostName"]["action"] == "add"
    assert snapshot(_cfg(home)) == before


def test_world_readable_bundle_gets_a_warning(env, home, tmp_path):
    bundle = _bundle(tmp_path)
    os.chmod(str(bundle), 0o644)
    done = cli(env, "cluster", "join", str(bundle))
    assert done.returncode == 0
    assert "readable by group or others" in done.stderr and "0644" in done.stderr
    assert_clean(done, CANARY_ORCH, CANARY_WORKER)


def test_bundle_from_stdin(env, home, tmp_path):
    data = _bundle(tmp_path).read_bytes()
    done = cli(env, "cluster", "join", "-", "--json", input=data)
    assert done.returncode == 0, done.stderr
    assert (_cfg(home) / "cluster-secrets.json").exists()


def test_export_then_join_round_trips_between_two_nodes(env, home, tmp_path):
    from tests.support.home import clean_env
    write_json(_cfg(home) / "cluster-secrets.json", {"svc": {
        "tracker": {"bot": {"worker": {"accessToken": CANARY_WORKER}}},
        "cluster": {"livenessAnchorIssue": "OPS-9"}}})
    write_json(_cfg(home) / "node.json", {"svc": {"host": {"name": "node-a"}}})
    out = tmp_path / "b.json"
    assert cli(env, "cluster", "bundle", "export", "--out", str(out)).returncode == 0
    other = tmp_path / "other-home"
    other.mkdir()
    done = cli(clean_env(other), "cluster", "join", str(out), "--host-name", "node-b")
    assert done.returncode == 0, done.stderr
    assert json.loads((other / ".config/svc/cluster-secrets.json").read_text()) == \
        json.loads((_cfg(home) / "cluster-secrets.json").read_text())
    assert json.loads((other / ".config/svc/node.json").read_text())["svc"]["host"]["name"] == "node-b"


def _checklist(done) -> dict:
    return {i["item"]: i for i in json.loads(done.stdout)["checklist"]}


def test_per_node_checklist_missing_then_present(env, home, tmp_path):
    bundle = _bundle(tmp_path)
    done = cli(env, "cluster", "join", str(bundle), "--dry-run", "--json")
    items = _checklist(done)
    assert list(items) == ["Model-provider account login", "repoRoot", "Telemetry endpoints",
                           "execution-core.env", "Worktree trust", "Tracker personal token",
                           "Webhook secrets", "SQLite databases", "Event log"]
    assert all(i["status"] == "missing" and i["todo"] for i in items.values())

    (home / ".claude").mkdir()
    write_json(home / ".claude" / ".credentials.json", {"claudeAiOauth": {"accessToken": "CANARY-login"}})
    write_json(home / "svc" / "execution-core" / "registry.json", {"repoRoot": str(tmp_path)})
    (home / "svc" / "execution-core" / "execution-core.env").write_text("HTTPS_PROXY=\n")
    write_json(home / ".claude.json", {"projects": {str(tmp_path): {"hasTrustDialogAccepted": True}}})
    write_json(_cfg(home) / "config.json", {"otel": {"exporterEndpoint": "http://10.0.0.2:4318"}})
    (tmp_path / ".svc").mkdir()
    write_json(tmp_path / ".svc" / "config.json", {"svc": {"tracker": {"teamKey": "ENG"}}}, 0o644)
    write_json(_cfg(home) / "config-ENG.json", {"tracker": {"apiKey": CANARY_PERSONAL,
                                                            "webhookSecret": "CANARY-webhook"}})
    (home / "svc" / "events").mkdir(parents=True)
    (home / "svc" / "events" / "2026-11.jsonl").write_text("")
    (home / "svc" / "state.db").write_bytes(b"")
    done = cli(env, "cluster", "join", str(bundle), "--dry-run", "--json")
    assert_clean(done, CANARY_PERSONAL, "CANARY-webhook", "CANARY-login", CANARY_ORCH)
    items = _checklist(done)
    assert {k: v["status"] for k, v in items.items() if v["status"] != "present"} == {}
    assert all(v["todo"] is None for v in items.values())
    text = cli(env, "cluster", "join", str(bundle), "--dry-run")
    assert_clean(text, CANARY_PERSONAL, "CANARY-webhook", "CANARY-login", CANARY_ORCH)
    assert "present" in text.stdout


def test_checklist_survives_corrupt_per_node_files(env, home, tmp_path):
    (home / "svc" / "execution-core").mkdir(parents=True)
    (home / "svc" / "execution-core" / "registry.json").write_text("{nope")
    (home / ".claude.json").write_text("[1, 2")
    done = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    assert_clean(done)
    items = _checklist(done)
    assert items["repoRoot"]["status"] == "missing" and "unreadable" in items["repoRoot"]["detail"]
    assert items["Worktree trust"]["status"] == "missing"


def _deep(n: int) -> str:
    return '{"kind": "svc.cluster.bundle", "version": 1, "shared": {"svc.cluster.livenessAnchorIssue": ' + \
        "[" * n + '"x"' + "]" * n + "}}"


HOSTILE = [
    ("per-node host name", lambda t: _bundle(t, {"svc.host.name": "evil"}), "not a SHARED"),
    ("per-node otel", lambda t: _bundle(t, {"svc.otel.endpoint": "http://x"}), "not a SHARED"),
    ("per-node personal token", lambda t: _bundle(t, {"tracker.apiKey": "k"}), "not a SHARED"),
    ("repo path is per node", lambda t: _bundle(t, {"svc.cluster.repoPath": "/tmp"}), "not a SHARED"),
    ("bare bot prefix", lambda t: _bundle(t, {"svc.tracker.bot.worker": "k"}), "not a SHARED"),
    ("bad key", lambda t: _bundle(t, {"svc..x": "k"}), "invalid key"),
    ("anchor not a ticket", lambda t: _bundle(t, {"svc.cluster.livenessAnchorIssue": "rm -rf /"}), "ticket"),
    ("anchor number", lambda t: _bundle(t, {"svc.cluster.livenessAnchorIssue": 12}), "ticket"),
    ("url with control chars", lambda t: _bundle(t, {"svc.cluster.repoUrl": "https://x/\x1b[2J"}), "URL"),
    ("url list", lambda t: _bundle(t, {"svc.plugin.sourceUrl": ["a"]}), "URL"),
    ("not json", lambda t: _write(t, b"kind=svc.cluster.bundle\n"), "not JSON"),
    ("truncated", lambda t: _write(t, _bundle(t).read_bytes()[:40]), "not JSON"),
    ("empty", lambda t: _write(t, b"   \n"), "empty"),
    ("not utf-8", lambda t: _write(t, b'{"kind": "\xff\xfe"}'), "UTF-8"),
    ("array", lambda t: _write(t, b"[1, 2]"), "object"),
    ("wrong kind", lambda t: _bundle(t, kind="svc.other"), "kind"),
    ("missing kind", lambda t: _write(t, b'{"version": 1, "shared": {}}'), "kind"),
    ("version 2", lambda t: _bundle(t, version=2), "version"),
    ("version string", lambda t: _bundle(t, version="1"), "version"),
    ("version true", lambda t: _bundle(t, version=True), "version"),
    ("version float", lambda t: _bundle(t, version=1.5), "version"),
    ("huge", lambda t: _bundle(t, {"svc.cluster.livenessAnchorIssue": "A" * (1024 * 1024 + 10)}), "larger than"),
    ("deep nesting", lambda t: _write(t, _deep(12).encode()), "nested"),
    ("very deep nesting", lambda t: _write(t, _deep(200000).encode()), "nested"),
    ("object value", lambda t: _bundle(t, {"svc.cluster.livenessAnchorIssue": {"a": 1}}), "value"),
    ("null value", lambda t: _bundle(t, {"svc.cluster.livenessAnchorIssue": None}), "value"),
    ("duplicate key", lambda t: _write(t, b'{"kind": "svc.cluster.bundle", "version": 1, "shared": {}, '
                                          b'"shared": {"svc.host.name": "x"}}'), "duplicate"),
    ("extra field", lambda t: _bundle(t, node={"svc.host.name": "x"}), "unexpected field"),
    ("shared not object", lambda t: _write(t, b'{"kind": "svc.cluster.bundle", "version": 1, "shared": []}'), "shared must be"),
    ("colliding keys", lambda t: _bundle(t, {"svc.tracker.bot.worker.a": "1", "svc.tracker.bot.worker.a.b": "2"}),
     "collide"),
    ("huge integer", lambda t: _write(t, _raw_bundle(b'"svc.tracker.bot.worker.expiresAt": ' + b"9" * 5000)),
     "number"),
    ("huge integer version", lambda t: _write(t, b'{"kind": "svc.cluster.bundle", "version": 1' + b"0" * 6000
                                             + b', "shared": {}}'), "number"),
    ("integer past 2^53", lambda t: _bundle(t, {"svc.tracker.bot.worker.expiresAt": 2 ** 64}), "value"),
    ("lone surrogate value", lambda t: _write(t, _raw_bundle(b'"svc.tracker.bot.worker.accessToken": "\\ud800"')),
     "Unicode"),
    ("lone low surrogate in an array", lambda t: _write(t, _raw_bundle(
        b'"svc.tracker.bot.worker.scopes": ["ok", "x\\udc80y"]')), "Unicode"),
    ("reversed surrogate pair", lambda t: _write(t, _raw_bundle(
        b'"svc.tracker.bot.worker.accessToken": "\\ude00\\ud83d"')), "Unicode"),
    ("lone surrogate key", lambda t: _write(t, _raw_bundle(b'"svc.tracker.bot.worker.\\ud800": "v"')), "Unicode"),
    ("lone surrogate createdBy", lambda t: _write(t, b'{"kind": "svc.cluster.bundle", "version": 1, '
                                                 b'"createdBy": "\\udfff", "shared": {}}'), "Unicode"),
    ("directory", lambda t: t, "directory"),
    ("missing file", lambda t: t / "nope.json", "no such file"),
]


def _raw_bundle(shared_members: bytes) -> bytes:
    return b'{"kind": "svc.cluster.bundle", "version": 1, "shared": {' + shared_members + b"}}"


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "hostile.json"
    path.write_bytes(data)
    return path


# Each of these also runs through the real CLI; the rest are checked in-process (same code path
# up to the parse) to keep the suite fast.
VIA_CLI = {"per-node host name", "per-node personal token", "not json", "wrong kind", "version 2",
           "version true", "huge", "very deep nesting", "duplicate key", "extra field", "missing file",
           "huge integer", "huge integer version", "integer past 2^53", "lone surrogate value",
           "lone low surrogate in an array", "reversed surrogate pair", "lone surrogate key",
           "lone surrogate createdBy"}


@pytest.mark.parametrize("label,make,phrase", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_bundle_fails_validation(tmp_path, label, make, phrase):
    from svcposture.cluster.mirror import BundleError, parse_bundle, read_bundle_bytes
    with pytest.raises(BundleError) as info:
        parse_bundle(read_bundle_bytes(str(make(tmp_path))))
    assert phrase in str(info.value)
    assert len(str(info.value)) < 1000


@pytest.mark.parametrize("label,make,phrase", [h for h in HOSTILE if h[0] in VIA_CLI],
                         ids=[h[0] for h in HOSTILE if h[0] in VIA_CLI])
def test_hostile_bundle_is_rejected_and_nothing_written(env, home, tmp_path, label, make, phrase):
    write_json(_cfg(home) / "cluster-secrets.json", {"svc": {"cluster": {"livenessAnchorIssue": "OPS-1"}}})
    before = snapshot(home)
    src = tmp_path / "src"
    src.mkdir()
    bundle = make(src)
    done = cli(env, "cluster", "join", str(bundle), "--host-name", "node-b")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert_clean(done)
    assert "rejected bundle" in done.stderr and "nothing was written" in done.stderr
    assert phrase in done.stderr, done.stderr
    assert len(done.stderr) < 2000
    assert done.stdout == ""
    assert snapshot(home) == before


def test_invalid_host_name_is_rejected(env, home, tmp_path):
    for bad in ("a b", "x" * 64):
        done = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--host-name", bad)
        assert done.returncode == 2, bad
        assert_clean(done)
    assert not _cfg(home).exists()


def test_corrupt_existing_secrets_is_never_overwritten(env, home, tmp_path):
    secrets = _cfg(home) / "cluster-secrets.json"
    secrets.parent.mkdir(parents=True)
    secrets.write_bytes(b'{"svc": {"cluster": {"livenessAnchorIssue": "OPS-1",}}}')
    os.chmod(str(secrets), 0o600)
    before = snapshot(home)
    done = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--host-name", "node-b")
    assert done.returncode == 2
    assert_clean(done, CANARY_ORCH)
    assert "cluster-secrets.json" in done.stderr and ":1:" in done.stderr
    assert snapshot(home) == before


def test_shape_conflict_in_existing_secrets_is_an_error_not_a_partial_write(env, home, tmp_path):
    write_json(_cfg(home) / "cluster-secrets.json", {"svc": {"tracker": {"bot": "not-an-object"}}})
    before = snapshot(home)
    done = cli(env, "cluster", "join", str(_bundle(tmp_path)), "--host-name", "node-b")
    assert done.returncode == 2
    assert_clean(done, CANARY_ORCH)
    assert "not an object" in done.stderr
    assert snapshot(home) == before
