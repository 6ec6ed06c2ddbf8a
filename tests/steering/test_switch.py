"""svc-monitor switch (docs/steering.md): the export line rewritten and nothing else, as a real
child, with and without a monitor.

Byte-exactness on a file with comments, trailing spaces and other variables
(Claude's and Codex's export lines), CRLF kept by the rewrite and refused by
the check that sources the result; the file's mode kept; a
symlinked file refused with its target untouched; a change between read and
rename refused (through the switch's test gate, which holds it after the
temporary file is written); unknown and unusable labels; --best from the
monitor's posture; --dry-run; one account.switched per switch, also when a
switch was killed half-way (reconcile); a running monitor showing the new
account without waiting for its next probe; the notify hook receiving the event.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from tests.support.home import canary, monitor_env, set_host_name, write_accounts, write_json
from tests.support.hooks import hooked
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

from svcposture._time import iso_from_ms
from svcposture.envfile.exportline import active_label, rewrite_export

TOK1 = canary("sw1")
TOK2 = canary("sw2")
TOK3 = canary("sw3")
CLOSED_URL = "http://127.0.0.1:9"

# Comments, trailing spaces, a placeholder, other variables, Codex lines and an export line with a
# trailing comment: every byte but the value must survive. Line ends are LF: /bin/sh keeps the CR of a CRLF
# line in the line's last word, so a CRLF file is not one the shell reads as written (see the CRLF test).
MIXED = (
    b"# model accounts for this node\n"
    b"\n"
    b"export MODEL_TOKEN_ACCT1=\"" + TOK1.encode() + b"\"  # one@example.com   \n"
    b"MODEL_TOKEN_ACCT2='" + TOK2.encode() + b"'\t# two@example.com\n"
    b"export MODEL_TOKEN_SPARE=PASTE_TOKEN_HERE  # spare@example.com\n"
    b"OTHER_SETTING=\"keep me\"   \n"
    b"CODEX_HOME_WORK=/srv/codex/work  # work@example.com\n"
    b"CODEX_HOME_HOME=/srv/codex/home\n"
    b"export CODEX_HOME=\"$CODEX_HOME_WORK\"  \n"
    b"  export MODEL_CODE_OAUTH_TOKEN=\"$MODEL_TOKEN_ACCT1\"   # the active one  \n"
    b"# trailing comment without a newline"
)


def switch(env: Dict[str, str], *args: str, timeout: float = 60) -> Tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "switch", *args], env=env,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    assert "Traceback" not in err, err
    for tok in (TOK1, TOK2, TOK3):
        assert tok not in out + err, "a token leaked"
    return proc.returncode, out, err


def switched_events(home: Path) -> List[Dict[str, Any]]:
    out = []
    for path in sorted((home / "svc" / "events").glob("*.jsonl")):
        for raw in path.read_bytes().splitlines():
            event = json.loads(raw)
            if event["attributes"]["event.name"] == "account.switched":
                out.append(event)
    return out


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".config" / "svc").mkdir(parents=True, mode=0o700)
    set_host_name(home, "switch-node")
    return home


def env_file(home: Path, data: bytes = MIXED, mode: int = 0o600) -> Path:
    path = home / ".config" / "svc" / "model-accounts.env"
    path.write_bytes(data)
    os.chmod(str(path), mode)
    return path


def offline_env(home: Path) -> Dict[str, str]:
    return monitor_env(home, CLOSED_URL, SVC_MONITOR_PORT="9")


# ---------------------------------------------------------------- the rewrite

def test_switch_to_rewrites_only_the_claude_export_value(home: Path) -> None:
    path = env_file(home, mode=0o640)
    code, out, err = switch(offline_env(home), "--to", "acct2", "--url", CLOSED_URL, "--json")
    assert code == 0, err
    expected = MIXED.replace(b'"$MODEL_TOKEN_ACCT1"   # the active', b'"$MODEL_TOKEN_ACCT2"   # the active')
    assert path.read_bytes() == expected
    assert os.stat(str(path)).st_mode & 0o777 == 0o640  # the file's own mode kept
    result = json.loads(out)
    assert result["switched"] is True and result["from"] == "acct1" and result["to"] == "acct2"
    assert result["reason"] == "manual" and result["provider"] == "claude"
    events = switched_events(home)
    assert len(events) == 1 and events[0]["id"] == result["eventId"]
    attrs = events[0]["attributes"]
    assert {k: attrs[k] for k in ("account.from", "account.to", "account.provider", "switch.reason", "node.name")} \
        == {"account.from": "acct1", "account.to": "acct2", "account.provider": "claude",
            "switch.reason": "manual", "node.name": "switch-node"}
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    # The monitor named with --url did not answer: the switch says so, and how to start one.
    assert "the monitor at %s did not answer" % CLOSED_URL in err and "start one with `svc-monitor`" in err, err
    # Already active: nothing written, no event.
    before = path.stat().st_mtime_ns
    code, out, _ = switch(offline_env(home), "--to", "acct2", "--url", CLOSED_URL)
    assert code == 0 and "already" in out and path.stat().st_mtime_ns == before and len(switched_events(home)) == 1


def test_switch_codex_rewrites_only_the_codex_export_value(home: Path) -> None:
    path = env_file(home)
    code, out, err = switch(offline_env(home), "--provider", "codex", "--to", "codex-home", "--json")
    assert code == 0, err
    assert path.read_bytes() == MIXED.replace(b'"$CODEX_HOME_WORK"', b'"$CODEX_HOME_HOME"')
    attrs = switched_events(home)[0]["attributes"]
    assert (attrs["account.from"], attrs["account.to"], attrs["account.provider"]) == ("codex-work", "codex-home",
                                                                                      "codex")


def test_a_file_without_an_export_line_gets_one_appended(home: Path) -> None:
    data = b"MODEL_TOKEN_A=x\nMODEL_TOKEN_B=y\nCODEX_HOME_W=/w"
    path = env_file(home, data)
    assert switch(offline_env(home), "--to", "b")[0] == 0
    assert path.read_bytes() == data + b'\nexport MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_B"\n'
    assert switch(offline_env(home), "--provider", "codex", "--to", "codex-w")[0] == 0
    assert path.read_bytes().endswith(b'"$MODEL_TOKEN_B"\nexport CODEX_HOME="$CODEX_HOME_W"\n')
    assert [e["attributes"]["account.from"] for e in switched_events(home)] == [None, None]


def test_a_crlf_file_is_refused_since_the_shell_reads_it_otherwise(home: Path) -> None:
    # The rewrite itself keeps CRLF (the pure test below); sourced, the file keeps each CR in the line's
    # last word, so the shell would end with no account active whatever the switch wrote.
    data = MIXED.replace(b"\n", b"\r\n")
    path = env_file(home, data)
    code, out, err = switch(offline_env(home), "--to", "acct2")
    assert code == 1 and out == "" and err.count("\n") == 1 and "CRLF" in err, err
    assert path.read_bytes() == data and switched_events(home) == []


def test_rewrite_is_pure_and_reads_every_spelling_of_the_reference() -> None:
    for value in (b'"$MODEL_TOKEN_X"', b"$MODEL_TOKEN_X", b"${MODEL_TOKEN_X}", b'"${MODEL_TOKEN_X}"'):
        data = b"MODEL_TOKEN_X=1\nexport MODEL_CODE_OAUTH_TOKEN=" + value + b" # c\n"
        assert active_label(data, "claude") == "x"
        assert rewrite_export(data, "claude", "X") == b'MODEL_TOKEN_X=1\nexport MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_X" # c\n'
    assert active_label(b"export MODEL_CODE_OAUTH_TOKEN=sk-literal\n", "claude") is None
    assert active_label(b"export MODEL_CODE_OAUTH_TOKEN=${MODEL_TOKEN_X\n", "claude") is None
    # The last assignment is the one the shell keeps, so it is the one rewritten.
    two = b"export MODEL_CODE_OAUTH_TOKEN=$MODEL_TOKEN_A\nexport MODEL_CODE_OAUTH_TOKEN=$MODEL_TOKEN_B\n"
    assert active_label(two, "claude") == "b"
    assert rewrite_export(two, "claude", "C").startswith(b"export MODEL_CODE_OAUTH_TOKEN=$MODEL_TOKEN_A\n")
    # A CRLF file keeps its line ends, the CR after the value included.
    crlf = b"MODEL_TOKEN_X=1\r\n  export MODEL_CODE_OAUTH_TOKEN=$MODEL_TOKEN_A  # c\r\n# end\r\n"
    assert rewrite_export(crlf, "claude", "X") == crlf.replace(b"$MODEL_TOKEN_A", b'"$MODEL_TOKEN_X"')
    assert rewrite_export(b"MODEL_TOKEN_X=1\r\n", "claude", "X") \
        == b'MODEL_TOKEN_X=1\r\nexport MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_X"\r\n'


# ---------------------------------------------------------------- refusals

def test_unknown_and_unusable_labels_leave_the_file_untouched(home: Path) -> None:
    path = env_file(home)
    for label in ("acct9", "spare", "ACCT2; rm -rf /", "codex-work"):
        code, out, err = switch(offline_env(home), "--to", label)
        assert code == 1 and out == "" and err.count("\n") == 1, (label, err)
    assert path.read_bytes() == MIXED and switched_events(home) == []
    # A label the file does not have: the ones it has are listed, each vendor's for its own --provider.
    code, _, err = switch(offline_env(home), "--to", "acct9")
    assert err.strip().endswith("acct9 is not an account in %s; the Claude accounts there: acct1, acct2, "
                                "spare (no value yet)" % path), err
    code, _, err = switch(offline_env(home), "--provider", "codex", "--to", "codex-play")
    assert code == 1 and err.strip().endswith("the Codex accounts there: codex-work, codex-home"), err


def test_a_symlinked_env_file_is_refused_and_its_target_untouched(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.env"
    target.write_bytes(MIXED)
    link = home / ".config" / "svc" / "model-accounts.env"
    link.symlink_to(target)
    code, _, err = switch(offline_env(home), "--to", "acct2")
    assert code == 1 and "symbolic link" in err
    assert target.read_bytes() == MIXED and link.is_symlink() and switched_events(home) == []


def test_a_change_between_read_and_rename_is_refused(home: Path, tmp_path: Path) -> None:
    path = env_file(home)
    gate = tmp_path / "gate"
    env = hooked(offline_env(home), switch_gate=gate)
    proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "switch", "--to", "acct2"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The switch has written its temporary file and waits at the gate.
        wait_until(lambda: [p for p in path.parent.iterdir() if p.name.endswith(".tmp")], 30,
                   message="the switch's temporary file")
        edited = MIXED + b"\n# an editor saved this meanwhile\n"
        with open(str(path), "r+b") as fh:  # in place: same inode, new size and bytes
            fh.write(edited)
        gate.touch()
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1 and b"changed" in err, err
    assert path.read_bytes() == edited and switched_events(home) == []
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    state = json.loads((home / "svc" / "switch-state.json").read_text())
    assert state["providers"]["claude"]["pending"] is None


def test_oversized_and_non_regular_files_are_refused(home: Path) -> None:
    env_file(home, MIXED + b"#" * (1024 * 1024))
    assert switch(offline_env(home), "--to", "acct2")[0] == 1
    path = home / ".config" / "svc" / "model-accounts.env"
    path.unlink()
    path.mkdir()
    assert switch(offline_env(home), "--to", "acct2")[0] == 1
    path.rmdir()
    assert switch(offline_env(home), "--to", "acct2")[0] == 1  # missing


def test_bad_usage_exits_2(home: Path) -> None:
    env_file(home)
    for args in ((), ("--to", "acct2", "--best"), ("--provider", "x", "--best"), ("--to",), ("--nope",)):
        assert switch(offline_env(home), *args)[0] == 2, args
    write_json(home / ".config" / "svc" / "cluster-secrets.json", {"svc": {"posture": {"reservePct": 90}}})
    assert switch(offline_env(home), "--to", "acct2")[0] == 2


# ---------------------------------------------------------------- exactly one event per switch

def _pending(home: Path, **pending: Any) -> None:
    entry = {"lastAutoMs": None, "avoid": {}, "pending": dict(pending, atMs=int(time.time() * 1000) - 5)}
    write_json(home / "svc" / "switch-state.json", {"version": 1, "providers": {"claude": entry}})


def test_a_switch_killed_after_its_rename_is_recorded_once(home: Path) -> None:
    # As a kill -9 between the rename and the append leaves it: the file switched, no event yet.
    env_file(home, MIXED.replace(b'"$MODEL_TOKEN_ACCT1"   #', b'"$MODEL_TOKEN_ACCT2"   #'))
    _pending(home, **{"from": "acct1", "to": "acct2", "reason": "manual", "email": None})
    code, out, _ = switch(offline_env(home), "--reconcile", "--json")
    assert code == 0 and json.loads(out) == {"reconciled": 1}
    assert [(e["attributes"]["account.from"], e["attributes"]["account.to"]) for e in switched_events(home)] \
        == [("acct1", "acct2")]
    assert json.loads(switch(offline_env(home), "--reconcile", "--json")[1]) == {"reconciled": 0}
    # Killed after the append but before the intent was cleared: found in the log, not appended again.
    _pending(home, **{"from": "acct1", "to": "acct2", "reason": "manual", "email": None})
    os.utime(str(home / "svc" / "switch-state.json"))
    events = switched_events(home)
    event = events[0]
    # Stamped just after the intent, read back from the state file: a second read off the clock
    # would land before the intent if the clock stepped back in between.
    at_ms = json.loads((home / "svc" / "switch-state.json").read_text())["providers"]["claude"]["pending"]["atMs"]
    event["ts"] = iso_from_ms(at_ms + 1)
    with open(str(sorted((home / "svc" / "events").glob("*.jsonl"))[-1]), "a") as fh:
        fh.write(json.dumps(dict(event, id="f" * 16)) + "\n")
    assert json.loads(switch(offline_env(home), "--reconcile", "--json")[1]) == {"reconciled": 0}
    assert len(switched_events(home)) == 2


def test_a_switch_killed_before_its_rename_records_nothing(home: Path) -> None:
    path = env_file(home)
    _pending(home, **{"from": "acct1", "to": "acct2", "reason": "manual", "email": None})
    # The next switch finishes the old intent first (here: drops it), then makes its own.
    code, out, _ = switch(offline_env(home), "--to", "acct2", "--json")
    assert code == 0 and json.loads(out)["switched"] is True
    assert len(switched_events(home)) == 1 and active_label(path.read_bytes(), "claude") == "acct2"


def test_dry_run_writes_nothing(home: Path) -> None:
    path = env_file(home)
    code, out, _ = switch(offline_env(home), "--to", "acct2", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["dryRun"] is True and json.loads(out)["switched"] is False
    assert path.read_bytes() == MIXED and switched_events(home) == []
    assert not (home / "svc" / "switch-state.json").exists()


# ---------------------------------------------------------------- with a monitor

@pytest.fixture()
def node(home: Path, tmp_path: Path) -> Iterator[Dict[str, Any]]:
    # Probes and cache on a minute: only the file watcher can make the monitor see a switch soon.
    slow = {"SVC_PROBE_INTERVAL_S": "60", "SVC_POSTURE_TTL_S": "60", "SVC_REFRESH_FLOOR_S": "30",
            "SVC_ALERT_CMD": "cat >> %s" % (tmp_path / "hook.jsonl")}
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.60, "allowed"), seven_day=(0.30, "allowed"))
        provider.set_account(TOK2, five_hour=(0.20, "allowed"), seven_day=(0.10, "allowed"))
        provider.set_account(TOK3, five_hour=(0.10, "allowed"), seven_day=(0.85, "allowed_warning"))
        env = monitor_env(home, provider.url, accounts=[("ACCT1", TOK1, "one@example.com"),
                                                        ("ACCT2", TOK2, "two@example.com"),
                                                        ("ACCT3", TOK3, "three@example.com")],
                          active="ACCT1", **slow)
        mon = start_monitor(env)
        try:
            wait_until(lambda: mon.get_json("/api/accounts")[1].get("active"), message="the first probe")
            yield {"env": dict(env, SVC_MONITOR_PORT=str(mon.port)), "mon": mon, "provider": provider,
                   "hook": tmp_path / "hook.jsonl", "url": mon.url}
        finally:
            mon.stop()


def _active(node: Dict[str, Any]) -> Optional[str]:
    body = node["mon"].get_json("/api/accounts")[1]
    return (body.get("active") or {}).get("label")


def test_best_switches_to_the_most_headroom_and_the_monitor_shows_it(node: Dict[str, Any], home: Path) -> None:
    calls = node["provider"].message_calls()
    code, out, err = switch(node["env"], "--best", "--url", node["url"], "--json")
    assert code == 0, err
    result = json.loads(out)
    # acct2 peaks at 20 %, acct3 at 85 %, acct1 (active) at 60 %.
    assert (result["from"], result["to"], result["reason"]) == ("acct1", "acct2", "best")
    # The monitor re-probes on the file's change, well before its next periodic probe.
    wait_until(lambda: _active(node) == "acct2", 20, message="the monitor to show acct2")
    assert node["provider"].message_calls() > calls
    event = switched_events(home)[-1]
    assert event["attributes"]["event.label"] == "two@example.com"
    # The notify hook receives account.switched.
    hooked = wait_until(lambda: node["hook"].exists() and [json.loads(l) for l in node["hook"].read_text().splitlines()
                                                            if "account.switched" in l], 20, message="the hook")
    assert hooked[0]["id"] == event["id"]
    # Under a 50 % reserve only acct2 (20 %) has headroom, and it is already active.
    write_json(home / ".config" / "svc" / "cluster-secrets.json", {"svc": {"posture": {"reservePct": 50}}})
    code, out, err = switch(node["env"], "--best", "--url", node["url"])
    assert code == 0 and "already" in out


def test_best_with_no_headroom_exits_1_and_the_file_is_untouched(node: Dict[str, Any], home: Path) -> None:
    write_json(home / ".config" / "svc" / "cluster-secrets.json", {"svc": {"posture": {"reservePct": 45}}})
    path = home / ".config" / "svc" / "model-accounts.env"
    before = path.read_bytes()
    # Under a 45 % reserve nothing may pass 55 %: acct1 (60), acct3 (85) have none; acct2 (20) has.
    node["provider"].set_account(TOK2, five_hour=(0.70, "allowed"), seven_day=(0.10, "allowed"))
    os.utime(str(path))  # any change of the file makes the monitor probe again
    wait_until(lambda: [a for a in node["mon"].get_json("/api/accounts")[1]["accounts"]
                        if a["label"] == "acct2" and a["fiveHour"]["pct"] == 70.0], message="the new posture")
    code, out, err = switch(node["env"], "--best", "--url", node["url"])
    assert code == 1 and "headroom" in err and path.read_bytes() == before and switched_events(home) == []


def test_best_without_a_monitor_is_unavailable(home: Path) -> None:
    path = env_file(home)
    code, _, err = switch(offline_env(home), "--best", "--url", CLOSED_URL)
    assert code == 69 and "--to" in err and path.read_bytes() == MIXED
    assert "did not answer" in err and "start one with `svc-monitor`" in err, err


def test_a_monitor_that_watches_another_accounts_file_is_refused(node: Dict[str, Any], tmp_path: Path) -> None:
    # Another node's file, under the same labels: the monitor at --url (this test's node) has other
    # accounts, emails included, so its posture must not decide or describe a switch of this file.
    other = tmp_path / "other"
    (other / ".config" / "svc").mkdir(parents=True, mode=0o700)
    set_host_name(other, "other-node")
    path = env_file(other, b"MODEL_TOKEN_ACCT1=a  # mine@example.com\nMODEL_TOKEN_ACCT2=b  # yours@example.com\n"
                           b'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n')
    before = path.read_bytes()
    env = dict(offline_env(other), SVC_MONITOR_PORT=str(node["mon"].port))
    for args in (("--to", "acct2", "--url", node["url"]), ("--best", "--url", node["url"]), ("--to", "acct2")):
        code, out, err = switch(env, *args)
        assert code == 2 and "watches another accounts file than %s" % path in err, (args, err)
    assert path.read_bytes() == before and switched_events(other) == []
    # The monitor says which file it watches, as a fingerprint: the same for its own file, whatever
    # the switch rewrites into place, and nothing of the path in it.
    health = node["mon"].get_json("/healthz")[1]
    assert len(health["accountsFile"]) == 16 and int(health["accountsFile"], 16) >= 0
    code, out, err = switch(node["env"], "--to", "acct3", "--url", node["url"], "--json")
    assert code == 0 and json.loads(out)["to"] == "acct3", err
    assert node["mon"].get_json("/healthz")[1]["accountsFile"] == health["accountsFile"]


def test_help_explains_itself(home: Path) -> None:
    code, out, _ = switch(offline_env(home), "--help")
    assert code == 0 and "--best" in out and "export MODEL_CODE_OAUTH_TOKEN" in out and "account.switched" in out


@pytest.mark.parametrize("state", [b"", b"{", b"[]", b'{"version": 2, "providers": {}}',
                                   b'{"version": 1, "providers": {"claude": {"avoid": [], "pending": 7}}}',
                                   b'{"version": 1, "providers": "x"}', b"\xff\xfe" * 1000])
def test_a_corrupt_state_file_is_moved_aside_and_the_switch_still_made(home: Path, state: bytes) -> None:
    path = env_file(home)
    (home / "svc").mkdir(mode=0o700, exist_ok=True)
    (home / "svc" / "switch-state.json").write_bytes(state)
    code, out, err = switch(offline_env(home), "--to", "acct2", "--json")
    assert code == 0, err
    assert active_label(path.read_bytes(), "claude") == "acct2" and len(switched_events(home)) == 1
    data = json.loads((home / "svc" / "switch-state.json").read_text())
    assert data["version"] == 1 and data["providers"]["claude"]["pending"] is None
