"""svc-monitor switch against env files and monitors it cannot trust, as a real child.

A value with a command substitution, backquotes or `${...}` with blanks in
it; an export line the shell overrides later or evaluates before the account
lines; a single-quoted reference; a rewrite that would pass the size limit;
an event log that refuses the append after the rename; hostile emails from
whatever answers at `--url`; a lock held by another process; a temporary copy
of the tokens left by a killed switch beside an env file outside ~/.config/svc.
Every file stays valid shell, every refusal is one line, no token is printed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from tests.support.home import canary, monitor_env, set_host_name
from tests.support.hooks import hooked
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.rawserver import RawServer, http_reply
from tests.support.waiting import wait_until

TOK1 = canary("hostile1")
TOK2 = canary("hostile2")
TOK3 = canary("hostile3")
TOKENS = (TOK1, TOK2, TOK3)
CLOSED_URL = "http://127.0.0.1:9"
MAX_ENV_BYTES = 1024 * 1024

ACCOUNTS = ('# accounts\n'
            'export MODEL_TOKEN_ACCT1="%s"  # one@example.com\n'
            'export MODEL_TOKEN_ACCT2="%s"  # two@example.com\n'
            'export MODEL_TOKEN_ACCT3="%s"  # three@example.com\n' % TOKENS)


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".config" / "svc").mkdir(parents=True, mode=0o700)
    set_host_name(home, "hostile-node")
    return home


def env_path(home: Path) -> Path:
    return home / ".config" / "svc" / "model-accounts.env"


def write_env(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    os.chmod(str(path), 0o600)
    return path


def offline(home: Path, **more: str) -> Dict[str, str]:
    return monitor_env(home, CLOSED_URL, SVC_MONITOR_PORT="9", **more)


def switch(env: Dict[str, str], *args: str, timeout: float = 60) -> Tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "switch", *args], env=env,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    assert "Traceback" not in err, err
    for tok in TOKENS:
        assert tok not in out + err and tok[-16:] not in out + err, "a token leaked"
    return proc.returncode, out, err


def switched_events(home: Path) -> List[Dict[str, Any]]:
    out = []
    events = home / "svc" / "events"
    if not events.is_dir():
        return out
    for path in sorted(events.glob("*.jsonl")):
        for raw in path.read_bytes().splitlines():
            event = json.loads(raw)
            if event["attributes"]["event.name"] == "account.switched":
                out.append(event)
    return out


def sourced_active(path: Path) -> Optional[str]:
    """Which account the shell makes active after sourcing `path` (label, or None); no value is printed."""
    script = ('set -a; . "$1" >/dev/null 2>&1; set +a; for n in ACCT1 ACCT2 ACCT3; do '
              'eval "v=\\${MODEL_TOKEN_$n-}"; '
              '[ -n "$v" ] && [ "$v" = "${MODEL_CODE_OAUTH_TOKEN-}" ] && { echo "$n"; exit 0; }; done; echo none')
    done = subprocess.run(["/bin/sh", "-c", script, "sh", str(path)], capture_output=True, timeout=30,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    name = done.stdout.decode().strip()
    return None if name == "none" else name.lower()


def shell_ok(path: Path) -> bool:
    return subprocess.run(["/bin/sh", "-n", str(path)], capture_output=True, timeout=30).returncode == 0


# ---------------------------------------------------------------- values the shell nests

@pytest.mark.parametrize("value", [
    "$(pass show claude/acct1)",
    "`pass show claude/acct1`",
    "${MODEL_TOKEN_ACCT1:-no token here}",
    "$(printf '%s' \"$(printf '%s' \"$MODEL_TOKEN_ACCT1\")\")",
    "\"$(pass show 'claude/acct 1')\"",
    "$( (printf '%s' \"$MODEL_TOKEN_ACCT1\") )",
    "$((1 + 2))",
])
def test_a_nested_export_value_is_replaced_whole_and_the_file_stays_valid_shell(home: Path, value: str) -> None:
    path = write_env(env_path(home), ACCOUNTS + "export MODEL_CODE_OAUTH_TOKEN=%s   # from the store\n"
                     "OTHER=kept\n" % value)
    assert shell_ok(path)
    code, out, err = switch(offline(home), "--to", "acct2", "--json")
    assert code == 0, err
    assert json.loads(out)["switched"] is True
    assert path.read_text() == ACCOUNTS + 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT2"   # from the store\n' \
                                          'OTHER=kept\n'
    assert shell_ok(path) and sourced_active(path) == "acct2"


@pytest.mark.parametrize("value", ["$(pass show claude/acct1", "`pass show", "${MODEL_TOKEN_ACCT1:-x y",
                                   "\"$(pass show x)", "$MODEL_TOKEN_ACCT1\\"])
def test_a_value_it_cannot_parse_is_refused_and_the_file_untouched(home: Path, value: str) -> None:
    text = ACCOUNTS + "export MODEL_CODE_OAUTH_TOKEN=%s\n# end\n" % value
    path = write_env(env_path(home), text)
    code, out, err = switch(offline(home), "--to", "acct2")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert "line 5" in err, err
    assert path.read_text() == text and switched_events(home) == []
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_value_read_short_is_refused_naming_the_line_before_anything_is_written(home: Path) -> None:
    # A `case` pattern's `)` inside $( ... ) ends the word too early for any reader short of the shell
    # itself: what seems to follow the value is more than a comment, so the line is refused as one the
    # rewrite could not own (`sh -n` over the rewritten file, and the child that sources it, stand behind).
    text = ACCOUNTS + "export MODEL_CODE_OAUTH_TOKEN=$(case x in x) printf '%s' \"$MODEL_TOKEN_ACCT1\";; esac)\n"
    path = write_env(env_path(home), text)
    assert shell_ok(path) and sourced_active(path) == "acct1"
    code, out, err = switch(offline(home), "--to", "acct2")
    assert code == 1 and out == "" and err.count("\n") == 1 and "line 5 holds more than the export" in err, err
    assert path.read_text() == text and switched_events(home) == []
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_file_that_is_not_valid_shell_is_refused_naming_the_line(home: Path) -> None:
    text = ACCOUNTS + 'if true; then\n  export OTHER=1\nexport MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n'
    path = write_env(env_path(home), text)
    code, out, err = switch(offline(home), "--to", "acct2")
    assert code == 1 and err.count("\n") == 1 and "not valid shell" in err, err
    assert path.read_text() == text and switched_events(home) == []


# ---------------------------------------------------------------- the text against the shell

def test_a_later_line_that_sets_the_active_token_is_refused(home: Path) -> None:
    text = (ACCOUNTS + 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n'
            '[ -z "$PIN" ] && export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT3"\n')
    path = write_env(env_path(home), text)
    assert sourced_active(path) == "acct3"
    for label in ("acct1", "acct2"):  # today: "already active", and a switch from acct1
        code, out, err = switch(offline(home), "--to", label)
        assert code == 1 and out == "" and err.count("\n") == 1, (label, out, err)
        assert "line 6" in err and "line 5" in err, err
    assert path.read_text() == text and switched_events(home) == []


EXPORT1 = 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"'


@pytest.mark.parametrize("lines, named", [
    # A second assignment on the export line: the rewrite would change the first, the shell keep the second.
    ([EXPORT1 + '; MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"'], 5),
    ([EXPORT1 + ' MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"'], 5),
    # A function, defined above and called below the export line.
    (['pin() { MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"; }', 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT2"',
      'pin'], 5),
    # The export line inside a function the file calls.
    (['use() {', '  ' + EXPORT1, '}', 'use'], 6),
    # Another file sourced, text evaluated, a value read.
    ([EXPORT1, '. "{home}/pin.env"'], 6),
    (["PIN=\"$(printf '%s=$MODEL_TOKEN_ACCT1' MODEL_CODE_OAUTH_''TOKEN)\"", EXPORT1, 'eval "$PIN"'], 7),
    ([EXPORT1, 'read -r MODEL_CODE_OAUTH_TOKEN < "{home}/pin.txt"'], 6),
], ids=["semicolon", "two-assignments", "function-called", "inside-function", "dot", "eval", "read"])
def test_a_file_the_rewrite_cannot_own_is_refused_naming_the_line(home: Path, lines: List[str], named: int) -> None:
    write_env(home / "pin.env", 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n')
    write_env(home / "pin.txt", TOK1 + "\n")
    text = ACCOUNTS + "\n".join(lines).replace("{home}", str(home)) + "\n"
    path = write_env(env_path(home), text)
    assert shell_ok(path) and sourced_active(path) == "acct1"
    # Today, before the fix, each of these switched "successfully" to acct2 while the shell stayed on acct1.
    for args in (("--to", "acct2"), ("--to", "acct2", "--dry-run")):
        code, out, err = switch(offline(home), *args)
        assert code == 1 and out == "" and err.count("\n") == 1, (args, out, err)
        assert "line %d" % named in err, err
    assert path.read_text() == text and switched_events(home) == []
    assert sourced_active(path) == "acct1"


def test_what_the_text_checks_miss_the_sourcing_child_catches(home: Path) -> None:
    # The variable's name held in another variable and exported through it: no line names it as set,
    # yet the shell ends on acct1. Only sourcing the rewritten file (in a token-scoped child) shows it.
    text = ACCOUNTS + EXPORT1 + '\nN=MODEL_CODE_OAUTH_TOKEN\nexport "$N=$MODEL_TOKEN_ACCT1"\n'
    path = write_env(env_path(home), text)
    assert shell_ok(path) and sourced_active(path) == "acct1"
    for args in (("--to", "acct2", "--dry-run"), ("--to", "acct2")):
        code, out, err = switch(offline(home), *args)
        assert code == 1 and out == "" and err.count("\n") == 1, (args, out, err)
        assert "makes acct1 active, not acct2" in err, err
    assert path.read_text() == text and switched_events(home) == []
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    state = json.loads((home / "svc" / "switch-state.json").read_text())
    assert state["providers"]["claude"]["pending"] is None
    # A file the shell reads as written switches, and sourcing it shows the new account.
    write_env(env_path(home), ACCOUNTS + EXPORT1 + "\n")
    code, out, err = switch(offline(home), "--to", "acct3", "--json")
    assert code == 0 and json.loads(out)["switched"] is True, err
    assert sourced_active(env_path(home)) == "acct3"


def test_an_export_line_above_the_account_lines_is_refused(home: Path) -> None:
    text = 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n' + ACCOUNTS
    path = write_env(env_path(home), text)
    assert sourced_active(path) is None
    for label in ("acct1", "acct2"):
        code, out, err = switch(offline(home), "--to", label)
        assert code == 1 and out == "" and err.count("\n") == 1, (label, out, err)
        assert "line 1" in err and "below" in err, err
    assert path.read_text() == text and switched_events(home) == []


def test_a_single_quoted_reference_names_no_account(home: Path) -> None:
    text = ACCOUNTS + "export MODEL_CODE_OAUTH_TOKEN='$MODEL_TOKEN_ACCT1'\n"
    path = write_env(env_path(home), text)
    assert sourced_active(path) is None
    # Not "already active": the shell sets the literal text, so the switch makes acct1 active for real.
    code, out, err = switch(offline(home), "--to", "acct1", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["switched"] is True and result["from"] is None
    assert sourced_active(path) == "acct1"
    assert [e["attributes"]["account.from"] for e in switched_events(home)] == [None]


def test_the_posture_naming_another_active_account_than_the_text_is_refused(home: Path, tmp_path: Path) -> None:
    # A file sourced from the env file pins acct3: the shell (so the monitor) says acct3, the text acct1.
    pin = write_env(tmp_path / "pin.env", 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT3"\n')
    text = ACCOUNTS + 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n. "%s"\n' % pin
    with ProviderServer() as provider:
        for tok in TOKENS:
            provider.set_account(tok, five_hour=(0.10, "allowed"), seven_day=(0.10, "allowed"))
        # Probes and cache on a minute: once the monitor has seen acct3, its posture holds still.
        env = monitor_env(home, provider.url, SVC_PROBE_INTERVAL_S="60", SVC_POSTURE_TTL_S="60",
                          SVC_REFRESH_FLOOR_S="30")
        path = write_env(env_path(home), text)
        mon = start_monitor(env)
        try:
            wait_until(lambda: (mon.get_json("/api/accounts")[1].get("active") or {}).get("label") == "acct3",
                       30, message="the monitor to see acct3 active")
            for label in ("acct1", "acct2"):
                code, out, err = switch(env, "--to", label, "--url", mon.url)
                assert code == 1 and out == "" and err.count("\n") == 1, (label, out, err)
                assert "acct3" in err and "acct1" in err, err
            assert path.read_text() == text and switched_events(home) == []
        finally:
            mon.stop()


def test_a_codex_posture_naming_another_login_than_the_text_is_refused(home: Path) -> None:
    text = ("CODEX_HOME_WORK=/srv/codex/work  # work@example.com\nCODEX_HOME_HOME=/srv/codex/home\n"
            "CODEX_HOME_SPARE=/srv/codex/spare\nexport CODEX_HOME=\"$CODEX_HOME_WORK\"\n")
    path = write_env(env_path(home), text)
    accounts = [{"label": label, "email": None, "active": label == "codex-home"}
                for label in ("codex-work", "codex-home", "codex-spare")]
    body = {"available": True, "node": "hostile-node", "probedAt": int(time.time() * 1000) + 60000,
            "status": "ok", "active": accounts[1], "accounts": accounts}
    with RawServer({"/api/accounts?provider=codex": http_reply(200, body)}) as server:
        for label in ("codex-work", "codex-spare"):
            code, out, err = switch(offline(home), "--provider", "codex", "--to", label, "--url", server.url)
            assert code == 1 and out == "" and err.count("\n") == 1, (label, out, err)
            assert "codex-home" in err and "codex-work" in err, err
    assert path.read_text() == text and switched_events(home) == []


# ---------------------------------------------------------------- the size limit

def test_a_switch_that_would_pass_the_size_limit_is_refused_before_writing(home: Path) -> None:
    head = ACCOUNTS + "# padding\n"
    filler = MAX_ENV_BYTES - len(head.encode()) - 2
    text = head + "#" * filler + "\n"
    assert len(text.encode()) == MAX_ENV_BYTES - 1
    path = write_env(env_path(home), text)
    code, out, err = switch(offline(home), "--to", "acct2")
    assert code == 1 and err.count("\n") == 1 and "1048576" in err.replace(" ", ""), err
    assert path.read_text() == text and switched_events(home) == []
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


# ---------------------------------------------------------------- the event after the rename

def test_an_event_that_cannot_be_appended_is_reported_pending_and_lands_later(home: Path) -> None:
    path = write_env(env_path(home), ACCOUNTS + 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n')
    (home / "svc").mkdir(mode=0o700, exist_ok=True)
    events = home / "svc" / "events"
    events.write_text("a file where the log directory should be")  # every append fails, even as root
    code, out, err = switch(offline(home), "--to", "acct2", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["switched"] is True and result["eventId"] is None and result["eventPending"] is True
    assert err.count("\n") == 1 and "pending" in err, err
    assert sourced_active(path) == "acct2"
    state = json.loads((home / "svc" / "switch-state.json").read_text())
    assert state["providers"]["claude"]["pending"]["to"] == "acct2"
    # While the log still refuses, another switch is refused: the pending event must not be lost.
    code, out, err = switch(offline(home), "--to", "acct3")
    assert code == 1 and "pending" in err and err.count("\n") == 1, err
    assert sourced_active(path) == "acct2"
    # The log is writable again: the next switch (or the monitor's start) records it, once.
    events.unlink()
    code, out, err = switch(offline(home), "--to", "acct3")
    assert code == 0, err
    assert [(e["attributes"]["account.from"], e["attributes"]["account.to"]) for e in switched_events(home)] \
        == [("acct1", "acct2"), ("acct2", "acct3")]
    assert json.loads((home / "svc" / "switch-state.json").read_text())["providers"]["claude"]["pending"] is None


def test_plain_output_warns_that_the_event_is_pending_and_the_monitors_start_records_it(home: Path) -> None:
    write_env(env_path(home), ACCOUNTS + 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n')
    (home / "svc").mkdir(mode=0o700, exist_ok=True)
    (home / "svc" / "events").write_text("not a directory")
    code, out, err = switch(offline(home), "--to", "acct2")
    assert code == 0 and "switched acct1 -> acct2" in out, (out, err)
    assert "warning" in err and "pending" in err and err.count("\n") == 1, err
    # The log takes appends again: the monitor's start records the pending event, once.
    (home / "svc" / "events").unlink()
    mon = start_monitor(offline(home))
    try:
        wait_until(lambda: len(switched_events(home)) == 1, 30, message="the pending event to land")
    finally:
        mon.stop()
    attrs = switched_events(home)[0]["attributes"]
    assert (attrs["account.from"], attrs["account.to"], attrs["switch.reason"]) == ("acct1", "acct2", "manual")
    assert json.loads((home / "svc" / "switch-state.json").read_text())["providers"]["claude"]["pending"] is None


# ---------------------------------------------------------------- the email from --url

HOSTILE_EMAILS = ["<b>two</b>@example.com", "two@example.com\x1b[2J", "\u202etwo@example.com",
                  "two@example.com\nnode.name: evil", "two@example.com<script>", "x" * 300 + "@example.com",
                  "two @example.com", ""]


def _posture(email: Any, active: Optional[str] = None) -> Dict[str, Any]:
    accounts = [{"label": label, "email": email if label == "acct2" else "%s@example.com" % label,
                 "active": label == active} for label in ("acct1", "acct2", "acct3")]
    return {"available": True, "node": "hostile-node", "probedAt": int(time.time() * 1000) + 60000,
            "status": "ok", "active": next((a for a in accounts if a["active"]), None), "accounts": accounts}


@pytest.mark.parametrize("email", HOSTILE_EMAILS + [7, None])
def test_an_email_from_the_url_is_kept_only_when_it_is_one(home: Path, email: Any) -> None:
    write_env(env_path(home), ACCOUNTS + 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n')
    with RawServer({"/api/accounts": http_reply(200, _posture(email, active="acct1"))}) as server:
        code, out, err = switch(offline(home), "--to", "acct2", "--url", server.url)
    assert code == 0, err
    assert switched_events(home)[0]["attributes"]["event.label"] == "acct2"


def test_a_real_email_from_the_url_is_kept(home: Path) -> None:
    write_env(env_path(home), ACCOUNTS + 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n')
    with RawServer({"/api/accounts": http_reply(200, _posture("Two.Person+x@mail.example.com", active="acct1"))}) \
            as server:
        code, out, err = switch(offline(home), "--to", "acct2", "--url", server.url)
    assert code == 0, err
    assert switched_events(home)[0]["attributes"]["event.label"] == "Two.Person+x@mail.example.com"


# ---------------------------------------------------------------- the lock and the temporary copy

def test_a_switch_blocked_on_a_held_lock_gives_up_and_names_the_holder(home: Path) -> None:
    path = write_env(env_path(home), ACCOUNTS + 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n')
    run = home / "svc" / "run"
    run.mkdir(parents=True, mode=0o700)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('held', flush=True)\n"
                               "time.sleep(300)\n", str(run / "switch.lock")],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        code, out, err = switch(offline(home), "--to", "acct2", timeout=90)
    finally:
        holder.kill()
        holder.wait()
    assert code == 1 and err.count("\n") == 1, err
    assert "pid %d" % holder.pid in err and "switch.lock" in err, err
    assert sourced_active(path) == "acct1" and switched_events(home) == []


def test_a_temporary_copy_left_by_a_killed_switch_is_swept_beside_the_env_file(home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    path = write_env(elsewhere / "accounts.env", ACCOUNTS + 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n')
    gate = tmp_path / "gate"
    env = offline(home, SVC_ACCOUNTS_ENV=str(path))

    def temps() -> List[Path]:
        return [p for p in elsewhere.iterdir() if p.name.endswith(".tmp")]

    def killed_mid_write() -> Path:
        proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "switch", "--to", "acct2"],
                                env=hooked(env, switch_gate=gate), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            left = wait_until(temps, 30, message="the switch's temporary file")
        finally:
            proc.kill()
            proc.wait()
        assert TOK1.encode() in left[0].read_bytes()  # a copy of the tokens
        old = time.time() - 2 * 3600
        os.utime(str(left[0]), (old, old))
        return left[0]

    # The next switch sweeps it (and settles the killed switch's intent: nothing was renamed).
    killed_mid_write()
    code, out, err = switch(env, "--to", "acct3")
    assert code == 0, err
    assert temps() == [] and sourced_active(path) == "acct3"
    assert [e["attributes"]["account.to"] for e in switched_events(home)] == ["acct3"]
    # So does the monitor's start.
    left = killed_mid_write()
    mon = start_monitor(env, args=("--no-probe",))
    try:
        wait_until(lambda: not left.exists(), 30, message="the monitor to sweep the temporary copy")
    finally:
        mon.stop()
    assert sourced_active(path) == "acct3"
