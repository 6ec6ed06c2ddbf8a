"""The library face (docs/architecture.md): what `import svcposture` offers, and what it costs."""
from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

import svcposture
from svcposture import SvcpostureError
from svcposture._time import iso_from_ms, parse_iso_ms
from svcposture.events import EventLog, ratelimit_sampled, status_changed
from svcposture.trajectory.history import append_rows
from svcposture.paths import Paths
from tests.support.home import (REPO, accounts_path, assert_no_canary, canary, clean_env, set_host_name,
                                snapshot, write_accounts)

NODE = "lib-node"
BODY_KEYS = ["available", "node", "generatedAt", "probedAt", "cached", "status", "active", "accounts",
             "siblingWithHeadroom"]
HEAVY = ("http.server", "http.client", "subprocess", "urllib", "urllib.request", "urllib.parse", "socket")


@pytest.fixture
def node_home(home: Path) -> Path:
    set_host_name(home, NODE)
    return home


# ---------------------------------------------------------------- import svcposture

def _fresh(code: str, *flags: str) -> str:
    env = clean_env(Path("/nonexistent"))
    return subprocess.run([sys.executable, *flags, "-c", code], cwd=str(REPO), env=env, capture_output=True,
                          text=True, check=True).stdout


def pulled_in_by_the_interpreter(loaded: set) -> set:
    """What the standard library modules among `loaded` import by themselves on this interpreter,
    in a fresh process (3.9's pathlib imports urllib.parse, 3.13's does not): not the package's doing."""
    stdlib = sorted(m for m in loaded if m.split(".")[0] != "svcposture" and m not in HEAVY)
    code = "import json, sys; before = set(sys.modules); import %s; print(json.dumps(sorted(set(sys.modules) - before)))"
    return set(json.loads(_fresh(code % ", ".join(stdlib)))) if stdlib else set()


def test_import_pulls_in_no_server_process_or_network_module():
    code = ("import json, sys; before = set(sys.modules); import svcposture; "
            "svcposture.forecast; svcposture.SvcpostureError; svcposture.ConfigError; "
            "print(json.dumps(sorted(set(sys.modules) - before)))")
    new = set(json.loads(_fresh(code)))
    heavy = new & set(HEAVY) - pulled_in_by_the_interpreter(new)
    assert not heavy, heavy
    # Without site (nothing preloaded), not even loaded by someone else.
    loaded = json.loads(_fresh("import json, sys, svcposture; print(json.dumps(sorted(sys.modules)))", "-S"))
    assert not set(loaded) & {"http.server", "subprocess", "urllib", "urllib.request", "typing"}


def test_posture_module_loads_no_process_module_until_it_probes():
    code = ("import sys; import svcposture, svcposture.posture.service, svcposture.trajectory.history, svcposture.events; "
            "svcposture.read_posture; svcposture.read_history; svcposture.read_events; "
            "print(int('subprocess' in sys.modules))")
    assert _fresh(code, "-S").strip() == "0"


def test_the_face_is_what_the_design_lists():
    for name in ("read_posture", "read_events", "read_history", "forecast", "owner", "start_server",
                 "SvcpostureError", "__version__", "ConfigError", "EventLogError", "LatchError"):
        assert name in svcposture.__all__ and name in dir(svcposture)
        assert getattr(svcposture, name) is not None
    for name in ("read_posture", "read_events", "read_history", "forecast", "owner", "start_server"):
        func = getattr(svcposture, name)
        assert func.__doc__ and len(func.__doc__) > 80, name
    params = inspect.signature(svcposture.read_posture).parameters
    assert list(params) == ["home", "environ", "deadline_s"]
    assert params["environ"].kind is inspect.Parameter.KEYWORD_ONLY
    assert list(inspect.signature(svcposture.read_events).parameters) == ["home", "name", "since"]
    assert list(inspect.signature(svcposture.read_history).parameters) == ["home", "hours"]
    assert list(inspect.signature(svcposture.forecast).parameters) == ["points", "now_ms", "resets_at_ms", "window"]
    assert list(inspect.signature(svcposture.owner).parameters) == ["ticket", "roster", "live"]
    assert list(inspect.signature(svcposture.start_server).parameters)[:3] == ["home", "bind", "port"]
    from svcposture.monitor.main import start_server
    assert svcposture.start_server is start_server
    with pytest.raises(AttributeError):
        svcposture.no_such_thing  # noqa: B018


