"""`python -m svcposture`: help, unknown families, exit codes, no tracebacks."""
from __future__ import annotations

import subprocess
import sys

import pytest


def run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "svcposture", *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_explains_every_family(env: dict, flag: str) -> None:
    proc = run(env, flag)
    assert proc.returncode == 0
    for family, meaning in (("monitor", "svc-monitor"), ("cluster", "svc-cluster"), ("stack", "svc-stack")):
        assert family in proc.stdout and meaning in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("args", [(), ("frobnicate",), ("--bogus",), ("MONITOR",)])
def test_no_or_unknown_family_is_usage_error(env: dict, args) -> None:
    proc = run(env, *args)
    assert proc.returncode == 2
    assert "usage: python -m svcposture" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    if args:
        assert "unknown command %r" % args[0] in proc.stderr


def test_cluster_help_exits_zero(env: dict) -> None:
    proc = run(env, "cluster", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "svc-cluster" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_config_error_is_one_line_exit_2(env: dict, home) -> None:
    # A corrupt Layer-2 file surfacing through a command: named, exit 2, no traceback.
    code = ("import sys\n"
            "from svcposture.cli import _run\n"
            "from svcposture import config\n"
            "from svcposture.paths import Paths\n"
            "sys.exit(_run('svc-cluster', lambda: bool(config.host_name(Paths())) or 0))\n")
    node_json = home / ".config" / "svc" / "node.json"
    node_json.parent.mkdir(parents=True)
    node_json.write_text('{"svc": {"host": ')
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("svc-cluster: config error: %s:1:18:" % node_json)
    assert "Traceback" not in proc.stderr
    assert node_json.read_text() == '{"svc": {"host": '


def test_the_command_table_names_what_each_module_registers():
    # Running one command imports only the module the table names for it: the table must say
    # exactly what each module registers, in the order `svc-cluster --help` lists them.
    import argparse
    import importlib

    from svcposture.cluster import commands
    listed = []
    for module, names in commands.COMMANDS:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module("svcposture.cluster." + module).add_commands(sub)
        assert tuple(sub.choices) == names, module
        listed.extend(names)
    everything = argparse.ArgumentParser().add_subparsers()
    commands.add_commands(everything, ["--help"])
    assert list(everything.choices) == listed
    one = argparse.ArgumentParser().add_subparsers()
    commands.add_commands(one, ["status", "--json"])
    assert list(one.choices) == ["status"]


def test_a_command_runs_without_loading_the_others(env: dict) -> None:
    code = ("import sys, atexit\n"
            "atexit.register(lambda: sys.stderr.write(repr(sorted(sys.modules))))\n"
            "from svcposture import cli\nsys.exit(cli.cluster_main(['status', '--help']))\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and "--url" in proc.stdout, proc.stderr
    loaded = proc.stderr
    assert "'svcposture.cluster.status'" in loaded
    assert "'svcposture.cluster.doctor'" not in loaded and "'svcposture.cluster.mirror'" not in loaded


def test_the_monitor_table_names_each_subcommand_once_and_help_lists_them_all(env: dict) -> None:
    # One row per subcommand: its module and function exist, and `svc-monitor --help` lists
    # every row in table order, with the arguments the row gives.
    import importlib

    from svcposture import cli
    names = [c.name for c in cli.MONITOR_COMMANDS]
    assert len(names) == len(set(names))
    assert {"init", "hud", "statusline", "guard", "switch", "mcp", "demo"} <= set(names)
    for command in cli.MONITOR_COMMANDS:
        assert callable(getattr(importlib.import_module("svcposture." + command.module), command.function))
        assert cli.monitor_command(command.name) is command
    assert cli.monitor_command("serve") is None and cli.monitor_command(None) is None
    proc = run(env, "monitor", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "{%s}" % ",".join(names) in proc.stdout
    places = [proc.stdout.index("svc-monitor %s %s" % (c.name, c.arguments.split(" ")[0]))
              for c in cli.MONITOR_COMMANDS]
    assert places == sorted(places)


@pytest.mark.parametrize("name", ["hud", "statusline", "guard", "switch", "init"])
def test_a_monitor_subcommand_loads_its_module_and_not_the_monitor(env: dict, name: str) -> None:
    code = ("import sys, atexit\n"
            "atexit.register(lambda: sys.stderr.write(repr(sorted(sys.modules))))\n"
            "from svcposture import cli\nsys.exit(cli.monitor_main([%r, '--help']))\n" % name)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and "svc-monitor %s" % name in proc.stdout, proc.stderr
    from svcposture import cli
    assert "'svcposture.%s'" % cli.monitor_command(name).module in proc.stderr
    assert "'svcposture.monitor.main'" not in proc.stderr and "'svcposture.monitor.node'" not in proc.stderr
