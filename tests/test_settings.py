"""The node's settings: read from the environment once, into one frozen object.

Settings.from_environ is pure (a mapping in, a frozen object out; it never
reads os.environ and logs nothing), every knob keeps the default and the
handling of bad values it had when each service read its own variable, and
the services take their knobs from the object they are given. A real monitor
started with a knob set shows its effect.

Every environment variable of the package is read in settings.py, a vendor's
own through the knobs its package declares, and no module reads a test-only
switch: the repository test below fails on a read anywhere else, by literal
or by a constant's name.
"""
from __future__ import annotations

import ast
import logging
import math
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Tuple
from types import MappingProxyType

import pytest

from svcposture.settings import InvalidSetting
from svcposture.events import EventLog
from svcposture.posture.latch import Latch
from svcposture.monitor.node import Node
from svcposture.trajectory.notify import Notifier
from svcposture.paths import Paths
from svcposture.posture.service import PostureService
from svcposture.claude.sampler import QuotaSampler
from svcposture.settings import Settings
from svcposture.trajectory.service import TrajectoryService
from tests.support.home import REPO, accounts_path, canary, clean_env, monitor_env, write_accounts
from tests.support.hooks import hooked
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until
from tests.support.posture import posture_service

DEFAULTS = {
    "monitor_bind": "127.0.0.1", "monitor_port": 7400, "prometheus_url": "", "auto_switch_at": None,
    "guard_budget_ms": 250,
    "advice_wait_s": 600,
    "probe": True, "max_streams": 1024, "keepalive_s": 15.0, "read_guard": False, "request_timeout_s": 10.0,
    "max_connections": 4096, "trusted_hosts": "", "trusted_origins": "", "fleet_ttl_s": 60.0,
    "metrics_bind": None, "metrics_tls_cert": "", "metrics_tls_key": "", "metrics_plain_http": False,
    "posture_ttl_s": 300.0, "refresh_floor_s": 30.0, "probe_interval_s": 300.0, "probe_deadline_s": 30.0,
    "reset_margin_s": 60.0, "quota_sampler": True, "quota_poll_interval_s": 300.0,
    "history_days": 8, "alert_thresholds": (80, 90), "alert_cmd": "", "alert_hook_cgroup": True,
    "liveness_interval_ms": 120000, "liveness_read_source": "tracker", "loki_url": "",
    "tracker_url": "https://api.linear.app/graphql", "tracker_window_ms": 3600000, "notes": (),
    "vendor_knobs": (("claude", "SVC_PROVIDER_URL", "https://api.anthropic.com"),
                     ("claude", "SVC_PROBE_MODEL", "claude-haiku-4-5-20251001"),
                     ("codex", "SVC_CODEX_URL", "https://chatgpt.com"),
                     ("copilot", "SVC_COPILOT_URL", "https://api.github.com"),
                     ("zai", "SVC_ZAI_URL", "https://api.z.ai"), ("kimi", "SVC_KIMI_URL", "https://api.kimi.com")),
}

# Knob -> (attribute, its default): the timing knobs that fall back to their default on a bad value.
LENIENT = {
    "SVC_FLEET_TTL_S": ("fleet_ttl_s", 60.0),
    "SVC_POSTURE_TTL_S": ("posture_ttl_s", 300.0),
    "SVC_REFRESH_FLOOR_S": ("refresh_floor_s", 30.0),
    "SVC_PROBE_INTERVAL_S": ("probe_interval_s", 300.0),
    "SVC_PROBE_DEADLINE_S": ("probe_deadline_s", 30.0),
    "SVC_QUOTA_POLL_INTERVAL_S": ("quota_poll_interval_s", 300.0),
    "SVC_HISTORY_DAYS": ("history_days", 8),
    "EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS": ("liveness_interval_ms", 120000),
    "SVC_TRACKER_RATE_WINDOW_MS": ("tracker_window_ms", 3600000),
    "SVC_GUARD_BUDGET_MS": ("guard_budget_ms", 250),
    "SVC_ADVICE_WAIT_S": ("advice_wait_s", 600),
    "SVC_MONITOR_PORT": ("monitor_port", 7400),
}
# Knob -> (attribute, the InvalidSetting message for the value "x"): what decides what the monitor serves.
STRICT = {
    "SVC_MONITOR_MAX_STREAMS": ("max_streams", "SVC_MONITOR_MAX_STREAMS='x' is not an integer"),
    "SVC_SSE_KEEPALIVE_S": ("keepalive_s", "SVC_SSE_KEEPALIVE_S='x' is not a number"),
    "SVC_MONITOR_REQUEST_TIMEOUT_S": ("request_timeout_s", "SVC_MONITOR_REQUEST_TIMEOUT_S='x' is not a number"),
    "SVC_MONITOR_MAX_CONNECTIONS": ("max_connections", "SVC_MONITOR_MAX_CONNECTIONS='x' is not an integer"),
}
BAD_NUMBERS = ("", "   ", "x", "12abc", "-1", "nan", "NaN", "inf", "-inf", "1e400", "true", "yes", "on", "0x10")


