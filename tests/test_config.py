"""The two config layers, the getters and their fallbacks, the Layer-2 writer, the classification."""
from __future__ import annotations

import json
import os
import platform
import stat
from pathlib import Path
from typing import Tuple

import pytest

from svcposture import config
from svcposture._files import MAX_JSON_BYTES
from svcposture.config import CLASSIFICATION, PER_NODE, SHARED, ConfigError
from svcposture.paths import Paths


def put(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj) if not isinstance(obj, (bytes, str)) else "")
    if isinstance(obj, bytes):
        path.write_bytes(obj)
    elif isinstance(obj, str):
        path.write_text(obj)
    return path


# ---------------------------------------------------------------- load_layer: bad input

BAD_FILES = [
    # The interpreter's json decides where a syntax error is (3.13 points at the trailing comma, col 30).
    ("corrupt", b'{"svc": {"host": {"name": "a",}}}', 1, None),
    ("empty", b"", 1, 1),
    ("whitespace", b"\n\n", 1, 1),
    ("truncated", b'{\n "svc": {\n  "host": ', 3, 11),
    ("non-utf8", b'{"svc": "caf\xe9"}', 1, 13),
    ("array", b"[1, 2]", 1, 1),
    ("string", b'"svc"', 1, 1),
    ("number", b"42", 1, 1),
    ("null", b"null", 1, 1),
]


def json_error_position(raw: bytes) -> Tuple[int, int]:
    """(line, column) of the syntax error this interpreter's json reports for `raw`."""
    try:
        json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        return exc.lineno, exc.colno
    raise AssertionError("%r parses" % raw)


