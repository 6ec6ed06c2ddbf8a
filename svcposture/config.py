"""The two config layers, the classification of every cluster config item, and the getters.

Layer 1 is `.svc/config.json` of the project repo (committed, SHARED by clone).
Layer 2 is three sibling files under `~/.config/svc/`: `cluster-secrets.json`
(SHARED values written by cluster-sync and join), `node.json` (PER-NODE values)
and `config.json` (the older single file that both fall back to).

Keys are dotted paths into nested JSON: `svc.host.name` is
`{"svc": {"host": {"name": ...}}}`.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple

from ._files import CorruptFileError, exclusive_lock, read_json, write_json_atomic
from ._reserve import RESERVE_KEY
from .errors import FACE, SvcpostureError
from .paths import Paths
from .settings import repo_root

SHARED = "SHARED"
PER_NODE = "PER-NODE"

HOST_NAME_KEY = "svc.host.name"
ANCHOR_KEY = "svc.cluster.livenessAnchorIssue"
REPO_PATH_KEY = "svc.cluster.repoPath"
REPO_URL_KEY = "svc.cluster.repoUrl"
PLUGIN_URL_KEY = "svc.plugin.sourceUrl"
BOT_ORCHESTRATOR_PREFIX = "svc.tracker.bot.orchestrator"
BOT_WORKER_PREFIX = "svc.tracker.bot.worker"
CLOUD_TOKEN_KEY = "svc.cloud.token"
TEAM_KEY = "svc.tracker.teamKey"

_MISSING = object()


class ConfigError(SvcpostureError, ValueError):
    """A config file is corrupt or holds a value of the wrong shape."""

    __module__ = FACE

    def __init__(self, message: str, path: Optional[str] = None, line: int = 0, column: int = 0) -> None:
        self.path = path
        self.line = line
        self.column = column
        super().__init__(message)

    @classmethod
    def from_corrupt(cls, exc: CorruptFileError) -> "ConfigError":
        return cls(str(exc), exc.path, exc.line, exc.column)


class ConfigItem(NamedTuple):
    name: str
    location: str
    klass: str
    on_mirror: str
    # Layer-2 dotted key (or key prefix ending in ".*") when the item lives in Layer 2.
    layer2_key: Optional[str] = None


# The contract's classification, item for item. `svc-cluster classify` prints it,
# the bundle exporter and join consult it, and nothing else decides a class.
CLASSIFICATION: Tuple[ConfigItem, ...] = (
    ConfigItem("Bot OAuth orchestrator token",
               "~/.config/svc/cluster-secrets.json key svc.tracker.bot.orchestrator.*", SHARED,
               "Written by cluster-sync from the encrypted cluster bots file; identical on all nodes. "
               "Falls back to config.json on nodes that have not run cluster-sync.",
               BOT_ORCHESTRATOR_PREFIX + ".*"),
    ConfigItem("Bot OAuth worker token",
               "~/.config/svc/cluster-secrets.json key svc.tracker.bot.worker.*", SHARED,
               "Same file; worker and orchestrator tokens are workspace-scoped, not host-scoped.",
               BOT_WORKER_PREFIX + ".*"),
    ConfigItem("Cluster roster", "cluster repo, file cluster.json, array roster[]", SHARED,
               "Add the new node's name to roster and push; cluster-sync pulls it and the next "
               "scheduler tick honors it with no restart. The legacy .svc/hosts.json is not read."),
    ConfigItem("Layer-1 project config", ".svc/config.json", SHARED,
               "Committed to git; present after clone."),
    ConfigItem("Liveness anchor issue",
               "~/.config/svc/cluster-secrets.json key svc.cluster.livenessAnchorIssue", SHARED,
               "Written by the join step from the bundle; one tracker ticket per fleet; falls back "
               "to config.json. Infrastructure: never close, archive or delete it.",
               ANCHOR_KEY),
    ConfigItem("Cloud token (env var SVC_CLOUD_TOKEN)",
               "cluster repo, encrypted secrets/cluster-cloud.json, key svc.cloud.token", SHARED,
               "cluster-sync decrypts it to ~/.config/svc/cluster-cloud.json; the projection step "
               "writes ~/.config/svc/cluster.env. The core never reads it."),
    ConfigItem("Plugin source", "~/svc/plugin-source/", SHARED,
               "Pulled from the same git remote by the setup script.", PLUGIN_URL_KEY),
    ConfigItem("Tracker team/state map", "Layer-1 svc.tracker.teamKey and stateMap", SHARED,
               "Present after clone via .svc/config.json."),
    ConfigItem("Host name", "~/.config/svc/node.json key svc.host.name", PER_NODE,
               "Written by the join step without overwriting an existing value. Must equal a unique "
               "entry of cluster.json roster; falls back to config.json.", HOST_NAME_KEY),
    ConfigItem("repoRoot", "~/svc/execution-core/registry.json key repoRoot", PER_NODE,
               "Absolute path on the new host; written by the execution-core register command."),
    ConfigItem("Model-provider account login",
               "OS keychain or ~/.claude/.credentials.json of the provider's CLI", PER_NODE,
               "Log in interactively on the new host; each node uses its own account."),
    ConfigItem("Telemetry endpoints", "~/.config/svc/config.json, OTel keys", PER_NODE,
               "Private-network addresses differ per node; set in Layer 2 on each host."),
    ConfigItem("execution-core.env", "~/svc/execution-core/execution-core.env", PER_NODE,
               "Proxy and tuning overrides are host-specific."),
    ConfigItem("Event log", "~/svc/events/YYYY-MM.jsonl", PER_NODE,
               "Each node writes its own log; nodes never share log files."),
    ConfigItem("SQLite databases", "~/svc/*.db (4 files)", PER_NODE,
               "Host-local state; not replicated."),
    ConfigItem("Worktree trust", "~/.claude.json per worktree path", PER_NODE,
               "Paths differ; re-trust on each host."),
    ConfigItem("Tracker personal token", "~/.config/svc/config-<key>.json key tracker.apiKey", PER_NODE,
               "User-scoped; each operator supplies their own."),
    ConfigItem("Webhook secrets", "~/.config/svc/config-<key>.json, webhook keys", PER_NODE,
               "Regenerate or copy securely; not managed by the mirror process."),
)

# The package's own settings beyond the contract's table, classified the same way.
# `svc-cluster classify` prints them after the contract's items.
PACKAGE_SETTINGS: Tuple[ConfigItem, ...] = (
    ConfigItem("Human reserve (percent of every account automation leaves for people)",
               "~/.config/svc/cluster-secrets.json key svc.posture.reservePct", SHARED,
               "Carried by the bundle and written by join; one value per fleet, so a reserve held by "
               "svc-monitor guard on each host holds across the fleet. Integer 0-50, default 0; "
               "falls back to config.json.",
               RESERVE_KEY),
)

# Layer-2 keys a bundle may carry. A key outside these can never be mirrored.
SHARED_LAYER2_KEYS: Tuple[str, ...] = (
    BOT_ORCHESTRATOR_PREFIX + ".*",
    BOT_WORKER_PREFIX + ".*",
    ANCHOR_KEY,
    REPO_URL_KEY,
    PLUGIN_URL_KEY,
    RESERVE_KEY,
)


def is_shared_layer2_key(key: str) -> bool:
    for pattern in SHARED_LAYER2_KEYS:
        if pattern.endswith(".*"):
            prefix = pattern[:-2]
            if key.startswith(prefix + ".") and len(key) > len(prefix) + 1:
                return True
        elif key == pattern:
            return True
    return False


# ---------------------------------------------------------------- dotted keys

_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


def split_key(key: str) -> List[str]:
    if not isinstance(key, str) or not _KEY_RE.match(key):
        raise ConfigError("invalid dotted key %r" % (key,))
    return key.split(".")


def get_dotted(obj: Any, key: str, default: Any = None) -> Any:
    node = obj
    for part in split_key(key):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def set_dotted(obj: Dict[str, Any], key: str, value: Any) -> None:
    parts = split_key(key)
    node = obj
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError("cannot set %s: %s is not an object" % (key, part))
        node = child
    node[parts[-1]] = value


def flatten(obj: Any, prefix: str = "") -> Dict[str, Any]:
    """Nested objects to {dotted key: leaf value}."""
    out: Dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = "%s.%s" % (prefix, k) if prefix else str(k)
            if isinstance(v, dict) and v:
                out.update(flatten(v, key))
            else:
                out[key] = v
    return out


# ---------------------------------------------------------------- files

def load_layer(path: "os.PathLike[str] | str") -> Dict[str, Any]:
    """A config file as a dict; {} when it does not exist.

    Corrupt JSON, a top-level value that is not an object, or an unreadable file
    raise ConfigError naming the file (and line and column where it applies).
    """
    try:
        data = read_json(path)
    except CorruptFileError as exc:
        raise ConfigError.from_corrupt(exc) from None
    except OSError as exc:
        raise ConfigError("%s: cannot read: %s" % (path, exc.strerror or exc), str(path)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("%s: top level must be a JSON object" % path, str(path), 1, 1)
    return data


def layer2_get(paths: Paths, key: str, files: Iterable[Path]) -> Any:
    """The first non-null value of `key` in `files`, in order."""
    return _first_value(key, files)[0]


def _first_value(key: str, files: Iterable[Path]) -> Tuple[Any, Optional[Path]]:
    for path in files:
        value = get_dotted(load_layer(path), key)
        if value is not None:
            return value, path
    return None, None


def _string_setting(key: str, files: Iterable[Path]) -> Optional[str]:
    """The first non-null `key` in `files` as a stripped string; a non-string
    value is a ConfigError naming the file it came from."""
    value, path = _first_value(key, files)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError("%s: %s must be a string, not %s" % (path, key, type(value).__name__),
                          str(path))
    return value.strip() or None


def host_name(paths: Paths) -> Optional[str]:
    """PER-NODE: node.json, then config.json. None when unset."""
    return _string_setting(HOST_NAME_KEY, (paths.node_json, paths.config_json))


# Every key the package reads from node.json; anything else there is a typo or
# belongs to another program, and is ignored.
NODE_JSON_KEYS: Tuple[str, ...] = (HOST_NAME_KEY, REPO_PATH_KEY)


def unknown_node_keys(paths: Paths) -> List[str]:
    """One sentence per key of node.json the package does not read, naming the
    closest known key when one is close (a typo: `svc.hots.name`). A corrupt
    file raises ConfigError, as every reader of it does."""
    import difflib

    notes = []
    for key in sorted(flatten(load_layer(paths.node_json))):
        if key in NODE_JSON_KEYS:
            continue
        close = difflib.get_close_matches(key, NODE_JSON_KEYS, n=1, cutoff=0.6)
        notes.append("%s: unknown key %s is ignored%s" % (
            paths.node_json, key[:200], " (did you mean %s?)" % close[0] if close else
            "; the keys read from this file are %s" % ", ".join(NODE_JSON_KEYS)))
    return notes


def node_name(paths: Paths) -> str:
    """The configured host name, else the OS host name's short label."""
    name = host_name(paths)
    if name:
        return name
    # os.uname, not platform.node: `platform` alone costs more to import than this package.
    return (os.uname().nodename or "localhost").split(".")[0]