# ---------------------------------------------------------------- pure

def test_an_empty_environment_gives_every_default():
    settings = Settings.from_environ({})
    assert {name: getattr(settings, name) for name in Settings.__slots__} == DEFAULTS
    assert settings == Settings() and hash(settings) == hash(Settings())


def test_from_environ_is_pure_and_never_reads_os_environ(monkeypatch, caplog):
    # Values in the process's own environment that would change (or break) every setting.
    for name in list(LENIENT) + list(STRICT) + ["SVC_ACCOUNTS_PROBE", "SVC_ALERT_THRESHOLDS", "SVC_ALERT_CMD"]:
        monkeypatch.setenv(name, "0")
    given = {"SVC_POSTURE_TTL_S": "42", "SVC_ALERT_THRESHOLDS": "50,x", "SVC_QUOTA_POLL_INTERVAL_S": "1"}
    frozen = MappingProxyType(dict(given))
    with caplog.at_level(logging.DEBUG):
        one = Settings.from_environ(frozen)
        two = Settings.from_environ(dict(given))
    assert one == two and hash(one) == hash(two) and one is not two
    assert dict(frozen) == given
    assert one.posture_ttl_s == 42.0 and one.probe is True and one.max_streams == 1024
    assert caplog.records == [], "parsing logs nothing: the service that owns a knob does"
    assert Settings.from_environ({}) == Settings()
    assert os.environ["SVC_MONITOR_MAX_STREAMS"] == "0"  # it would have raised had it been read


def test_settings_are_frozen_and_replace_makes_a_copy():
    settings = Settings.from_environ({"SVC_HISTORY_DAYS": "3"})
    for name in ("history_days", "alert_cmd", "notes", "anything"):
        with pytest.raises(AttributeError):
            setattr(settings, name, 1)
        with pytest.raises(AttributeError):
            delattr(settings, name)
    changed = settings.replace(history_days=4)
    assert (settings.history_days, changed.history_days) == (3, 4) and changed != settings
    assert Settings(posture_ttl_s=5.0).posture_ttl_s == 5.0 and Settings(posture_ttl_s=5.0).history_days == 8
    with pytest.raises(TypeError):
        Settings(no_such_setting=1)
    assert "posture_ttl_s=300.0" in repr(Settings())


# ---------------------------------------------------------------- bad values, as before

@pytest.mark.parametrize("name", sorted(LENIENT))
@pytest.mark.parametrize("raw", BAD_NUMBERS)
def test_a_bad_timing_knob_gives_its_default(name, raw):
    attribute, default = LENIENT[name]
    settings = Settings.from_environ({name: raw})
    value = getattr(settings, attribute)
    assert value == default and type(value) is type(default), (name, raw, value)
    assert settings.notes == ()


