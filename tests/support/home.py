"""A node's HOME and environment for tests: env building, the accounts env file,
host name, roster and anchor, planted canaries, the event log, and a real
cluster repo (git) with a bare remote.

Every node process a test starts gets its environment from clean_env() or a
function built on it, so no SVC_*/MODEL_* setting of the developer's shell
leaks in and the checkout's package is the one imported.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent.parent

# Planted tokens: tests assert they never show up in any output, log or file.
CANARY = "lin_oauth_CANARY_5e1f0c9a7b2d4e6f"  # the tracker bot token of make_node()
BEARER = "Bearer " + CANARY
CANARY_ORCH = "CANARY-orch-tok-7f3a9e"
CANARY_WORKER = "CANARY-worker-tok-41bc02"
CANARY_CLOUD = "CANARY-cloud-'tok'-$HOME-\"q\"-9d1e"
CANARY_PERSONAL = "CANARY-personal-tok-55e0"

# The short clocks of a node under test (monitor_env): probes every 0.2 s.
FAST_TIMINGS = {
    "SVC_PROBE_INTERVAL_S": "0.2",
    "SVC_POSTURE_TTL_S": "0.2",
    "SVC_REFRESH_FLOOR_S": "0.05",
    "SVC_PROBE_DEADLINE_S": "5",
    "SVC_PROBE_TIMEOUT_S": "3",
}
# Nothing a test node does may leave the machine, even when it has an anchor.
NOWHERE = {"SVC_TRACKER_URL": "http://127.0.0.1:9/graphql", "SVC_LOKI_URL": "http://127.0.0.1:9"}


# ---------------------------------------------------------------- environments

def clean_env(home: Path) -> Dict[str, str]:
    """The environment a node process gets in tests: HOME relocated, no stray
    SVC_*/MODEL_* settings from the developer's shell, the repo importable."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SVC_", "MODEL_", "EXECUTION_CORE_"))}
    env["HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("NO_COLOR", None)
    # A terminal's size says how wide the HUD draws; pytest-xdist's workers set one of their own.
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    return env


def node_env(home: Any, provider_url: Optional[str] = None, accounts: Sequence[Any] = (),
             active: Optional[str] = None, extra: Optional[Mapping[str, str]] = None, *,
             tracker_url: Optional[str] = None, interval_ms: Optional[int] = None, **more: str) -> Dict[str, str]:
    """clean_env() for a node at `home`, plus what the test points it at:

    - `provider_url`: the provider it probes (and the usage sampler off);
    - `accounts` [(SUFFIX, token, email)] and `active`: its accounts env file;
    - `tracker_url`, `interval_ms`: its tracker and liveness publish interval;
    - `extra` and keyword settings: any other variables."""
    home = Path(home)
    env = clean_env(home)
    if provider_url:
        env["SVC_PROVIDER_URL"] = provider_url
        env["SVC_QUOTA_SAMPLER"] = "0"
    if accounts:
        write_accounts(accounts_path(home), list(accounts), active=active)
    if tracker_url:
        env["SVC_TRACKER_URL"] = tracker_url
    if interval_ms:
        env["EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS"] = str(interval_ms)
    env.update(extra or {})
    env.update(more)
    return env


def monitor_env(home: Path, provider_url: str, **overrides: str) -> Dict[str, str]:
    """node_env() with the short clocks of FAST_TIMINGS and nowhere to publish;
    no token anywhere in it."""
    return node_env(home, provider_url, extra=dict(FAST_TIMINGS, **NOWHERE), **overrides)


# ---------------------------------------------------------------- node files

def write_json(path: Path, obj: Any, mode: int = 0o600, indent: Optional[int] = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=indent))
    os.chmod(str(path), mode)
    return path


def set_host_name(home: Path, name: str) -> None:
    """`svc.host.name` in the node's node.json (~/.config/svc created 0700)."""
    target = home / ".config" / "svc" / "node.json"
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_json(target, {"svc": {"host": {"name": name}}}, indent=None)


