"""Fuzz the probe: the env-file parser, the unified headers, and the whole child.

The child sources a random file as shell. To keep that harmless the child's
PATH is an empty directory (only shell builtins can run) and the fuzzed text
never holds a redirection, so nothing can touch the filesystem.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Dict, List

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.home import clean_env
from tests.support.provider import ANY, ProviderServer
from svcposture.envfile import entries as envfile
from svcposture.claude import accounts as accounts_text
from svcposture.claude import errors
from svcposture.claude import provider as wire

PURE = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
CHILD = settings(max_examples=8, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

CANARY = "sk-canary-" + os.urandom(8).hex()
WORD = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


# ---------------------------------------------------------------- the env-file text parser

line_parts = st.sampled_from([
    "MODEL_TOKEN_", "export ", "ACCT1", "acct_2", "=", "'", '"', "#", " # ", "a@b.io", "x@y", "\\", " ",
    "\t", "PASTE_TOKEN_HERE", "$MODEL_TOKEN_ACCT1", "MODEL_CODE_OAUTH_TOKEN", "\u00e9", "\x00", "@", ".",
    "very.long.name@sub.example.co.uk",
])
env_line = st.one_of(st.lists(line_parts, max_size=12).map("".join), st.text(max_size=60))


@PURE
@given(lines=st.lists(env_line, max_size=12))
def test_parse_entries_never_fails_and_finds_only_real_emails(lines: List[str]) -> None:
    text = "\n".join(lines)
    entries = envfile.parse_entries(text, accounts_text.ENTRY_RE)
    suffixes = [s for s, _ in entries]
    assert len(suffixes) == len(set(suffixes))
    for suffix, email in entries:
        assert re.match(r"^[A-Za-z0-9_]+$", suffix)
        assert ("MODEL_TOKEN_" + suffix) in text
        if email is not None:
            assert "@" in email and email in text and len(email) <= 254


@PURE
@given(rest=st.text(max_size=80))
def test_comment_of_returns_a_suffix_of_its_input(rest: str) -> None:
    comment = envfile.comment_of(rest)
    assert comment is None or rest.endswith(comment)


@PURE
@given(text=st.text(max_size=200), token=st.text(max_size=20), active=st.text(max_size=20))
def test_entries_from_env_keeps_only_usable_tokens(text: str, token: str, active: str) -> None:
    environ = {"MODEL_TOKEN_ACCT1": token, "MODEL_CODE_OAUTH_TOKEN": active}
    entries, unusable = accounts_text.entries_from_env(text + "\nMODEL_TOKEN_ACCT1=x", environ)
    labels = [e["label"] for e in entries] + unusable
    assert len(labels) == len(set(labels))
    for entry in entries:
        assert entry["token"].strip() and entry["token"] != envfile.PLACEHOLDER
    active_label, dupes = accounts_text.resolve_active(entries)
    assert sum(1 for e in entries if e["active"]) == (1 if active_label else 0)


# ---------------------------------------------------------------- header values

header_value = st.one_of(
    st.sampled_from(["0", "0.5", "1.02", "1e3", "-0.1", "NaN", "inf", "1e999", "0x10", " 0.25 ", "", "1_000",
                     "allowed", "allowed_warning", "rejected", "five_hour", "seven_day", "Allowed", "é",
                     "1700000000", "99999999999", "1e11", "17000000000000", "-5", "1.5e9"]),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=30),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10 ** 12, 10 ** 13).map(str),
)
UNIFIED_NAMES = ["status", "representative-claim", "5h-utilization", "5h-reset", "5h-status",
                 "7d-utilization", "7d-reset", "7d-status", "overage-status", "fallback-percentage"]
header_sets = st.dictionaries(st.sampled_from(UNIFIED_NAMES).map(lambda n: wire.UNIFIED + n),
                              header_value, max_size=10)


def _check_view(view: Dict[str, Any]) -> None:
    assert set(view) == {"overallStatus", "representativeClaim", "fiveHour", "sevenDay"}
    for key in ("overallStatus", "representativeClaim"):
        assert view[key] is None or WORD.match(view[key])
    for key in ("fiveHour", "sevenDay"):
        window = view[key]
        if window is None:
            continue
        assert set(window) == {"pct", "resetsAt", "status"}
        pct = window["pct"]
        assert pct is None or (isinstance(pct, float) and pct >= 0 and pct == pct and pct != float("inf"))
        assert window["resetsAt"] is None or ISO.match(window["resetsAt"])
        assert window["status"] is None or WORD.match(window["status"])
    json.dumps(view, allow_nan=False)


@PURE
@given(headers=header_sets, other=st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3))
def test_unified_headers_parse_or_raise_value_error(headers: Dict[str, str], other: Dict[str, str]) -> None:
    merged = dict(other)
    merged.update(headers)
    try:
        view = wire.parse_unified_headers(merged)
    except ValueError:
        return
    if view is None:
        # Unknown unified headers (overage-status, ...) are ignored (docs/posture.md).
        assert not set(headers) & {wire.UNIFIED + n for n in wire._KNOWN_UNIFIED}
        return
    _check_view(view)


# ---------------------------------------------------------------- the whole child

_provider: Dict[str, ProviderServer] = {}
_lock = threading.Lock()


def provider() -> ProviderServer:
    """One provider for every example: raw headers per token, one usage reply for ANY token."""
    with _lock:
        if "p" not in _provider:
            _provider["p"] = ProviderServer().start()
        return _provider["p"]


def run_probe(home: Path, subcommand: str, env_text: bytes, extra_env: Dict[str, str]) -> Dict[str, Any]:
    """`python -m svcposture.probe SUB --json` with PATH emptied; returns the parsed result."""
    env_file = home / "accounts.env"
    env_file.write_bytes(env_text)
    os.chmod(str(env_file), 0o600)
    empty_bin = home / "empty-bin"
    empty_bin.mkdir(exist_ok=True)
    env = clean_env(home)
    env.update({"PATH": str(empty_bin), "SVC_ACCOUNTS_ENV": str(env_file), "SVC_PROBE_DEADLINE_S": "3",
                "SVC_PROBE_TIMEOUT_S": "2"})
    env.update(extra_env)
    proc = subprocess.run([sys.executable, "-m", "svcposture.probe", subcommand, "--json"], cwd=str(home),
                          env=env, capture_output=True, timeout=30)
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    assert proc.returncode in (0, 1), (proc.returncode, out, err)
    assert err == "", err
    assert CANARY not in out
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    result = json.loads(lines[0])
    assert isinstance(result, dict)
    if result.get("error"):
        _check_error(result["error"])
        assert proc.returncode == 1
    return result


def _check_error(err: Dict[str, Any]) -> None:
    assert set(err) == {"kind", "message", "httpStatus"}
    assert err["kind"] in errors.ERROR_KINDS
    assert err["message"] in errors.KNOWN_MESSAGES
    assert err["httpStatus"] is None or isinstance(err["httpStatus"], int)


# Shell-ish noise with no redirection, pipe, background job or command substitution:
# with PATH empty, the worst it can do is run a builtin inside the child's own shell.
SAFE_NOISE = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF,
                                            blacklist_characters="<>|&`;()$\\"), max_size=40)
env_file_line = st.one_of(
    st.tuples(st.sampled_from(["ACCT1", "ACCT2", "X_9", "acct3"]),
              st.sampled_from([CANARY, "'%s'" % CANARY, '"%s"' % CANARY, "", "PASTE_TOKEN_HERE", " "]),
              st.sampled_from(["", "  # a@b.io", " #ops@example.com", "#x", " # ", " # é@é.é"]),
              st.booleans()).map(lambda t: "%sMODEL_TOKEN_%s=%s%s" % ("export " if t[3] else "", t[0], t[1], t[2])),
    st.sampled_from(['export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"', "MODEL_CODE_OAUTH_TOKEN=" + CANARY,
                     "# comment", "", "unset MODEL_TOKEN_ACCT1", "MODEL_TOKEN_=x", "MODEL_TOKEN_ACCT1",
                     "exit 0", "exit 3", "return", "set -e", "false", "if", "fi", "'", '"', "\x00", "\r"]),
    SAFE_NOISE,
)
env_files = st.one_of(
    st.lists(env_file_line, max_size=8).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")),
    st.binary(max_size=120).filter(lambda b: not set(b"<>|&`;()$\\") & set(b)),
)


@CHILD
@given(text=env_files)
def test_check_child_on_random_env_files(text: bytes) -> None:
    home = Path(tempfile.mkdtemp(prefix="svcfuzz-"))
    try:
        result = run_probe(home, "check", text, {})
        if not result.get("error"):
            assert isinstance(result["available"], bool)
            block = result.get("claude")
            if block is not None:  # only a file with a Claude line has Claude's block
                assert set(block) >= {"usable", "unusable", "active", "duplicateActive"}
                assert block["active"] is None or block["active"] in block["usable"]
                assert all(re.match(r"^[a-z0-9_]+$", label) for label in block["usable"] + block["unusable"])
    finally:
        shutil.rmtree(str(home), ignore_errors=True)


@CHILD
@given(text=env_files)
def test_headers_child_on_random_env_files(text: bytes) -> None:
    server = provider()
    server.set_account(CANARY, raw_headers={wire.UNIFIED + "status": "allowed",
                                            wire.UNIFIED + "5h-utilization": "0.5"})
    home = Path(tempfile.mkdtemp(prefix="svcfuzz-"))
    try:
        result = run_probe(home, "headers", text, {"SVC_PROVIDER_URL": server.url})
        if result.get("error"):
            return
        if not result.get("available"):
            assert result == {"available": False}
            return
        labels = [a["label"] for a in result["claude"]["accounts"]]
        assert len(labels) == len(set(labels)) and labels
        for account in result["claude"]["accounts"]:
            if account["error"]:
                _check_error(account["error"])
            else:
                _check_view({k: account[k] for k in ("overallStatus", "representativeClaim", "fiveHour",
                                                     "sevenDay")})
    finally:
        shutil.rmtree(str(home), ignore_errors=True)


@CHILD
@given(headers=header_sets, status=st.sampled_from([200, 200, 429, 500, 403, 301, 204]))
def test_header_probe_on_random_provider_values(headers: Dict[str, str], status: int) -> None:
    """A fuzzed account never spoils the good one beside it."""
    server = provider()
    bad, good = "tok-bad-" + os.urandom(4).hex(), "tok-good-" + os.urandom(4).hex()
    server.set_account(bad, raw_headers=headers, http_status=status)
    server.set_account(good, raw_headers={wire.UNIFIED + "status": "allowed", wire.UNIFIED + "5h-utilization": "0.25",
                                          wire.UNIFIED + "5h-status": "allowed"})
    home = Path(tempfile.mkdtemp(prefix="svcfuzz-"))
    text = ("MODEL_TOKEN_BAD=%s  # bad@x.io\nMODEL_TOKEN_GOOD=%s  # good@x.io\n"
            'MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_BAD"\n' % (bad, good)).encode()
    try:
        result = run_probe(home, "headers", text, {"SVC_PROVIDER_URL": server.url})
        assert result["available"] is True
        accounts = {a["label"]: a for a in result["claude"]["accounts"]}
        assert accounts["good"]["error"] is None and accounts["good"]["fiveHour"]["pct"] == 25.0
        fuzzed = accounts["bad"]
        assert fuzzed["active"] is True
        if fuzzed["error"]:
            _check_error(fuzzed["error"])
            if status in (401, 403):
                assert fuzzed["error"]["kind"] == "auth"
        else:
            _check_view({k: fuzzed[k] for k in ("overallStatus", "representativeClaim", "fiveHour", "sevenDay")})
        assert bad not in json.dumps(result) and good not in json.dumps(result)
    finally:
        server.remove_account(bad)
        server.remove_account(good)
        shutil.rmtree(str(home), ignore_errors=True)


# ---------------------------------------------------------------- the usage probe

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10, 10 ** 6), st.floats(allow_nan=True),
                      st.text(max_size=12), st.sampled_from(["2030-01-01T00:00:00.123456+00:00", "2030-01-01",
                                                             "2030-13-45T99:99:99Z", "2030-01-01T00:00:00Z"]))
json_value = st.recursive(json_leaf, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=8), kids, max_size=3)), max_leaves=12)
window = st.one_of(st.none(), json_value, st.fixed_dictionaries({}, optional={
    "utilization": json_leaf, "resets_at": json_leaf}))
usage_body = st.one_of(json_value, st.fixed_dictionaries({}, optional={
    "five_hour": window, "seven_day": window, "seven_day_opus": window, "seven_day_sonnet": window,
    "extra": json_value}))


@PURE
@given(body=usage_body, subscription=st.one_of(st.none(), st.text(max_size=10)),
       tier=st.one_of(st.none(), st.text(max_size=10)))
def test_usage_values_map_to_contract_keys_or_raise(body: Any, subscription: Any, tier: Any) -> None:
    from svcposture.events import QUOTA_KEYS, ratelimit_sampled
    try:
        values = wire.usage_values(body, subscription, tier)
    except ValueError:
        return
    assert set(values) <= set(QUOTA_KEYS)
    assert all(v is not None for v in values.values())
    for key, value in values.items():
        if key.endswith("_resets_at"):
            assert ISO.match(value), value
    # Whatever the mapping accepts, the event builder accepts and JSON can hold.
    json.dumps(ratelimit_sampled("n1", None, values), allow_nan=False)


credentials_files = st.one_of(
    st.binary(max_size=80),
    json_value.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"claudeAiOauth": st.one_of(json_value, st.fixed_dictionaries({}, optional={
        "accessToken": st.sampled_from([CANARY, "", "PASTE_TOKEN_HERE", " "]) | json_leaf,
        "subscriptionType": json_leaf, "rateLimitTier": json_leaf}))}).map(lambda d: json.dumps(d).encode()),
)


@CHILD
@given(creds=credentials_files, profile=st.one_of(st.binary(max_size=40),
                                                  json_value.map(lambda v: json.dumps(v).encode())),
       body=usage_body, status=st.sampled_from([200, 200, 429, 500, 401]))
def test_usage_child_on_random_credentials_and_replies(creds: bytes, profile: bytes, body: Any,
                                                       status: int) -> None:
    server = provider()
    server.set_usage(ANY, body, http_status=status, retry_after=7 if status == 429 else None)
    home = Path(tempfile.mkdtemp(prefix="svcfuzz-"))
    try:
        (home / ".claude").mkdir()
        (home / ".claude" / ".credentials.json").write_bytes(creds)
        (home / ".claude.json").write_bytes(profile)
        env = clean_env(home)
        env.update({"SVC_PROVIDER_URL": server.url, "SVC_PROBE_DEADLINE_S": "5", "SVC_PROBE_TIMEOUT_S": "3"})
        proc = subprocess.run([sys.executable, "-m", "svcposture.probe", "usage", "--json"], cwd=str(home),
                              env=env, capture_output=True, timeout=30)
        out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
        assert err == "" and proc.returncode in (0, 1), (proc.returncode, out, err)
        assert CANARY not in out
        result = json.loads(out.strip().splitlines()[-1])
        if result.get("ok"):
            assert proc.returncode == 0 and isinstance(result["values"], dict)
        else:
            assert proc.returncode == 1
            _check_error(result["error"])
    finally:
        shutil.rmtree(str(home), ignore_errors=True)