def test_timing_knobs_take_good_values_within_their_bounds():
    env = {"SVC_POSTURE_TTL_S": " 0.5 ", "SVC_PROBE_INTERVAL_S": "0.01", "SVC_PROBE_DEADLINE_S": "0.1",
           "SVC_HISTORY_DAYS": "3650", "EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS": "100", "SVC_FLEET_TTL_S": "0"}
    settings = Settings.from_environ(env)
    assert (settings.posture_ttl_s, settings.probe_interval_s, settings.probe_deadline_s) == (0.5, 0.01, 0.1)
    assert (settings.history_days, settings.liveness_interval_ms, settings.fleet_ttl_s) == (3650, 100, 0.0)
    # Out of range, as each service always had it: below the floor or above the ceiling is the default.
    out = Settings.from_environ({"SVC_PROBE_INTERVAL_S": "0.001", "SVC_PROBE_DEADLINE_S": "0.05",
                                 "SVC_HISTORY_DAYS": "3651", "SVC_FLEET_TTL_S": "3601",
                                 "EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS": "99"})
    assert (out.probe_interval_s, out.probe_deadline_s, out.history_days, out.fleet_ttl_s) == (300.0, 30.0, 8, 60.0)
    assert out.liveness_interval_ms == 120000
    assert Settings.from_environ({"SVC_HISTORY_DAYS": "2.5"}).history_days == 8  # an integer knob
    assert Settings.from_environ({"SVC_POSTURE_TTL_S": "1e300"}).posture_ttl_s == 1e300  # no ceiling, as before


def test_the_refresh_floor_is_at_most_the_ttl():
    assert Settings.from_environ({"SVC_POSTURE_TTL_S": "10"}).refresh_floor_s == 10.0
    assert Settings.from_environ({"SVC_POSTURE_TTL_S": "0"}).refresh_floor_s == 0.0
    both = Settings.from_environ({"SVC_POSTURE_TTL_S": "100", "SVC_REFRESH_FLOOR_S": "7"})
    assert (both.posture_ttl_s, both.refresh_floor_s) == (100.0, 7.0)
    assert Settings.from_environ({"SVC_POSTURE_TTL_S": "nan", "SVC_REFRESH_FLOOR_S": "500"}).refresh_floor_s == 300.0


def test_the_quota_interval_is_raised_to_the_endpoint_budget_with_a_note():
    raised = Settings.from_environ({"SVC_QUOTA_POLL_INTERVAL_S": "10"})
    assert raised.quota_poll_interval_s == 180.0
    assert raised.notes_on("SVC_QUOTA_POLL_INTERVAL_S") == [
        "SVC_QUOTA_POLL_INTERVAL_S=10 is below the usage endpoint's budget; polling every 180 s"]
    assert Settings.from_environ({"SVC_QUOTA_POLL_INTERVAL_S": "0"}).quota_poll_interval_s == 180.0
    assert Settings.from_environ({"SVC_QUOTA_POLL_INTERVAL_S": "181"}).quota_poll_interval_s == 181.0
    # No variable goes below the floor, nor moves the reset probe's margin: those are rules.
    for name in ("_SVC_TEST_QUOTA_POLL_S", "SVCTEST_QUOTA_POLL_S", "_SVC_TEST_RESET_MARGIN_S", "SVCTEST_RESET_MARGIN_S"):
        assert Settings.from_environ({name: "0.5"}) == Settings(), name


@pytest.mark.parametrize("name", sorted(STRICT))
def test_a_bad_monitor_setting_raises_as_before_unless_not_strict(name):
    attribute, message = STRICT[name]
    with pytest.raises(InvalidSetting) as caught:
        Settings.from_environ({name: "x"})
    assert str(caught.value) == message
    for raw in ("-1", "nan", "1e400", "0", "true"):
        with pytest.raises(InvalidSetting):
            Settings.from_environ({name: raw})
        assert getattr(Settings.from_environ({name: raw}, strict=False), attribute) == DEFAULTS[attribute]
    for raw in ("", "  "):
        assert getattr(Settings.from_environ({name: raw}), attribute) == DEFAULTS[attribute]


