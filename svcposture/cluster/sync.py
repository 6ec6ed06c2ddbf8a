"""svc-cluster sync: pull the cluster repo, decrypt its secrets, write them, project the cloud env.

Everything is decrypted and validated before anything is written; decrypted
content and the decrypt tool's own output are never shown.
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .._files import exclusive_lock, write_json_atomic
from .._text import loads_bounded
from ..config import CLOUD_TOKEN_KEY, ConfigError, flatten, get_dotted, load_layer, split_key
from ..paths import Paths
from ..settings import DECRYPT_CMD_ENV, decrypt_cmd
from ._common import ClusterError, guarded, is_secret_key, print_json
from .cloudenv import project_cloud_env
from .mirror import valid_value
from .roster import ClusterRepoError, git, git_timeout, require_checkout

BOTS_FILE = "secrets/cluster-bots.json"
# The subtree of cluster-secrets.json that sync owns: after a sync it holds exactly
# the bot keys of the decrypted bots file, so a key revoked there goes away here.
BOTS_SUBTREE = "svc.tracker.bot"
CLOUD_FILE = "secrets/cluster-cloud.json"
MAX_DECRYPTED_BYTES = 1024 * 1024


class DecryptError(ClusterError, RuntimeError):
    """An encrypted cluster file could not be decrypted; nothing was written."""


def decrypt_command(path: Path) -> List[str]:
    try:
        argv = shlex.split(decrypt_cmd(os.environ))
    except ValueError as exc:
        raise DecryptError("%s cannot be parsed: %s" % (DECRYPT_CMD_ENV, exc)) from None
    if not argv:
        raise DecryptError("%s is empty" % DECRYPT_CMD_ENV)
    return argv + [str(path)]


def decrypt_json(path: Path, label: str) -> Dict[str, Any]:
    argv = decrypt_command(path)
    try:
        done = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=git_timeout())
    except FileNotFoundError:
        raise DecryptError("decrypt tool %r not found: install it or set SVC_DECRYPT_CMD" % argv[0]) from None
    except PermissionError:
        raise DecryptError("decrypt tool %r is not executable" % argv[0]) from None
    except OSError as exc:
        raise DecryptError("cannot run decrypt tool %r: %s" % (argv[0], exc.strerror or exc)) from None
    except subprocess.TimeoutExpired:
        raise DecryptError("decrypting %s timed out" % label) from None
    # The tool's own output may hold plaintext; report only its exit status.
    if done.returncode != 0:
        raise DecryptError("decrypting %s with %r failed (exit %d); its output is not shown because it "
                           "may contain secrets" % (label, argv[0], done.returncode))
    raw = done.stdout
    if len(raw) > MAX_DECRYPTED_BYTES:
        raise DecryptError("decrypted %s is larger than %d bytes" % (label, MAX_DECRYPTED_BYTES))
    try:
        data = loads_bounded(raw, MAX_DECRYPTED_BYTES)
    except ValueError:
        raise DecryptError("decrypted %s is not JSON (content not shown)" % label) from None
    if not isinstance(data, dict):
        raise DecryptError("decrypted %s is not a JSON object (content not shown)" % label)
    return data


def _plain_key(key: str) -> bool:
    try:
        split_key(key)
    except ConfigError:
        return False
    return True


def cmd_sync(ns: argparse.Namespace) -> int:
    paths = Paths()
    repo = require_checkout(paths)
    report: Dict[str, Any] = {"repo": str(repo), "pulled": False, "head": None}
    # Refuse early, before pulling or decrypting, if a file we would write is corrupt.
    load_layer(paths.cluster_secrets)
    load_layer(paths.cluster_cloud)
    if not ns.no_pull:
        try:
            git(repo, "pull", "-q", "--ff-only")
        except ClusterRepoError as exc:
            raise ClusterRepoError("%s; nothing was written (fix the checkout, or --no-pull to sync it as it is)"
                                   % exc) from None
        report["pulled"] = True
    report["head"] = git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).stdout.strip() or None
    bots_path, cloud_path = repo / BOTS_FILE, repo / CLOUD_FILE
    bots = decrypt_json(bots_path, BOTS_FILE) if bots_path.is_file() else None
    cloud = decrypt_json(cloud_path, CLOUD_FILE) if cloud_path.is_file() else None

    # Everything decrypted and validated; only now is anything written.
    report["bots"] = _merge_bots(paths, bots)
    report["cloud"] = _write_cloud(paths, cloud)
    projection = project_cloud_env(paths)
    report["projection"] = projection
    ok = projection.get("ok", False)
    if ns.json:
        print_json(report)
    else:
        _print_sync(report)
    if not ok:
        print("svc-cluster: sync: cloud env not projected: %s" % projection.get("error"), file=sys.stderr)
        return 1
    return 0


def _merge_bots(paths: Paths, bots: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Make the svc.tracker.bot.* subtree of cluster-secrets.json equal the decrypted
    bots file's tokens; every other key of the file is left as it is."""
    if bots is None:
        # No bots file in the repo is not a revocation: nothing to own, nothing touched.
        return {"status": "absent", "file": BOTS_FILE}
    flat = flatten(bots)
    tokens = {k: v for k, v in flat.items()
              if is_secret_key(k) and _plain_key(k) and v is not None and valid_value(v)}
    # Names of other entries are decrypted content too: only their number is reported.
    ignored = len([k for k in flat if k not in tokens])
    changed, removed = replace_subtree(paths.cluster_secrets, BOTS_SUBTREE, tokens)
    return {"status": "merged" if tokens else "empty", "file": BOTS_FILE,
            "keys": sorted(tokens), "changed": changed, "removed": removed, "ignoredKeyCount": ignored,
            "target": str(paths.cluster_secrets)}


