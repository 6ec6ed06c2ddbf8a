"""First-run mistakes, made as a new operator makes them, through the real commands:
each error names its cause (the file, the line, the key) and what to do."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import assert_clean, cli
from tests.support.home import canary, clean_env, write_json
from tests.support.monitor import start_monitor, Monitor
from tests.support.waiting import wait_until

TOKEN = canary("firstrun")


def _accounts(home: Path) -> Path:
    return home / ".config" / "svc" / "model-accounts.env"


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


# ---------------------------------------------------------------- HOME

@pytest.mark.parametrize("command", [("monitor", "init"), ("monitor",), ("cluster", "doctor"),
                                     ("monitor", "statusline"), ("stack", "status")])
@pytest.mark.parametrize("kind", ["missing", "a-file"])
def test_a_home_that_is_not_an_existing_directory_is_refused(tmp_path, command, kind):
    home = tmp_path / "no-such-home"
    if kind == "a-file":
        home.write_text("")
    env = clean_env(home)
    done = cli(env, *command, "--port", "0") if command == ("monitor",) else cli(env, *command)
    assert_clean(done)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "HOME is %r, which %s" % (str(home), "does not exist" if kind == "missing" else "is not a directory") \
        in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1
    assert home.exists() is (kind == "a-file") and not (tmp_path / "svc").exists()


def test_help_needs_no_home(tmp_path):
    done = cli(clean_env(tmp_path / "no-such-home"), "cluster", "doctor", "--help")
    assert done.returncode == 0 and "usage:" in done.stdout


# ---------------------------------------------------------------- the accounts env file

def test_placeholders_still_there_are_named_with_their_lines(tmp_path):
    home = _home(tmp_path)
    env = clean_env(home)
    assert cli(env, "monitor", "init", "--host-name", "n1").returncode == 0
    path = _accounts(home)
    lines = path.read_text().splitlines()
    # The other vendors' commented examples hold the placeholder too; only live lines are entries.
    expected = [n for n, line in enumerate(lines, start=1)
                if "=PASTE_TOKEN_HERE" in line and not line.lstrip().startswith("#")]
    assert expected == [7, 8]
    where = "line 7 (acct1), line 8 (acct2)"

    check = subprocess.run([sys.executable, "-m", "svcposture.probe", "check"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert "%s: the placeholder PASTE_TOKEN_HERE is still there on %s" % (path, where) in check.stdout
    report = json.loads(subprocess.run([sys.executable, "-m", "svcposture.probe", "check", "--json"], env=env,
                                       capture_output=True, text=True, timeout=60).stdout)
    assert report["claude"]["placeholders"] == [{"label": "acct1", "line": 7}, {"label": "acct2", "line": 8}]

    doctor = cli(env, "cluster", "doctor", "--json")
    accounts = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "accounts-env")
    assert where in accounts["detail"] and accounts["status"] == "INFO"

    mon = start_monitor(dict(env, SVC_PROVIDER_URL="http://127.0.0.1:9", SVC_QUOTA_SAMPLER="0"))
    try:
        wait_until(lambda: where in mon.stderr_text(), timeout=30, message="the start-up note")
    finally:
        mon.stop()


def _broken_accounts(home: Path) -> Path:
    path = _accounts(home)
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_text('# accounts\nexport MODEL_TOKEN_ACCT1="%s"  # a@x.io\nMODEL_TOKEN_ACCT2=%s(oops  # b@x.io\n'
                    'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n' % (TOKEN, TOKEN))
    path.chmod(0o600)
    return path


def test_a_shell_syntax_error_names_the_file_and_line_and_never_the_token(tmp_path):
    home = _home(tmp_path)
    env = dict(clean_env(home), SVC_PROVIDER_URL="http://127.0.0.1:9", SVC_QUOTA_SAMPLER="0")
    path = _broken_accounts(home)
    at = "%s:3: the shell stopped at a syntax error on this line" % path

    check = subprocess.run([sys.executable, "-m", "svcposture.probe", "check"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 1 and at in check.stdout and "error (config)" in check.stdout, check.stdout
    assert "internal" not in check.stdout
    headers = subprocess.run([sys.executable, "-m", "svcposture.probe", "headers", "--json"], env=env,
                             capture_output=True, text=True, timeout=60)
    body = json.loads(headers.stdout)
    assert body["line"] == 3 and body["error"]["kind"] == "config"
    doctor = cli(env, "cluster", "doctor")
    assert at in doctor.stdout
    for done in (check, headers, doctor):
        assert TOKEN not in done.stdout + done.stderr and "oops" not in done.stdout + done.stderr

    mon = start_monitor(env)
    try:
        wait_until(lambda: at in mon.stderr_text(), timeout=30, message="the start-up note")
        status, posture = mon.get_json("/api/accounts")
        assert posture["status"] == "error" and posture["error"]["kind"] == "config", posture
    finally:
        mon.stop()
    assert TOKEN not in mon.stderr_text() + mon.stdout_text()


def test_bashs_message_quotes_the_line_but_only_its_number_is_kept(tmp_path):
    """bash (when it is /bin/sh) quotes the offending line, token and all."""
    bash = Path("/bin/bash")
    if not bash.exists():
        pytest.skip("no bash")
    from svcposture.probe.runner import shell_syntax_line

    path = _broken_accounts(_home(tmp_path))
    with open(str(path), "rb") as fh:
        done = subprocess.run([str(bash), "-c", "set -a; . /dev/fd/%d" % fh.fileno()], pass_fds=(fh.fileno(),),
                              capture_output=True, timeout=20)
        fd = fh.fileno()
    assert done.returncode != 0 and TOKEN.encode() in done.stderr  # the shell's own message holds the token
    assert shell_syntax_line(done.stderr, fd) == 3
    assert shell_syntax_line(b"sh: 7: /dev/fd/%d: Syntax error: Unterminated quoted string\n" % fd, fd) == 7
    assert shell_syntax_line(b"/dev/fd/%d: line 2: foo: command not found\n" % fd, fd) is None


# ---------------------------------------------------------------- node.json

def test_an_unknown_node_json_key_is_warned_with_the_closest_known_one(tmp_path):
    home = _home(tmp_path)
    node_json = write_json(home / ".config" / "svc" / "node.json", {"svc": {"hots": {"name": "n1"}, "zzz": 1}})
    env = clean_env(home)
    mon = start_monitor(env, args=("--no-probe",))
    try:
        note = "%s: unknown key svc.hots.name is ignored (did you mean svc.host.name?)" % node_json
        other = "unknown key svc.zzz is ignored; the keys read from this file are svc.host.name"
        wait_until(lambda: note in mon.stderr_text() and other in mon.stderr_text(), timeout=20,
                   message="the start-up warnings")
    finally:
        mon.stop()
    doctor = cli(env, "cluster", "doctor", "--json")
    host = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "host-name")
    # A host in no cluster needs no host name; the misspelt key is still a warning.
    assert note in host["detail"] and host["status"] == "WARN" and "not in a cluster" in host["detail"]


# ---------------------------------------------------------------- the port, the subcommand

def test_a_port_in_use_suggests_port_0_and_the_running_monitor(tmp_path):
    first_home = tmp_path / "a"
    first_home.mkdir()
    first = start_monitor(clean_env(first_home), args=("--no-probe",))
    try:
        home = _home(tmp_path)
        env = clean_env(home)
        second = Monitor(env, ("--no-probe",), port=first.port).start(wait=False)
        assert second.proc.wait(30) == 1
        second.stop()
        err = second.stderr_text()
        assert "cannot listen on 127.0.0.1:%d" % first.port in err and "start with --port 0" in err, err
        assert "is running at" not in err
        # The record of a monitor that is running (as a monitor of this HOME writes it).
        write_json(home / "svc" / "run" / "monitor.json", {"pid": first.pid, "url": first.url, "startedAt": "x"})
        third = Monitor(env, ("--no-probe",), port=first.port).start(wait=False)
        assert third.proc.wait(30) == 1
        third.stop()
        assert "is running at %s" % first.url in third.stderr_text(), third.stderr_text()
    finally:
        first.stop()


def test_a_mistyped_subcommand_lists_the_subcommands(tmp_path):
    done = cli(clean_env(_home(tmp_path)), "monitor", "dmeo")
    assert done.returncode == 2 and done.stdout == ""
    assert re.search(r"unknown subcommand 'dmeo' \(choose from 'init', 'hud', 'statusline', 'guard', 'switch', "
                     r"'reserve', 'mcp', 'demo'\); did you mean 'demo'\?", done.stderr), done.stderr
    assert done.stderr.startswith("usage: svc-monitor")