def liveness_anchor(paths: Paths) -> Optional[str]:
    """SHARED: cluster-secrets.json, then config.json. None when unset."""
    return _string_setting(ANCHOR_KEY, (paths.cluster_secrets, paths.config_json))


def cluster_repo_path(paths: Paths) -> Path:
    value = _string_setting(REPO_PATH_KEY, (paths.node_json, paths.config_json, paths.cluster_secrets))
    if not value:
        return paths.default_cluster_repo
    # `~` is this node's home (Paths.home), not the process's, so tests and
    # relocated nodes resolve it the same way.
    if value == "~":
        return paths.home
    return Path(os.path.expanduser(value)) if not value.startswith("~/") else paths.home / value[2:]


def cluster_json_path(paths: Paths) -> Path:
    return cluster_repo_path(paths) / "cluster.json"


def roster(paths: Paths) -> List[str]:
    """SHARED: read live from the cluster repo's cluster.json on every call.

    A missing file is an empty roster. A malformed one raises ConfigError. The
    legacy `.svc/hosts.json` is deliberately never consulted.
    """
    path = cluster_json_path(paths)
    data = load_layer(path)
    names = data.get("roster", [])
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise ConfigError("%s: roster must be an array of non-empty strings" % path, str(path))
    return [n.strip() for n in names]