def test_switches_and_words_are_read_as_before():
    # Only "0" turns probing or the sampler off; only "1" turns the read guard on.
    for word in ("false", "no", "off", "", "00"):
        assert Settings.from_environ({"SVC_ACCOUNTS_PROBE": word}).probe is True
        assert Settings.from_environ({"SVC_QUOTA_SAMPLER": word}).quota_sampler is True
    assert Settings.from_environ({"SVC_ACCOUNTS_PROBE": " 0 "}).probe is False
    assert Settings.from_environ({"SVC_QUOTA_SAMPLER": "0 "}).quota_sampler is False
    for word in ("true", "yes", "on", " 1", "2"):
        assert Settings.from_environ({"SVC_MONITOR_READ_GUARD": word}).read_guard is False
    assert Settings.from_environ({"SVC_MONITOR_READ_GUARD": "1"}).read_guard is True
    for word in ("loki", " LOKI ", "Loki"):
        assert Settings.from_environ({"SVC_LIVENESS_READ_SOURCE": word}).liveness_read_source == "loki"
    assert Settings.from_environ({"SVC_LIVENESS_READ_SOURCE": " Prometheus"}).liveness_read_source == "prometheus"
    for word in ("", "tracker", "lokii", "1"):
        assert Settings.from_environ({"SVC_LIVENESS_READ_SOURCE": word}).liveness_read_source == "tracker"
    urls = Settings.from_environ({"SVC_TRACKER_URL": "  ", "SVC_LOKI_URL": " http://127.0.0.1:9 "})
    assert (urls.tracker_url, urls.loki_url) == ("https://api.linear.app/graphql", "http://127.0.0.1:9")
    assert Settings.from_environ({"SVC_ALERT_CMD": " true "}).alert_cmd == " true "
    for word in ("false", "no", "off", "", "1"):
        assert Settings.from_environ({"SVC_ALERT_HOOK_CGROUP": word}).alert_hook_cgroup is True
    assert Settings.from_environ({"SVC_ALERT_HOOK_CGROUP": " 0 "}).alert_hook_cgroup is False


def test_alert_thresholds_keep_their_parser_and_messages():
    assert Settings.from_environ({"SVC_ALERT_THRESHOLDS": "95, 50,50"}).alert_thresholds == (50, 95)
    bad = Settings.from_environ({"SVC_ALERT_THRESHOLDS": "x,,101"})
    assert bad.alert_thresholds == (80, 90)
    assert bad.notes_on("SVC_ALERT_THRESHOLDS") == [
        "SVC_ALERT_THRESHOLDS item 'x' is not an integer from 1 to 100; ignored",
        "SVC_ALERT_THRESHOLDS has an empty item; ignored",
        "SVC_ALERT_THRESHOLDS item '101' is not an integer from 1 to 100; ignored",
        "SVC_ALERT_THRESHOLDS has no usable threshold; using the default 80,90"]
    huge = Settings.from_environ({"SVC_ALERT_THRESHOLDS": "7," * 100000})
    assert huge.alert_thresholds == (7,) and math.isfinite(len(huge.notes))


# ---------------------------------------------------------------- the services take the object

@pytest.fixture
def node_paths(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "SVC_POSTURE_TTL_S": "11", "SVC_HISTORY_DAYS": "2", "SVC_QUOTA_POLL_INTERVAL_S": "5",
           "SVC_ALERT_CMD": "true", "SVC_ALERT_THRESHOLDS": "60"}
    return Paths(home, environ=env)


def test_services_take_their_knobs_from_the_settings_given_not_the_environment(node_paths, caplog):
    settings = Settings(posture_ttl_s=7.0, refresh_floor_s=1.0, probe_interval_s=9.0, probe_deadline_s=3.0,
                        reset_margin_s=2.0, history_days=5, alert_thresholds=(70,), quota_poll_interval_s=200.0,
                        quota_sampler=False, alert_cmd="")
    log = EventLog.for_paths(node_paths)
    with caplog.at_level(logging.WARNING):
        service = posture_service(node_paths, node="n", latch=Latch(node_paths.latch, log, "n"), settings=settings)
        trajectory = TrajectoryService(node_paths, node="n", event_log=log, settings=settings)
        sampler = QuotaSampler(node_paths, node="n", log=log, settings=settings)
    assert (service.ttl_s, service.floor_s, service.interval_s, service.deadline_s) == (7.0, 1.0, 9.0, 3.0)
    assert service.resets.margin_ms == 2000
    assert (trajectory.days, trajectory.thresholds) == (5, (70,))
    assert (sampler.interval_s, sampler.enabled, sampler.deadline_s) == (200.0, False, 3.0)
    assert Notifier.from_environ(node_paths.environ, settings) is None
    hook = Notifier.from_environ({"SVC_ALERT_HOOK_CGROUP": "1"}, settings.replace(alert_cmd="true",
                                                                                 alert_hook_cgroup=False))
    assert hook is not None and hook.use_cgroup is False
    assert Notifier("true", {"SVC_ALERT_HOOK_CGROUP": "0"}).use_cgroup is False  # no settings: its environment
    assert caplog.records == []
    # The environment still goes whole (token-free) to the probe child.
    assert service.environ is node_paths.environ and sampler.environ is node_paths.environ