def test_every_exception_of_the_core_derives_from_svcposture_error():
    found = []
    for info in pkgutil.walk_packages(svcposture.__path__, "svcposture."):
        if info.ispkg or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            # The face's exceptions report the package as their module (test_face.py).
            if isinstance(value, type) and issubclass(value, BaseException) \
                    and value.__module__ in (module.__name__, svcposture.__name__):
                found.append(value)
                assert issubclass(value, SvcpostureError), value
    assert {c.__name__ for c in found} >= {"ConfigError", "CorruptFileError", "EventLogError", "LatchError",
                                            "HistoryError", "InvalidSetting", "SvcpostureError"}
    # The builtin bases stay, so existing `except ValueError/OSError` keep working.
    assert issubclass(svcposture.ConfigError, ValueError) and issubclass(svcposture.CorruptFileError, ValueError)
    assert issubclass(svcposture.EventLogError, OSError) and issubclass(svcposture.LatchError, OSError)


# ---------------------------------------------------------------- read_posture

def test_read_posture_sweeps_the_real_child_and_writes_nothing(node_home, provider):
    tokens = {"a": canary("a"), "b": canary("b")}
    provider.set_account(tokens["a"], status="rejected", five_hour=(1.02, "rejected"), seven_day=(0.3, "allowed"))
    provider.set_account(tokens["b"], five_hour=(0.1, "allowed"), seven_day=(0.2, "allowed"))
    write_accounts(accounts_path(node_home), [("A", tokens["a"], "a@example.com"), ("B", tokens["b"], None)],
                   active="A")
    env = clean_env(node_home)
    env["SVC_PROVIDER_URL"] = provider.url
    before = snapshot(node_home)
    started = time.time_ns() // 1_000_000

    body = svcposture.read_posture(node_home, environ=env)

    assert list(body) == BODY_KEYS
    assert body["node"] == NODE and body["cached"] is False and body["status"] == "rejected"
    assert started <= body["probedAt"] <= time.time_ns() // 1_000_000
    assert parse_iso_ms(body["generatedAt"]) >= body["probedAt"]
    assert body["active"]["label"] == "a" and body["active"]["fiveHour"]["pct"] == 102.0
    assert body["siblingWithHeadroom"] == {"label": "b", "email": None}
    assert provider.message_calls(tokens["a"]) == 1 and provider.message_calls(tokens["b"]) == 1
    assert_no_canary([json.dumps(body)], tokens.values())
    # No latch, no event log, no history: reading is not observing.
    assert snapshot(node_home) == before
    # home=None reads $HOME of the environment given.
    assert svcposture.read_posture(environ=env)["active"]["label"] == "a"


def test_read_posture_disabled_and_error_bodies(node_home, provider):
    env = clean_env(node_home)
    env["SVC_PROVIDER_URL"] = provider.url
    assert svcposture.read_posture(node_home, environ=env) == {"available": False, "node": NODE}
    token = canary("c")
    provider.set_account(token)
    write_accounts(accounts_path(node_home), [("C", token, None)], active="C")
    assert svcposture.read_posture(node_home, environ=dict(env, SVC_ACCOUNTS_PROBE="0")) == \
        {"available": False, "node": NODE}
    assert provider.message_calls(token) == 0
    os.chmod(str(accounts_path(node_home)), 0o620)
    body = svcposture.read_posture(node_home, environ=env)
    assert body["status"] == "error" and body["error"]["kind"] == "config" and body["accounts"] == []


def test_read_posture_honours_the_deadline(node_home, provider):
    token = canary("slow")
    provider.set_account(token, mode="slow", delay=20.0)
    write_accounts(accounts_path(node_home), [("SLOW", token, None)], active="SLOW")
    env = clean_env(node_home)
    env["SVC_PROVIDER_URL"] = provider.url
    started = time.monotonic()
    body = svcposture.read_posture(node_home, environ=env, deadline_s=2.0)
    assert time.monotonic() - started < 10
    assert body["status"] == "error"
    kinds = [body["error"]["kind"]] if "error" in body else [body["active"]["error"]["kind"]]
    assert kinds == ["timeout"]
    for bad in (0, -1, float("nan"), float("inf"), "5", True):
        with pytest.raises(SvcpostureError):
            svcposture.read_posture(node_home, environ=env, deadline_s=bad)


# ---------------------------------------------------------------- read_events

