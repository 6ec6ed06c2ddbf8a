"""svc-cluster classify, bundle export, join, roster and sync: mirroring config onto a node.

A bundle carries SHARED Layer-2 values only; join writes them verbatim into
cluster-secrets.json and never touches a PER-NODE value except to fill in a
missing host name. The roster and the encrypted cluster secrets live in the
cluster repo checkout and are handled with the real `git` and decrypt tools.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import stack
from .._files import write_bytes_atomic, write_json_atomic
from .._time import iso_now
from ..config import (
    ANCHOR_KEY, BOT_ORCHESTRATOR_PREFIX, BOT_WORKER_PREFIX, CLASSIFICATION, CLOUD_TOKEN_KEY, HOST_NAME_KEY,
    PER_NODE, PLUGIN_URL_KEY, REPO_URL_KEY, SHARED_LAYER2_KEYS, TEAM_KEY, ConfigError, cluster_json_path,
    cluster_repo_path, flatten, get_dotted, is_shared_layer2_key, layer1_get, load_layer, node_name,
    set_dotted, split_key, write_layer,
)
from ..paths import Paths

BUNDLE_KIND = "svc.cluster.bundle"
BUNDLE_VERSION = 1
MAX_BUNDLE_BYTES = 1024 * 1024
# top object -> shared -> an array value -> scalar. Anything deeper is not a bundle.
MAX_BUNDLE_DEPTH = 3
_BUNDLE_FIELDS = ("kind", "version", "createdAt", "createdBy", "shared")
MAX_DECRYPTED_BYTES = 1024 * 1024
_HOST_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62})$")
_SECRET_PREFIXES = (BOT_ORCHESTRATOR_PREFIX + ".", BOT_WORKER_PREFIX + ".")
_URL_USERINFO_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class BundleError(ValueError):
    """A bundle is not one we accept; nothing was written."""


class ClusterRepoError(RuntimeError):
    """The cluster repo checkout is missing or a git operation on it failed."""


class DecryptError(RuntimeError):
    """An encrypted cluster file could not be decrypted; nothing was written."""


# ---------------------------------------------------------------- display helpers

def is_secret_key(key: str) -> bool:
    return key.startswith(_SECRET_PREFIXES)


def redact_url(text: str) -> str:
    return _URL_USERINFO_RE.sub(r"\1***@", text)


def printable(text: Any) -> str:
    # Values from a file someone handed us must not drive the terminal.
    return _CONTROL_RE.sub("?", str(text))


def display_value(key: str, value: Any) -> Any:
    """What may be shown of a value: never a token, never URL credentials."""
    if is_secret_key(key):
        return "<secret>"
    if isinstance(value, str):
        return printable(redact_url(value))
    if isinstance(value, list):
        return [display_value(key, v) for v in value]
    return value


def _dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False)


# ---------------------------------------------------------------- classify

def classification_rows() -> List[Dict[str, Any]]:
    return [{"name": item.name, "location": item.location, "class": item.klass,
             "onMirror": item.on_mirror, "layer2Key": item.layer2_key} for item in CLASSIFICATION]


def _cmd_classify(ns: argparse.Namespace) -> int:
    rows = classification_rows()
    if ns.json:
        print(_dumps({"items": rows, "sharedLayer2Keys": list(SHARED_LAYER2_KEYS)}))
        return 0
    width = max(len(r["name"]) for r in rows)
    for klass in ("SHARED", PER_NODE):
        print("%s (%s):" % (klass, "copy verbatim on a mirror" if klass == "SHARED" else "regenerate on each host"))
        for r in rows:
            if r["class"] == klass:
                print("  %-*s  %s" % (width, r["name"], r["location"]))
                print("  %-*s  -> %s" % (width, "", r["onMirror"]))
        print()
    print("%d items. A bundle may carry only these Layer-2 keys: %s" % (len(rows), ", ".join(SHARED_LAYER2_KEYS)))
    return 0


# ---------------------------------------------------------------- bundle export

def _shared_values(paths: Paths) -> Dict[str, Any]:
    """SHARED Layer-2 values: cluster-secrets.json first, config.json as the fallback.

    The fallback is per classification item, not per leaf, so a token pair
    (access and refresh) is never assembled from two different files.
    """
    primary = {k: v for k, v in flatten(load_layer(paths.cluster_secrets)).items() if is_shared_layer2_key(k)}
    fallback = {k: v for k, v in flatten(load_layer(paths.config_json)).items() if is_shared_layer2_key(k)}

    def group(key: str) -> str:
        for pattern in SHARED_LAYER2_KEYS:
            if pattern.endswith(".*") and key.startswith(pattern[:-1]):
                return pattern
        return key

    out: Dict[str, Any] = {}
    primary_groups = {group(k) for k, v in primary.items() if v is not None}
    for key, value in primary.items():
        if value is not None and _valid_value(value):
            out[key] = value
    for key, value in fallback.items():
        if group(key) not in primary_groups and value is not None and _valid_value(value):
            out[key] = value
    return dict(sorted(out.items()))


def build_bundle(paths: Paths) -> Dict[str, Any]:
    shared = _shared_values(paths)
    for key in shared:
        # Belt and braces: the classification is the only gate into a bundle.
        if not is_shared_layer2_key(key):
            raise BundleError("refusing to export non-SHARED key %s" % key)
    return {"kind": BUNDLE_KIND, "version": BUNDLE_VERSION, "createdAt": iso_now(),
            "createdBy": node_name(paths), "shared": shared}


def _cmd_bundle_export(ns: argparse.Namespace) -> int:
    paths = Paths()
    if ns.out is None and sys.stdout.isatty():
        print("svc-cluster: a bundle holds tokens; refusing to print it to a terminal. "
              "Use --out FILE (written with mode 0600) or redirect stdout.", file=sys.stderr)
        return 2
    bundle = build_bundle(paths)
    text = json.dumps(bundle, indent=2) + "\n"
    keys = list(bundle["shared"])
    if ns.out is None or ns.out == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        print("svc-cluster: bundle with %d SHARED keys written to stdout" % len(keys), file=sys.stderr)
        return 0
    out = Path(ns.out)
    if out.is_dir():
        print("svc-cluster: --out %s is a directory" % out, file=sys.stderr)
        return 2
    write_bytes_atomic(out, text.encode("utf-8"), 0o600)
    print("svc-cluster: wrote bundle %s (mode 0600) with %d SHARED keys: %s"
          % (out, len(keys), ", ".join(keys) if keys else "(none)"))
    if not keys:
        print("svc-cluster: warning: no SHARED Layer-2 values are set on this node", file=sys.stderr)
    return 0


# ---------------------------------------------------------------- bundle parsing

def _valid_value(value: Any) -> bool:
    if isinstance(value, bool) or isinstance(value, str) or isinstance(value, int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(not isinstance(v, (list, dict)) and v is not None and _valid_value(v) for v in value)
    return False


_TICKET_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*-[0-9]+$")


def _value_problem(key: str, value: Any) -> Optional[str]:
    # The non-secret SHARED keys have a known shape; a bundle must not smuggle in junk.
    if key == ANCHOR_KEY:
        if not isinstance(value, str) or not _TICKET_RE.match(value):
            return "must be a tracker ticket identifier like OPS-12"
    elif key in (REPO_URL_KEY, PLUGIN_URL_KEY):
        if not isinstance(value, str) or not value.strip() or _CONTROL_RE.search(value):
            return "must be a non-empty URL string without control characters"
    return None


def _depth(obj: Any) -> int:
    deepest, stack_ = 0, [(obj, 1)]
    while stack_:
        node, level = stack_.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            if level > MAX_BUNDLE_DEPTH:
                return level
            children = node.values() if isinstance(node, dict) else node
            stack_.extend((child, level + 1) for child in children)
    return deepest


def _no_duplicates(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BundleError("duplicate key %r" % printable(key))
        out[key] = value
    return out


def read_bundle_bytes(source: str) -> bytes:
    if source == "-":
        raw = sys.stdin.buffer.read(MAX_BUNDLE_BYTES + 1)
    else:
        try:
            with open(source, "rb") as fh:
                raw = fh.read(MAX_BUNDLE_BYTES + 1)
        except FileNotFoundError:
            raise BundleError("no such file") from None
        except IsADirectoryError:
            raise BundleError("is a directory") from None
        except OSError as exc:
            raise BundleError("cannot read: %s" % (exc.strerror or exc)) from None
    if len(raw) > MAX_BUNDLE_BYTES:
        raise BundleError("larger than %d bytes; a bundle is a few hundred bytes" % MAX_BUNDLE_BYTES)
    return raw


def parse_bundle(raw: bytes) -> Dict[str, Any]:
    """Validate a bundle completely; return it with `shared` as {dotted key: value}."""
    if not raw.strip():
        raise BundleError("empty file, expected a JSON bundle")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError("not UTF-8 text") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise BundleError("not JSON (line %d column %d: %s)" % (exc.lineno, exc.colno, exc.msg)) from None
    except RecursionError:
        raise BundleError("nested more than %d levels deep" % MAX_BUNDLE_DEPTH) from None
    if not isinstance(data, dict):
        raise BundleError("top level must be a JSON object")
    if _depth(data) > MAX_BUNDLE_DEPTH:
        raise BundleError("nested more than %d levels deep" % MAX_BUNDLE_DEPTH)
    if data.get("kind") != BUNDLE_KIND:
        raise BundleError("kind is %s, expected %r" % (
            printable(json.dumps(data.get("kind")))[:80], BUNDLE_KIND))
    version = data.get("version")
    if isinstance(version, bool) or version != BUNDLE_VERSION or not isinstance(version, int):
        raise BundleError("unsupported version %s; this node reads version %d" % (
            printable(json.dumps(version))[:40], BUNDLE_VERSION))
    extra = [k for k in data if k not in _BUNDLE_FIELDS]
    if extra:
        raise BundleError("unexpected field(s): %s" % ", ".join(printable(k)[:60] for k in sorted(extra)[:5]))
    for field in ("createdAt", "createdBy"):
        if field in data and not isinstance(data[field], str):
            raise BundleError("%s must be a string" % field)
    shared = data.get("shared")
    if not isinstance(shared, dict):
        raise BundleError("shared must be an object of {dotted key: value}")
    for key, value in shared.items():
        try:
            split_key(key)
        except ConfigError:
            raise BundleError("invalid key %r" % printable(key)[:120]) from None
        if not is_shared_layer2_key(key):
            raise BundleError("key %s is not a SHARED Layer-2 key (allowed: %s); a bundle never carries "
                              "PER-NODE values" % (key, ", ".join(SHARED_LAYER2_KEYS)))
        if not _valid_value(value):
            raise BundleError("key %s: value must be a string, number, boolean or array of those" % key)
        problem = _value_problem(key, value)
        if problem:
            raise BundleError("key %s: %s" % (key, problem))
    keys = sorted(shared)
    for a, b in zip(keys, keys[1:]):
        if b.startswith(a + "."):
            raise BundleError("keys %s and %s collide (one is inside the other)" % (a, b))
    return data


# ---------------------------------------------------------------- join

_CHECKS: List[Tuple[str, str, Callable[[Paths], Tuple[bool, str]], str]] = []


def _check(name: str, location: str, todo: str) -> Callable[[Callable[[Paths], Tuple[bool, str]]], Any]:
    def register(func: Callable[[Paths], Tuple[bool, str]]) -> Any:
        _CHECKS.append((name, location, func, todo))
        return func
    return register


def _config_files(paths: Paths) -> List[Path]:
    try:
        return sorted(p for p in paths.config_dir.glob("config-*.json") if p.is_file())
    except OSError:
        return []


@_check("Model-provider account login", "OS keychain or ~/.claude/.credentials.json",
        "log in interactively with the provider's CLI on this host; each node uses its own account")
def _check_login(paths: Paths) -> Tuple[bool, str]:
    return paths.login_credentials.is_file(), str(paths.login_credentials)


@_check("repoRoot", "~/svc/execution-core/registry.json key repoRoot",
        "run the execution-core register command in this host's checkout")
def _check_repo_root(paths: Paths) -> Tuple[bool, str]:
    root = load_layer(paths.registry_json).get("repoRoot")
    return isinstance(root, str) and bool(root.strip()), str(paths.registry_json)


@_check("Telemetry endpoints", "~/.config/svc/config.json, OTel keys",
        "set this host's private-network OTel endpoints in ~/.config/svc/config.json")
def _check_telemetry(paths: Paths) -> Tuple[bool, str]:
    keys = [k for k, v in flatten(load_layer(paths.config_json)).items()
            if v not in (None, "") and ("otel" in k.lower() or "telemetry" in k.lower())]
    return bool(keys), ", ".join(keys[:4]) or str(paths.config_json)


@_check("execution-core.env", "~/svc/execution-core/execution-core.env",
        "write this host's proxy and tuning overrides (or an empty file if none)")
def _check_execution_core_env(paths: Paths) -> Tuple[bool, str]:
    return paths.execution_core_env.is_file(), str(paths.execution_core_env)


@_check("Worktree trust", "~/.claude.json per worktree path",
        "open each worktree with the provider CLI on this host and accept the trust prompt")
def _check_trust(paths: Paths) -> Tuple[bool, str]:
    projects = load_layer(paths.login_profile).get("projects")
    trusted = [p for p, v in projects.items() if isinstance(v, dict) and v.get("hasTrustDialogAccepted")] \
        if isinstance(projects, dict) else []
    return bool(trusted), "%d trusted path(s) in %s" % (len(trusted), paths.login_profile)


@_check("Tracker personal token", "~/.config/svc/config-<key>.json key tracker.apiKey",
        "put your own tracker API key into ~/.config/svc/config-<teamKey>.json (tracker.apiKey)")
def _check_personal_token(paths: Paths) -> Tuple[bool, str]:
    team = layer1_get(paths, TEAM_KEY)
    files = [paths.personal_config(team)] if isinstance(team, str) and team else _config_files(paths)
    for path in files:
        value = get_dotted(load_layer(path), "tracker.apiKey")
        if isinstance(value, str) and value.strip():
            return True, str(path)
    return False, ", ".join(str(p) for p in files) or str(paths.config_dir / "config-<key>.json")


@_check("Webhook secrets", "~/.config/svc/config-<key>.json, webhook keys",
        "generate fresh webhook secrets on this host (or copy them over a secure channel)")
def _check_webhooks(paths: Paths) -> Tuple[bool, str]:
    for path in _config_files(paths):
        keys = [k for k, v in flatten(load_layer(path)).items() if "webhook" in k.lower() and v not in (None, "")]
        if keys:
            return True, str(path)
    return False, str(paths.config_dir / "config-<key>.json")


@_check("SQLite databases", "~/svc/*.db (4 files)",
        "nothing to copy: the services create their host-local databases on first run")
def _check_sqlite(paths: Paths) -> Tuple[bool, str]:
    try:
        found = sorted(p.name for p in paths.svc_dir.glob("*.db"))
    except OSError:
        found = []
    return bool(found), "%d of 4 file(s) in %s" % (len(found), paths.svc_dir)


@_check("Event log", "~/svc/events/YYYY-MM.jsonl",
        "nothing to copy: the monitor starts this node's own log; never share log files")
def _check_event_log(paths: Paths) -> Tuple[bool, str]:
    try:
        found = sorted(p.name for p in paths.events_dir.glob("*.jsonl"))
    except OSError:
        found = []
    return bool(found), "%d file(s) in %s" % (len(found), paths.events_dir)


def per_node_checklist(paths: Paths) -> List[Dict[str, Any]]:
    out = []
    for name, location, func, todo in _CHECKS:
        try:
            present, detail = func(paths)
        except (ConfigError, OSError, ValueError) as exc:
            present, detail = False, "unreadable: %s" % printable(exc)
        out.append({"item": name, "status": "present" if present else "missing", "location": location,
                    "detail": detail, "todo": None if present else todo})
    return out


def _loose_mode(source: str) -> Optional[str]:
    if source == "-":
        return None
    try:
        mode = os.stat(source).st_mode
    except OSError:
        return None
    return "%04o" % (mode & 0o7777) if mode & 0o077 else None


def plan_join(paths: Paths, bundle: Dict[str, Any], host: Optional[str]) -> Dict[str, Any]:
    """Everything join would do, computed before anything is written."""
    secrets = load_layer(paths.cluster_secrets)
    node = load_layer(paths.node_json)
    config = load_layer(paths.config_json)
    trial = json.loads(json.dumps(secrets))
    shared = []
    for key, value in sorted(bundle["shared"].items()):
        marker = object()
        previous = get_dotted(secrets, key, marker)
        if previous is marker:
            action = "add"
        elif previous == value and type(previous) is type(value):
            action = "unchanged"
        else:
            action = "update"
        try:
            set_dotted(trial, key, value)
        except ConfigError as exc:
            raise ConfigError("%s: %s" % (paths.cluster_secrets, exc), str(paths.cluster_secrets)) from None
        shared.append({"key": key, "action": action, "value": display_value(key, value), "_raw": value})

    node_value = get_dotted(node, HOST_NAME_KEY)
    existing = node_value if node_value is not None else get_dotted(config, HOST_NAME_KEY)
    existing = existing.strip() if isinstance(existing, str) and existing.strip() else None
    if host is None:
        host_plan = {"action": "unchanged" if existing else "missing", "value": existing, "existing": existing}
    elif existing is None:
        if node_value is not None:
            # A blank or non-string value in node.json is still "a value"; only fill a real gap.
            host_plan = {"action": "conflict", "value": host, "existing": printable(node_value)}
        else:
            host_plan = {"action": "add", "value": host, "existing": None}
    elif existing == host:
        host_plan = {"action": "unchanged", "value": host, "existing": existing}
    else:
        host_plan = {"action": "conflict", "value": host, "existing": existing}
    if host_plan["action"] == "add":
        set_dotted(json.loads(json.dumps(node)), HOST_NAME_KEY, host)
    return {"shared": shared, "hostName": host_plan}


def _roster_note(paths: Paths, host: Optional[str]) -> Optional[str]:
    if not host:
        return None
    try:
        names = _read_roster_file(cluster_json_path(paths))[1]
    except (ConfigError, ClusterRepoError):
        return "cannot read the roster in %s" % cluster_repo_path(paths)
    if names is None:
        return "no cluster.json at %s yet: clone the cluster repo, then `svc-cluster roster add %s --push`" % (
            cluster_repo_path(paths), host)
    if host.lower() in (n.lower() for n in names):
        return None
    return "%s is not in the roster, so it owns no tickets: run `svc-cluster roster add %s --push`" % (host, host)


def _cmd_join(ns: argparse.Namespace) -> int:
    paths = Paths()
    if ns.host_name is not None and not _HOST_RE.match(ns.host_name):
        print("svc-cluster: --host-name %r: use letters, digits, '.', '_' or '-' (at most 63, starting "
              "with a letter or digit)" % printable(ns.host_name), file=sys.stderr)
        return 2
    try:
        bundle = parse_bundle(read_bundle_bytes(ns.bundle))
    except BundleError as exc:
        print("svc-cluster: join: rejected bundle %s: %s; nothing was written" % (printable(ns.bundle), exc),
              file=sys.stderr)
        return 2
    loose = _loose_mode(ns.bundle)
    plan = plan_join(paths, bundle, ns.host_name)
    checklist = per_node_checklist(paths)
    shared_updates = {item["key"]: item["_raw"] for item in plan["shared"] if item["action"] != "unchanged"}
    host_plan = plan["hostName"]
    if not ns.dry_run:
        if shared_updates:
            write_layer(paths.cluster_secrets, shared_updates)
        if host_plan["action"] == "add":
            write_layer(paths.node_json, {HOST_NAME_KEY: host_plan["value"]}, only_if_absent=True)
    changed = bool(shared_updates) or host_plan["action"] == "add"
    roster_note = _roster_note(paths, host_plan["value"] if host_plan["action"] != "conflict" else host_plan["existing"])
    report = {
        "bundle": {"path": ns.bundle, "createdBy": printable(bundle.get("createdBy", "")),
                   "createdAt": printable(bundle.get("createdAt", ""))},
        "dryRun": bool(ns.dry_run),
        "changed": changed and not ns.dry_run,
        "wouldChange": changed,
        "shared": [{k: v for k, v in item.items() if k != "_raw"} for item in plan["shared"]],
        "sharedFile": str(paths.cluster_secrets),
        "hostName": dict(host_plan, file=str(paths.node_json)),
        "roster": roster_note,
        "checklist": checklist,
    }
    if ns.json:
        print(_dumps(report))
    else:
        _print_join(report)
    if loose:
        print("svc-cluster: warning: %s is readable by group or others (mode %s) and holds tokens; "
              "delete it when you are done" % (printable(ns.bundle), loose), file=sys.stderr)
    # The SHARED part is done, but a kept host name the operator asked to change needs a look.
    return 1 if host_plan["action"] == "conflict" else 0


def _print_join(report: Dict[str, Any]) -> None:
    dry = report["dryRun"]
    b = report["bundle"]
    print("%sjoin: bundle from %s (created %s)" % ("[dry run] " if dry else "", b["createdBy"] or "?",
                                                  b["createdAt"] or "?"))
    print("SHARED values -> %s" % report["sharedFile"])
    if not report["shared"]:
        print("  (the bundle carries no values)")
    for item in report["shared"]:
        action = item["action"] if not dry or item["action"] == "unchanged" else "would " + item["action"]
        print("  %-12s %s = %s" % (action, item["key"], json.dumps(item["value"])))
    h = report["hostName"]
    print("PER-NODE host name (%s) -> %s" % (HOST_NAME_KEY, h["file"]))
    if h["action"] == "add":
        print("  %-12s %s" % ("would add" if dry else "add", h["value"]))
    elif h["action"] == "unchanged":
        print("  %-12s %s" % ("unchanged", h["value"]))
    elif h["action"] == "conflict":
        print("  %-12s kept existing %r; --host-name %r was NOT written (a host name is never overwritten)"
              % ("conflict", h["existing"], h["value"]))
    else:
        print("  %-12s pass --host-name NAME (it must be a unique roster entry)" % "missing")
    if report["roster"]:
        print("  note: %s" % report["roster"])
    print("PER-NODE checklist (never copied from another node):")
    for item in report["checklist"]:
        line = "  %-8s %-30s %s" % (item["status"], item["item"], item["detail"])
        print(line)
        if item["todo"]:
            print("  %-8s %-30s -> %s" % ("", "", item["todo"]))
    if dry:
        print("dry run: nothing was written" + ("" if report["wouldChange"] else "; nothing would change"))
    elif not report["changed"]:
        print("nothing changed: every item is already as the bundle says")


# ---------------------------------------------------------------- git

def _git_timeout() -> float:
    try:
        value = float(os.environ.get("SVC_GIT_TIMEOUT_S", "120"))
    except ValueError:
        return 120.0
    return value if value > 0 else 120.0


def _git(repo: Path, *args: str, check: bool = True, identity: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # Never wait for a password prompt nobody will answer.
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    cmd = ["git", "-C", str(repo)]
    if identity:
        cmd += _identity_options(repo)
    cmd += list(args)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=_git_timeout(),
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ClusterRepoError("git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise ClusterRepoError("git %s in %s timed out after %.0f s" % (args[0], repo, _git_timeout())) from None
    if check and done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        detail = redact_url(printable(" ".join(lines[:3])))[:600]
        raise ClusterRepoError("git %s in %s failed (exit %d): %s" % (args[0], repo, done.returncode, detail))
    return done


def _identity_options(repo: Path) -> List[str]:
    probe = _git(repo, "config", "user.email", check=False)
    if probe.returncode == 0 and probe.stdout.strip():
        return []
    # A fresh node may have no git identity; commit as the tool rather than fail.
    return ["-c", "user.name=svc-cluster", "-c", "user.email=svc-cluster@localhost"]


def _require_checkout(paths: Paths) -> Path:
    repo = cluster_repo_path(paths)
    if not repo.is_dir():
        raise ClusterRepoError("cluster repo checkout not found at %s: clone it there "
                               "(git clone <svc.cluster.repoUrl> %s) or set svc.cluster.repoPath" % (repo, repo))
    top = _git(repo, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != repo.resolve():
        raise ClusterRepoError("%s is not the top of a git checkout" % repo)
    return repo


# ---------------------------------------------------------------- roster

def _read_roster_file(path: Path) -> Tuple[Dict[str, Any], Optional[List[str]]]:
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


def _cmd_roster_list(ns: argparse.Namespace) -> int:
    paths = Paths()
    repo = _require_checkout(paths)
    _, names = _read_roster_file(repo / "cluster.json")
    names = [n.strip() for n in names or []]
    dups = _duplicates(names)
    if ns.json:
        print(_dumps({"repo": str(repo), "roster": names, "duplicates": dups}))
    else:
        for n in names:
            print(printable(n))
        if not names:
            print("svc-cluster: the roster in %s is empty" % (repo / "cluster.json"), file=sys.stderr)
    if dups:
        print("svc-cluster: warning: duplicate roster names: %s" % ", ".join(printable(d) for d in dups),
              file=sys.stderr)
        return 1
    return 0


def _cmd_roster_edit(ns: argparse.Namespace) -> int:
    paths = Paths()
    name = ns.name
    if not _HOST_RE.match(name):
        print("svc-cluster: roster: invalid host name %r: use letters, digits, '.', '_' or '-' "
              "(at most 63, starting with a letter or digit)" % printable(name), file=sys.stderr)
        return 2
    repo = _require_checkout(paths)
    path = repo / "cluster.json"
    rel = "cluster.json"
    dirty = _git(repo, "status", "--porcelain", "--", rel).stdout.strip()
    if dirty:
        raise ClusterRepoError("%s has uncommitted changes; commit or discard them first" % path)
    data, names = _read_roster_file(path)
    current = [n.strip() for n in names or []]
    lowered = [n.lower() for n in current]
    if ns.roster_action == "add":
        if name.lower() in lowered:
            print("svc-cluster: roster: %s is already in the roster (names are unique); nothing changed"
                  % current[lowered.index(name.lower())], file=sys.stderr)
            return 1
        updated = list(names or []) + [name]
        message = "roster: add %s" % name
    else:
        if name.lower() not in lowered:
            print("svc-cluster: roster: %s is not in the roster; nothing changed" % name, file=sys.stderr)
            return 1
        updated = [n for n in names or [] if n.strip().lower() != name.lower()]
        message = "roster: remove %s" % name
    data = dict(data)
    data["roster"] = updated
    existed = path.exists()
    old_bytes = path.read_bytes() if existed else None
    mode = (path.stat().st_mode & 0o7777) if existed else 0o644
    write_json_atomic(path, data, mode)
    try:
        _git(repo, "add", "--", rel)
        _git(repo, "commit", "-q", "-m", message, "--", rel, identity=True)
    except ClusterRepoError:
        # Leave the checkout as we found it.
        if old_bytes is None:
            _git(repo, "rm", "-q", "--cached", "--", rel, check=False)
            path.unlink()
        else:
            write_bytes_atomic(path, old_bytes, mode)
            _git(repo, "reset", "-q", "--", rel, check=False)
        raise
    commit = _git(repo, "rev-parse", "HEAD").stdout.strip()
    pushed = False
    push_error = None
    if ns.push:
        try:
            _git(repo, "push", "-q")
            pushed = True
        except ClusterRepoError as exc:
            push_error = str(exc)
    result = {"action": ns.roster_action, "name": name, "roster": [n.strip() for n in updated],
              "commit": commit, "pushed": pushed, "pushError": push_error, "repo": str(repo)}
    if ns.json:
        print(_dumps(result))
    else:
        print("svc-cluster: roster: %s %s; committed %s%s" % (
            "added" if ns.roster_action == "add" else "removed", name, commit[:12],
            "; pushed" if pushed else ("" if ns.push else " (not pushed; use --push or git push)")))
    if push_error:
        print("svc-cluster: roster: the commit stays local; push failed: %s" % push_error, file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------- sync

BOTS_FILE = "secrets/cluster-bots.json"
CLOUD_FILE = "secrets/cluster-cloud.json"


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
        done = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=_git_timeout())
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
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
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


def _cmd_sync(ns: argparse.Namespace) -> int:
    paths = Paths()
    repo = _require_checkout(paths)
    report: Dict[str, Any] = {"repo": str(repo), "pulled": False, "head": None}
    # Refuse early, before pulling or decrypting, if a file we would write is corrupt.
    load_layer(paths.cluster_secrets)
    load_layer(paths.cluster_cloud)
    if not ns.no_pull:
        try:
            _git(repo, "pull", "-q", "--ff-only")
        except ClusterRepoError as exc:
            raise ClusterRepoError("%s; nothing was written (fix the checkout, or --no-pull to sync it as it is)"
                                   % exc) from None
        report["pulled"] = True
    report["head"] = _git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).stdout.strip() or None
    bots_path, cloud_path = repo / BOTS_FILE, repo / CLOUD_FILE
    bots = decrypt_json(bots_path, BOTS_FILE) if bots_path.is_file() else None
    cloud = decrypt_json(cloud_path, CLOUD_FILE) if cloud_path.is_file() else None

    # Everything decrypted and validated; only now is anything written.
    if bots is None:
        report["bots"] = {"status": "absent", "file": BOTS_FILE}
    else:
        flat = flatten(bots)
        tokens = {k: v for k, v in flat.items()
                  if is_secret_key(k) and _plain_key(k) and v is not None and _valid_value(v)}
        # Names of other entries are decrypted content too: only their number is reported.
        ignored = len([k for k in flat if k not in tokens])
        changes = write_layer(paths.cluster_secrets, tokens) if tokens else {}
        report["bots"] = {"status": "merged" if tokens else "empty", "file": BOTS_FILE,
                          "keys": sorted(tokens), "changed": sorted(changes), "ignoredKeyCount": ignored,
                          "target": str(paths.cluster_secrets)}
    if cloud is None:
        report["cloud"] = {"status": "absent", "file": CLOUD_FILE}
    else:
        current = load_layer(paths.cluster_cloud) if paths.cluster_cloud.exists() else None
        mode_ok = paths.cluster_cloud.exists() and (paths.cluster_cloud.stat().st_mode & 0o7777) == 0o600
        if current == cloud and mode_ok:
            status = "unchanged"
        else:
            write_json_atomic(paths.cluster_cloud, cloud, 0o600)
            status = "written"
        report["cloud"] = {"status": status, "file": CLOUD_FILE, "target": str(paths.cluster_cloud),
                           "token": "present" if flatten(cloud).get(CLOUD_TOKEN_KEY) else "absent"}
    projection = stack.project_cloud_env(paths)
    report["projection"] = projection
    ok = projection.get("ok", False)
    if ns.json:
        print(_dumps(report))
    else:
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
        if ok:
            print("  env:   %s %s; ~/.zshenv guard %s" % (projection["envFile"], projection["envFileAction"],
                                                         projection["guardAction"]))
    if not ok:
        print("svc-cluster: sync: cloud env not projected: %s" % projection.get("error"), file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------- registration

def _guard(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(ns: argparse.Namespace) -> int:
        try:
            return func(ns)
        except (ClusterRepoError, DecryptError) as exc:
            print("svc-cluster: %s: %s" % (ns.command, exc), file=sys.stderr)
            return 1
        except BundleError as exc:
            print("svc-cluster: %s: %s" % (ns.command, exc), file=sys.stderr)
            return 2
        except OSError as exc:
            print("svc-cluster: %s: %s: %s" % (ns.command, exc.filename or "I/O error", exc.strerror or exc),
                  file=sys.stderr)
            return 1
    return run


def add_commands(sub: Any) -> None:
    p = sub.add_parser("classify", help="print the SHARED / PER-NODE classification of every config item",
                       description="Print every cluster config item with its class (SHARED: copy verbatim on a "
                                   "mirror; PER-NODE: regenerate on each host), where it lives, and what to do "
                                   "on a mirror.")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(func=_guard(_cmd_classify))

    p = sub.add_parser("bundle", help="export this node's SHARED Layer-2 values as a bundle",
                       description="Bundles carry SHARED Layer-2 values only (bot tokens, liveness anchor, "
                                   "cluster repo URL, plugin source URL) from cluster-secrets.json, falling back "
                                   "to config.json. PER-NODE values never enter a bundle.")
    bundle_sub = p.add_subparsers(dest="bundle_action", metavar="ACTION")
    e = bundle_sub.add_parser("export", help="write a bundle (it holds tokens: keep it private)",
                              description="Write a bundle of SHARED values. With --out the file is written "
                                          "atomically with mode 0600; without it the bundle goes to stdout, "
                                          "which is refused when stdout is a terminal.")
    e.add_argument("--out", metavar="FILE", help="write the bundle here (mode 0600) instead of stdout")
    e.set_defaults(func=_guard(_cmd_bundle_export))

    def bundle_help(ns: argparse.Namespace) -> int:
        p.print_help(sys.stderr)
        return 2
    p.set_defaults(func=bundle_help)

    p = sub.add_parser("join", help="mirror a bundle onto this node and print the PER-NODE checklist",
                       description="Validate a bundle (kind svc.cluster.bundle, version 1, SHARED keys only, "
                                   "at most 1 MiB), write its values verbatim into ~/.config/svc/cluster-secrets."
                                   "json, set svc.host.name in node.json only if none is set, and list each "
                                   "PER-NODE item as present or missing with what to do. Token values are never "
                                   "printed. A rejected bundle exits 2 and writes nothing.")
    p.add_argument("bundle", metavar="BUNDLE", help="bundle file from `svc-cluster bundle export` (- for stdin)")
    p.add_argument("--host-name", metavar="NAME", help="this node's host name, written only if none exists")
    p.add_argument("--dry-run", action="store_true", help="show the plan; write nothing")
    p.add_argument("--json", action="store_true", help="print the plan/result as JSON")
    p.set_defaults(func=_guard(_cmd_join))

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
    r.set_defaults(func=_guard(_cmd_roster_list))
    for action, text in (("add", "add NAME to the roster and commit"), ("remove", "remove NAME and commit")):
        r = roster_sub.add_parser(action, help=text, description=text[0].upper() + text[1:] +
                                  ". Refuses when cluster.json has uncommitted changes.")
        r.add_argument("name", metavar="NAME", help="host name (its svc.host.name)")
        r.add_argument("--push", action="store_true", help="push the commit to the upstream remote")
        r.add_argument("--json", action="store_true", help="print the result as JSON")
        r.set_defaults(func=_guard(_cmd_roster_edit))

    def roster_help(ns: argparse.Namespace) -> int:
        p.print_help(sys.stderr)
        return 2
    p.set_defaults(func=roster_help)

    p = sub.add_parser("sync", help="pull the cluster repo, decrypt its secrets, project the cloud env",
                       description="git pull --ff-only in the cluster repo; decrypt secrets/cluster-bots.json "
                                   "and secrets/cluster-cloud.json with $SVC_DECRYPT_CMD (default `sops "
                                   "--decrypt`, the file path is appended); merge the bot tokens into "
                                   "cluster-secrets.json; write cluster-cloud.json (0600); then run the "
                                   "cloud-env projection. If anything fails before the writes, no file is "
                                   "touched; decrypted content and the tool's output are never shown.")
    p.add_argument("--no-pull", action="store_true", help="use the checkout as it is (offline)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (no token values)")
    p.set_defaults(func=_guard(_cmd_sync))
