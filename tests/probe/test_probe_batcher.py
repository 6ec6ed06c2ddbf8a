"""One probe child for the vendors whose probes start together (svcposture/probe/batcher.py,
svcposture/probe/vendorlines.py), each vendor's block handed on as soon as it is done.

The accounts env file of these nodes records every child that sources it: its shell's pid and
command line (`--vendor` names the vendors it was started for), appended to a file. That is the
count of real children, whatever the services report.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from svcposture.paths import Paths
from svcposture.probe.batcher import ProbeBatcher
from svcposture.probe.vendorlines import MAX_LINE_BYTES, VendorLines, one_vendor_report, vendor_line
from tests.support.codex import CodexServer, make_login, usage_reply
from tests.support.home import REPO, accounts_path, canary, write_accounts
from tests.support.posture import posture_service
from tests.support.provider import ProviderServer
from tests.support.rawserver import RawServer, Trickle
from tests.support.waiting import wait_until

CLAUDE_TOKEN = canary("batch")
CODEX_TOKEN = "codex-access-CANARY-batch-" + "7" * 12
USAGE_PATH = "/backend-api/wham/usage"
# Wide enough that two services started one after the other share a child on a loaded machine.
WINDOW_S = 0.5


# ---------------------------------------------------------------- the line protocol, pure

def _collect(vendors: List[str]):
    got: List[Any] = []
    return got, VendorLines(vendors, lambda name, report: got.append((name, report)))


def test_each_asked_vendors_line_is_handed_on_once_as_it_completes():
    got, lines = _collect(["claude", "codex"])
    first = vendor_line("codex", {"available": True, "codex": {"accounts": []}}).encode()
    lines.feed(b"noise\n" + first[:10])
    assert got == []  # half a line is not a line
    lines.feed(first[10:] + b"\n")
    assert got == [("codex", {"available": True, "codex": {"accounts": []}})]
    assert lines.pending() == ["claude"]
    # A second line for a vendor already answered, one for a vendor not asked, a report that is not
    # an object, broken JSON: none is handed on.
    lines.feed(vendor_line("codex", {"available": False}).encode() + b"\n"
               + vendor_line("kimi", {"available": False}).encode() + b"\n"
               + b'{"vendor":"claude","report":"text"}\n{"vendor":"claude","rep\n')
    assert len(got) == 1 and lines.pending() == ["claude"]
    lines.feed(vendor_line("claude", {"available": False}).encode() + b"\n")
    assert got[1] == ("claude", {"available": False}) and lines.pending() == []


def test_a_line_past_the_bound_is_skipped_to_its_end():
    got, lines = _collect(["claude"])
    lines.feed(b'{"vendor":"claude","report":{"x":"' + b"y" * (MAX_LINE_BYTES + 10))
    lines.feed(b'"}}\n')
    assert got == []
    lines.feed(vendor_line("claude", {"available": False}).encode() + b"\n")
    assert got == [("claude", {"available": False})]


def test_a_whole_runs_report_read_for_one_vendor():
    error = {"error": {"kind": "config", "message": "m"}, "line": 3}
    assert one_vendor_report(error, "codex") == error
    report = {"available": True, "claude": {"accounts": []}}
    assert one_vendor_report(report, "claude") == {"available": True, "claude": {"accounts": []}}
    assert one_vendor_report(report, "codex") == {"available": False}
    assert one_vendor_report("junk", "codex")["error"]["kind"] == "internal"


# ---------------------------------------------------------------- a node of two vendors

def _starts(path: Path) -> List[List[str]]:
    """The vendors of each child that sourced the file, in start order."""
    if not path.exists():
        return []
    return [re.findall(r"--vendor (\w+)", line) for line in path.read_text().splitlines() if line.strip()]


def _node_file(home: Path, starts: Path, extra: str = "") -> Path:
    make_login(home / "codex-work", CODEX_TOKEN, "acc-work")
    recorder = "echo \"$$ $(tr '\\0' ' ' < /proc/$$/cmdline)\" >> '%s'\n" % starts
    return write_accounts(accounts_path(home), [("ACCT1", CLAUDE_TOKEN, "one@x.example")], active="ACCT1",
                          extra=recorder + 'CODEX_HOME_WORK="%s"  # work@x.example\n'
                                'export CODEX_HOME="$CODEX_HOME_WORK"\n' % (home / "codex-work") + extra)


def _paths(home: Path, env: Dict[str, str], provider_url: str, codex_url: str, **knobs: str) -> Paths:
    env.update({"SVC_PROVIDER_URL": provider_url, "SVC_CODEX_URL": codex_url, "SVC_QUOTA_SAMPLER": "0",
                "SVC_ACCOUNTS_ENV": str(accounts_path(home))}, **knobs)
    return Paths(home, environ=env)


class TwoServices:
    """Claude's and Codex's posture services over one home, sharing one batcher, as a node builds them."""

    def __init__(self, paths: Paths) -> None:
        self.batcher = batcher = ProbeBatcher(window_s=WINDOW_S)
        self.claude = posture_service(paths, node="n", batcher=batcher)
        self.codex = posture_service(paths, node="n", provider="codex", batcher=batcher)

    def start(self) -> None:
        self.claude.start()
        self.codex.start()

    def stop(self) -> None:
        self.claude.stop()
        self.codex.stop()


@pytest.fixture
def services():
    made: List[TwoServices] = []

    def make(paths: Paths) -> TwoServices:
        made.append(TwoServices(paths))
        return made[-1]
    yield make
    for pair in made:
        pair.stop()


def test_two_vendors_periodic_probes_run_in_one_child_each_time(home, env, tmp_path, services):
    starts = tmp_path / "starts"
    with ProviderServer() as provider, CodexServer() as codex:
        provider.set_account(CLAUDE_TOKEN, five_hour=(0.25, "allowed"), seven_day=(0.10, "allowed"))
        codex.set_reply(CODEX_TOKEN, usage_reply(40, 20))
        _node_file(home, starts)
        paths = _paths(home, env, provider.url, codex.url, SVC_PROBE_INTERVAL_S="1", SVC_POSTURE_TTL_S="1",
                       SVC_REFRESH_FLOOR_S="0.1", SVC_PROBE_DEADLINE_S="10", SVC_PROBE_TIMEOUT_S="3")
        pair = services(paths)
        pair.start()
        # The first probes and the periodic ones share a child. On a loaded machine one tick can be
        # scheduled past the other's window and run alone; the ticks go on, and they share again.
        shared = lambda: [c for c in _starts(starts) if sorted(c) == ["claude", "codex"]]  # noqa: E731
        wait_until(lambda: pair.claude.probe_runs >= 3 and pair.codex.probe_runs >= 3 and len(shared()) >= 3,
                   60, 0.05, "three sweeps of both vendors in one child")
        children = _starts(starts)
        assert pair.claude.summary()["status"] == "ok"
        assert pair.codex.summary()["active"]["label"] == "codex-work"
    # No child ever ran a vendor twice, and both vendors' probes went through children.
    assert all(len(set(vendors)) == len(vendors) for vendors in children), children
    assert provider.message_calls(CLAUDE_TOKEN) >= 3


def test_a_forced_refresh_of_one_vendor_gets_a_child_of_its_own_at_once(home, env, tmp_path, services):
    starts = tmp_path / "starts"
    with ProviderServer() as provider, CodexServer() as codex:
        provider.set_account(CLAUDE_TOKEN, five_hour=(0.25, "allowed"), seven_day=(0.10, "allowed"))
        codex.set_reply(CODEX_TOKEN, usage_reply(40, 20))
        _node_file(home, starts)
        paths = _paths(home, env, provider.url, codex.url, SVC_PROBE_INTERVAL_S="300", SVC_POSTURE_TTL_S="300",
                       SVC_REFRESH_FLOOR_S="0", SVC_PROBE_DEADLINE_S="10")
        pair = services(paths)
        pair.start()
        wait_until(lambda: pair.claude.summary() is not None and pair.codex.summary() is not None, 30, 0.05,
                   "both first probes")
        assert _starts(starts) == [["claude", "codex"]] or _starts(starts) == [["codex", "claude"]]
        # A window no one could wait out in this test: a refresh that waited it would not come back.
        pair.batcher._window_s = 600.0
        answered: List[Dict[str, Any]] = []
        threading.Thread(target=lambda: answered.append(pair.codex.read(refresh=True)), daemon=True).start()
        body = wait_until(lambda: answered and answered[0], 30, 0.05, "the forced refresh's answer")
        assert body["cached"] is False and body["active"]["label"] == "codex-work"
        assert pair.claude.read()["cached"] is True
        assert provider.message_calls(CLAUDE_TOKEN) == 1
    assert _starts(starts)[1:] == [["codex"]]


def test_a_fast_vendors_block_comes_while_another_in_the_same_child_waits(home, env, tmp_path, services):
    starts = tmp_path / "starts"
    now = int(time.time())
    trickle = Trickle(json.dumps(usage_reply(40, 20, reset_5h=now + 3600, reset_7d=now + 86400)).encode())
    with ProviderServer() as provider, RawServer({USAGE_PATH: trickle}) as codex:
        provider.set_account(CLAUDE_TOKEN, five_hour=(0.25, "allowed"), seven_day=(0.10, "allowed"))
        _node_file(home, starts)
        # Codex's exchange deadline: 1.5 request timeouts, 3 s, far inside the sweep's 30 s.
        paths = _paths(home, env, provider.url, codex.url, SVC_PROBE_INTERVAL_S="300", SVC_POSTURE_TTL_S="300",
                       SVC_PROBE_DEADLINE_S="30", SVC_PROBE_TIMEOUT_S="2")
        pair = services(paths)
        try:
            pair.start()
            assert trickle.started.wait(30), "the Codex usage request never came"
            wait_until(lambda: pair.claude.summary() is not None, 20, 0.02, "Claude's posture")
            # Claude's block came while the child still waited on Codex's trickling endpoint.
            assert not trickle.client_gone() and pair.codex.summary() is None
            assert pair.claude.summary()["active"]["label"] == "acct1"
            wait_until(lambda: pair.codex.summary() is not None, 20, 0.05, "Codex's posture at its deadline")
            account = pair.codex.summary()["accounts"][0]
            assert (account["label"], account["error"]["kind"]) == ("codex-work", "timeout")
        finally:
            trickle.stop.set()
    assert sorted(_starts(starts)[0]) == ["claude", "codex"] and len(_starts(starts)) == 1


def test_a_stopping_service_is_answered_at_once_and_the_child_goes_on_for_the_other(home, env, tmp_path, services):
    starts = tmp_path / "starts"
    trickle = Trickle(json.dumps(usage_reply(40, 20)).encode())
    with ProviderServer() as provider, RawServer({USAGE_PATH: trickle}) as codex:
        provider.set_account(CLAUDE_TOKEN, mode="slow", delay=20)
        _node_file(home, starts)
        paths = _paths(home, env, provider.url, codex.url, SVC_PROBE_INTERVAL_S="300", SVC_POSTURE_TTL_S="300",
                       SVC_PROBE_DEADLINE_S="30", SVC_PROBE_TIMEOUT_S="2")
        pair = services(paths)
        try:
            pair.start()
            assert trickle.started.wait(30), "the Codex usage request never came"
            wait_until(lambda: provider.message_calls(CLAUDE_TOKEN) == 1, 20, 0.02, "Claude's request")
            t0 = time.monotonic()
            pair.claude.stop()
            assert time.monotonic() - t0 < 5
            # The child still runs for Codex, whose own deadline ends its exchange.
            wait_until(lambda: pair.codex.summary() is not None, 20, 0.05, "Codex's posture")
            assert pair.codex.summary()["accounts"][0]["error"]["kind"] == "timeout"
        finally:
            trickle.stop.set()
    assert len(_starts(starts)) == 1


def _ask_together(batcher: ProbeBatcher, paths: Paths, asks: Dict[str, Dict[str, str]]) -> Dict[str, Any]:
    """Each vendor's report, asked for at once from its own thread with its own environment."""
    got: Dict[str, Any] = {}
    threads = [threading.Thread(target=lambda v=v, e=e: got.__setitem__(v, batcher.report(paths, v, e, deadline_s=10)))
               for v, e in asks.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return got


def test_environments_that_disagree_get_a_child_each(home, env, tmp_path):
    starts = tmp_path / "starts"
    with ProviderServer() as provider, CodexServer() as codex:
        provider.set_account(CLAUDE_TOKEN)
        codex.set_reply(CODEX_TOKEN, usage_reply(40, 20))
        _node_file(home, starts)
        paths = _paths(home, env, provider.url, codex.url)
        batcher = ProbeBatcher(window_s=WINDOW_S)
        same = _ask_together(batcher, paths, {"claude": dict(env, SVC_X="1"), "codex": dict(env, SVC_Y="2")})
        assert sorted(_starts(starts)[0]) == ["claude", "codex"] and len(_starts(starts)) == 1
        differ = _ask_together(batcher, paths, {"claude": dict(env, SVC_X="1"), "codex": dict(env, SVC_X="2")})
    assert sorted(map(tuple, _starts(starts)[1:])) == [("claude",), ("codex",)]
    for reports in (same, differ):
        assert reports["claude"]["claude"]["active"] == "acct1" and "codex" not in reports["claude"]
        assert reports["codex"]["codex"]["active"] == "codex-work" and "claude" not in reports["codex"]


def test_a_node_level_error_goes_to_every_vendor_of_the_child(home, env, tmp_path):
    starts = tmp_path / "starts"
    with ProviderServer() as provider, CodexServer() as codex:
        _node_file(home, starts, extra="if then fi (\n")
        paths = _paths(home, env, provider.url, codex.url)
        reports = _ask_together(ProbeBatcher(window_s=WINDOW_S), paths, {"claude": env, "codex": env})
    assert len(_starts(starts)) == 1
    assert reports["claude"] == reports["codex"]
    assert reports["claude"]["error"]["kind"] == "config" and reports["claude"]["line"] == 7


# ---------------------------------------------------------------- the command line

def test_people_name_several_vendors_and_the_child_imports_no_runner(home, env, tmp_path):
    with ProviderServer() as provider, CodexServer() as codex:
        provider.set_account(CLAUDE_TOKEN)
        codex.set_reply(CODEX_TOKEN, usage_reply(40, 20))
        _node_file(home, tmp_path / "starts")
        _paths(home, env, provider.url, codex.url)
        for args in (["--vendor", "claude", "--vendor", "codex"], ["--vendor", "codex,claude"]):
            done = subprocess.run([sys.executable, "-m", "svcposture.probe", "headers", "--json"] + args, env=env,
                                  cwd=str(REPO), capture_output=True, text=True, timeout=60)
            report = json.loads(done.stdout.strip().splitlines()[-1])
            assert done.returncode == 0 and sorted(report) == ["available", "claude", "codex"], done.stdout
        refused = subprocess.run([sys.executable, "-m", "svcposture.probe", "headers", "--vendor", "nope"], env=env,
                                 cwd=str(REPO), capture_output=True, text=True, timeout=60)
        assert refused.returncode == 2 and "--vendor" in refused.stderr
    # The child's path (--child, a file with no account to probe) loads no process machinery.
    empty = tmp_path / "empty.env"
    empty.write_text("MODEL_TOKEN_X=PASTE_TOKEN_HERE\n")
    code = ("import sys; from svcposture.probe import command; "
            "code = command.main(['headers', '--json', '--child', '--env-fd', sys.argv[1], '--vendor', 'claude']); "
            "print(json.dumps(sorted(m for m in ('subprocess', 'svcposture.probe.runner', 'svcposture.probe.text') "
            "if m in sys.modules)))").replace("import sys;", "import json, sys;")
    fd = os.open(str(empty), os.O_RDONLY)
    try:
        done = subprocess.run([sys.executable, "-c", code, str(fd)], env=env, cwd=str(REPO), pass_fds=(fd,),
                              capture_output=True, text=True, timeout=60)
    finally:
        os.close(fd)
    out = done.stdout.strip().splitlines()
    assert json.loads(out[-2]) == {"available": False} and json.loads(out[-1]) == [], done.stdout + done.stderr
