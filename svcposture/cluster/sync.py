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
from typing import Any, Dict, List, Optional

from .._files import write_json_atomic
from .._text import loads_bounded
from ..config import CLOUD_TOKEN_KEY, ConfigError, flatten, load_layer, split_key, write_layer
from ..paths import Paths
from ._common import ClusterError, guarded, is_secret_key, print_json
from .cloudenv import project_cloud_env
from .mirror import valid_value
from .roster import ClusterRepoError, git, git_timeout, require_checkout

BOTS_FILE = "secrets/cluster-bots.json"
CLOUD_FILE = "secrets/cluster-cloud.json"
MAX_DECRYPTED_BYTES = 1024 * 1024


class DecryptError(ClusterError, RuntimeError):
    """An encrypted cluster file could not be decrypted; nothing was written."""


def decrypt_command(path: Path) -> List[str]:
    spec = os.environ.get("SVC_DECRYPT_CMD") or "sops --decrypt"
    try:
        argv = shlex.split(spec)
    except ValueError as exc:
        raise DecryptError("SVC_DECRYPT_CMD cannot be parsed: %s" % exc) from None
    if not argv:
        raise DecryptError("SVC_DECRYPT_CMD is empty")
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
    """Merge the decrypted svc.tracker.bot.* tokens into cluster-secrets.json."""
    if bots is None:
        return {"status": "absent", "file": BOTS_FILE}
    flat = flatten(bots)
    tokens = {k: v for k, v in flat.items()
              if is_secret_key(k) and _plain_key(k) and v is not None and valid_value(v)}
    # Names of other entries are decrypted content too: only their number is reported.
    ignored = len([k for k in flat if k not in tokens])
    changes = write_layer(paths.cluster_secrets, tokens) if tokens else {}
    return {"status": "merged" if tokens else "empty", "file": BOTS_FILE,
            "keys": sorted(tokens), "changed": sorted(changes), "ignoredKeyCount": ignored,
            "target": str(paths.cluster_secrets)}


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
        print("  bots:  %d token key(s) merged into %s (%d changed)%s" % (
            len(b["keys"]), b["target"], len(b["changed"]),
            "; ignored %d entr%s outside svc.tracker.bot.*" % (
                b["ignoredKeyCount"], "y" if b["ignoredKeyCount"] == 1 else "ies")
            if b["ignoredKeyCount"] else ""))
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
                                   "--decrypt`, the file path is appended); merge the bot tokens into "
                                   "cluster-secrets.json; write cluster-cloud.json (0600); then run the "
                                   "cloud-env projection. If anything fails before the writes, no file is "
                                   "touched; decrypted content and the tool's output are never shown.")
    p.add_argument("--no-pull", action="store_true", help="use the checkout as it is (offline)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (no token values)")
    p.set_defaults(func=guarded(cmd_sync))
