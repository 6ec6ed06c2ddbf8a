"""A tracker or Loki that trickles its reply (one byte every 2 s, inside any per-recv
timeout) cannot hang /api/fleet nor pile up the monitor's threads: the real monitor,
20 concurrent readers on real sockets, and the thread count from /proc."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.home import BEARER, make_node, node_env
from tests.support.monitor import http_get, start_monitor
from tests.support.slowupstream import SlowUpstream
from tests.support.waiting import wait_until
from tests.monitor.test_metrics_openapi import _validate

READERS = 20
# A reader that has no answer by then has been left waiting on the read: the
# monitor promises one within a few seconds (3 s of waiting, then the stale body).
READER_TIMEOUT_S = 12.0


def _threads(pid: int) -> int:
    with open("/proc/%d/status" % pid) as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("Threads:"))


def _settled_threads(pid: int) -> int:
    """The thread count once it has stayed the same for five polls in a row."""
    seen = []

    def steady() -> bool:
        seen.append(_threads(pid))
        return len(seen) >= 5 and len(set(seen[-5:])) == 1
    wait_until(steady, timeout=30, interval=0.2, message="a steady thread count")
    return seen[-1]


def _readers(url: str) -> list:
    def one(_: int) -> dict:
        status, _headers, body = http_get(url, "/api/fleet", timeout=READER_TIMEOUT_S)
        assert status == 200
        return json.loads(body)
    with ThreadPoolExecutor(READERS) as pool:
        return list(pool.map(one, range(READERS)))


@pytest.fixture(params=["tracker", "loki"])
def node(request, tmp_path):
    with SlowUpstream(host="n1") as upstream:
        if request.param == "tracker":
            home = make_node(tmp_path, "n1", ["n1"], anchor="OPS-1")
            env = node_env(home, tracker_url=upstream.url + "/graphql")
        else:
            home = make_node(tmp_path, "n1", ["n1"])
            env = node_env(home, SVC_LIVENESS_READ_SOURCE="loki", SVC_LOKI_URL=upstream.url,
                           SVC_TRACKER_URL="http://127.0.0.1:9/graphql")
        env["SVC_FLEET_TTL_S"] = "0"  # every reader wants a fresh read: the worst case
        mon = start_monitor(env, args=("--no-probe",))
        try:
            yield mon, upstream, request.param
        finally:
            mon.stop()


def test_a_trickling_upstream_gets_every_reader_an_answer_and_no_thread_stays(node):
    mon, upstream, source = node
    baseline = _settled_threads(mon.pid)

    # Before any good read: an error body, within the wait, for every reader.
    upstream.trickle = True
    bodies = _readers(mon.url)
    assert all(b["hosts"] == [] and "still being read" in b["error"] for b in bodies), bodies[0]
    _validate(json.loads(mon.get("/api/openapi.json")[2]), {"$ref": "#/components/schemas/FleetReport"}, bodies[0])
    assert upstream.trickled >= 1
    wait_until(lambda: _threads(mon.pid) <= baseline, timeout=60,
               message="threads back to %d after the trickled read" % baseline)

    # A good read, then a trickling one: the last good body, marked stale, with its age.
    upstream.trickle = False
    good = wait_until(lambda: (lambda b: b if not b.get("error") else None)(json.loads(mon.get("/api/fleet")[2])),
                      timeout=30, message="a good fleet read")
    assert [h["host"] for h in good["hosts"]] == ["n1"] and good["source"] == source
    upstream.trickle = True
    bodies = _readers(mon.url)
    doc = json.loads(mon.get("/api/openapi.json")[2])
    for body in bodies:
        assert body["stale"] is True and isinstance(body["staleAgeS"], float) and body["staleAgeS"] >= 0, body
        assert body["hosts"] == good["hosts"] and body["generatedAt"] == good["generatedAt"]
        _validate(doc, {"$ref": "#/components/schemas/FleetReport"}, body)  # the document describes it
    wait_until(lambda: _threads(mon.pid) <= baseline, timeout=60,
               message="threads back to %d after the second trickled read" % baseline)
    assert mon.proc.poll() is None


def test_svc_cluster_status_ends_against_a_trickling_tracker(tmp_path):
    """The command-line read has the same total deadline: it ends, with the tracker named."""
    with SlowUpstream() as upstream:
        upstream.trickle = True
        home = make_node(tmp_path, "n1", ["n1"], anchor="OPS-1")
        env = node_env(home, tracker_url=upstream.url + "/graphql")
        done = subprocess.run([sys.executable, "-m", "svcposture", "cluster", "status", "--json"], env=env,
                              capture_output=True, text=True, timeout=60)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and "did not answer within 10 s" in report["error"], (done.stdout, done.stderr)
    assert BEARER not in done.stdout + done.stderr


def test_hud_once_ends_against_a_trickling_monitor(tmp_path):
    """`svc-monitor hud --once` reads under the same total deadline (20 s) as the cluster clients."""
    with SlowUpstream() as upstream:
        upstream.trickle = True
        home = tmp_path / "home"
        home.mkdir()
        done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "hud", "--once", "--url", upstream.url],
                              env=node_env(home), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "cannot reach the monitor at %s: no complete answer within 20 s" % upstream.url in done.stderr
    assert "Traceback" not in done.stderr


def _provider_calls(url: str) -> Any:
    from svcposture.claude.provider import fetch_usage, probe_account
    from svcposture.codex.child import fetch_codex_usage
    return {
        "header probe": lambda: probe_account("tok-trickle", {"SVC_PROVIDER_URL": url}, 1.0)["error"],
        "usage probe": lambda: fetch_usage("tok-trickle", {"SVC_PROVIDER_URL": url}, 1.0, None, None)["error"],
        "codex usage": lambda: fetch_codex_usage("tok-trickle", None, "/nonexistent", {"SVC_CODEX_URL": url},
                                                 1.0)["error"],
    }


@pytest.mark.parametrize("call", ["header probe", "usage probe", "codex usage"])
def test_a_provider_trickling_its_reply_is_a_timeout_at_the_request_deadline(call: str) -> None:
    """The probe child's requests go through _http's Exchange: a provider sending a byte every
    0.3 s, inside any per-recv timeout, is cut at the request's total deadline (1 s here)."""
    import threading

    with SlowUpstream(byte_every_s=0.3) as upstream:
        upstream.trickle = True
        result: list = []
        worker = threading.Thread(target=lambda: result.append(_provider_calls(upstream.url)[call]()), daemon=True)
        started = time.monotonic()
        worker.start()
        worker.join(15.0)
        elapsed = time.monotonic() - started
    assert result, "%s still reading after %.1f s" % (call, elapsed)
    assert result[0]["kind"] == "timeout" and elapsed < 10.0, (result, elapsed)