def test_without_settings_a_service_reads_its_environment_and_logs_as_before(node_paths, caplog):
    log = EventLog.for_paths(node_paths)
    env = dict(node_paths.environ, SVC_ALERT_THRESHOLDS="x")
    with caplog.at_level(logging.WARNING):
        trajectory = TrajectoryService(node_paths, node="n", event_log=log, environ=env)
        sampler = QuotaSampler(node_paths, node="n", log=log)
    assert trajectory.days == 2 and trajectory.thresholds == (80, 90) and sampler.interval_s == 180.0
    lines = [(r.name, r.getMessage()) for r in caplog.records]
    assert lines == [
        ("svcposture.trajectory", "SVC_ALERT_THRESHOLDS item 'x' is not an integer from 1 to 100; ignored"),
        ("svcposture.trajectory", "SVC_ALERT_THRESHOLDS has no usable threshold; using the default 80,90"),
        ("svcposture.posture", "SVC_QUOTA_POLL_INTERVAL_S=5 is below the usage endpoint's budget; polling every 180 s"),
    ]


def test_the_node_hands_its_one_settings_object_to_every_service(node_paths):
    settings = Settings(posture_ttl_s=4.0, history_days=6, probe=False, alert_thresholds=(55,))
    node = Node(node_paths, settings)
    try:
        assert node.app.settings is settings and node.settings is settings
        assert all(p.ttl_s == 4.0 and p.probe_enabled is False for p in node.postures.values())
        assert node.trajectory.days == 6 and node.trajectory.thresholds == (55,)
        assert node.trajectory.notifier is None  # SVC_ALERT_CMD of the environment is not read
    finally:
        node.stop()


# ---------------------------------------------------------------- a real monitor

@pytest.fixture
def provider():
    with ProviderServer() as server:
        yield server


@pytest.mark.parametrize("ttl, cached", [("300", True), ("nonsense", True), ("0.2", False)])
def test_a_monitor_serves_posture_for_its_ttl(home, provider, ttl, cached):
    token = canary("a")
    provider.set_account(token)
    write_accounts(accounts_path(home), [("A", token, "a@example.com")], active="A")
    env = monitor_env(home, provider.url, SVC_POSTURE_TTL_S=ttl, SVC_PROBE_INTERVAL_S="300",
                      SVC_REFRESH_FLOOR_S="0.05")
    mon = start_monitor(env)
    try:
        assert wait_until(lambda: mon.get_json("/api/accounts")[1].get("status") == "ok", timeout=15)
        first = mon.get_json("/api/accounts")[1]
        if cached:
            # Well inside the TTL (300 s; a bad value is the default 300): every read is the cached probe.
            for _ in range(5):
                body = mon.get_json("/api/accounts")[1]
                assert body["cached"] is True and body["probedAt"] == first["probedAt"]
            assert provider.message_calls(token) == 1
        else:
            assert wait_until(lambda: mon.get_json("/api/accounts")[1]["probedAt"] > first["probedAt"], timeout=10)
            assert provider.message_calls(token) >= 2
    finally:
        assert mon.stop() == 0


