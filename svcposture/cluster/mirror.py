"""svc-cluster classify, bundle export and join: mirroring SHARED config onto a node.

A bundle carries SHARED Layer-2 values only; join writes them verbatim into
cluster-secrets.json and never touches a PER-NODE value except to fill in a
missing host name, then prints the PER-NODE checklist (doctor.per_node_checklist).
The roster lives in roster, the cluster sync in sync.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .._files import write_bytes_atomic
from .._text import has_control, is_int, printable
from .._time import iso_now
from ..config import (
    ANCHOR_KEY, CLASSIFICATION, HOST_NAME_KEY, PER_NODE, PLUGIN_URL_KEY, REPO_URL_KEY, SHARED_LAYER2_KEYS,
    ConfigError, cluster_json_path, cluster_repo_path, flatten, get_dotted, is_shared_layer2_key, load_layer,
    node_name, set_dotted, split_key, write_layer,
)
from ..paths import Paths
from ._common import HOST_RE, TICKET_RE, ClusterError, display_value, guarded, print_json, usage_command
from .doctor import per_node_checklist
from .roster import read_roster_file

BUNDLE_KIND = "svc.cluster.bundle"
BUNDLE_VERSION = 1
MAX_BUNDLE_BYTES = 1024 * 1024
# top object -> shared -> an array value -> scalar. Anything deeper is not a bundle.
MAX_BUNDLE_DEPTH = 3
_BUNDLE_FIELDS = ("kind", "version", "createdAt", "createdBy", "shared")


class BundleError(ClusterError, ValueError):
    """A bundle is not one we accept; nothing was written."""

    exit_code = 2


# ---------------------------------------------------------------- classify

def classification_rows() -> List[Dict[str, Any]]:
    return [{"name": item.name, "location": item.location, "class": item.klass,
             "onMirror": item.on_mirror, "layer2Key": item.layer2_key} for item in CLASSIFICATION]


def cmd_classify(ns: argparse.Namespace) -> int:
    rows = classification_rows()
    if ns.json:
        print_json({"items": rows, "sharedLayer2Keys": list(SHARED_LAYER2_KEYS)})
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
        if value is not None and valid_value(value):
            out[key] = value
    for key, value in fallback.items():
        if group(key) not in primary_groups and value is not None and valid_value(value):
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


def cmd_bundle_export(ns: argparse.Namespace) -> int:
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

# JSON's exact integers (IEEE doubles): a bundle value beyond them is no id, epoch or count.
MAX_BUNDLE_INT = 2 ** 53


def _encodable(text: str) -> bool:
    # A lone surrogate ("\ud800") survives json.loads but not UTF-8 encoding, so
    # it would fail only when the value is written, after the checks passed.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def valid_value(value: Any) -> bool:
    """A value a bundle may carry: a UTF-8-encodable string, a finite number (an
    integer within +-2^53), a boolean, or an array of those."""
    if isinstance(value, bool):
        return True
    if isinstance(value, str):
        return _encodable(value)
    if isinstance(value, int):
        return -MAX_BUNDLE_INT <= value <= MAX_BUNDLE_INT
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(not isinstance(v, (list, dict)) and v is not None and valid_value(v) for v in value)
    return False


def _value_problem(key: str, value: Any) -> Optional[str]:
    # The non-secret SHARED keys have a known shape; a bundle must not smuggle in junk.
    if key == ANCHOR_KEY:
        # NB: match, unlike valid_ticket's fullmatch, lets one trailing newline through (`$`).
        if not isinstance(value, str) or not TICKET_RE.match(value):
            return "must be a tracker ticket identifier like OPS-12"
    elif key in (REPO_URL_KEY, PLUGIN_URL_KEY):
        if not isinstance(value, str) or not value.strip() or has_control(value):
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
    except BundleError:
        raise  # a duplicate key, found by the hook
    except ValueError:
        # Python 3.11+ refuses integer literals past its digit limit (4300).
        raise BundleError("holds a number too long to be a value") from None
    if not isinstance(data, dict):
        raise BundleError("top level must be a JSON object")
    if _depth(data) > MAX_BUNDLE_DEPTH:
        raise BundleError("nested more than %d levels deep" % MAX_BUNDLE_DEPTH)
    _check_text(data)
    if data.get("kind") != BUNDLE_KIND:
        raise BundleError("kind is %s, expected %r" % (
            printable(json.dumps(data.get("kind")))[:80], BUNDLE_KIND))
    version = data.get("version")
    if not is_int(version) or version != BUNDLE_VERSION:
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
    _check_shared(shared)
    return data


def _check_text(data: Dict[str, Any]) -> None:
    """Every key and string at every depth encodes as UTF-8 (the depth is already bounded)."""
    stack_: List[Any] = [data]
    while stack_:
        node = stack_.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if not _encodable(key):
                    raise BundleError("a key is not valid Unicode (a lone surrogate)")
                stack_.append(value)
        elif isinstance(node, list):
            stack_.extend(node)
        elif isinstance(node, str) and not _encodable(node):
            raise BundleError("a string is not valid Unicode (a lone surrogate)")


def _check_shared(shared: Dict[str, Any]) -> None:
    """Every key SHARED and well formed, every value of the right shape, no key inside another."""
    for key, value in shared.items():
        try:
            split_key(key)
        except ConfigError:
            raise BundleError("invalid key %r" % printable(key)[:120]) from None
        if not is_shared_layer2_key(key):
            raise BundleError("key %s is not a SHARED Layer-2 key (allowed: %s); a bundle never carries "
                              "PER-NODE values" % (key, ", ".join(SHARED_LAYER2_KEYS)))
        if not valid_value(value):
            raise BundleError("key %s: value must be a string, number, boolean or array of those" % key)
        problem = _value_problem(key, value)
        if problem:
            raise BundleError("key %s: %s" % (key, problem))
    keys = sorted(shared)
    for a, b in zip(keys, keys[1:]):
        if b.startswith(a + "."):
            raise BundleError("keys %s and %s collide (one is inside the other)" % (a, b))


# ---------------------------------------------------------------- join

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
    return {"shared": _plan_shared(paths, secrets, bundle["shared"]), "hostName": _plan_host(node, config, host)}


def _plan_shared(paths: Paths, secrets: Dict[str, Any], values: Dict[str, Any]) -> List[Dict[str, Any]]:
    """add / update / unchanged per SHARED key; refuses a key that cannot go into cluster-secrets.json."""
    trial = json.loads(json.dumps(secrets))
    shared = []
    for key, value in sorted(values.items()):
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
    return shared


def _plan_host(node: Dict[str, Any], config: Dict[str, Any], host: Optional[str]) -> Dict[str, Any]:
    """What happens to the host name: it is written only where none exists."""
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
    return host_plan


def _roster_note(paths: Paths, host: Optional[str]) -> Optional[str]:
    if not host:
        return None
    try:
        names = read_roster_file(cluster_json_path(paths))[1]
    except ConfigError:
        return "cannot read the roster in %s" % cluster_repo_path(paths)
    if names is None:
        return "no cluster.json at %s yet: clone the cluster repo, then `svc-cluster roster add %s --push`" % (
            cluster_repo_path(paths), host)
    if host.lower() in (n.lower() for n in names):
        return None
    return "%s is not in the roster, so it owns no tickets: run `svc-cluster roster add %s --push`" % (host, host)


def cmd_join(ns: argparse.Namespace) -> int:
    paths = Paths()
    if ns.host_name is not None and not HOST_RE.match(ns.host_name):
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
        print_json(report)
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


# ---------------------------------------------------------------- commands

def add_commands(sub: Any) -> None:
    p = sub.add_parser("classify", help="print the SHARED / PER-NODE classification of every config item",
                       description="Print every cluster config item with its class (SHARED: copy verbatim on a "
                                   "mirror; PER-NODE: regenerate on each host), where it lives, and what to do "
                                   "on a mirror.")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(func=guarded(cmd_classify))

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
    e.set_defaults(func=guarded(cmd_bundle_export))
    p.set_defaults(func=usage_command(p))

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
    p.set_defaults(func=guarded(cmd_join))
