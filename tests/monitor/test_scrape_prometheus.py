"""Debian's real Prometheus scrapes a real monitor the way docs/fleet-prometheus.md tells users to.

The monitor's scrape listener is off the loopback (0.0.0.0) with TLS: a throw-away CA and a server
certificate for 127.0.0.1 made with the real openssl. Its bearer token file is the one
`svc-monitor init --metrics-token` makes, copied unchanged to Prometheus's credentials_file. The
scrape job is the shipped scripts/prometheus/prometheus.yml (`scheme: https`, `tls_config.ca_file`,
`authorization.credentials_file`), its Prometheus-host paths pointed at the test's files and its
intervals cut to a second. A wrong token in that file is a failed scrape (`up == 0`, the target's
error naming the 401), and the fleet read from Prometheus (`svc-cluster status`) then calls the
host stale; the right token again brings it back.
"""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from tests.support.cli import cli, run_cluster
from tests.support.engines import query, start_prometheus, stop_all, tool, http_json
from tests.support.home import REPO, canary, make_node, node_env
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.tlscerts import make_certs
from tests.support.waiting import wait_until

PROM_DIR = REPO / "scripts" / "prometheus"
TOK1 = canary("promtls1")
INTERVAL_MS = 2000  # the fleet read counts a host live while a scrape succeeded within 4 s
SCRAPE_RE = re.compile(r"svc-monitor scrape listener on https://0\.0\.0\.0:(\d+):")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tool("prometheus")
    work = tmp_path_factory.mktemp("prom-tls")
    certs = make_certs(work / "tls")
    engines = []
    mon = None
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.61, "allowed"), seven_day=(0.20, "allowed"))
        home = make_node(work, "127.0.0.1", ["127.0.0.1"], token=None)
        env = node_env(home, provider.url, [("ACCT1", TOK1, "tls@example.com")], active="ACCT1",
                       interval_ms=INTERVAL_MS, SVC_TRACKER_URL="http://127.0.0.1:9/graphql")
        done = cli(env, "monitor", "init", "--metrics-token")
        assert done.returncode == 0, done.stderr
        token_file = home / ".config" / "svc" / "metrics-token"
        try:
            mon = start_monitor(dict(env, SVC_METRICS_BIND="0.0.0.0:0", SVC_METRICS_TLS_CERT=str(certs.cert),
                                     SVC_METRICS_TLS_KEY=str(certs.key)), timeout=30)
            port = int(wait_until(lambda: SCRAPE_RE.search(mon.stderr_text()), timeout=20,
                                  message="the scrape listener's line").group(1))
            credentials = work / "svc-metrics-token"
            shutil.copy(str(token_file), str(credentials))  # as the docs say: the node's file, unchanged
            os.chmod(str(credentials), 0o640)
            sd = work / "svc-fleet.json"
            done = run_cluster(env, "roster", "sd", "--port", str(port), "--out", str(sd))
            assert done.returncode == 0, done.stderr
            config = _shipped_config(work, certs.ca, credentials, sd)
            prom = start_prometheus(work, config)
            engines.append(prom)
            reader = dict(env, SVC_LIVENESS_READ_SOURCE="prometheus", SVC_PROMETHEUS_URL=prom.base)
            yield {"prom": prom, "reader": reader, "credentials": credentials, "token_file": token_file,
                   "mon": mon}
        finally:
            stop_all(engines)
            if mon is not None:
                mon.stop()


def _shipped_config(work, ca, credentials, sd):
    """scripts/prometheus/prometheus.yml with its Prometheus-host paths pointed at the test's files."""
    text = (PROM_DIR / "prometheus.yml").read_text()
    for old, new in (("/etc/prometheus/svc-ca.pem", str(ca)), ("/etc/prometheus/svc-metrics-token", str(credentials)),
                     ("/etc/prometheus/svc-fleet.json", str(sd))):
        assert old in text, old
        text = text.replace(old, new)
    text = re.sub(r"(scrape_interval|evaluation_interval): \w+", r"\1: 1s", text)
    text = text.replace("refresh_interval: 5m", "refresh_interval: 1s")
    assert "scheme: https" in text and "type: Bearer" in text
    shutil.copy(str(PROM_DIR / "svcposture.rules.yml"), str(work))
    config = work / "prometheus.yml"
    config.write_text(text)
    return config


def _up(prom):
    result = query(prom.base, 'up{job="svc-monitor"}')
    return result[0]["value"][1] if result else None


def _target(prom):
    targets = http_json(prom.base + "/api/v1/targets")["data"]["activeTargets"]
    return targets[0] if targets else None


def _status(reader):
    done = run_cluster(reader, "status", "--json", timeout=60)
    report = json.loads(done.stdout)
    return {row["host"]: row for row in report["hosts"]}


def test_prometheus_scrapes_over_tls_with_the_bearer_file(stack):
    prom = stack["prom"]
    wait_until(lambda: _up(prom) == "1", timeout=90, interval=0.5,
               message="a successful scrape over TLS\n%s" % prom.log_tail())
    target = _target(prom)
    assert target["scrapeUrl"].startswith("https://127.0.0.1:") and target["health"] == "up"
    assert target["labels"]["node"] == "127.0.0.1"
    series = wait_until(lambda: query(prom.base, 'svc_account_utilization_percent{window="five_hour"}'),
                        timeout=60, interval=0.5, message="the account's series through the scrape listener")
    assert float(series[0]["value"][1]) == 61.0 and series[0]["metric"]["account"] == "acct1"
    row = wait_until(lambda: (lambda r: r if r["state"] == "live" and r.get("account") else None)(
        _status(stack["reader"])["127.0.0.1"]), timeout=60, interval=0.5, message="the host live in the fleet read")
    assert row["account"]["label"] == "acct1"


def test_a_wrong_token_is_a_failed_scrape_and_the_fleet_read_says_so(stack):
    prom, credentials = stack["prom"], stack["credentials"]
    wait_until(lambda: _up(prom) == "1", timeout=90, interval=0.5, message="a successful scrape first")
    credentials.write_text("a-token-the-fleet-never-had-0123456789\n")  # Prometheus reads it at every scrape
    wait_until(lambda: _up(prom) == "0", timeout=60, interval=0.5, message="up == 0 after the wrong token")
    target = _target(prom)
    assert target["health"] == "down" and "401" in target["lastError"], target["lastError"]
    wait_until(lambda: _status(stack["reader"])["127.0.0.1"]["state"] == "stale", timeout=60, interval=0.5,
               message="the host stale in svc-cluster status")
    done = run_cluster(stack["reader"], "status", timeout=60)
    assert "stale" in done.stdout and "127.0.0.1" in done.stdout
    # The fleet's token again: the next scrape succeeds, the host is live again.
    shutil.copy(str(stack["token_file"]), str(credentials))
    wait_until(lambda: _status(stack["reader"])["127.0.0.1"]["state"] == "live", timeout=60, interval=0.5,
               message="the host live again with the right token")
    assert stack["mon"].stderr_text().count("Traceback") == 0