def test_a_monitor_logs_corrected_knobs_once_and_refuses_a_bad_monitor_setting(home, provider):
    env = monitor_env(home, provider.url, SVC_QUOTA_POLL_INTERVAL_S="10", SVC_ALERT_THRESHOLDS="x")
    mon = start_monitor(env, args=("--no-probe",))
    try:
        assert mon.get("/healthz")[0] == 200
    finally:
        assert mon.stop() == 0
    err = mon.stderr_text()
    assert err.count("SVC_QUOTA_POLL_INTERVAL_S=10 is below the usage endpoint's budget; polling every 180 s") == 1
    assert err.count("SVC_ALERT_THRESHOLDS has no usable threshold; using the default 80,90") == 1
    refused = subprocess.run([sys.executable, "-m", "svcposture", "monitor", "--port", "0"],
                             env=dict(env, SVC_MONITOR_MAX_STREAMS="lots"), capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2
    assert refused.stderr.strip() == "svc-monitor: SVC_MONITOR_MAX_STREAMS='lots' is not an integer"


def test_the_steering_and_fleet_knobs_are_settings():
    s = Settings.from_environ({"SVC_AUTO_SWITCH_AT": "85%", "SVC_GUARD_BUDGET_MS": "900",
                               "SVC_PROMETHEUS_URL": " http://prom:9090 ", "SVC_MONITOR_PORT": "7455",
                               "SVC_MONITOR_BIND": "::1"})
    assert (s.auto_switch_at, s.guard_budget_ms, s.prometheus_url) == (85.0, 900, "http://prom:9090")
    assert (s.monitor_bind, s.monitor_port) == ("::1", 7455)
    for junk in ("0", "101", "x", "nan%"):
        bad = Settings.from_environ({"SVC_AUTO_SWITCH_AT": junk})
        assert bad.auto_switch_at is None and bad.notes_on("SVC_AUTO_SWITCH_AT"), junk


def test_the_monitor_command_refuses_a_bad_port_variable_that_a_library_node_ignores():
    from svcposture.settings import InvalidSetting
    from svcposture.settings import monitor_address

    with pytest.raises(InvalidSetting, match="SVC_MONITOR_PORT"):
        monitor_address({"SVC_MONITOR_PORT": "70000"})
    assert Settings.from_environ({"SVC_MONITOR_PORT": "70000"}).monitor_port == 7400



# ---------------------------------------------------------------- a vendor's own knobs

def test_each_vendor_knob_is_read_through_the_registry_into_settings():
    from svcposture.claude.knobs import PROBE_MODEL, PROVIDER_URL
    from svcposture.codex.knobs import CODEX_URL, STATE
    from svcposture.settings import knob_value

    given = Settings.from_environ({"SVC_PROVIDER_URL": " http://127.0.0.1:7/ ", "SVC_PROBE_MODEL": "m",
                                   "SVC_CODEX_URL": "http://127.0.0.1:8//", "SVC_CODEX_STATE": "{}",
                                   "SVC_ZAI_URL": "http://127.0.0.1:9/"})
    assert given.vendor_knobs[:3] == (("claude", "SVC_PROVIDER_URL", "http://127.0.0.1:7"),
                                      ("claude", "SVC_PROBE_MODEL", "m"), ("codex", "SVC_CODEX_URL", "http://127.0.0.1:8"))
    assert given.vendor_knob("SVC_ZAI_URL") == "http://127.0.0.1:9"
    assert [name for _vendor, name, _value in given.vendor_knobs[3:]] == ["SVC_COPILOT_URL", "SVC_ZAI_URL",
                                                                            "SVC_KIMI_URL"]
    assert given.vendor_knob("SVC_CODEX_URL") == "http://127.0.0.1:8" and given != Settings()
    with pytest.raises(KeyError):
        given.vendor_knob("SVC_CODEX_STATE")  # the monitor's message to its child is no setting
    # The child reads the same knobs the same way, from the environment it is given.
    assert knob_value({"SVC_PROVIDER_URL": "http://x/"}, PROVIDER_URL) == "http://x"
    for blank in ({}, {"SVC_PROBE_MODEL": ""}, {"SVC_PROBE_MODEL": "   "}):
        assert knob_value(blank, PROBE_MODEL) == "claude-haiku-4-5-20251001"
    assert knob_value({}, CODEX_URL) == "https://chatgpt.com" and knob_value({}, STATE) == ""
    assert knob_value({"SVC_CODEX_STATE": " {} "}, STATE) == "{}"


def test_a_knob_whose_text_does_not_parse_gives_its_default():
    from svcposture.settings import knob_value
    from svcposture.vendor import Knob

    port = Knob("SVC_SOME_PORT", 8080, "a port", int)
    assert [knob_value({"SVC_SOME_PORT": raw}, port) for raw in ("81", " 82 ", "x", "", "8.5")] == [81, 82, 8080,
                                                                                                  8080, 8080]


def test_a_new_vendors_knob_needs_nothing_outside_its_package():
    """The stand-in third vendor declares SVC_ACME_URL in its own package; registered, its knob is
    in the node's Settings, and its child reads it (tests/test_third_vendor.py probes through it)."""
    script = (
        "from svcposture.settings import Settings\n"
        "from svcposture.vendors import register_vendor\n"
        "from tests.support.thirdvendor import VENDOR\n"
        "register_vendor(VENDOR)\n"
        "s = Settings.from_environ({'SVC_ACME_URL': 'http://127.0.0.1:5/'})\n"
        "print(s.vendor_knob('SVC_ACME_URL'), Settings().vendor_knob('SVC_ACME_URL'))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=str(REPO), capture_output=True, timeout=60)
    assert done.stdout.split() == [b"http://127.0.0.1:5", b"http://127.0.0.1:9"], done.stderr.decode()


# ---------------------------------------------------------------- one home for every variable

PACKAGE = REPO / "svcposture"
# The package's variables: SVC_*, the contract's EXECUTION_CORE_*, and anything test-only spelled _SVC_*.
VARIABLE = re.compile(r"^_?(?:SVC|EXECUTION_CORE)_[A-Z0-9_]+$")
# Where a read's value lands in an environment-like argument: `environ`, `env`, `os.environ`, `paths.environ`.
ENV_NAMES = ("environ", "env")


def _module_constants(trees: Dict[str, ast.Module]) -> Tuple[Dict[str, str], Dict[str, str]]:
    """The package's module-level names for a variable: NAME = "SVC_X", and NAME = Knob("SVC_X", ...)."""
    names: Dict[str, str] = {}
    knobs: Dict[str, str] = {}
    for tree in trees.values():
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str) and VARIABLE.match(value.value):
                names[node.targets[0].id] = value.value
            elif isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Constant) \
                    and isinstance(value.args[0].value, str) and VARIABLE.match(value.args[0].value):
                knobs[node.targets[0].id] = value.args[0].value
    return names, knobs


