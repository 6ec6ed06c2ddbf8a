"""svc-cluster classify and bundle export, driven as real subprocesses."""
from __future__ import annotations

import json
import os
import pty
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import assert_clean, cli
from tests.support.home import CANARY_ORCH, CANARY_PERSONAL, CANARY_WORKER, mode, write_json

from svcposture.config import CLASSIFICATION, PER_NODE, SHARED, is_shared_layer2_key


def _seed_node(home: Path) -> None:
    cfg = home / ".config" / "svc"
    write_json(cfg / "cluster-secrets.json", {"svc": {
        "tracker": {"bot": {"orchestrator": {"accessToken": CANARY_ORCH, "expiresAt": 1700000000}}},
        "cluster": {"livenessAnchorIssue": "OPS-7"},
    }})
    # config.json: the older single file. Its worker token is the fallback; its orchestrator
    # refresh token must NOT be mixed into the cluster-secrets orchestrator pair.
    write_json(cfg / "config.json", {"svc": {
        "host": {"name": "node-a"},
        "tracker": {"bot": {"orchestrator": {"refreshToken": "STALE-REFRESH"},
                            "worker": {"accessToken": CANARY_WORKER}},
                    "teamKey": "ENG"},
        "cluster": {"repoUrl": "git@example.invalid:ops/cluster.git", "repoPath": "~/svc/cluster"},
        "plugin": {"sourceUrl": "https://example.invalid/plugin.git"},
        "otel": {"endpoint": "http://10.1.2.3:4318"},
    }, "tracker": {"apiKey": CANARY_PERSONAL}})
    write_json(cfg / "node.json", {"svc": {"host": {"name": "node-a"}}})
    write_json(cfg / "config-ENG.json", {"tracker": {"apiKey": CANARY_PERSONAL, "webhookSecret": "WH-SECRET"}})


def test_classify_lists_all_18_items(env):
    done = cli(env, "cluster", "classify", "--json")
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["items"]
    assert len(items) == 18
    assert [i["name"] for i in items] == [c.name for c in CLASSIFICATION]
    assert sum(i["class"] == SHARED for i in items) == 8
    assert sum(i["class"] == PER_NODE for i in items) == 10
    by_name = {i["name"]: i for i in items}
    assert by_name["Host name"]["class"] == PER_NODE
    assert by_name["Liveness anchor issue"]["class"] == SHARED
    assert by_name["Cluster roster"]["class"] == SHARED
    assert all(i["location"] and i["onMirror"] for i in items)

    text = cli(env, "cluster", "classify")
    assert text.returncode == 0
    for item in CLASSIFICATION:
        assert item.name in text.stdout
    assert "18 items" in text.stdout


@pytest.mark.parametrize("argv,words", [
    (("cluster", "--help"), ("classify", "bundle", "join", "roster", "sync")),
    (("cluster", "classify", "--help"), ("SHARED", "PER-NODE")),
    (("cluster", "bundle", "export", "--help"), ("0600", "--out")),
    (("cluster", "join", "--help"), ("--host-name", "--dry-run", "1 MiB")),
    (("cluster", "roster", "--help"), ("cluster.json", "hosts.json")),
    (("cluster", "roster", "add", "--help"), ("--push",)),
    (("cluster", "sync", "--help"), ("SVC_DECRYPT_CMD", "--ff-only")),
])
def test_help_explains_each_command(capsys, argv, words):
    # In-process (same parser the CLI builds); the subprocess path is covered below.
    from svcposture.cli import cluster_main
    with pytest.raises(SystemExit) as info:
        cluster_main(list(argv[1:]))
    assert info.value.code == 0
    out = capsys.readouterr().out
    for word in words:
        assert word in out


def test_help_via_subprocess(env):
    done = cli(env, "cluster", "join", "--help")
    assert done.returncode == 0 and "--host-name" in done.stdout


def test_bare_group_commands_print_usage_and_exit_2(env):
    for argv in (("cluster", "bundle"), ("cluster", "roster")):
        done = cli(env, *argv)
        assert done.returncode == 2
        assert "usage" in done.stderr
        assert_clean(done)


