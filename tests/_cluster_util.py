"""Helpers for the cluster-config tests: the CLI as a subprocess, a real cluster repo with a bare remote."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple

CANARY_ORCH = "CANARY-orch-tok-7f3a9e"
CANARY_WORKER = "CANARY-worker-tok-41bc02"
CANARY_CLOUD = "CANARY-cloud-'tok'-$HOME-\"q\"-9d1e"
CANARY_PERSONAL = "CANARY-personal-tok-55e0"

_GIT_ID = {
    "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@localhost",
    "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@localhost",
}


def cli(env: Dict[str, str], *args: str, input: Optional[bytes] = None, timeout: float = 60,
        cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """`python -m svcposture ARGS` as a real child; text output."""
    done = subprocess.run([sys.executable, "-m", "svcposture", *args], env=env, input=input,
                          capture_output=True, timeout=timeout, cwd=str(cwd) if cwd else None)
    done.stdout = done.stdout.decode("utf-8", "replace")
    done.stderr = done.stderr.decode("utf-8", "replace")
    return done


def assert_clean(done: subprocess.CompletedProcess, *secrets: str) -> None:
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    for secret in secrets:
        assert secret not in text, "secret leaked into output"


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_GIT_ID)
    env["HOME"] = str(cwd)
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    return subprocess.run(["git", *args], cwd=str(cwd), env=env, capture_output=True, text=True, check=check)


def write_json(path: Path, obj: Any, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2))
    os.chmod(str(path), mode)
    return path


def make_cluster_repo(tmp_path: Path, home: Path, roster: Iterable[str] = ("node-a",),
                      files: Optional[Dict[str, bytes]] = None) -> Tuple[Path, Path, Path]:
    """(bare remote, seed clone for 'other nodes', this node's checkout at ~/svc/cluster)."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(bare), str(seed))
    git(seed, "checkout", "-q", "-b", "main")
    write_json(seed / "cluster.json", {"roster": list(roster), "note": "kept"}, 0o644)
    for rel, data in (files or {}).items():
        (seed / rel).parent.mkdir(parents=True, exist_ok=True)
        (seed / rel).write_bytes(data)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "seed")
    git(seed, "push", "-q", "-u", "origin", "main")
    checkout = home / "svc" / "cluster"
    checkout.parent.mkdir(parents=True, exist_ok=True)
    git(tmp_path, "clone", "-q", str(bare), str(checkout))
    return bare, seed, checkout


def push_from_seed(seed: Path, files: Dict[str, bytes], message: str = "update") -> str:
    for rel, data in files.items():
        (seed / rel).parent.mkdir(parents=True, exist_ok=True)
        (seed / rel).write_bytes(data)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", message)
    git(seed, "push", "-q")
    return git(seed, "rev-parse", "HEAD").stdout.strip()


def snapshot(root: Path) -> Dict[str, Tuple[bytes, int, int]]:
    """Every file under root with its bytes, mode and mtime_ns: compare to prove nothing was written."""
    out: Dict[str, Tuple[bytes, int, int]] = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            out[str(path.relative_to(root))] = (path.read_bytes(), st.st_mode & 0o7777, st.st_mtime_ns)
    return out


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777