def layer1_root(paths: Paths) -> Optional[Path]:
    """The project repo: $SVC_REPO_ROOT, else registry.json repoRoot, else None."""
    override = repo_root(paths.environ)
    if override:
        return Path(override)
    registry = load_layer(paths.registry_json)
    root = registry.get("repoRoot")
    if isinstance(root, str) and root.strip():
        return Path(root.strip())
    return None


def layer1_path(paths: Paths) -> Optional[Path]:
    root = layer1_root(paths)
    return None if root is None else root / ".svc" / "config.json"


def layer1_get(paths: Paths, key: str) -> Any:
    path = layer1_path(paths)
    return None if path is None else get_dotted(load_layer(path), key)


# ---------------------------------------------------------------- writes

def write_layer(path: "os.PathLike[str] | str", updates: Mapping[str, Any],
                only_if_absent: bool = False) -> Dict[str, Tuple[Any, Any]]:
    """Merge dotted `updates` into one config file atomically (mode 0600).

    Returns {key: (previous, new)} for keys that changed. A corrupt existing file
    raises ConfigError and is left exactly as it was. With `only_if_absent`, keys
    that already hold a non-null value are kept.
    """
    # Locked so that two writers (join and set-anchor, say) never lose an update.
    with exclusive_lock(path):
        data = load_layer(path)
        changes: Dict[str, Tuple[Any, Any]] = {}
        for key, value in updates.items():
            previous = get_dotted(data, key, _MISSING)
            if only_if_absent and previous is not _MISSING and previous is not None:
                continue
            # `True == 1` in Python; a type change is a change.
            if previous is not _MISSING and type(previous) is type(value) and previous == value:
                continue
            set_dotted(data, key, value)
            changes[key] = (None if previous is _MISSING else previous, value)
        if changes:
            write_json_atomic(path, data)
    return changes
