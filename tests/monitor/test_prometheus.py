"""scripts/prometheus with Debian's real promtool and prometheus, scraping a real monitor on loopback."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request

import pytest

from tests.support.cli import run_cluster
from tests.support.home import REPO, canary, make_node, monitor_env
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

PROM_DIR = REPO / "scripts" / "prometheus"
RULES = PROM_DIR / "svcposture.rules.yml"
TOK1 = canary("prom1")
TOK2 = canary("prom2")


def tool(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail("%s is not installed under CI: scripts/run_tests.sh installs Debian's prometheus" % name)
    pytest.skip("%s not installed (apt-get install prometheus)" % name)


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([tool("promtool"), *args], cwd=str(PROM_DIR), capture_output=True, text=True, timeout=120)


def test_rules_pass_promtool_check():
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def test_rule_unit_tests_pass():
    done = promtool("test", "rules", "svcposture.rules.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_rule_unit_tests_can_fail(tmp_path):
    # The unit tests hold the thresholds: a rule loosened to 80 % breaks them.
    shutil.copy(str(PROM_DIR / "svcposture.rules.test.yml"), str(tmp_path))
    (tmp_path / "svcposture.rules.yml").write_text(RULES.read_text().replace(">= 90", ">= 80"))
    done = subprocess.run([tool("promtool"), "test", "rules", "svcposture.rules.test.yml"], cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "SvcAccountNearLimit" in done.stdout + done.stderr


def test_the_refused_credential_rule_test_can_fail(tmp_path):
    # The unit test holds the state it alerts on: a rule on another health breaks it.
    shutil.copy(str(PROM_DIR / "svcposture.rules.test.yml"), str(tmp_path))
    (tmp_path / "svcposture.rules.yml").write_text(RULES.read_text().replace('health="refused"', 'health="ok"'))
    done = subprocess.run([tool("promtool"), "test", "rules", "svcposture.rules.test.yml"], cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "SvcCredentialRefused" in done.stdout + done.stderr


def test_example_config_is_valid(tmp_path):
    # promtool wants the files the example names on the Prometheus host (/etc/prometheus/...) to exist.
    shutil.copy(str(RULES), str(tmp_path))
    text = (PROM_DIR / "prometheus.yml").read_text()
    for name in ("svc-ca.pem", "svc-metrics-token"):
        assert "/etc/prometheus/" + name in text
        (tmp_path / name).write_text("placeholder\n")
        text = text.replace("/etc/prometheus/" + name, str(tmp_path / name))
    (tmp_path / "prometheus.yml").write_text(text)
    done = subprocess.run([tool("promtool"), "check", "config", "prometheus.yml"], cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "scheme: https" in text and "credentials_file:" in text and "ca_file:" in text


def test_rules_use_only_metrics_the_monitor_exposes():
    from svcposture.monitor.exposition import render_metrics
    exposed = set(re.findall(r"^# TYPE (\w+) ", render_metrics([("claude", {})], subscribers=0, subscribers_max=1), re.M))
    # The trajectory's wall forecast (docs/trajectory.md) and Prometheus' own `up`.
    exposed |= {"svc_account_forecast_wall_timestamp_seconds", "up"}
    expressions = "\n".join(line for line in RULES.read_text().splitlines()
                            if not line.strip().startswith("#") and "summary:" not in line)
    used = set(re.findall(r"\b(svc_\w+|up)\b", expressions))
    assert "svc_account_utilization_percent" in used and "up" in used
    assert used <= exposed, used - exposed


# ---------------------------------------------------------------- roster sd

def test_roster_sd(tmp_path):
    home = make_node(tmp_path, "a", ["node-a", "node-b", "node-a", "bad name", "<x>"])
    env = monitor_env(home, "http://127.0.0.1:9")
    done = run_cluster(env, "roster", "sd", "--port", "7411")
    assert done.returncode == 0
    assert json.loads(done.stdout) == [{"targets": ["node-a:7411"], "labels": {"node": "node-a"}},
                                       {"targets": ["node-b:7411"], "labels": {"node": "node-b"}}]
    assert "skipped 'bad name'" in done.stderr and "'<x>'" in done.stderr
    out = tmp_path / "sd" / "fleet.json"
    out.parent.mkdir()
    done = run_cluster(env, "roster", "sd", "--out", str(out))
    assert done.returncode == 0 and json.loads(out.read_text())[0]["targets"] == ["node-a:7400"]
    assert out.stat().st_mode & 0o777 == 0o644
    for args in (("--port", "x"), ("--port", "0"), ("--port", "70000")):
        done = run_cluster(env, "roster", "sd", *args)
        assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    (home / "svc" / "cluster" / "cluster.json").write_text('{"roster": "nope"')
    done = run_cluster(env, "roster", "sd")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    done = run_cluster(env, "roster", "sd", "--out", str(tmp_path / "missing-dir" / "f.json"))
    assert done.returncode in (1, 2) and "Traceback" not in done.stderr


# ---------------------------------------------------------------- a real prometheus

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prom_get(base: str, path: str, **params: str) -> dict:
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        return json.loads(response.read())


def test_real_prometheus_scrapes_a_monitor_and_fires_a_rule(tmp_path, monitors):
    binary = tool("prometheus")
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.42, "allowed"), seven_day=(0.10, "allowed"))
        provider.set_account(TOK2, five_hour=(0.05, "allowed"), seven_day=(0.30, "allowed"))
        home = make_node(tmp_path, "127.0.0.1", ["127.0.0.1"], token=None)
        env = monitor_env(home, provider.url, accounts=[("ACCT1", TOK1, "a@example.com"),
                                                        ("ACCT2", TOK2, "b@example.com")], active="ACCT1")
        mon = monitors.start(env)
        prom = None
        try:
            sd = tmp_path / "prom" / "svc-fleet.json"
            sd.parent.mkdir()
            done = run_cluster(env, "roster", "sd", "--port", str(mon.port), "--out", str(sd))
            assert done.returncode == 0, done.stderr
            # The shipped rules, with their `for:` holds cut to nothing so the test need not wait minutes.
            (sd.parent / "svcposture.rules.yml").write_text(re.sub(r"for: \w+", "for: 0s", RULES.read_text()))
            port = free_port()
            (sd.parent / "prometheus.yml").write_text(
                "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "rule_files: [svcposture.rules.yml]\n"
                "scrape_configs:\n"
                "  - job_name: svc-monitor\n"
                "    file_sd_configs: [{files: ['%s'], refresh_interval: 1s}]\n" % sd)
            log = open(str(tmp_path / "prometheus.log"), "w")
            prom = subprocess.Popen([binary, "--config.file=%s" % (sd.parent / "prometheus.yml"),
                                     "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
                                     "--web.listen-address=127.0.0.1:%d" % port],
                                    stdout=log, stderr=subprocess.STDOUT, cwd=str(sd.parent))
            base = "http://127.0.0.1:%d" % port

            def series():
                try:
                    result = prom_get(base, "/api/v1/query", query="svc_account_utilization_percent")["data"]["result"]
                except OSError:
                    assert prom.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
                    return None
                return {(r["metric"]["account"], r["metric"]["window"]): float(r["value"][1]) for r in result}

            got = wait_until(lambda: (lambda s: s if s and len(s) == 4 else None)(series()), timeout=90,
                             message="every account's utilization through Prometheus")
            assert got == {("acct1", "five_hour"): 42.0, ("acct1", "seven_day"): 10.0,
                           ("acct2", "five_hour"): 5.0, ("acct2", "seven_day"): 30.0}
            target = prom_get(base, "/api/v1/targets")["data"]["activeTargets"][0]
            assert target["labels"]["node"] == "127.0.0.1" and target["health"] == "up"

            provider.set_account(TOK1, status="rejected", five_hour=(1.04, "rejected"), seven_day=(0.10, "allowed"))

            def exhausted():
                alerts = prom_get(base, "/api/v1/alerts")["data"]["alerts"]
                return [a for a in alerts if a["labels"]["alertname"] == "SvcAccountExhausted"
                        and a["state"] == "firing"]
            firing = wait_until(exhausted, timeout=90, message="SvcAccountExhausted firing")
            assert [(a["labels"]["account"], a["labels"]["window"]) for a in firing] == [("acct1", "five_hour")]
            assert "acct1" in firing[0]["annotations"]["summary"]
        finally:
            if prom is not None:
                prom.terminate()
                try:
                    prom.wait(20)
                except subprocess.TimeoutExpired:
                    prom.kill()
            mon.stop()