@pytest.mark.parametrize("name, raw, line, column", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_load_layer_bad_input_names_file_line_column(home: Path, name: str, raw: bytes, line: int,
                                                     column: int) -> None:
    path = put(home / "cfg.json", raw)
    with pytest.raises(ConfigError) as info:
        config.load_layer(path)
    err = info.value
    assert err.path == str(path)
    if column is None:
        line, column = json_error_position(raw)
    assert (err.line, err.column) == (line, column)
    assert str(path) in str(err)
    assert path.read_bytes() == raw


def test_load_layer_huge_is_refused(home: Path) -> None:
    path = home / "huge.json"
    with open(str(path), "wb") as fh:
        fh.write(b'{"pad": "')
        fh.write(b"a" * (MAX_JSON_BYTES + 1))
        fh.write(b'"}')
    with pytest.raises(ConfigError, match="larger than") as info:
        config.load_layer(path)
    assert info.value.path == str(path)


def test_load_layer_missing_is_empty_and_unreadable_is_config_error(home: Path) -> None:
    assert config.load_layer(home / "nope.json") == {}
    blocker = put(home / "blocker", "x")
    # A parent that is a regular file: the file cannot exist, so it is missing.
    assert config.load_layer(blocker / "cfg.json") == {}
    # Root reads through any mode bits; a symlink loop is unreadable even for root.
    loop = home / "loop.json"
    os.symlink(str(loop), str(loop))
    with pytest.raises(ConfigError, match="cannot read") as info:
        config.load_layer(loop)
    assert info.value.path == str(loop)


# ---------------------------------------------------------------- dotted keys

def test_dotted_get_set_flatten() -> None:
    data: dict = {}
    config.set_dotted(data, "svc.host.name", "n1")
    config.set_dotted(data, "svc.cluster.livenessAnchorIssue", "OPS-1")
    assert data == {"svc": {"host": {"name": "n1"}, "cluster": {"livenessAnchorIssue": "OPS-1"}}}
    assert config.get_dotted(data, "svc.host.name") == "n1"
    assert config.get_dotted(data, "svc.host.name.deeper") is None
    assert config.get_dotted(data, "svc.nope", "dflt") == "dflt"
    assert config.flatten(data) == {"svc.host.name": "n1", "svc.cluster.livenessAnchorIssue": "OPS-1"}
    with pytest.raises(ConfigError):
        config.set_dotted(data, "svc.host.name.x", 1)   # "name" is a string, not an object


@pytest.mark.parametrize("key", ["", ".a", "a.", "a..b", "a b", "a/b", None, 5])
def test_invalid_dotted_keys(key) -> None:
    with pytest.raises(ConfigError):
        config.get_dotted({}, key)


# ---------------------------------------------------------------- getters and fallbacks

def test_host_name_node_json_wins_then_config_json(paths: Paths) -> None:
    assert config.host_name(paths) is None
    put(paths.config_json, {"svc": {"host": {"name": "from-config"}}})
    assert config.host_name(paths) == "from-config"
    put(paths.node_json, {"svc": {"host": {"name": "  from-node  "}}})
    assert config.host_name(paths) == "from-node"
    put(paths.node_json, {"svc": {"host": {"name": None}}})
    assert config.host_name(paths) == "from-config"
    # The anchor's SHARED file does not define a PER-NODE value.
    put(paths.config_json, {})
    put(paths.cluster_secrets, {"svc": {"host": {"name": "shared?"}}})
    assert config.host_name(paths) is None


def test_host_name_wrong_type_names_its_file(paths: Paths) -> None:
    put(paths.config_json, {"svc": {"host": {"name": "fine"}}})
    put(paths.node_json, {"svc": {"host": {"name": 42}}})
    with pytest.raises(ConfigError) as info:
        config.host_name(paths)
    assert info.value.path == str(paths.node_json)
    assert "node.json" in str(info.value) and "svc.host.name" in str(info.value)


def test_corrupt_node_json_is_an_error_not_a_silent_fallback(paths: Paths) -> None:
    put(paths.config_json, {"svc": {"host": {"name": "fallback"}}})
    put(paths.node_json, b"{oops")
    with pytest.raises(ConfigError) as info:
        config.host_name(paths)
    assert info.value.path == str(paths.node_json)


def test_node_name_falls_back_to_os_short_hostname(paths: Paths) -> None:
    assert config.node_name(paths) == (platform.node() or "localhost").split(".")[0]
    put(paths.node_json, {"svc": {"host": {"name": "node-a"}}})
    assert config.node_name(paths) == "node-a"


def test_anchor_cluster_secrets_then_config_json(paths: Paths) -> None:
    assert config.liveness_anchor(paths) is None
    put(paths.node_json, {"svc": {"cluster": {"livenessAnchorIssue": "NODE-1"}}})
    assert config.liveness_anchor(paths) is None, "node.json is PER-NODE; the anchor is SHARED"
    put(paths.config_json, {"svc": {"cluster": {"livenessAnchorIssue": "OLD-7"}}})
    assert config.liveness_anchor(paths) == "OLD-7"
    put(paths.cluster_secrets, {"svc": {"cluster": {"livenessAnchorIssue": "OPS-42"}}})
    assert config.liveness_anchor(paths) == "OPS-42"
    put(paths.cluster_secrets, {"svc": {"cluster": {"livenessAnchorIssue": ["OPS-42"]}}})
    with pytest.raises(ConfigError) as info:
        config.liveness_anchor(paths)
    assert info.value.path == str(paths.cluster_secrets)


def test_roster_is_read_live_and_legacy_hosts_json_is_ignored(paths: Paths, home: Path) -> None:
    assert config.roster(paths) == []
    cluster_json = paths.default_cluster_repo / "cluster.json"
    put(cluster_json, {"roster": ["a", " b "]})
    assert config.roster(paths) == ["a", "b"]
    put(cluster_json, {"roster": ["a", "b", "c"]})
    assert config.roster(paths) == ["a", "b", "c"], "no caching: the next call sees the edit"
    repo = home / "project"
    put(repo / ".svc" / "hosts.json", {"hosts": ["legacy-1", "legacy-2"]})
    paths2 = Paths(home, environ={"HOME": str(home), "SVC_REPO_ROOT": str(repo)})
    assert config.roster(paths2) == ["a", "b", "c"]


@pytest.mark.parametrize("body", [
    {"roster": "a,b"}, {"roster": [1, 2]}, {"roster": ["a", ""]}, {"roster": [None]}, [["a"]],
])
def test_roster_bad_shape(paths: Paths, body) -> None:
    path = put(paths.default_cluster_repo / "cluster.json", body)
    with pytest.raises(ConfigError) as info:
        config.roster(paths)
    assert info.value.path == str(path)


def test_roster_follows_repo_path(paths: Paths, home: Path) -> None:
    put(paths.node_json, {"svc": {"cluster": {"repoPath": "~/elsewhere/cl"}}})
    assert config.cluster_repo_path(paths) == home / "elsewhere" / "cl"
    put(home / "elsewhere" / "cl" / "cluster.json", {"roster": ["x"]})
    assert config.roster(paths) == ["x"]
    put(paths.node_json, {"svc": {"cluster": {"repoPath": str(home / "abs")}}})
    assert config.cluster_json_path(paths) == home / "abs" / "cluster.json"
    put(paths.node_json, {"svc": {"cluster": {"repoPath": "~"}}})
    assert config.cluster_repo_path(paths) == home


def test_layer1_root_and_get(home: Path, paths: Paths) -> None:
    assert config.layer1_root(paths) is None and config.layer1_get(paths, "svc.tracker.teamKey") is None
    repo = home / "proj"
    put(repo / ".svc" / "config.json", {"svc": {"tracker": {"teamKey": "ENG"}}})
    put(paths.registry_json, {"repoRoot": str(repo)})
    assert config.layer1_root(paths) == repo
    assert config.layer1_get(paths, config.TEAM_KEY) == "ENG"
    other = home / "other"
    p2 = Paths(home, environ={"HOME": str(home), "SVC_REPO_ROOT": str(other)})
    assert config.layer1_path(p2) == other / ".svc" / "config.json"
    assert config.layer1_get(p2, config.TEAM_KEY) is None


# ---------------------------------------------------------------- write_layer

def test_write_layer_merges_atomically_with_0600(paths: Paths) -> None:
    put(paths.cluster_secrets, {"svc": {"tracker": {"bot": {"worker": {"accessToken": "canary-w"}}}},
                                "other": [1, 2]})
    changes = config.write_layer(paths.cluster_secrets, {config.ANCHOR_KEY: "OPS-1"})
    assert changes == {config.ANCHOR_KEY: (None, "OPS-1")}
    data = json.loads(paths.cluster_secrets.read_text())
    assert data["other"] == [1, 2]
    assert data["svc"]["tracker"]["bot"]["worker"]["accessToken"] == "canary-w"
    assert data["svc"]["cluster"]["livenessAnchorIssue"] == "OPS-1"
    assert stat.S_IMODE(os.stat(str(paths.cluster_secrets)).st_mode) == 0o600
    assert sorted(os.listdir(str(paths.config_dir))) == ["cluster-secrets.json"]


def test_write_layer_reports_previous_and_skips_no_ops(paths: Paths) -> None:
    config.write_layer(paths.node_json, {config.HOST_NAME_KEY: "a"})
    inode = os.stat(str(paths.node_json)).st_ino
    assert config.write_layer(paths.node_json, {config.HOST_NAME_KEY: "a"}) == {}
    assert os.stat(str(paths.node_json)).st_ino == inode, "a no-op must not rewrite the file"
    assert config.write_layer(paths.node_json, {config.HOST_NAME_KEY: "b"}) == {config.HOST_NAME_KEY: ("a", "b")}


def test_write_layer_only_if_absent_never_overwrites(paths: Paths) -> None:
    assert config.write_layer(paths.node_json, {config.HOST_NAME_KEY: "first"}, only_if_absent=True)
    assert config.write_layer(paths.node_json, {config.HOST_NAME_KEY: "second"}, only_if_absent=True) == {}
    assert config.host_name(paths) == "first"


@pytest.mark.parametrize("raw", [b"{broken", b"", b"[]", b'{"a": "\xff"}'])
def test_write_layer_refuses_corrupt_file_and_leaves_it(paths: Paths, raw: bytes) -> None:
    put(paths.cluster_secrets, raw)
    with pytest.raises(ConfigError) as info:
        config.write_layer(paths.cluster_secrets, {config.ANCHOR_KEY: "OPS-1"})
    assert info.value.path == str(paths.cluster_secrets)
    assert paths.cluster_secrets.read_bytes() == raw
    assert os.listdir(str(paths.config_dir)) == ["cluster-secrets.json"]


def test_write_layer_conflicting_shape_writes_nothing(paths: Paths) -> None:
    put(paths.node_json, {"svc": {"host": "flat-string"}})
    before = paths.node_json.read_bytes()
    with pytest.raises(ConfigError):
        config.write_layer(paths.node_json, {"svc.other": 1, config.HOST_NAME_KEY: "n"})
    assert paths.node_json.read_bytes() == before


def test_write_layer_unwritable_directory(home: Path) -> None:
    blocker = put(home / ".config", "a file where the directory should be")
    p = Paths(home, environ={"HOME": str(home)})
    with pytest.raises((ConfigError, OSError)):
        config.write_layer(p.node_json, {config.HOST_NAME_KEY: "n"})
    assert blocker.read_text() == "a file where the directory should be"


# ---------------------------------------------------------------- classification

CONTRACT_CLASSES = {
    "Bot OAuth orchestrator token": SHARED,
    "Bot OAuth worker token": SHARED,
    "Cluster roster": SHARED,
    "Layer-1 project config": SHARED,
    "Liveness anchor issue": SHARED,
    "Cloud token (env var SVC_CLOUD_TOKEN)": SHARED,
    "Plugin source": SHARED,
    "Tracker team/state map": SHARED,
    "Host name": PER_NODE,
    "repoRoot": PER_NODE,
    "Model-provider account login": PER_NODE,
    "Telemetry endpoints": PER_NODE,
    "execution-core.env": PER_NODE,
    "Event log": PER_NODE,
    "SQLite databases": PER_NODE,
    "Worktree trust": PER_NODE,
    "Tracker personal token": PER_NODE,
    "Webhook secrets": PER_NODE,
}


def test_classification_is_the_contract_table() -> None:
    assert len(CLASSIFICATION) == 18
    assert {item.name: item.klass for item in CLASSIFICATION} == CONTRACT_CLASSES
    assert [item.name for item in CLASSIFICATION] == list(CONTRACT_CLASSES), "contract order"
    for item in CLASSIFICATION:
        assert item.location and item.on_mirror
    by_name = {item.name: item for item in CLASSIFICATION}
    assert by_name["Host name"].layer2_key == config.HOST_NAME_KEY
    assert by_name["Liveness anchor issue"].layer2_key == config.ANCHOR_KEY


def test_only_shared_keys_can_be_mirrored() -> None:
    for item in CLASSIFICATION:
        if item.layer2_key and item.klass == PER_NODE:
            assert not config.is_shared_layer2_key(item.layer2_key.rstrip(".*"))
    assert config.is_shared_layer2_key("svc.tracker.bot.orchestrator.accessToken")
    assert config.is_shared_layer2_key("svc.tracker.bot.worker.refreshToken")
    assert config.is_shared_layer2_key(config.ANCHOR_KEY)
    assert not config.is_shared_layer2_key("svc.tracker.bot.orchestrator")
    assert not config.is_shared_layer2_key("svc.tracker.bot.orchestratorX.a")
    assert not config.is_shared_layer2_key(config.HOST_NAME_KEY)
    assert not config.is_shared_layer2_key("tracker.apiKey")
