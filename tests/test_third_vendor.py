"""A third vendor is one package and one registry line (docs/vendors.md), through a real monitor.

The stand-in vendor "acme" (tests/support/thirdvendor/) is registered only by
`SVC_VENDORS=tests.support.thirdvendor` in the node's environment: the
monitor, its probe children, guard and switch all import it from there. Its
accounts go through posture (`/api/accounts?provider=acme` and the stream),
history, `/metrics`, `guard --provider acme` and `switch --provider acme`,
beside a Claude account whose body stays the contract's. Its optional members
go through `svc-monitor init` (its commented example) and `svc-monitor demo`
(its demo account on the simulated provider). MCP: tests/mcp/test_mcp_third_vendor.py.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.home import accounts_path, canary, files_text, monitor_env, set_host_name, write_accounts
from tests.support.monitor import SSEClient, start_monitor
from tests.support.provider import ProviderServer
from tests.support.thirdvendor.server import AcmeServer, quota_reply
from tests.support.waiting import wait_until

from svcposture.envfile.exportline import active_label

CLAUDE_TOKEN = canary("acmeclaude")
KEY_ONE = "acme-key-CANARY-one-" + "3" * 16
KEY_TWO = "acme-key-CANARY-two-" + "4" * 16
SECRETS = (CLAUDE_TOKEN, KEY_ONE, KEY_TWO)
REGISTRY_LINE = {"SVC_VENDORS": "tests.support.thirdvendor"}


def run(env, *args):
    done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", *args], env=env, capture_output=True,
                          timeout=60)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert "Traceback" not in err, err
    assert not any(secret in out + err for secret in SECRETS)
    return done.returncode, out, err


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    root = tmp_path_factory.mktemp("third-vendor")
    home = root / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "acme-node")
    reset_5h, reset_7d = int(time.time()) + 3600, int(time.time()) + 4 * 86400
    extra = ('ACME_KEY_ONE="%s"  # one@acme.example\nACME_KEY_TWO="%s"  # two@acme.example\n'
             'export ACME_KEY="$ACME_KEY_ONE"\n' % (KEY_ONE, KEY_TWO))
    write_accounts(accounts_path(home), [("ACCT1", CLAUDE_TOKEN, "c@x.example")], active="ACCT1", extra=extra)
    with ProviderServer() as provider, AcmeServer() as acme:
        provider.set_account(CLAUDE_TOKEN, five_hour=(0.30, "allowed"), seven_day=(0.10, "allowed"))
        acme.set_reply(KEY_ONE, quota_reply(0.42, 0.20, reset_5h, reset_7d))
        acme.set_reply(KEY_TWO, quota_reply(0.60, 0.05, reset_5h, reset_7d))
        env = monitor_env(home, provider.url, SVC_ACME_URL=acme.url, SVC_PROBE_INTERVAL_S="1",
                          SVC_POSTURE_TTL_S="1", SVC_GUARD_BUDGET_MS="5000", **REGISTRY_LINE)
        mon = start_monitor(env)
        try:
            env["SVC_MONITOR_PORT"] = str(mon.port)
            wait_until(lambda: (mon.get_json("/api/accounts?provider=acme")[1].get("active") or {}).get("label"),
                       30, message="the acme posture")
            yield home, env, mon
        finally:
            mon.stop()


def test_posture_for_the_third_vendor_is_served_beside_claude(node) -> None:
    home, env, mon = node
    status, body = mon.get_json("/api/accounts?provider=acme")
    assert status == 200 and body["available"] is True and body["status"] == "ok"
    assert [a["label"] for a in body["accounts"]] == ["acme-one", "acme-two"]
    one = body["accounts"][0]
    assert (one["provider"], one["email"], one["fiveHour"]["pct"], one["sevenDay"]["pct"]) == \
        ("acme", "one@acme.example", 42.0, 20.0)
    assert body["active"]["label"] == "acme-one" and body["siblingWithHeadroom"]["label"] == "acme-two"
    status, claude = mon.get_json("/api/accounts")
    assert status == 200 and [a["label"] for a in claude["accounts"]] == ["acct1"]
    assert "provider" not in claude["accounts"][0]
    # The registry is the only list of names: a bad value names the third vendor too.
    status, bad = mon.get_json("/api/accounts?provider=acmee")
    assert status == 400 and "claude, codex, copilot, zai, kimi, acme" in bad["message"]
    status, spec = mon.get_json("/api/openapi.json")
    enums = [p["schema"]["enum"] for p in spec["paths"]["/api/accounts"]["get"]["parameters"]
             if p["name"] == "provider"]
    assert enums == [["claude", "codex", "copilot", "zai", "kimi", "acme"]]


def test_the_stream_serves_the_third_vendor(node) -> None:
    _home, _env, mon = node
    stream = SSEClient(mon.port, "/api/accounts/stream?provider=acme")
    try:
        event = stream.next_event()
    finally:
        stream.sock.close()
    frame = json.loads(event["data"])
    assert stream.status == 200 and frame["available"] is True and frame["accounts"][0]["provider"] == "acme"


def test_the_advice_names_the_third_vendors_accounts(node) -> None:
    _home, _env, mon = node
    status, body = mon.get_json("/api/advice?provider=acme")
    assert status == 200 and body["available"] is True and body["provider"] == "acme"
    assert body["active"]["label"] == "acme-one" and body["advice"] == "stay"
    # acme-two has less headroom: no candidate, but listed with its health.
    assert [(r["label"], r["candidate"], r["health"]) for r in body["ranked"]] == [("acme-two", False, "ok")]
    assert "acme-one" in body["reason"]
    status, vendors = mon.get_json("/api/vendors")
    assert status == 200 and {"name": "acme", "displayName": "Acme", "shown": True} in vendors["vendors"]
    assert [v["name"] for v in vendors["vendors"]] == ["claude", "codex", "copilot", "zai", "kimi", "acme"]


def test_history_and_metrics_carry_the_third_vendor(node) -> None:
    _home, _env, mon = node

    def history_row():
        status, body = mon.get_json("/api/history?hours=1")
        return status == 200 and (body.get("accounts") or {}).get("acme-one")

    row = wait_until(history_row, 30, message="acme-one in the history")
    assert row["provider"] == "acme" and row["fiveHour"][-1][1] == 42.0
    text = mon.get("/metrics")[2].decode()
    assert re.search(r'^svc_account_utilization_percent\{account="acme-one",provider="acme",[^}]*window="five_hour"\} '
                     r'42\.0$', text, re.M), text
    assert re.search(r'^svc_node_active_account\{node="acme-node",account="acme-one",provider="acme"[^}]*\} 1$',
                     text, re.M), text
    assert 'svc_posture_available{provider="acme"} 1' in text


def test_guard_and_switch_take_the_third_vendor(node) -> None:
    home, env, mon = node
    code, out, _ = run(env, "guard", "--provider", "acme", "--json")
    decision = json.loads(out)
    assert code == 0 and (decision["account"], decision["provider"], decision["pct"]) == ("acme-one", "acme", 42.0)
    assert run(env, "guard", "--provider", "acme", "--account", "acme-two", "--reserve", "50")[0] == 1
    code, out, err = run(env, "switch", "--provider", "acme", "--to", "acme-two", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert (result["switched"], result["from"], result["to"], result["provider"]) == (True, "acme-one", "acme-two",
                                                                                      "acme")
    data = accounts_path(home).read_bytes()
    assert data.count(b"export ACME_KEY=") == 1 and b'export ACME_KEY="$ACME_KEY_TWO"' in data
    # The Claude export line is left as it was.
    assert active_label(data, "claude") == "acct1"
    wait_until(lambda: mon.get_json("/api/accounts?provider=acme")[1]["active"]["label"] == "acme-two", 20,
               message="the monitor to show acme-two")
    events = [json.loads(line) for path in sorted((home / "svc" / "events").glob("*.jsonl"))
              for line in path.read_text().splitlines() if line.strip()]
    switched = [e for e in events if "account.switched" in json.dumps(e)]
    assert switched and '"account.provider": "acme"' in json.dumps(switched[-1])
    # Back, so that the module's other tests see acme-one active whatever their order.
    assert run(env, "switch", "--provider", "acme", "--to", "acme-one")[0] == 0
    wait_until(lambda: mon.get_json("/api/accounts?provider=acme")[1]["active"]["label"] == "acme-one", 20,
               message="the monitor to show acme-one again")


def test_without_the_registry_line_nothing_knows_the_third_vendor(node) -> None:
    home, env, mon = node
    plain = {k: v for k, v in env.items() if k != "SVC_VENDORS"}
    code, _out, err = run(plain, "guard", "--provider", "acme")
    assert code == 2 and "--provider must be claude, codex, copilot, zai or kimi" in err
    code, _out, err = run(plain, "switch", "--provider", "acme", "--to", "acme-two")
    assert code == 2
    code, _out, err = run(dict(env, SVC_VENDORS="tests.support.no_such_vendor"), "guard", "--provider", "acme")
    assert code == 2 and "SVC_VENDORS=tests.support.no_such_vendor" in err


def test_no_key_of_the_third_vendor_leaves_the_env_file(node) -> None:
    home, _env, mon = node
    bodies = [mon.get(path)[2].decode() for path in ("/api/accounts?provider=acme", "/api/accounts", "/metrics",
                                                       "/api/history?hours=1", "/api/trajectory")]
    env_file = accounts_path(home)
    others = files_text(home).replace(env_file.read_text(), "")
    for text in bodies + [others, mon.stderr_text(), mon.stdout_text()]:
        assert not any(secret in text for secret in SECRETS)


# ---------------------------------------------------------------- init and the demo: each vendor's part

def _init_json(env):
    code, out, err = run(env, "init", "--json", "--host-name", "acme-init")
    assert code == 0, err
    return json.loads(out)


def test_init_writes_the_third_vendors_commented_example(tmp_path) -> None:
    from tests.support.home import clean_env
    from tests.support.thirdvendor.vendor import SETUP_HELP

    plain_home, home = tmp_path / "plain", tmp_path / "acme"
    plain_home.mkdir(mode=0o700)
    home.mkdir(mode=0o700)
    plain, report = _init_json(clean_env(plain_home)), _init_json(dict(clean_env(home), **REGISTRY_LINE))
    text = accounts_path(home).read_text()
    # The built-in vendors' part is what it is without the third vendor; its example comes last.
    assert text == accounts_path(plain_home).read_text() + "#\n" + "\n".join(SETUP_HELP.example) + "\n"
    assert report["nextSteps"][0] == plain["nextSteps"][0] + "; for an acme key: copy it from the acme console"
    assert report["nextSteps"][1:] == [step.replace(str(plain_home), str(home)) for step in plain["nextSteps"][1:]]
    # Uncommented and filled in, the example is a usable acme key, the active one.
    key = "acme-key-from-the-console"
    filled = text.replace("# ACME_KEY_WORK=PASTE_TOKEN_HERE", "ACME_KEY_WORK=" + key).replace(
        '# export ACME_KEY="$ACME_KEY_WORK"', 'export ACME_KEY="$ACME_KEY_WORK"')
    accounts_path(home).write_text(filled)
    done = subprocess.run([sys.executable, "-m", "svcposture.probe", "check", "--json"],
                          env=dict(clean_env(home), **REGISTRY_LINE), capture_output=True, timeout=60)
    check = json.loads(done.stdout)
    assert check["acme"] == {"usable": ["acme-work"], "unusable": [], "active": "acme-work", "duplicateActive": []}
    assert key.encode() not in done.stdout + done.stderr


def test_the_simulated_provider_answers_each_vendors_part(tmp_path) -> None:
    # In this process the third vendor is not registered: its part is handed over as a registered one would be.
    import urllib.error
    import urllib.request

    from svcposture.demo import main as demo
    from tests.support.thirdvendor import VENDOR
    from tests.support.thirdvendor.demo import KEY

    clock = [1_800_000_000.0]
    parts = demo.demo_parts() + [VENDOR.demo]
    provider = demo.SimulatedProvider(clock=lambda: clock[0], parts=parts).start()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(path, key):
        request = urllib.request.Request(provider.url + path, headers={"authorization": "Bearer " + key})
        try:
            with opener.open(request, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())
    try:
        status, body = get("/v1/quota", KEY[1])
        windows = {w["seconds"]: w for w in body["windows"]}
        assert status == 200 and windows[18000]["used"] == pytest.approx(0.40) and windows[18000]["resets"] == \
            int(clock[0]) + 3 * 3600
        clock[0] += 3600
        assert {w["seconds"]: w for w in get("/v1/quota", KEY[1])[1]["windows"]}[18000]["used"] == pytest.approx(0.70)
        assert get("/v1/quota", "not-the-key") == (401, {"error": "bad key"})
        assert get("/no/such/route", KEY[1]) == (404, {"error": "not found"})
    finally:
        provider.stop()
    node = demo.DemoNode(provider.url, base_environ=dict(REGISTRY_LINE, PATH="/usr/bin"), parts=parts)
    try:
        text = node.paths.accounts_env.read_text()
        assert "export ACME_KEY_DEMO='%s'  # %s\nexport ACME_KEY=\"$ACME_KEY_DEMO\"\n" % KEY[1:] in text
        assert node.environ["SVC_ACME_URL"] == provider.url and node.environ["SVC_VENDORS"] == \
            REGISTRY_LINE["SVC_VENDORS"]
    finally:
        node.remove()


def test_the_demo_serves_the_third_vendors_accounts(tmp_path) -> None:
    from tests.support.firstlook import Demo, get_json

    started = Demo(tmp_path / "home", ["--port", "0"], env=REGISTRY_LINE).wait_ready()
    try:
        body = wait_until(lambda: (lambda b: b if b.get("available") else None)(
            get_json(started.url + "/api/accounts?provider=acme")), 30, message="the demo's acme posture")
        assert [a["label"] for a in body["accounts"]] == ["acme-demo"] and body["active"]["label"] == "acme-demo"
        account = body["active"]
        assert account["provider"] == "acme" and account["email"] == "wile@demo.invalid"
        assert 40.0 <= account["fiveHour"]["pct"] < 45.0 and account["sevenDay"]["pct"] == 33.0
        # Beside the built-in vendors' demo accounts, as without the third vendor.
        assert [a["label"] for a in get_json(started.url + "/api/accounts")["accounts"]] == ["acct1", "acct2", "acct3"]
        assert [a["label"] for a in get_json(started.url + "/api/accounts?provider=codex")["accounts"]] == \
            ["codex-demo"]
        # Its seeded day of history, as the built-in vendors' accounts have.
        history = get_json(started.url + "/api/history?hours=25")["accounts"]["acme-demo"]
        assert history["provider"] == "acme" and len(history["fiveHour"]) > 100
        home = [l for l in started.lines if "demo home " in l][0].split("demo home ", 1)[1].split(";")[0]
        text = (Path(home) / ".config" / "svc" / "model-accounts.env").read_text()
        assert 'export ACME_KEY="$ACME_KEY_DEMO"' in text
    finally:
        assert started.stop() == 0