def replace_subtree(path: Path, subtree: str, leaves: Dict[str, Any]) -> Tuple[List[str], List[str]]:
    """Set the object at dotted `subtree` of a config file to exactly `leaves`
    ({dotted key under subtree: value}), atomically and under the file's lock.

    Returns (keys added or changed, keys removed), names only. With no leaves the
    subtree is deleted; objects above it are kept. A corrupt file raises ConfigError
    and is left as it was."""
    with exclusive_lock(path):
        data = load_layer(path)
        current = get_dotted(data, subtree)
        old = flatten(current, subtree) if isinstance(current, dict) else (
            {} if current is None else {subtree: current})
        changed = sorted(k for k, v in leaves.items() if k not in old or type(old[k]) is not type(v) or old[k] != v)
        removed = sorted(k for k in old if k not in leaves)
        if changed or removed:
            _set_subtree(data, subtree, _nest(leaves, subtree))
            write_json_atomic(path, data)
    return changed, removed


def _nest(leaves: Dict[str, Any], subtree: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in leaves.items():
        node = out
        parts = split_key(key)[len(split_key(subtree)):]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _set_subtree(data: Dict[str, Any], subtree: str, value: Dict[str, Any]) -> None:
    *parents, last = split_key(subtree)
    node = data
    for part in parents:
        child = node.get(part)
        if child is None:
            if not value:
                return  # nothing there to delete
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError("cannot set %s: %s is not an object" % (subtree, part))
        node = child
    if value:
        node[last] = value
    else:
        node.pop(last, None)


def _write_cloud(paths: Paths, cloud: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Write the decrypted cloud file as cluster-cloud.json (0600) unless it is already exactly that."""
    if cloud is None:
        return {"status": "absent", "file": CLOUD_FILE}
    current = load_layer(paths.cluster_cloud) if paths.cluster_cloud.exists() else None
    mode_ok = paths.cluster_cloud.exists() and (paths.cluster_cloud.stat().st_mode & 0o7777) == 0o600
    if current == cloud and mode_ok:
        status = "unchanged"
    else:
        write_json_atomic(paths.cluster_cloud, cloud, 0o600)
        status = "written"
    return {"status": status, "file": CLOUD_FILE, "target": str(paths.cluster_cloud),
            "token": "present" if flatten(cloud).get(CLOUD_TOKEN_KEY) else "absent"}


def _print_sync(report: Dict[str, Any]) -> None:
    print("svc-cluster: sync: %s at %s" % ("pulled" if report["pulled"] else "not pulled",
                                          (report["head"] or "?")[:12]))
    b = report["bots"]
    if b["status"] == "absent":
        print("  bots:  %s not in the cluster repo; cluster-secrets.json left as it was" % BOTS_FILE)
    else:
        print("  bots:  %d token key(s) in %s (%d changed, %d removed)%s" % (
            len(b["keys"]), b["target"], len(b["changed"]), len(b["removed"]),
            "; ignored %d entr%s outside svc.tracker.bot.*" % (
                b["ignoredKeyCount"], "y" if b["ignoredKeyCount"] == 1 else "ies")
            if b["ignoredKeyCount"] else ""))
    for key in b.get("removed", []):
        print("  bots:  removed %s (no longer in %s)" % (key, BOTS_FILE))
    c = report["cloud"]
    if c["status"] == "absent":
        print("  cloud: %s not in the cluster repo; cluster-cloud.json left as it was" % CLOUD_FILE)
    else:
        print("  cloud: %s %s (token %s)" % (c["target"], c["status"], c["token"]))
    projection = report["projection"]
    if projection.get("ok", False):
        print("  env:   %s %s; ~/.zshenv guard %s" % (projection["envFile"], projection["envFileAction"],
                                                     projection["guardAction"]))


# ---------------------------------------------------------------- commands

def add_commands(sub: Any) -> None:
    p = sub.add_parser("sync", help="pull the cluster repo, decrypt its secrets, project the cloud env",
                       description="git pull --ff-only in the cluster repo; decrypt secrets/cluster-bots.json "
                                   "and secrets/cluster-cloud.json with $SVC_DECRYPT_CMD (default `sops "
                                   "--decrypt`, the file path is appended); make the svc.tracker.bot.* keys of "
                                   "cluster-secrets.json exactly the bots file's (a key revoked there is "
                                   "removed here, reported by name; every other key is kept); write cluster-cloud.json (0600); then run the "
                                   "cloud-env projection. If anything fails before the writes, no file is "
                                   "touched; decrypted content and the tool's output are never shown.")
    p.add_argument("--no-pull", action="store_true", help="use the checkout as it is (offline)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (no token values)")
    p.set_defaults(func=guarded(cmd_sync))
