"""The token-scoped probe child, run as a real subprocess against the provider test server."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.home import REPO, assert_no_canary, canary, write_accounts
from tests.support.provider import ProviderServer
from svcposture.probe import runner as probe
from svcposture.paths import Paths
from svcposture.claude.errors import MESSAGES as CLAUDE_MESSAGES, error as claude_error


def _setup(home: Path, env: dict, provider: ProviderServer, **extra: str) -> Paths:
    env["SVC_PROVIDER_URL"] = provider.url
    env["SVC_ACCOUNTS_ENV"] = str(home / ".config" / "svc" / "model-accounts.env")
    env.update(extra)
    return Paths(home, environ=env)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _by_label(report):
    return {a["label"]: a for a in report["claude"]["accounts"]}


def test_every_provider_scenario_in_one_sweep(home, env, provider):
    tokens = {name: canary(name) for name in ("ok", "warn", "rej", "auth", "nohdr", "garb", "slow", "drop",
                                              "redir")}
    provider.set_account(tokens["ok"], five_hour=(0.1234, "allowed"), seven_day=(0.5, "allowed"),
                         reset_5h=1767225600, reset_7d=1767830400)
    provider.set_account(tokens["warn"], status="allowed_warning", five_hour=(0.2, "allowed"),
                         seven_day=(0.91, "allowed_warning"), representative_claim="seven_day")
    provider.set_account(tokens["rej"], status="rejected", five_hour=(1.0449, "rejected"),
                         seven_day=(0.3, "allowed"), representative_claim="five_hour")
    provider.set_account(tokens["auth"], mode="auth")
    provider.set_account(tokens["nohdr"], mode="no_headers")
    provider.set_account(tokens["garb"], mode="garbage")
    provider.set_account(tokens["slow"], mode="slow", delay=3.0)
    provider.set_account(tokens["drop"], mode="drop")
    provider.set_account(tokens["redir"], mode="redirect")
    entries = [(n.upper(), t, "%s@example.com" % n) for n, t in tokens.items()]
    paths = _setup(home, env, provider, SVC_PROBE_TIMEOUT_S="0.8")
    write_accounts(paths.accounts_env, entries, active="REJ")

    report = probe.run_headers(paths, env)
    text = json.dumps(report)
    assert_no_canary([text], tokens.values())
    assert report["available"] is True and report["claude"]["active"] == "rej"
    accts = _by_label(report)
    assert list(accts) == list(tokens)  # file order
    assert accts["ok"]["error"] is None
    assert accts["ok"]["fiveHour"] == {"pct": 12.3, "resetsAt": "2026-01-01T00:00:00.000Z", "status": "allowed"}
    assert accts["ok"]["sevenDay"] == {"pct": 50.0, "resetsAt": "2026-01-08T00:00:00.000Z", "status": "allowed"}
    assert accts["ok"]["email"] == "ok@example.com" and accts["ok"]["active"] is False
    assert accts["warn"]["overallStatus"] == "allowed_warning"
    assert accts["warn"]["representativeClaim"] == "seven_day"
    # 429 still parsed: the account is rejected, not an error.
    assert accts["rej"]["error"] is None and accts["rej"]["active"] is True
    assert accts["rej"]["fiveHour"]["pct"] == 104.5 and accts["rej"]["overallStatus"] == "rejected"
    assert accts["auth"]["error"] == {"kind": "auth", "message": CLAUDE_MESSAGES["auth"].refused, "httpStatus": 401}
    assert accts["nohdr"]["error"]["kind"] == "no_headers" and accts["nohdr"]["error"]["httpStatus"] == 200
    assert accts["garb"]["error"]["kind"] == "parse"
    assert accts["garb"]["fiveHour"] is None
    assert accts["slow"]["error"]["kind"] == "timeout"
    assert accts["drop"]["error"]["kind"] == "transport"
    # A redirect is never followed: it would carry the token elsewhere.
    assert accts["redir"]["error"] == {"kind": "http", "message": CLAUDE_MESSAGES["http"].unexpected_status,
                                       "httpStatus": 307}

    # The exact request of docs/posture.md, one per usable account.
    for name, token in tokens.items():
        assert provider.message_calls(token) == 1, name
    req = [r for r in provider.requests if r["token"] == tokens["ok"]][0]
    assert req["headers"]["anthropic-version"] == "2023-06-01"
    assert req["headers"]["anthropic-beta"] == "oauth-2025-04-20"
    assert req["headers"]["content-type"] == "application/json"
    assert req["headers"]["user-agent"].startswith("svcposture/")
    assert json.loads(req["body"]) == {"model": "claude-haiku-4-5-20251001", "max_tokens": 1,
                                       "messages": [{"role": "user", "content": "hi"}]}


def test_at_most_four_in_flight(home, env, provider):
    tokens = [canary("c%d" % i) for i in range(6)]
    for t in tokens:
        provider.set_account(t, mode="slow", delay=0.5)
    paths = _setup(home, env, provider)
    write_accounts(paths.accounts_env, [("A%d" % i, t, None) for i, t in enumerate(tokens)])
    report = probe.run_headers(paths, env)
    assert all(a["error"] is None for a in report["claude"]["accounts"])
    assert provider.max_concurrent() == 4
    starts = sorted(r["at"] for r in provider.requests)
    # The 5th request cannot start before one of the first four has been answered.
    assert starts[4] - starts[0] >= 0.45


def test_connection_refused_is_transport_for_each_account(home, env):
    env["SVC_PROVIDER_URL"] = "http://127.0.0.1:%d" % _free_port()
    env["SVC_ACCOUNTS_ENV"] = str(home / "acc.env")
    paths = Paths(home, environ=env)
    write_accounts(paths.accounts_env, [("A", canary("a"), None), ("B", canary("b"), None)], active="B")
    report = probe.run_headers(paths, env)
    assert [a["error"]["kind"] for a in report["claude"]["accounts"]] == ["transport", "transport"]
    assert report["claude"]["active"] == "b"


def test_inherited_tokens_are_stripped_so_only_the_file_decides(home, env, provider):
    inherited = canary("inherited")
    file_token = canary("file")
    provider.set_account(file_token)
    provider.set_account(inherited)
    paths = _setup(home, env, provider)
    write_accounts(paths.accounts_env, [("ONE", file_token, None)])
    env["MODEL_CODE_OAUTH_TOKEN"] = file_token
    env["MODEL_TOKEN_SNEAKY"] = inherited
    report = probe.run_headers(paths, env)
    assert [a["label"] for a in report["claude"]["accounts"]] == ["one"]
    # The active token came from the monitor's env, not the file: nobody is active.
    assert report["claude"]["active"] is None
    assert provider.message_calls(inherited) == 0


def test_disabled_cases_and_placeholder(home, env, provider):
    paths = _setup(home, env, provider)
    assert probe.run_headers(paths, env) == {"available": False}  # no file
    paths.accounts_env.parent.mkdir(parents=True, exist_ok=True)
    paths.accounts_env.write_text("")
    os.chmod(str(paths.accounts_env), 0o600)
    assert probe.run_headers(paths, env) == {"available": False}  # empty
    write_accounts(paths.accounts_env, [("A", "PASTE_TOKEN_HERE", "a@x.io"), ("B", "", None)], active="A")
    assert probe.run_headers(paths, env) == {"available": False}  # no usable entry
    assert provider.message_calls() == 0


def test_group_or_other_writable_file_is_refused_before_sourcing(home, env, provider, tmp_path):
    marker = tmp_path / "sourced"
    paths = _setup(home, env, provider)
    write_accounts(paths.accounts_env, [("A", canary("a"), None)], mode=0o666,
                   extra="touch %s\n" % marker)
    report = probe.run_headers(paths, env)
    assert report["error"]["kind"] == "config"
    assert not marker.exists()
    # Empty but writable by the group: still an error, never the disabled body.
    paths.accounts_env.write_text("")
    os.chmod(str(paths.accounts_env), 0o620)
    assert probe.run_headers(paths, env)["error"]["kind"] == "config"


def test_bad_env_files(home, env, provider):
    good = canary("good")
    provider.set_account(good)
    paths = _setup(home, env, provider)
    f = paths.accounts_env
    f.parent.mkdir(parents=True, exist_ok=True)

    def run(content: bytes, deadline_s=None):
        f.write_bytes(content)
        os.chmod(str(f), 0o600)
        return probe.run_headers(paths, env, deadline_s=deadline_s)

    # Lines that are not assignments (shell runs them and moves on): the good entry still works.
    r = run(b"no_such_command_svc_test\nKEY WITHOUT EQUALS\n=oops\nMODEL_TOKEN_\n"
            b"MODEL_TOKEN_GOOD=%s # g@x.io\n" % good.encode())
    assert [a["label"] for a in r["claude"]["accounts"]] == ["good"] and r["claude"]["accounts"][0]["email"] == "g@x.io"
    assert r["claude"]["accounts"][0]["error"] is None
    # A syntax error stops the shell before the child starts: a node-level config error
    # naming the line the shell named, no traceback.
    r = run(b"MODEL_TOKEN_GOOD=%s\nif then fi (\n" % good.encode())
    assert r["error"]["kind"] == "config" and r["line"] == 2
    # Truncated mid-quote: the shell names the line it reached the end of the file on.
    r = run(b'MODEL_TOKEN_GOOD="' + good.encode()[:10])
    assert r["error"]["kind"] == "config" and r["line"] == 1
    # Binary junk and a NUL byte: never a traceback, never a token.
    r = run(b"\x00\xff\xfeMODEL_TOKEN_X=\x00y\n")
    assert r.get("available") is False or r["error"]["kind"] == "internal"
    # Huge: refused by stat before sourcing.
    r = run(b"# " + b"x" * (probe.MAX_ENV_FILE_BYTES + 10) + b"\n")
    assert r["error"]["kind"] == "config"
    # A file that never finishes is killed at the sweep deadline.
    t0 = time.monotonic()
    r = run(b"while :; do :; done\n", deadline_s=1.0)
    assert r["error"]["kind"] == "timeout" and time.monotonic() - t0 < 8
    assert provider.message_calls(good) == 1


def test_hostile_env_file_output_never_reaches_the_result(home, env, provider):
    token = canary("hostile")
    provider.set_account(token)
    paths = _setup(home, env, provider)
    hostile = ('echo "$MODEL_TOKEN_H"\necho "$MODEL_TOKEN_H" >&2\n'
               'echo \'{"available": true, "accounts": [{"label": "h", "leak": "\'"$MODEL_TOKEN_H"\'"}]}\'\n')
    write_accounts(paths.accounts_env, [("H", token, "h@example.com")], active="H", extra=hostile)
    report = probe.run_headers(paths, env)
    assert_no_canary([json.dumps(report)], [token])
    assert report["claude"]["accounts"][0]["label"] == "h" and "leak" not in report["claude"]["accounts"][0]


def test_env_file_flooding_stdout_does_not_hide_the_result(home, env, provider):
    token = canary("flood")
    provider.set_account(token)
    paths = _setup(home, env, provider)
    flood = "head -c %d /dev/zero | tr '\\0' x\necho\n" % (probe.MAX_CHILD_OUTPUT + 2 * 1024 * 1024)
    write_accounts(paths.accounts_env, [("F", token, None)], active="F", extra=flood)
    report = probe.run_headers(paths, env)
    assert report["claude"]["active"] == "f" and report["claude"]["accounts"][0]["error"] is None


def test_sweep_deadline_kills_child_and_its_background_jobs(home, env, provider, tmp_path):
    token = canary("bg")
    provider.set_account(token, mode="slow", delay=5)
    pidfile = tmp_path / "bg.pid"
    paths = _setup(home, env, provider, SVC_PROBE_TIMEOUT_S="10")
    write_accounts(paths.accounts_env, [("BG", token, None)],
                   extra="sleep 30 & echo $! > %s\n" % pidfile)
    t0 = time.monotonic()
    report = probe.run_headers(paths, env, deadline_s=2.5)
    elapsed = time.monotonic() - t0
    # The child answers before the kill with the unfinished account as a timeout.
    assert report["claude"]["accounts"][0]["error"]["kind"] == "timeout"
    assert elapsed < 8
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    alive = True
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open("/proc/%d/stat" % pid) as fh:
                if fh.read().split()[2] == "Z":
                    alive = False
                    break
        except (ProcessLookupError, FileNotFoundError):
            alive = False
            break
        time.sleep(0.05)
    assert not alive


def test_cli_check_and_headers_are_token_free(home, env, provider):
    a, b = canary("a"), canary("b")
    provider.set_account(a)
    provider.set_account(b, status="rejected", seven_day=(1.0, "rejected"), representative_claim="seven_day")
    paths = _setup(home, env, provider)
    write_accounts(paths.accounts_env, [("A", a, "a@example.com"), ("B", b, None), ("C", b, None),
                                        ("D", "PASTE_TOKEN_HERE", None)], active="B")
    env["MODEL_CODE_OAUTH_TOKEN"] = a  # the caller's own shell must not matter
    out = subprocess.run([sys.executable, "-m", "svcposture.probe", "check", "--json"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    check = json.loads(out.stdout)
    assert check == {"available": True, "lineProblems": [], "claude": {
        "usable": ["a", "b", "c"], "unusable": ["d"], "active": "b", "duplicateActive": ["b", "c"],
        "placeholders": [{"label": "d", "line": 5}]}}
    assert provider.message_calls() == 0
    out2 = subprocess.run([sys.executable, "-m", "svcposture.probe", "headers", "--json"], env=env,
                          capture_output=True, text=True, timeout=30)
    human = subprocess.run([sys.executable, "-m", "svcposture.probe", "headers"], env=env,
                           capture_output=True, text=True, timeout=30)
    helptext = subprocess.run([sys.executable, "-m", "svcposture.probe", "--help"], env=env,
                              capture_output=True, text=True, timeout=30)
    assert out2.returncode == 0 and human.returncode == 0 and "token-free" in helptext.stdout
    assert "*b" in human.stdout
    assert_no_canary([out.stdout, out.stderr, out2.stdout, out2.stderr, human.stdout, human.stderr], [a, b])
    assert json.loads(out2.stdout)["claude"]["active"] == "b"


def test_cli_config_error_exit_code_and_no_traceback(home, env, provider):
    paths = _setup(home, env, provider)
    write_accounts(paths.accounts_env, [("A", canary("a"), None)], mode=0o646)
    out = subprocess.run([sys.executable, "-m", "svcposture.probe", "headers", "--json"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert json.loads(out.stdout)["error"]["kind"] == "config"
    assert "Traceback" not in out.stderr


def test_vendored_copy_runs_its_own_child(home, env, provider, tmp_path):
    token = canary("vendored")
    provider.set_account(token)
    host = tmp_path / "hostproj"
    vendor = host / "hostpkg" / "_vendor"
    vendor.mkdir(parents=True)
    (host / "hostpkg" / "__init__.py").write_text("")
    (vendor / "__init__.py").write_text("")
    shutil.copytree(str(REPO / "svcposture"), str(vendor / "svcposture"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    paths = _setup(home, env, provider)
    write_accounts(paths.accounts_env, [("V", token, "v@example.com")], active="V")
    env["PYTHONPATH"] = str(host)  # the repo copy is NOT importable
    code = ("import json, os, sys\n"
            "from hostpkg._vendor.svcposture.probe import runner as probe\n"
            "from hostpkg._vendor.svcposture.paths import Paths\n"
            "assert 'svcposture' not in sys.modules\n"
            "print(json.dumps(probe.run_headers(Paths(environ=os.environ))))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path), capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["claude"]["active"] == "v" and report["claude"]["accounts"][0]["error"] is None
    assert provider.message_calls(token) == 1


def test_provider_server_subprocess_script_mode(home, env, tmp_path):
    token = canary("sub")
    script = tmp_path / "script.json"

    def write_script(status):
        tmp = tmp_path / "script.tmp"
        tmp.write_text(json.dumps({"accounts": {token: {
            "status": status, "seven_day": [1.0 if status == "rejected" else 0.2, status],
            "representative_claim": "seven_day"}}}))
        os.replace(str(tmp), str(script))

    write_script("allowed")
    server = subprocess.Popen([sys.executable, "-m", "tests.support.provider", "--port", "0",
                               "--script", str(script)], stdout=subprocess.PIPE, text=True, cwd=str(REPO))
    try:
        line = server.stdout.readline()
        assert line.startswith("provider listening on http://127.0.0.1:")
        paths = Paths(home, environ=env)
        env["SVC_PROVIDER_URL"] = line.split()[-1]
        env["SVC_ACCOUNTS_ENV"] = str(home / "acc.env")
        write_accounts(home / "acc.env", [("S", token, None)], active="S")
        first = probe.run_headers(paths, env)
        assert first["claude"]["accounts"][0]["sevenDay"]["status"] == "allowed"
        write_script("rejected")
        second = probe.run_headers(paths, env)
        assert second["claude"]["accounts"][0]["overallStatus"] == "rejected"
        assert second["claude"]["accounts"][0]["sevenDay"]["pct"] == 100.0
    finally:
        server.terminate()
        server.wait(10)
    assert server.returncode is not None


def test_a_429s_retry_after_stands_in_for_a_missing_reset(home, env, provider):
    from tests.support.fieldsamples import iso, reply

    tokens = {name: canary("ra-" + name) for name in ("field", "week", "both", "short")}
    # A field capture (tests/fixtures/field/SOURCES.md): the 5-hour window rejected, no reset header, retry-after.
    field = reply("claude-429-5h-rejected-retry-after.json")
    provider.set_account(tokens["field"], raw_headers=field["headers"], http_status=429)
    unified = "anthropic-ratelimit-unified-"
    # Built here (no capture of this shape was found): the 7-day window rejected without its reset header,
    # the 5-hour one with its own, and a retry-after of two days, which only the 7-day window can last.
    week = {unified + "status": "rejected", unified + "5h-utilization": "0.40", unified + "5h-status": "allowed",
            unified + "5h-reset": "1790000000", unified + "7d-utilization": "1.00", unified + "7d-status": "rejected",
            "retry-after": "172800"}
    provider.set_account(tokens["week"], raw_headers=week, http_status=429)
    # Both windows without a reset, none rejected, no claim: two days can only be the 7-day window's.
    both = {unified + "status": "rejected", unified + "5h-utilization": "0.40", unified + "7d-utilization": "1.00",
            "retry-after": "172800"}
    provider.set_account(tokens["both"], raw_headers=both, http_status=429)
    # An hour fits either window: with nothing to tell them apart, neither is given a reset.
    provider.set_account(tokens["short"], raw_headers=dict(both, **{"retry-after": "3600"}), http_status=429)
    paths = _setup(home, env, provider)
    write_accounts(paths.accounts_env, [(n.upper(), t, "%s@example.com" % n) for n, t in tokens.items()],
                   active="FIELD")
    before = time.time()
    rows = _by_label(probe.run_headers(paths, env))
    after = time.time()

    def near(resets_at, wait_s):
        return iso(before + wait_s - 1) <= resets_at <= iso(after + wait_s + 1)

    assert rows["field"]["error"] is None and near(rows["field"]["fiveHour"]["resetsAt"], 13262)
    assert rows["week"]["fiveHour"]["resetsAt"] == iso(1790000000)
    assert near(rows["week"]["sevenDay"]["resetsAt"], 172800)
    assert rows["both"]["fiveHour"]["resetsAt"] is None and near(rows["both"]["sevenDay"]["resetsAt"], 172800)
    assert rows["short"]["fiveHour"]["resetsAt"] is None and rows["short"]["sevenDay"]["resetsAt"] is None


def test_an_exchange_stuck_on_a_provider_does_not_hold_the_childs_exit(tmp_path):
    """The child's workers are daemon threads: an exchange that never returns is abandoned at the
    exit. On a pool that joins its threads at exit (ThreadPoolExecutor) this child never ends."""
    from tests.support.home import clean_env

    script = ("import sys, threading\n"
              "from svcposture.probe.workers import Workers\n"
              "pool = Workers(2)\n"
              "stuck = pool.submit(threading.Event().wait)\n"
              "done = pool.submit(lambda a, b: a + b, 2, 3)\n"
              "print(done.result(timeout=30), stuck.done())\n"
              "sys.exit(7)\n")
    proc = subprocess.run([sys.executable, "-c", script], env=clean_env(tmp_path), cwd=str(tmp_path),
                          capture_output=True, timeout=60)
    assert (proc.returncode, proc.stdout.split()) == (7, [b"5", b"False"]), proc.stderr


def test_a_workers_call_that_raises_is_its_futures_exception_and_the_pool_goes_on():
    from svcposture.probe.workers import Workers

    pool = Workers(1)
    failed = pool.submit(lambda: 1 // 0)
    after = pool.submit(str, 42)
    assert after.result(timeout=30) == "42"
    assert isinstance(failed.exception(timeout=30), ZeroDivisionError)