def _variable(node: ast.AST, names: Dict[str, str], knobs: Dict[str, str]) -> Optional[str]:
    """The variable `node` names: a literal, a constant (bare or as module.NAME), or a knob's `.name`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE.match(node.value):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        if node.attr == "name" and isinstance(node.value, ast.Name) and node.value.id in knobs:
            return knobs[node.value.id]
        return names.get(node.attr)
    return None


def _callee(func: ast.AST) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _environment_like(node: ast.AST) -> bool:
    return _callee(node) in ENV_NAMES or (isinstance(node, ast.Attribute) and node.attr.endswith("environ"))


def env_reads(tree: ast.Module, names: Dict[str, str], knobs: Dict[str, str]) -> List[Tuple[int, str]]:
    """(line, variable) of each read of a package variable in `tree`.

    A read is `x.get(V)` or `getenv(V)`, `x[V]` loaded, `V in x`, or a call that
    hands V on together with an environment (`env_number(environ, V, ...)`) or
    to a function whose name says it reads one (`env_seconds(V, 10)`). Writing
    V into a child's environment, or naming it in a message, is no read.
    """
    found = []
    for node in ast.walk(tree):
        var = None
        if isinstance(node, ast.Call) and node.args:
            callee = _callee(node.func)
            if callee in ("get", "getenv"):
                var = _variable(node.args[0], names, knobs)
            if var is None and ("env" in callee.lower() or any(_environment_like(a) for a in node.args)):
                var = next(filter(None, (_variable(a, names, knobs) for a in node.args)), None)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            var = _variable(node.slice, names, knobs)
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            var = _variable(node.left, names, knobs)
        if var is not None:
            found.append((node.lineno, var))
    return found


def _package_trees() -> Dict[str, ast.Module]:
    return {str(path.relative_to(REPO)): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted(PACKAGE.rglob("*.py"))}


def test_no_module_but_settings_reads_a_variable_of_the_package():
    trees = _package_trees()
    names, knobs = _module_constants(trees)
    assert {"VENDORS_ENV", "AUTO_SWITCH_ENV", "LOKI_URL_ENV", "STATE_ENV"} - set(names) == {"STATE_ENV"}
    assert knobs == {"PROVIDER_URL": "SVC_PROVIDER_URL", "PROBE_MODEL": "SVC_PROBE_MODEL",
                     "CODEX_URL": "SVC_CODEX_URL", "STATE": "SVC_CODEX_STATE"}
    outside = {path: reads for path, tree in trees.items() if path != "svcposture/settings.py"
               for reads in [env_reads(tree, names, knobs)] if reads}
    assert outside == {}, "read these through svcposture/settings.py (docs/settings.md)"
    assert len(env_reads(trees["svcposture/settings.py"], names, knobs)) >= 30  # the check sees reads where they are


def test_the_read_check_can_fail():
    source = (
        "import os\n"
        "from ..settings import LOKI_URL_ENV\n"
        "from . import knobs\n"
        "OWN = 'SVC_OWN'\n"
        "a = os.environ.get('SVC_A')\n"
        "b = environ.get(OWN, '')\n"
        "c = os.environ[LOKI_URL_ENV]\n"
        "d = 'SVC_D' in paths.environ\n"
        "e = env_number(environ, 'SVC_E', 1.0, low=0)\n"
        "f = env_seconds('SVC_F', 10.0)\n"
        "g = os.getenv('_SVC_TEST_G')\n"
        "h = environ.get(CODEX_URL.name)\n"
        "i = environ.get(settings.AUTO_SWITCH_ENV)\n"
        "env['SVC_WRITTEN'] = '1'\n"
        "settings.notes_on('SVC_NOTED')\n"
        "raise ValueError('%s is junk' % OWN)\n")
    tree = ast.parse(source)
    names, knobs = _module_constants(dict(_package_trees(), probe=tree))
    assert [v for _line, v in env_reads(tree, names, knobs)] == [
        "SVC_A", "SVC_OWN", "SVC_LOKI_URL", "SVC_D", "SVC_E", "SVC_F", "_SVC_TEST_G", "SVC_CODEX_URL",
        "SVC_AUTO_SWITCH_AT"]


def test_no_test_only_switch_is_left_in_the_package():
    for path in PACKAGE.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".js", ".html", ".json"):
            text = path.read_text(encoding="utf-8", errors="replace")
            assert "_SVC_TEST" not in text and "SVCTEST" not in text, path


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return text[start:end if end != -1 else len(text)]


def test_docs_settings_lists_every_variable_and_each_vendor_knob_under_its_vendor():
    from svcposture.vendor import optional_member
    from svcposture.vendors import registered

    text = (REPO / "docs" / "settings.md").read_text()
    tree = ast.parse((PACKAGE / "settings.py").read_text())
    variables = {n.value for n in ast.walk(tree)
                 if isinstance(n, ast.Constant) and isinstance(n.value, str) and VARIABLE.match(n.value)}
    assert len(variables) > 40
    assert sorted(v for v in variables if "`%s`" % v not in text) == []
    for vendor in registered():
        section = _section(text, "### %s" % vendor.display_name)
        for knob in optional_member(vendor, "knobs") or ():
            assert "`%s`" % knob.name in section, (vendor.name, knob.name)


# ---------------------------------------------------------------- the tests' hooks reach the package's children

def test_the_test_hooks_reach_a_child_the_package_starts(tmp_path):
    """tests/support/sitehooks patches the package in each process whose environment names a hook;
    the package starts its children with PYTHONPATH kept and without -I, -E or -S, so they get it too."""
    from svcposture._spawn import ISOLATED_MAIN, child_env, module_command

    assert module_command("probe")[1:3] == ["-c", ISOLATED_MAIN]  # no flag that skips PYTHONPATH or site
    (tmp_path / "hookprobe.py").write_text(
        "import sys\n"
        "from svcposture.settings import Settings\n"
        "from svcposture.steering import switching\n"
        "s = Settings.from_environ({})\n"
        "print(s.reset_margin_s, s.quota_poll_interval_s, switching.auto_gap_ms(), "
        "'sitecustomize' in sys.modules)\n")

    def child(env: Dict[str, str]) -> str:
        env = child_env(env)
        env["PYTHONPATH"] += os.pathsep + str(tmp_path)
        done = subprocess.run([sys.executable, "-c", ISOLATED_MAIN, "-m", "hookprobe"], env=env, cwd="/",
                              capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode().strip()

    env = clean_env(tmp_path)
    assert child(env) == "60.0 300.0 600000 False"
    assert child(hooked(env, reset_margin_s=1, quota_poll_s=0.5, auto_switch_gap_s=2)) == "1.0 0.5 2000 True"
