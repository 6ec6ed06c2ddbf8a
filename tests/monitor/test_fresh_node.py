"""From a fresh machine to a node: an empty or relative HOME is refused by every
command, every directory the package creates is 0700, the monitor's start-up
line names the accounts env file, and the demo tells how to point the HUD at it."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

import svcposture
from svcposture.monitor.main import accounts_env_note
from svcposture.paths import HomeError, Paths
from tests.support.cli import assert_clean, cli
from tests.support.home import clean_env
from tests.support.waiting import wait_until

ENTRY_POINTS = [
    ("monitor", "--port", "0"),
    ("monitor", "init"),
    ("monitor", "hud", "--once"),
    ("monitor", "statusline"),
    ("monitor", "demo", "--port", "0"),
    ("cluster", "doctor"),
    ("cluster", "status"),
    ("cluster", "set-anchor", "OPS-1"),
    ("stack", "start", "--port", "0"),
    ("stack", "sync-cloud-env"),
]
PROGS = {"monitor": "svc-monitor", "cluster": "svc-cluster", "stack": "svc-stack"}


def tree(root: Path) -> List[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def loose_dirs(home: Path) -> List[str]:
    """Every directory below `home` that is not owner-only, as 'mode path'."""
    out = []
    for dirpath, dirnames, _files in os.walk(str(home)):
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path) and os.stat(path).st_mode & 0o777 != 0o700:
                out.append("%o %s" % (os.stat(path).st_mode & 0o777, path))
    return out


# ---------------------------------------------------------------- HOME empty or relative

@pytest.mark.parametrize("home_value", ["", "rel", "~", "./x"], ids=["empty", "relative", "tilde", "dot"])
@pytest.mark.parametrize("args", ENTRY_POINTS, ids=["-".join(a[:2]) for a in ENTRY_POINTS])
def test_every_command_refuses_an_empty_or_relative_home(tmp_path: Path, home_value: str, args) -> None:
    watched = tmp_path / "watched"
    (watched / "rel").mkdir(parents=True)  # where a relative HOME would land, were it used
    env = clean_env(tmp_path / "unused")
    env["HOME"] = home_value
    before_root = {name for name in ("svc", ".config") if os.path.lexists("/" + name)}
    done = subprocess.run([sys.executable, "-m", "svcposture", *args], env=env, cwd=str(watched),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr
    prog = PROGS[args[0]]
    what = "empty" if not home_value else "relative (%r)" % home_value
    assert done.stderr == ("%s: error: HOME is %s; set it to the absolute path of your home directory\n"
                           % (prog, "set but empty" if not home_value else what))
    assert tree(watched) == ["rel"]
    assert not (tmp_path / "unused").exists()
    after_root = {name for name in ("svc", ".config") if os.path.lexists("/" + name)}
    assert after_root == before_root


@pytest.mark.parametrize("home_value", ["", "rel"])
@pytest.mark.parametrize("sub", ["check", "headers", "usage"])
def test_probe_module_refuses_an_empty_or_relative_home(tmp_path: Path, home_value: str, sub: str) -> None:
    env = clean_env(tmp_path / "unused")
    env["HOME"] = home_value
    done = subprocess.run([sys.executable, "-m", "svcposture.probe", sub, "--json"], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.startswith("svcposture.probe: error: HOME is ") and done.stderr.count("\n") == 1
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize("home_value", ["", "relative/home"])
def test_library_refuses_an_empty_or_relative_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   home_value: str) -> None:
    monkeypatch.setenv("HOME", home_value)
    monkeypatch.chdir(tmp_path)
    calls = [lambda: svcposture.read_posture(), lambda: svcposture.read_events(),
             lambda: svcposture.read_history(), lambda: svcposture.start_server(), lambda: Paths()]
    for call in calls:
        with pytest.raises(svcposture.SvcpostureError) as caught:
            call()
        assert isinstance(caught.value, HomeError) and "HOME" in str(caught.value)
    assert os.listdir(str(tmp_path)) == []
    # An explicit home needs no HOME at all.
    node = tmp_path / "node"
    node.mkdir()
    assert svcposture.read_history(node, hours=1)["accounts"] == {}


def test_unset_home_falls_back_to_the_account_home() -> None:
    assert Paths(environ={}).home == Path(os.path.expanduser("~"))


def test_home_with_control_characters_is_shown_safely(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    env["HOME"] = "evil\x1b[2Jhome"
    done = subprocess.run([sys.executable, "-m", "svcposture", "cluster", "doctor"], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "\x1b" not in done.stderr and "evil?[2Jhome" in done.stderr


# ---------------------------------------------------------------- 0700 everywhere

def test_every_directory_any_command_creates_is_owner_only(home: Path, env: dict, monitors) -> None:
    env = dict(env, SVC_ACCOUNTS_PROBE="0", SVC_QUOTA_SAMPLER="0", SVC_PROVIDER_URL="http://127.0.0.1:9",
               SVC_TRACKER_URL="http://127.0.0.1:9/graphql")
    commands = [
        ("cluster", "doctor", "--json"),        # on a bare home: it creates ~/svc/events
        ("monitor", "init", "--host-name", "node-a"),
        ("cluster", "set-anchor", "OPS-1"),
        ("cluster", "bundle", "export", "--out", str(home / "out" / "bundle.json")),
        ("stack", "sync-cloud-env"),
        ("cluster", "status", "--json"),
        ("cluster", "doctor", "--json"),
    ]
    for args in commands:
        done = cli(env, *args)
        assert_clean(done)
        assert loose_dirs(home) == [], args
    assert (home / "svc" / "events").is_dir() and (home / ".config" / "svc").is_dir()
    mon = monitors.start(env)
    try:
        assert loose_dirs(home) == [], "monitor"
    finally:
        mon.stop()
    started = cli(env, "stack", "start", "--port", "0", "--json")
    try:
        assert started.returncode == 0, started.stderr
        assert loose_dirs(home) == [], "stack start"
    finally:
        assert cli(env, "stack", "stop").returncode == 0
    assert (home / "svc" / "logs").is_dir() and (home / "svc" / "run").is_dir()
    assert loose_dirs(home) == []


# ---------------------------------------------------------------- the monitor's start-up line

def test_start_up_line_names_the_missing_accounts_file_and_init(home: Path, env: dict, monitors) -> None:
    accounts = home / ".config" / "svc" / "model-accounts.env"
    mon = monitors.start(env)
    try:
        line = [l for l in mon.stderr_text().splitlines() if "svc-monitor listening on" in l][0]
        assert line == ("svc-monitor listening on %s (accounts env file %s: missing, so the posture is "
                        "unavailable; svc-monitor init creates it)" % (mon.url, accounts))
        assert mon.get_json("/api/accounts")[1] == {"available": False, "node": os.uname().nodename.split(".")[0]}
    finally:
        mon.stop()
    assert cli(env, "monitor", "init", "--host-name", "node-a").returncode == 0
    mon = monitors.start(env)
    assert "svc-monitor listening on %s (accounts env file %s)\n" % (mon.url, accounts) in mon.stderr_text()
    # placeholders only: still exactly the disabled body
    body = wait_until(lambda: mon.get_json("/api/accounts")[1], message="a posture body")
    assert body == {"available": False, "node": "node-a"}


def test_accounts_note_for_each_state(home: Path) -> None:
    paths = Paths(home, environ={"HOME": str(home)})
    target = paths.accounts_env
    assert "missing" in accounts_env_note(paths, True) and str(target) in accounts_env_note(paths, True)
    assert accounts_env_note(paths, False).startswith("probe off")
    target.parent.mkdir(parents=True)
    target.write_text("")
    os.chmod(str(target), 0o600)
    assert accounts_env_note(paths, True) == "accounts env file %s: empty, so the posture is unavailable" % target
    target.write_text("MODEL_TOKEN_A=x\n")
    assert accounts_env_note(paths, True) == "accounts env file %s" % target
    os.chmod(str(target), 0o666)
    assert "mode 0666" in accounts_env_note(paths, True) and "refused" in accounts_env_note(paths, True)
    target.unlink()
    target.mkdir()
    assert "not a regular file" in accounts_env_note(paths, True)
    weird = Paths(home, environ={"HOME": str(home), "SVC_ACCOUNTS_ENV": str(home / "a\x1b[1mb")})
    assert "\x1b" not in accounts_env_note(weird, True)


# ---------------------------------------------------------------- the demo

def test_demo_prints_its_hud_line_and_nothing_about_liveness(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "demo", "--port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(tmp_path))
    try:
        lines: List[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("demo home" in l for l in lines):
            line = proc.stdout.readline().decode()
            if not line:
                break
            lines.append(line)
        url = re.search(r"dashboard at (http://127\.0\.0\.1:\d+)/", "".join(lines)).group(1)
        # Started with `python -m svcposture`, it prints the command the same way (docs/first-look.md).
        assert any(l.startswith("svc-monitor demo: terminal HUD: ") and
                   l.endswith(" -m svcposture monitor hud --url %s\n" % url) for l in lines), lines
        demo_home = Path(re.search(r"demo home (\S+);", "".join(lines)).group(1))
        assert loose_dirs(demo_home.parent) == [] and oct(demo_home.stat().st_mode & 0o777) == "0o700"
        # The printed command works from a home that knows nothing of the demo.
        other = tmp_path / "other"
        other.mkdir()
        command = lines[[i for i, l in enumerate(lines) if "terminal HUD" in l][0]].split("terminal HUD: ")[1].split()
        assert command[-5:-2] == ["svcposture", "monitor", "hud"]
        hud = wait_until(lambda: _hud_once(clean_env(other), command[-2:]), timeout=30, message="the HUD line")
        assert "acct1" in hud
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        err = proc.stderr.read().decode()
        assert "liveness" not in err.lower() and "Traceback" not in err
        assert "svc-monitor listening on %s (accounts env file %s/.config/svc/model-accounts.env)" % (url, demo_home) \
            in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _hud_once(env: Dict[str, str], args: List[str]) -> str:
    done = cli(env, "monitor", "hud", "--once", *args)
    return done.stdout if done.returncode == 0 and "acct1" in done.stdout else ""


# ---------------------------------------------------------------- help

def test_monitor_help_lists_every_subcommand(env: dict) -> None:
    done = cli(env, "monitor", "--help")
    assert done.returncode == 0
    usage = done.stdout.split("\n\n")[0]
    for sub in ("init", "hud", "statusline", "guard", "switch", "mcp", "demo"):
        assert sub in usage, usage
        assert re.search(r"^  svc-monitor %s " % sub, done.stdout, re.M), sub
