"""Every command on a node whose files are corrupt: a clear message and a
documented exit code, never a traceback.

The node's state files (Layer-2 config, the cluster roster, the latch, the
event log, the monitor's run files, the accounts env file, the cloud env) are
replaced with random or near-JSON bytes, then each command runs. Network
endpoints point at a closed loopback port, so nothing leaves the machine.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.home import clean_env

CLOSED = "http://127.0.0.1:9"

COMMANDS: List[Tuple[str, ...]] = [
    ("svcposture", "cluster", "classify", "--json"),
    ("svcposture", "cluster", "doctor", "--json"),
    ("svcposture", "cluster", "doctor"),
    ("svcposture", "cluster", "status", "--json"),
    ("svcposture", "cluster", "owner", "ABC-1", "--json"),
    ("svcposture", "cluster", "set-anchor", "ABC-2"),
    ("svcposture", "cluster", "roster", "list"),
    ("svcposture", "cluster", "bundle", "export", "--out", "{tmp}/bundle.json"),
    ("svcposture", "cluster", "join", "{tmp}/incoming.json", "--dry-run", "--json"),
    ("svcposture", "cluster", "sync"),
    ("svcposture", "stack", "status"),
    ("svcposture", "stack", "sync-cloud-env"),
    ("svcposture", "monitor", "hud", "--once"),
    ("svcposture.probe", "check", "--json"),
]

# Relative to HOME.
FILES = [
    ".config/svc/node.json", ".config/svc/config.json", ".config/svc/cluster-secrets.json",
    ".config/svc/cluster-cloud.json", ".config/svc/cluster.env", ".config/svc/model-accounts.env",
    "svc/cluster/cluster.json", "svc/account-status-latch.json", "svc/events/2026-11.jsonl",
    "svc/run/monitor.json", "svc/run/monitor.pid", "svc/execution-core/registry.json", ".zshenv",
    ".claude/.credentials.json", "{tmp}/incoming.json",
]

fragments = st.sampled_from([
    b"{", b"}", b"[", b"]", b'"', b":", b",", b"\n", b"null", b"true", b"1e999", b"\xff", b"\x00", b"-1",
    b'{"svc":{"host":{"name":', b'"roster":', b'{"pid":', b'"url":"javascript:x"', b'{"version":1,"accounts":',
    b'{"kind":"svc.cluster.bundle","version":1,"shared":{', b'"svc.cluster.livenessAnchorIssue":', b"99999",
    b'"\\u0000"', b"[[[[[[[[", b"export X=1", b"PASTE_TOKEN_HERE",
    b"9" * 5000, b'"\\ud800"', b'"\\udc80x"', b'"svc.tracker.bot.worker.\\udfff":',
])
garbage = st.one_of(st.binary(max_size=200), st.lists(fragments, max_size=25).map(b"".join))

FUZZ = settings(max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def node_env(home: Path) -> Dict[str, str]:
    env = clean_env(home)
    env.update({"SVC_TRACKER_URL": CLOSED + "/graphql", "SVC_PROVIDER_URL": CLOSED, "SVC_LOKI_URL": CLOSED,
                "SVC_DECRYPT_CMD": "/bin/false", "SVC_PROBE_DEADLINE_S": "5", "GIT_TERMINAL_PROMPT": "0",
                "SVC_STACK_TIMEOUT_S": "5"})
    return env


def plant(home: Path, tmp: Path, files: Dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = Path(rel.format(tmp=tmp)) if rel.startswith("{tmp}") else home / rel
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_bytes(data)
        os.chmod(str(path), 0o600)


def run(command: Tuple[str, ...], home: Path, tmp: Path) -> Tuple[int, str, str]:
    args = [a.format(tmp=tmp) for a in command]
    proc = subprocess.run([sys.executable, "-m"] + args, cwd=str(tmp), env=node_env(home), capture_output=True,
                          timeout=90, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def check(command: Tuple[str, ...], code: int, out: str, err: str) -> None:
    where = "%s -> exit %d\nstdout: %s\nstderr: %s" % (" ".join(command), code, out[-1500:], err[-1500:])
    assert "Traceback" not in err and "Traceback" not in out, where
    assert code in (0, 1, 2, 3), where
    if "--json" in command and code in (0, 1) and out.strip():
        json.loads(out.strip().splitlines()[-1] if command[0] == "svcposture.probe" else out)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[1:3]))
def test_every_command_on_a_fully_corrupt_node(command: Tuple[str, ...], tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    plant(home, tmp_path, {rel: b'{"svc": {"host": [1, 2' if i % 2 else b"\xff\xfe\x00garbage"
                           for i, rel in enumerate(FILES)})
    check(command, *run(command, home, tmp_path))


@FUZZ
@given(command=st.sampled_from(COMMANDS),
       files=st.dictionaries(st.sampled_from(FILES), garbage, min_size=1, max_size=6))
def test_commands_on_random_state_files(command: Tuple[str, ...], files: Dict[str, bytes]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="svcfuzz-"))
    try:
        home = tmp / "home"
        home.mkdir(mode=0o700)
        plant(home, tmp, files)
        check(command, *run(command, home, tmp))
    finally:
        shutil.rmtree(str(tmp), ignore_errors=True)