def test_read_events_newest_first_by_name_and_since(node_home, monkeypatch):
    log = EventLog.for_paths(Paths(node_home))
    stamps = [parse_iso_ms(s) for s in ("2025-12-30T10:00:00Z", "2026-01-02T10:00:00Z", "2026-01-05T10:00:00Z",
                                        "2026-01-05T11:00:00Z")]
    log.append(status_changed(NODE, "a", None, "rejected", "five_hour", ts_ms=stamps[0]))
    log.append(ratelimit_sampled(NODE, None, {"ratelimit.five_hour_pct": 10.0}, ts_ms=stamps[1]))
    log.append(status_changed(NODE, "a", None, "ok", None, ts_ms=stamps[2]))
    log.append(ratelimit_sampled(NODE, None, {"ratelimit.five_hour_pct": 20.0}, ts_ms=stamps[3]))
    with open(str(log.path_for(stamps[3])), "ab") as fh:
        fh.write(b"garbage\n")

    def ts(events):
        return [parse_iso_ms(e["ts"]) for e in events]

    assert ts(svcposture.read_events(node_home)) == stamps[::-1]
    changed = list(svcposture.read_events(node_home, name="account.status.changed"))
    assert ts(changed) == [stamps[2], stamps[0]]
    assert [e["attributes"]["account.status"] for e in changed] == ["ok", "rejected"]
    assert ts(svcposture.read_events(node_home, since="2026-01-02T10:00:00Z")) == stamps[:0:-1]
    assert ts(svcposture.read_events(node_home, since=stamps[2])) == [stamps[3], stamps[2]]
    assert ts(svcposture.read_events(node_home, since=float(stamps[2]) + 0.5)) == [stamps[3]]
    assert list(svcposture.read_events(node_home, name="account.status.changed", since=stamps[3])) == []
    # A since in January does not open December's file.
    from svcposture import events as events_module
    opened = []
    real = events_module.iter_lines_reverse
    monkeypatch.setattr(events_module, "iter_lines_reverse",
                        lambda path, **kw: (opened.append(Path(path).name), real(path, **kw))[1])
    assert len(list(svcposture.read_events(node_home, since="2026-01-01T00:00:00Z"))) == 3
    assert opened == ["2026-01.jsonl"]
    monkeypatch.undo()
    monkeypatch.setenv("HOME", str(node_home))
    events = svcposture.read_events()
    assert isinstance(events, types.GeneratorType) and parse_iso_ms(next(events)["ts"]) == stamps[3]


def test_read_events_refuses_a_bad_since_at_the_call(node_home):
    for bad in ("yesterday", "2026-13-01T00:00:00Z", float("nan"), True, [1], 1e30):
        with pytest.raises(SvcpostureError):
            svcposture.read_events(node_home, since=bad)
    assert list(svcposture.read_events(node_home / "nowhere")) == []


# ---------------------------------------------------------------- read_history, forecast, owner

def test_read_history_is_the_api_history_body(node_home):
    now = time.time_ns() // 1_000_000
    append_rows(Paths(node_home), [
        {"t": now - 2 * 3_600_000, "label": "a", "fiveHour": {"pct": 10.0, "resetsAt": None}, "sevenDay": None},
        {"t": now - 30 * 3_600_000, "label": "a", "fiveHour": {"pct": 5.0, "resetsAt": None}, "sevenDay": None},
    ])
    body = svcposture.read_history(node_home)
    assert list(body) == ["node", "from", "to", "accounts"] and body["node"] == NODE
    assert body["to"] - body["from"] == 24 * 3_600_000 and body["to"] >= now
    assert body["accounts"] == {"a": {"provider": "claude", "fiveHour": [[now - 2 * 3_600_000, 10.0]], "sevenDay": []}}
    assert len(svcposture.read_history(node_home, hours=48)["accounts"]["a"]["fiveHour"]) == 2
    with pytest.raises(SvcpostureError):
        svcposture.read_history(node_home, hours=0)
    assert svcposture.read_history(node_home / "empty")["accounts"] == {}


def test_forecast_and_owner_are_the_pure_functions():
    from svcposture import hrw
    from svcposture.trajectory.forecast import forecast

    assert svcposture.forecast is forecast
    now = 1_700_000_000_000
    points = [(now - 40 * 60_000, 52.0), (now - 20 * 60_000, 61.0), (now, 70.0)]
    result = svcposture.forecast(points, now_ms=now, resets_at_ms=now + 3 * 3_600_000, window="five_hour")
    assert result == {"ratePctPerHour": 27.0, "wallAt": iso_from_ms(now + 4_000_000), "beforeReset": True,
                      "pctAtReset": 151.0, "samples": 3}
    assert svcposture.forecast(points[:2], now_ms=now, resets_at_ms=None, window="fiveHour") is None
    roster = ["node-a", "node-b", "node-c"]
    assert svcposture.owner("ENG-42", roster) == hrw.owner("ENG-42", roster) in roster
    assert svcposture.owner("ENG-42", roster, live=["node-b"]) == "node-b"
    assert svcposture.owner("ENG-42", []) is None