def test_export_writes_only_shared_values_0600(env, home, tmp_path):
    _seed_node(home)
    out = tmp_path / "bundle.json"
    done = cli(env, "cluster", "bundle", "export", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert_clean(done, CANARY_ORCH, CANARY_WORKER, CANARY_PERSONAL)
    assert mode(out) == 0o600
    bundle = json.loads(out.read_text())
    assert bundle["kind"] == "svc.cluster.bundle" and bundle["version"] == 1
    assert bundle["createdBy"] == "node-a"
    assert bundle["createdAt"].endswith("Z")
    assert bundle["shared"] == {
        "svc.cluster.livenessAnchorIssue": "OPS-7",
        "svc.cluster.repoUrl": "git@example.invalid:ops/cluster.git",
        "svc.plugin.sourceUrl": "https://example.invalid/plugin.git",
        "svc.tracker.bot.orchestrator.accessToken": CANARY_ORCH,
        "svc.tracker.bot.orchestrator.expiresAt": 1700000000,
        "svc.tracker.bot.worker.accessToken": CANARY_WORKER,
    }
    raw = out.read_text()
    for per_node in ("node-a\"", "10.1.2.3", CANARY_PERSONAL, "WH-SECRET", "STALE-REFRESH", "repoPath", "teamKey"):
        assert per_node not in raw.replace('"createdBy": "node-a"', "")


def test_export_over_existing_file_resets_mode(env, home, tmp_path):
    _seed_node(home)
    out = tmp_path / "b.json"
    out.write_text("old")
    os.chmod(str(out), 0o644)
    assert cli(env, "cluster", "bundle", "export", "--out", str(out)).returncode == 0
    assert mode(out) == 0o600
    assert json.loads(out.read_text())["kind"] == "svc.cluster.bundle"


def test_export_to_pipe_is_allowed_but_terminal_is_refused(env, home):
    _seed_node(home)
    piped = cli(env, "cluster", "bundle", "export")
    assert piped.returncode == 0
    assert json.loads(piped.stdout)["shared"]["svc.tracker.bot.worker.accessToken"] == CANARY_WORKER
    assert CANARY_WORKER not in piped.stderr

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "svcposture", "cluster", "bundle", "export"],
                                env=env, stdout=slave, stderr=subprocess.PIPE)
        os.close(slave)
        _, err = proc.communicate(timeout=30)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert proc.returncode == 2
    assert b"--out" in err and b"terminal" in err
    assert CANARY_ORCH.encode() not in seen + err
    assert CANARY_WORKER.encode() not in seen + err


def test_export_refuses_corrupt_secrets_file(env, home, tmp_path):
    secrets = home / ".config" / "svc" / "cluster-secrets.json"
    secrets.parent.mkdir(parents=True)
    secrets.write_text('{"svc": {"tracker": ')
    done = cli(env, "cluster", "bundle", "export", "--out", str(tmp_path / "b.json"))
    assert done.returncode == 2
    assert "cluster-secrets.json" in done.stderr and "config error" in done.stderr
    assert_clean(done)
    assert not (tmp_path / "b.json").exists()
    assert secrets.read_text() == '{"svc": {"tracker": '


def test_export_with_nothing_configured_is_an_empty_bundle(env, tmp_path):
    out = tmp_path / "b.json"
    done = cli(env, "cluster", "bundle", "export", "--out", str(out))
    assert done.returncode == 0
    assert "no SHARED" in done.stderr
    assert json.loads(out.read_text())["shared"] == {}


def test_a_per_node_key_can_never_enter_a_bundle(paths):
    """Random Layer-2 contents: every exported key is SHARED, and every SHARED leaf is exported."""
    from svcposture.cluster.mirror import build_bundle
    rng = random.Random(1234)
    words = ["svc", "tracker", "bot", "orchestrator", "worker", "host", "name", "cluster", "repoUrl",
             "repoPath", "livenessAnchorIssue", "plugin", "sourceUrl", "otel", "apiKey", "webhook", "x"]
    for round_ in range(60):
        layers = []
        for _ in range(3):
            doc: dict = {}
            for _ in range(rng.randint(0, 6)):
                depth = rng.randint(1, 5)
                key = ".".join(rng.choice(words) for _ in range(depth))
                if rng.random() < 0.5:
                    key = rng.choice(["svc.tracker.bot.orchestrator.", "svc.tracker.bot.worker.",
                                      "svc.host.", "svc.cluster.", "svc.plugin."]) + rng.choice(words)
                node = doc
                parts = key.split(".")
                ok = True
                for part in parts[:-1]:
                    child = node.setdefault(part, {})
                    if not isinstance(child, dict):
                        ok = False
                        break
                    node = child
                if ok and not isinstance(node.get(parts[-1]), dict):
                    node[parts[-1]] = "v%d" % rng.randint(0, 99)
            layers.append(doc)
        for path, doc in zip((paths.cluster_secrets, paths.node_json, paths.config_json), layers):
            write_json(path, doc)
        shared = build_bundle(paths)["shared"]
        assert all(is_shared_layer2_key(k) for k in shared), (round_, shared)
        assert "svc.host.name" not in shared
