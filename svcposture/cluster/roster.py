"""svc-cluster roster: the cluster repo checkout, the git helpers, and roster list/add/remove.

The roster is `cluster.json` `roster[]` in the cluster repo checkout
(svc.cluster.repoPath, default ~/svc/cluster), edited with the real `git`.
The legacy `.svc/hosts.json` is never read.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .._files import write_bytes_atomic, write_json_atomic
from .._text import printable
from ..config import ConfigError, cluster_repo_path, load_layer
from ..paths import Paths
from ..settings import git_timeout_s
from ._common import HOST_RE, ClusterError, guarded, print_json, redact_url, usage_command


ROSTER_FILE = "cluster.json"


class ClusterRepoError(ClusterError, RuntimeError):
    """The cluster repo checkout is missing or a git operation on it failed."""


# ---------------------------------------------------------------- git

def git_timeout() -> float:
    return git_timeout_s(os.environ)


def git(repo: Path, *args: str, check: bool = True, identity: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # Never wait for a password prompt nobody will answer.
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    cmd = ["git", "-C", str(repo)]
    if identity:
        cmd += _identity_options(repo)
    cmd += list(args)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=git_timeout(),
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ClusterRepoError("git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise ClusterRepoError("git %s in %s timed out after %.0f s" % (args[0], repo, git_timeout())) from None
    if check and done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        detail = redact_url(printable(" ".join(lines[:3])))[:600]
        raise ClusterRepoError("git %s in %s failed (exit %d): %s" % (args[0], repo, done.returncode, detail))
    return done


def _identity_options(repo: Path) -> List[str]:
    probe = git(repo, "config", "user.email", check=False)
    if probe.returncode == 0 and probe.stdout.strip():
        return []
    # A fresh node may have no git identity; commit as the tool rather than fail.
    return ["-c", "user.name=svc-cluster", "-c", "user.email=svc-cluster@localhost"]


def require_checkout(paths: Paths) -> Path:
    repo = cluster_repo_path(paths)
    if not repo.is_dir():
        raise ClusterRepoError("cluster repo checkout not found at %s: clone it there "
                               "(git clone <svc.cluster.repoUrl> %s) or set svc.cluster.repoPath" % (repo, repo))
    top = git(repo, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != repo.resolve():
        raise ClusterRepoError("%s is not the top of a git checkout" % repo)
    return repo


# ---------------------------------------------------------------- roster

def read_roster_file(path: Path) -> Tuple[Dict[str, Any], Optional[List[str]]]:
    """(whole cluster.json, roster names) -- names None when the file is missing."""
    if not path.exists():
        return {}, None
    data = load_layer(path)
    names = data.get("roster", [])
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise ConfigError("%s: roster must be an array of non-empty strings" % path, str(path))
    return data, list(names)


def _duplicates(names: List[str]) -> List[str]:
    seen, dups = set(), []
    for n in names:
        key = n.strip().lower()
        if key in seen and n not in dups:
            dups.append(n)
        seen.add(key)
    return dups


def cmd_roster_list(ns: argparse.Namespace) -> int:
    paths = Paths()
    repo = require_checkout(paths)
    _, names = read_roster_file(repo / ROSTER_FILE)
    names = [n.strip() for n in names or []]
    dups = _duplicates(names)
    if ns.json:
        print_json({"repo": str(repo), "roster": names, "duplicates": dups})
    else:
        for n in names:
            print(printable(n))
        if not names:
            print("svc-cluster: the roster in %s is empty" % (repo / ROSTER_FILE), file=sys.stderr)
    if dups:
        print("svc-cluster: warning: duplicate roster names: %s" % ", ".join(printable(d) for d in dups),
              file=sys.stderr)
        return 1
    return 0


def cmd_roster_add(ns: argparse.Namespace) -> int:
    return _edit(ns, add=True)


def cmd_roster_remove(ns: argparse.Namespace) -> int:
    return _edit(ns, add=False)


def _edit(ns: argparse.Namespace, add: bool) -> int:
    name = ns.name
    if not HOST_RE.match(name):
        print("svc-cluster: roster: invalid host name %r: use letters, digits, '.', '_' or '-' "
              "(at most 63, starting with a letter or digit)" % printable(name), file=sys.stderr)
        return 2
    repo = require_checkout(Paths())
    path = repo / ROSTER_FILE
    if git(repo, "status", "--porcelain", "--", ROSTER_FILE).stdout.strip():
        raise ClusterRepoError("%s has uncommitted changes; commit or discard them first" % path)
    data, names = read_roster_file(path)
    current = [n.strip() for n in names or []]
    lowered = [n.lower() for n in current]
    if add:
        if name.lower() in lowered:
            print("svc-cluster: roster: %s is already in the roster (names are unique); nothing changed"
                  % current[lowered.index(name.lower())], file=sys.stderr)
            return 1
        updated = list(names or []) + [name]
    else:
        if name.lower() not in lowered:
            print("svc-cluster: roster: %s is not in the roster; nothing changed" % name, file=sys.stderr)
            return 1
        updated = [n for n in names or [] if n.strip().lower() != name.lower()]
    commit = _commit(repo, dict(data, roster=updated), "roster: %s %s" % ("add" if add else "remove", name))
    pushed, push_error = _push(repo) if ns.push else (False, None)
    result = {"action": ns.roster_action, "name": name, "roster": [n.strip() for n in updated],
              "commit": commit, "pushed": pushed, "pushError": push_error, "repo": str(repo)}
    if ns.json:
        print_json(result)
    else:
        print("svc-cluster: roster: %s %s; committed %s%s" % (
            "added" if add else "removed", name, commit[:12],
            "; pushed" if pushed else ("" if ns.push else " (not pushed; use --push or git push)")))
    if push_error:
        print("svc-cluster: roster: the commit stays local; push failed: %s" % push_error, file=sys.stderr)
        return 1
    return 0


def _commit(repo: Path, data: Dict[str, Any], message: str) -> str:
    """Write cluster.json and commit it; on failure the checkout is left as it was found."""
    path = repo / ROSTER_FILE
    existed = path.exists()
    old_bytes = path.read_bytes() if existed else None
    mode = (path.stat().st_mode & 0o7777) if existed else 0o644
    write_json_atomic(path, data, mode)
    try:
        git(repo, "add", "--", ROSTER_FILE)
        git(repo, "commit", "-q", "-m", message, "--", ROSTER_FILE, identity=True)
    except ClusterRepoError:
        if old_bytes is None:
            git(repo, "rm", "-q", "--cached", "--", ROSTER_FILE, check=False)
            path.unlink()
        else:
            write_bytes_atomic(path, old_bytes, mode)
            git(repo, "reset", "-q", "--", ROSTER_FILE, check=False)
        raise
    return git(repo, "rev-parse", "HEAD").stdout.strip()


def _push(repo: Path) -> Tuple[bool, Optional[str]]:
    """(pushed, error): a failed push keeps the commit local."""
    try:
        git(repo, "push", "-q")
    except ClusterRepoError as exc:
        return False, str(exc)
    return True, None


# ---------------------------------------------------------------- commands

def add_commands(sub: Any) -> None:
    p = sub.add_parser("roster", help="list or edit the cluster roster (cluster.json in the cluster repo)",
                       description="The roster is cluster.json roster[] in the cluster repo checkout "
                                   "(svc.cluster.repoPath, default ~/svc/cluster). add/remove commit the change "
                                   "with git; --push also pushes it. Names are unique (case-insensitive). "
                                   "The legacy .svc/hosts.json is never read.")
    roster_sub = p.add_subparsers(dest="roster_action", metavar="ACTION")
    r = roster_sub.add_parser("list", help="print the roster, one name per line",
                              description="Print the roster read live from cluster.json. Exit 1 if it holds "
                                          "duplicate names.")
    r.add_argument("--json", action="store_true", help="print {repo, roster, duplicates} as JSON")
    r.set_defaults(func=guarded(cmd_roster_list))
    for action, text, handler in (("add", "add NAME to the roster and commit", cmd_roster_add),
                                  ("remove", "remove NAME and commit", cmd_roster_remove)):
        r = roster_sub.add_parser(action, help=text, description=text[0].upper() + text[1:] +
                                  ". Refuses when cluster.json has uncommitted changes.")
        r.add_argument("name", metavar="NAME", help="host name (its svc.host.name)")
        r.add_argument("--push", action="store_true", help="push the commit to the upstream remote")
        r.add_argument("--json", action="store_true", help="print the result as JSON")
        r.set_defaults(func=guarded(handler))
    from .scrape import add_roster_sd
    add_roster_sd(roster_sub)
    p.set_defaults(func=usage_command(p))
