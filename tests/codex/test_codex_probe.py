"""Codex logins in the probe child, run as a real subprocess against the stand-in usage endpoint."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from svcposture.probe import runner as probe
from svcposture.codex.child import TICKET_PREFIX
from svcposture.codex.errors import CODEX_MESSAGES
from svcposture.codex.state import STATE_ENV, encode_state
from svcposture import hrw
from svcposture.paths import Paths
from tests.support.codex import (CORPUS, CodexServer, make_login, token_count_line, usage_reply,
                                 write_codex_accounts, write_session)
from tests.support.home import REPO, accounts_path, assert_no_canary, canary


@pytest.fixture
def server():
    with CodexServer() as s:
        yield s


def _paths(home: Path, env: dict, server: CodexServer, **extra: str) -> Paths:
    env["SVC_CODEX_URL"] = server.url
    env["SVC_PROVIDER_URL"] = "http://127.0.0.1:9"
    env.update(extra)
    return Paths(home, environ=env)


def _rows(report):
    return {r["label"]: r for r in report["codex"]["accounts"]}


def _login(home: Path, server: CodexServer, name: str, body=None, status: int = 200, account_id=None, **kw):
    token, refresh = canary("cx" + name), canary("rt" + name)
    directory = home / ("codex-" + name)
    make_login(directory, token, account_id or ("acct-" + name), refresh=refresh)
    server.set_reply(token, body if body is not None else usage_reply(), status, account_id=account_id, **kw)
    return directory, token, refresh


def test_every_corpus_reply_in_one_sweep(home, env, server):
    entries, secrets = [], []
    for index, (name, body, status, _expected) in enumerate(CORPUS):
        directory, token, refresh = _login(home, server, "c%d" % index, body, status)
        entries.append(("C%d" % index, str(directory), "c%d@example.com" % index))
        secrets += [token, refresh]
    paths = _paths(home, env, server, SVC_PROBE_DEADLINE_S="20")
    write_codex_accounts(accounts_path(home), entries, active="C0")
    report = probe.run_headers(paths, env)
    assert_no_canary([json.dumps(report)], secrets)
    assert report["available"] is True and "claude" not in report  # no Claude line: nothing of Claude
    rows = _rows(report)
    assert list(rows) == ["codex-c%d" % i for i in range(len(CORPUS))]
    assert rows["codex-c0"]["active"] is True and sum(r["active"] for r in rows.values()) == 1
    now = time.time()
    for index, (name, _body, _status, expected) in enumerate(CORPUS):
        row = rows["codex-c%d" % index]
        assert row["provider"] == "codex" and row["polledAt"] is not None, name
        if "error" in expected:
            assert row["error"]["kind"] == expected["error"], name
            assert row["source"] is None and row["fiveHour"] is None and row["sevenDay"] is None, name
            continue
        assert row["error"] is None and row["source"] == "api", name
        for field in ("fiveHour", "sevenDay"):
            want, got = expected.get(field), row[field]
            if want is None:
                assert got is None, (name, field)
                continue
            assert got["pct"] == want[0] and got["derived"] is True, (name, field)
            if want[1] == "soon":
                from svcposture._time import parse_iso_ms
                assert now < parse_iso_ms(got["resetsAt"]) / 1000 < now + 90000, name
            else:
                assert got["resetsAt"] == want[1], (name, field)
        assert [(w["seconds"], w["pct"]) for w in row["extraWindows"]] == expected.get("extra", []), name
        if "review" in expected:
            assert [(w["seconds"], w["pct"]) for w in row["codeReview"]] == expected["review"], name
        if "planType" in expected:
            assert row["planType"] == expected["planType"], name
        if "credits" in expected:
            assert row["credits"] == expected["credits"], name
        if "status5" in expected:
            assert row["fiveHour"]["status"] == expected["status5"] and row["sevenDay"]["status"] == expected["status7"]


def test_request_carries_the_token_the_account_and_accept(home, env, server):
    directory, token, _ = _login(home, server, "one", account_id="acct-777")
    paths = _paths(home, env, server)
    write_codex_accounts(accounts_path(home), [("ONE", str(directory), None)])
    report = probe.run_headers(paths, env)
    row = _rows(report)["codex-one"]
    assert row["error"] is None and row["fiveHour"]["pct"] == 10.0
    assert row["accountKey"] and len(row["accountKey"]) == 16 and "acct-777" not in json.dumps(report)
    assert server.requests == [{"path": "/backend-api/wham/usage", "authorization": "Bearer " + token,
                                "account": "acct-777", "accept": "application/json"}]


def test_unauthorized_names_the_fix_and_never_refreshes(home, env, server):
    directory, token, refresh = _login(home, server, "old", {"detail": "expired"}, 401)
    paths = _paths(home, env, server)
    write_codex_accounts(accounts_path(home), [("OLD", str(directory), None)])
    before = (directory / "auth.json").read_bytes()
    row = _rows(probe.run_headers(paths, env))["codex-old"]
    assert row["error"] == {"kind": "unauthorized", "message": CODEX_MESSAGES["unauthorized"].refused,
                            "httpStatus": 401, "fix": "run `codex login` with CODEX_HOME=%s" % directory}
    assert (directory / "auth.json").read_bytes() == before
    assert [r["path"] for r in server.requests] == ["/backend-api/wham/usage"]


def _bad_logins(home: Path):
    """(name, directory or value in the file, expected message index) of each bad login."""
    bad = []
    loose = home / "loose"
    make_login(loose, canary("loose"), mode=0o644)
    bad.append(("LOOSE", str(loose), "loose_mode"))
    group_read = home / "groupread"
    make_login(group_read, canary("gr"), mode=0o640)
    bad.append(("GROUPREAD", str(group_read), "loose_mode"))
    linked = home / "linked"
    real = make_login(home / "real-elsewhere", canary("linked"))
    linked.mkdir()
    os.symlink(str(real), str(linked / "auth.json"))
    bad.append(("LINKED", str(linked), "symlink"))
    bad.append(("RELATIVE", "codex-home/relative", "not_absolute"))
    bad.append(("MISSING", str(home / "does-not-exist"), "no_directory"))
    nofile = home / "nofile"
    nofile.mkdir()
    bad.append(("NOFILE", str(nofile), "no_auth_file"))
    huge = home / "huge"
    make_login(huge, canary("huge"))
    with open(str(huge / "auth.json"), "a") as fh:
        fh.truncate(10 * 1024 * 1024)
    bad.append(("HUGE", str(huge), "too_large"))
    shapes = {"SHAPELIST": "[1, 2]", "SHAPETOKENS": '{"tokens": {"access_token": 42}}', "NOTJSON": "tokens=abc",
              "EMPTY": "", "CTRL": '{"tokens": {"access_token": "abc\\r\\nX-Evil: 1"}}'}
    for name, text in shapes.items():
        d = home / name.lower()
        d.mkdir()
        fd = os.open(str(d / "auth.json"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, text.encode())
        os.close(fd)
        bad.append((name, str(d), "bad_shape"))
    apikey = home / "apikey"
    make_login(apikey, None, api_key=canary("apikey"))
    bad.append(("APIKEY", str(apikey), "api_key_only"))
    fifo = home / "fifo"
    fifo.mkdir()
    os.mkfifo(str(fifo / "auth.json"), 0o600)
    bad.append(("FIFO", str(fifo), "not_regular_file"))
    return bad


def test_bad_logins_are_one_line_errors_and_send_nothing(home, env, server):
    good_dir, good_token, _ = _login(home, server, "good")
    bad = _bad_logins(home)
    entries = [(name, value, None) for name, value, _ in bad] + [("GOOD", str(good_dir), "me@example.com")]
    paths = _paths(home, env, server)
    write_codex_accounts(accounts_path(home), entries, active="GOOD")
    started = time.monotonic()
    report = probe.run_headers(paths, env)
    assert time.monotonic() - started < 20  # a FIFO never blocks the sweep
    rows = _rows(report)
    for name, value, index in bad:
        err = rows["codex-" + name.lower()]["error"]
        assert err["kind"] == "config" and err["message"] == getattr(CODEX_MESSAGES["config"], index), name
        assert "\n" not in err["message"] and (err["fix"] is None or "\n" not in err["fix"])
    assert rows["codex-relative"]["error"]["fix"] == "set the CODEX_HOME_ line to an absolute directory"
    assert rows["codex-loose"]["error"]["fix"] == "run `chmod 600 %s/auth.json`" % (home / "loose")
    # A line naming no directory is not echoed: its text could be anything at all.
    assert rows["codex-missing"]["error"]["fix"] == \
        "create the directory and run `codex login` with CODEX_HOME set to it"
    assert rows["codex-good"]["error"] is None and rows["codex-good"]["fiveHour"]["pct"] == 10.0
    assert [r["authorization"] for r in server.requests] == ["Bearer " + good_token]
    assert "Traceback" not in json.dumps(report)


def test_file_with_claude_and_codex_lines_reports_each_under_its_name(home, env, server, tmp_path):
    from tests.support.provider import ProviderServer

    directory, token, refresh = _login(home, server, "work")
    claude = canary("claude")
    with ProviderServer() as provider:
        provider.set_account(claude, five_hour=(0.1, "allowed"), seven_day=(0.2, "allowed"))
        paths = _paths(home, env, server, SVC_PROVIDER_URL=provider.url)
        text = ('export MODEL_TOKEN_ACCT1="%s"  # a@example.com\nexport MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n'
                'CODEX_HOME_WORK=%s  # w@example.com\nexport CODEX_HOME="$CODEX_HOME_WORK"\n') % (claude, directory)
        accounts_path(home).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(accounts_path(home)), os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, text.encode())
        os.close(fd)
        report = probe.run_headers(paths, env)
    assert_no_canary([json.dumps(report)], [token, refresh, claude])
    assert set(report) == {"available", "claude", "codex"}
    assert report["claude"]["active"] == "acct1" and [a["label"] for a in report["claude"]["accounts"]] == ["acct1"]
    block = report["codex"]
    assert block["available"] is True and block["active"] == "codex-work"
    assert block["accounts"][0]["email"] == "w@example.com" and block["accounts"][0]["source"] == "api"


def test_no_codex_line_means_no_codex_key(home, env, server):
    from tests.support.home import write_accounts
    from tests.support.provider import ProviderServer

    with ProviderServer() as provider:
        token = canary("only")
        provider.set_account(token)
        paths = _paths(home, env, server, SVC_PROVIDER_URL=provider.url)
        write_accounts(accounts_path(home), [("A", token, None)], active="A")
        report = probe.run_headers(paths, env)
        check = probe.run_check(paths, env)
    assert "codex" not in report and "codex" not in check and report["available"] is True
    assert server.requests == []


def test_parent_codex_home_does_not_decide_the_active_login(home, env, server):
    a, _, _ = _login(home, server, "a")
    b, _, _ = _login(home, server, "b")
    env["CODEX_HOME"] = str(b)
    env["CODEX_HOME_C"] = str(a)
    paths = _paths(home, env, server)
    write_codex_accounts(accounts_path(home), [("A", str(a), None), ("B", str(b), None)],
                         extra="CODEX_HOME_D=PASTE_DIR_HERE\n")
    report = probe.run_headers(paths, env)
    assert report["codex"]["active"] is None and list(_rows(report)) == ["codex-a", "codex-b"]
    assert report["codex"]["unusable"] == ["codex-d"]
    check = probe.run_check(paths, env)
    assert check["codex"] == {"usable": ["codex-a", "codex-b"], "unusable": ["codex-d"], "active": None,
                              "duplicateActive": []}


def test_session_sample_is_taken_without_a_request(home, env, server):
    directory, token, _ = _login(home, server, "s")
    now = time.time()
    write_session(directory, now - 30, [token_count_line(now - 30, (42.0, 300, now + 1000), (91.0, 10080, now + 9000))])
    paths = _paths(home, env, server)
    write_codex_accounts(accounts_path(home), [("S", str(directory), None)])
    row = _rows(probe.run_headers(paths, env))["codex-s"]
    assert row["source"] == "session" and row["polledAt"] is None and server.requests == []
    assert row["fiveHour"]["pct"] == 42.0 and row["sevenDay"]["status"] == "allowed_warning"
    sampled = row["sampledAt"]
    assert abs(sampled / 1000 - (now - 30)) < 1
    # The monitor already holds that sample: the next sweep asks the endpoint.
    state = encode_state("n1", None, None, {"codex-s": {"lastSampleMs": sampled, "notBeforeMs": None}})
    row = _rows(probe.run_headers(paths, dict(env, **{STATE_ENV: state})))["codex-s"]
    assert row["source"] == "api" and row["polledAt"] is not None and len(server.requests) == 1


def test_usage_floor_sends_nothing(home, env, server):
    directory, _, _ = _login(home, server, "f")
    paths = _paths(home, env, server)
    write_codex_accounts(accounts_path(home), [("F", str(directory), None)])
    future = int(time.time() * 1000) + 120000
    state = encode_state(None, None, None, {"codex-f": {"lastSampleMs": None, "notBeforeMs": future}})
    row = _rows(probe.run_headers(paths, dict(env, **{STATE_ENV: state})))["codex-f"]
    assert row["skipped"] == "floor" and row["source"] is None and row["polledAt"] is None
    assert server.requests == []


def _id_owned_by(owner: str, hosts) -> str:
    for i in range(1000):
        candidate = "acct-%d" % i
        if hrw.owner(TICKET_PREFIX + candidate, hosts) == owner:
            return candidate
    raise AssertionError("no account id owned by %s" % owner)


def test_one_poller_per_login_across_the_fleet(home, env, server):
    hosts = ["host-a", "host-b", "host-c"]
    mine, _, _ = _login(home, server, "mine", account_id=_id_owned_by("host-a", hosts))
    theirs, _, _ = _login(home, server, "theirs", account_id=_id_owned_by("host-b", hosts))
    paths = _paths(home, env, server)
    write_codex_accounts(accounts_path(home), [("MINE", str(mine), None), ("THEIRS", str(theirs), None)])
    state = encode_state("host-a", hosts, hosts, {})
    rows = _rows(probe.run_headers(paths, dict(env, **{STATE_ENV: state})))
    assert rows["codex-mine"]["source"] == "api" and rows["codex-mine"]["pollOwner"] is None
    assert rows["codex-theirs"]["skipped"] == "owner" and rows["codex-theirs"]["pollOwner"] == "host-b"
    assert len(server.requests) == 1
    # host-b is not live: its logins fall to the live hosts.
    state = encode_state("host-a", hosts, ["host-a"], {})
    rows = _rows(probe.run_headers(paths, dict(env, **{STATE_ENV: state})))
    assert rows["codex-theirs"]["source"] == "api" and len(server.requests) == 3


def test_slow_endpoint_is_a_timeout_on_that_login_only(home, env, server):
    slow, _, _ = _login(home, server, "slow", delay=5.0)
    fast, _, _ = _login(home, server, "fast")
    paths = _paths(home, env, server, SVC_PROBE_TIMEOUT_S="0.5")
    write_codex_accounts(accounts_path(home), [("SLOW", str(slow), None), ("FAST", str(fast), None)])
    rows = _rows(probe.run_headers(paths, env))
    assert rows["codex-slow"]["error"]["kind"] == "timeout" and rows["codex-slow"]["polledAt"] is not None
    assert rows["codex-fast"]["error"] is None


def test_command_line_run_by_hand_is_token_free(home, env, server):
    directory, token, refresh = _login(home, server, "cli")
    env = dict(env, SVC_CODEX_URL=server.url, SVC_PROVIDER_URL="http://127.0.0.1:9")
    write_codex_accounts(accounts_path(home), [("CLI", str(directory), "c@example.com")], active="CLI")
    out = subprocess.run([sys.executable, "-m", "svcposture.probe", "headers", "--json"], env=env, cwd=str(REPO),
                         capture_output=True, text=True, timeout=60)
    assert_no_canary([out.stdout, out.stderr], [token, refresh])
    report = json.loads(out.stdout)
    assert report["codex"]["accounts"][0]["fiveHour"]["pct"] == 10.0


def test_human_output_lists_codex_logins_with_their_fix(home, env, server):
    good, token, refresh = _login(home, server, "good", usage_reply(12.5, 95))
    bad, bad_token, bad_refresh = _login(home, server, "bad", {"detail": "expired"}, 401)
    env = dict(env, SVC_CODEX_URL=server.url, SVC_PROVIDER_URL="http://127.0.0.1:9")
    write_codex_accounts(accounts_path(home), [("GOOD", str(good), "g@example.com"), ("BAD", str(bad), None)],
                         active="GOOD")
    outputs = {}
    for sub in ("headers", "check"):
        out = subprocess.run([sys.executable, "-m", "svcposture.probe", sub], env=env, cwd=str(REPO),
                             capture_output=True, text=True, timeout=60)
        assert_no_canary([out.stdout, out.stderr], [token, refresh, bad_token, bad_refresh])
        assert "Traceback" not in out.stderr
        outputs[sub] = out.stdout.splitlines()
    assert outputs["headers"] == [
        "Codex:",
        "*codex-good g@example.com: 5h 12.5% allowed 7d 95% allowed_warning [api]",
        " codex-bad -: error unauthorized: %s; fix: run `codex login` with CODEX_HOME=%s"
        % (CODEX_MESSAGES["unauthorized"].refused, bad)]
    assert outputs["check"][-4:] == ["Codex usable: codex-good, codex-bad", "Codex unusable: -",
                                     "Codex active: codex-good", "Codex duplicate active: -"]


def test_poll_memory_between_sweeps_keeps_the_floor(home, env, server):
    from svcposture.codex.pollstate import CodexPollState

    directory, _, _ = _login(home, server, "mem")
    paths = _paths(home, env, server)
    write_codex_accounts(accounts_path(home), [("MEM", str(directory), None)])
    memory = CodexPollState()
    sources = []
    for _ in range(3):
        report = probe.run_headers(paths, memory.child_environ(env, "solo"))
        memory.absorb(report["codex"])
        row = _rows(report)["codex-mem"]
        sources.append(row["source"] or row["skipped"])
    # One request, then the floor holds for the sweeps that follow within 180 s.
    assert sources == ["api", "floor", "floor"] and len(server.requests) == 1
    # The codex CLI logs a fresher sample: the next sweep takes it, still without a request.
    now = time.time() + 1
    write_session(directory, now, [token_count_line(now, (77.0, 300, 600), None, spelling="resets_in_seconds")])
    report = probe.run_headers(paths, memory.child_environ(env, "solo"))
    assert _rows(report)["codex-mem"]["source"] == "session" and len(server.requests) == 1


def test_two_hosts_sharing_a_login_send_one_request(tmp_path, server):
    from tests.support.home import clean_env

    hosts = ["host-a", "host-b"]
    token, refresh = canary("shared"), canary("sharedrt")
    server.set_reply(token, usage_reply(33, 44), account_id="acct-shared")
    rows = {}
    for host in hosts:
        node_home = tmp_path / host
        node_home.mkdir(mode=0o700)
        make_login(node_home / ".codex", token, "acct-shared", refresh=refresh)
        write_codex_accounts(accounts_path(node_home), [("SHARED", str(node_home / ".codex"), None)])
        env = dict(clean_env(node_home), SVC_CODEX_URL=server.url, **{STATE_ENV: encode_state(host, hosts, None, {})})
        rows[host] = _rows(probe.run_headers(Paths(node_home, environ=env), env))["codex-shared"]
    owner = hrw.owner(TICKET_PREFIX + "acct-shared", hosts)
    other = next(h for h in hosts if h != owner)
    assert rows[owner]["source"] == "api" and rows[owner]["fiveHour"]["pct"] == 33.0
    assert rows[other]["skipped"] == "owner" and rows[other]["pollOwner"] == owner
    assert len(server.requests) == 1 and rows[owner]["accountKey"] == rows[other]["accountKey"]