def make_node(root: Path, host: Optional[str], roster: Optional[Iterable[str]], anchor: Optional[str] = None,
              token: Optional[str] = CANARY, name: Optional[str] = None) -> Path:
    """A HOME for one host under `root` (host name, tracker token, anchor, roster); returns it."""
    home = root / (name or host or "node")
    home.mkdir(parents=True, exist_ok=True)
    if host is not None:
        write_json(home / ".config" / "svc" / "node.json", {"svc": {"host": {"name": host}}}, indent=None)
    secrets: Dict[str, Any] = {"svc": {}}
    if token is not None:
        secrets["svc"]["tracker"] = {"bot": {"orchestrator": {"accessToken": token}}}
    if anchor is not None:
        secrets["svc"]["cluster"] = {"livenessAnchorIssue": anchor}
    write_json(home / ".config" / "svc" / "cluster-secrets.json", secrets, indent=None)
    if roster is not None:
        write_json(home / "svc" / "cluster" / "cluster.json", {"roster": list(roster)}, 0o644, indent=None)
    return home


def accounts_path(home: Path) -> Path:
    """Where a node keeps its accounts env file when SVC_ACCOUNTS_ENV is unset."""
    return home / ".config" / "svc" / "model-accounts.env"


def write_accounts(path: Path, entries: Sequence[Tuple[str, str, Optional[str]]],
                   active: Optional[str] = None, mode: int = 0o600, extra: str = "") -> Path:
    """`export MODEL_TOKEN_<SUFFIX>="<token>"  # <email>` per entry (SUFFIX, token,
    email or None), then the export that makes SUFFIX `active`, then `extra`.

    Written atomically (created with `mode`, then renamed), so a probe child of a
    monitor killed a moment ago never sources half a file."""
    lines: List[str] = ["# model accounts"]
    for suffix, token, email in entries:
        comment = "  # %s" % email if email else ""
        lines.append('export MODEL_TOKEN_%s="%s"%s' % (suffix, token, comment))
    if active:
        lines.append('export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_%s"' % active)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n" + extra)
    os.chmod(str(tmp), mode)
    os.replace(str(tmp), str(path))
    return path


# ---------------------------------------------------------------- canaries and the node's files

def canary(name: str) -> str:
    """A token value that must never appear outside the env file and the provider."""
    return "sk-ant-oat01-CANARY%s%s" % (name.upper(), os.urandom(6).hex())


def files_text(root: Path) -> str:
    """Every regular file under `root` (event log, latch, ...) as one string."""
    out: List[str] = []
    for dirpath, _dirs, names in os.walk(str(root)):
        for name in names:
            p = Path(dirpath) / name
            try:
                out.append(p.read_bytes().decode("utf-8", "replace"))
            except OSError:
                pass
    return "\n".join(out)


def assert_no_canary(texts: Iterable[str], tokens: Iterable[str]) -> None:
    joined = "\n".join(texts)
    for token in tokens:
        assert token not in joined, "a token leaked"
        # Any long slice of it is as bad as the whole.
        assert token[-16:] not in joined, "part of a token leaked"


def status_events(home: Path) -> List[Dict[str, Any]]:
    """Every account.status.changed in the node's log, oldest first (bad lines skipped)."""
    out: List[Dict[str, Any]] = []
    events_dir = home / "svc" / "events"
    if not events_dir.is_dir():
        return out
    for path in sorted(events_dir.glob("*.jsonl")):
        for raw in path.read_bytes().split(b"\n"):
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("attributes"), dict) \
                    and event["attributes"].get("event.name") == "account.status.changed":
                out.append(event)
    return out


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


# ---------------------------------------------------------------- a cluster repo

_GIT_ID = {
    "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@localhost",
    "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@localhost",
}


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_GIT_ID)
    env["HOME"] = str(cwd)
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    return subprocess.run(["git", *args], cwd=str(cwd), env=env, capture_output=True, text=True, check=check)


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
