"""Children never import from the caller's working directory.

`python -m svcposture...` puts the working directory first on sys.path. The
commands below start children of the package (the doctor's entry check, the
monitor's token-stripping re-exec, the automatic switch); run from a directory
another user can write, a planted `svcposture/` package there would run as the
operator. Each command is started here as its installed console script is (the
script's own directory first on sys.path, not the working directory), from a
directory holding such a package, which writes a marker file when imported: the
marker must never appear.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from tests.support.home import accounts_path, canary, make_node, monitor_env, node_env, set_host_name, \
    write_accounts
from tests.support.monitor import Monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

from svcposture.envfile.exportline import active_label

TA, TB = canary("cwda"), canary("cwdb")
SCRIPT = """import sys
from svcposture.cli import {entry}
sys.exit({entry}())
"""


@pytest.fixture
def planted(tmp_path: Path) -> Dict[str, Path]:
    """A working directory holding a hostile `svcposture` package, and console scripts elsewhere."""
    cwd = tmp_path / "shared-dir"
    (cwd / "svcposture").mkdir(parents=True)
    marker = tmp_path / "planted-package-ran"
    (cwd / "svcposture" / "__init__.py").write_text(
        "open(%r, 'a').write('imported by ' + __import__('sys').argv[0] + '\\n')\n" % str(marker))
    (cwd / "svcposture" / "__main__.py").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, entry in (("svc-monitor", "monitor_main"), ("svc-cluster", "cluster_main")):
        (bin_dir / name).write_text(SCRIPT.format(entry=entry))
    return {"cwd": cwd, "marker": marker, "bin": bin_dir}


def script(planted: Dict[str, Path], name: str) -> List[str]:
    return [sys.executable, str(planted["bin"] / name)]


class ScriptMonitor(Monitor):
    """The monitor started as its console script, from the planted directory."""

    def __init__(self, planted: Dict[str, Path], env: Dict[str, str]) -> None:
        super().__init__(env, [], cwd=str(planted["cwd"]))
        self.launcher = script(planted, "svc-monitor")

    def command(self) -> List[str]:
        return self.launcher + ["--port", "0"] + self.args


def test_the_launchers_themselves_import_the_real_package(planted, tmp_path):
    """The premise: started this way, the command itself does not see the planted package."""
    (tmp_path / "home").mkdir()
    done = subprocess.run(script(planted, "svc-cluster") + ["classify", "--json"], cwd=str(planted["cwd"]),
                          env=node_env(tmp_path / "home"), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not planted["marker"].exists()


def test_doctor_entry_check_runs_the_real_package(planted, tmp_path, anchor_tracker):
    home = make_node(tmp_path, "a", ["a", "b"], anchor="OPS-1")
    write_accounts(home / ".config" / "svc" / "model-accounts.env", [("ACCT1", TA, "one@example.com")],
                   active="ACCT1")
    done = subprocess.run(script(planted, "svc-cluster") + ["doctor", "--json"], cwd=str(planted["cwd"]),
                          env=node_env(home, tracker_url=anchor_tracker.url), capture_output=True, timeout=120)
    assert b'"accounts-env"' in done.stdout, done.stderr
    assert not planted["marker"].exists(), planted["marker"].read_text()
    assert b"active acct1" in done.stdout, done.stdout


def test_the_monitor_re_exec_without_tokens_runs_the_real_package(planted, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    with ProviderServer() as provider:
        provider.set_account(TA, five_hour=(0.10, "allowed"), seven_day=(0.10, "allowed"))
        env = monitor_env(home, provider.url, accounts=[("ACCT1", TA, "one@example.com")], active="ACCT1")
        # A token in the caller's environment: the monitor starts itself afresh without it.
        env["MODEL_CODE_OAUTH_TOKEN"] = TB
        mon = ScriptMonitor(planted, env)
        try:
            mon.start(timeout=60)
            assert mon.get_json("/api/accounts")[0] == 200
            with open("/proc/%d/environ" % mon.pid, "rb") as fh:
                assert TB.encode() not in fh.read(), "the re-exec did not happen"
        finally:
            mon.stop(check=False)
    assert not planted["marker"].exists(), planted["marker"].read_text()


def test_the_automatic_switch_child_runs_the_real_package(planted, tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "cwd-node")
    write_accounts(accounts_path(home), [("A", TA, "a@example.com"), ("B", TB, "b@example.com")], active="A")
    with ProviderServer() as provider:
        provider.set_account(TA, five_hour=(0.95, "allowed_warning"), seven_day=(0.30, "allowed"))
        provider.set_account(TB, five_hour=(0.10, "allowed"), seven_day=(0.10, "allowed"))
        mon = ScriptMonitor(planted, monitor_env(home, provider.url, SVC_AUTO_SWITCH_AT="90"))
        try:
            mon.start(timeout=60)
            # The switch child either switches (the real package) or dies importing the planted one.
            wait_until(lambda: planted["marker"].exists() or active_label(accounts_path(home).read_bytes(),
                                                                          "claude") == "b",
                       60, message="the automatic switch child")
        finally:
            mon.stop(check=False)
    assert not planted["marker"].exists(), planted["marker"].read_text()
    assert active_label(accounts_path(home).read_bytes(), "claude") == "b"
