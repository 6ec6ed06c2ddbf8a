"""Every environment variable the package reads, read here: the knobs, their defaults and rules.

Settings.from_environ(environ) is a pure function of the mapping it is given:
it reads every knob the monitor process uses (its HTTP side: SVC_MONITOR_*,
SVC_SSE_KEEPALIVE_S, SVC_FLEET_TTL_S; its scrape listener: SVC_METRICS_*; its
services: the probe schedule, history, alerts, the notify hook, the quota
sampler, liveness and the tracker; and each registered vendor's own knobs,
which the vendor's package declares as `knobs` and which are read through the
registry), checks each
and returns a frozen object. The services receive that object, so a test
builds a node from a dict and a change to os.environ after start-up changes
nothing. The environment is still handed to what needs it whole: the probe
child and the notify hook get its token-free copy.

What runs outside the monitor reads its knobs through the small functions
beside Settings, each a function of the mapping it is given: the terminal
clients (monitor_url, the budgets, probe_interval_s), the probe child
(sweep_deadline_s, sweep_deadline_at, probe_timeout_s, and knob_value for a
vendor's knob), the node's file locations (accounts_env_path,
login_credentials_path, repo_root), the registry (vendor_modules) and the
cluster commands (decrypt_cmd, git_timeout_s, the svc-stack timeouts).
No other module of the package reads an environment variable of the
package; a test in the repository keeps it so (tests/test_settings.py).

A bad value is handled by one of two rules (env_number). A setting that
decides what the monitor serves (SVC_MONITOR_*, SVC_SSE_KEEPALIVE_S, the scrape
listener's SVC_METRICS_*) raises InvalidSetting; a knob that only tunes timing falls back to its default. A
value corrected with a log line is kept in `notes` as (variable, message),
and the service that owns the knob logs it when built: parsing logs nothing.

The module imports only the package's error base at load time: the terminal
clients and the token-scoped child read their knobs here, and their start-up
time is counted. The registry is imported when Settings are built.
"""
from __future__ import annotations

from .errors import FACE, SvcpostureError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

    Number = Union[int, float]

DEFAULT_BIND = "127.0.0.1"
DEFAULT_PORT = 7400
DEFAULT_MAX_STREAMS = 1024
DEFAULT_MAX_CONNECTIONS = 4096
DEFAULT_KEEPALIVE_S = 15.0
# Slowloris: a request (or the next one on a kept-alive connection) must
# arrive within this many seconds unless SVC_MONITOR_REQUEST_TIMEOUT_S says otherwise.
DEFAULT_REQUEST_TIMEOUT_S = 10.0
DEFAULT_FLEET_TTL_S = 60.0
# What a client reads of ~/svc/run/monitor.json ({pid, url, startedAt} is far smaller).
MAX_MONITOR_RECORD = 64 * 1024
MAX_FLEET_TTL_S = 3600.0

# The posture service's schedule (docs/posture.md).
DEFAULT_TTL_S = 300.0
# The probe at a reset waits this long past the reset instant (docs/posture.md).
DEFAULT_RESET_MARGIN_S = 60.0
# History day files kept (docs/trajectory.md).
DEFAULT_HISTORY_DAYS = 8
# Alert thresholds, in percent (docs/trajectory.md).
DEFAULT_THRESHOLDS = (80, 90)
DEFAULT_FLOOR_S = 30.0
DEFAULT_INTERVAL_S = 300.0

# The sweep deadline ($SVC_PROBE_DEADLINE_S): the parent kills the child then,
# and the child answers a little before it. The parent also gives the child the
# kill instant itself ($SVC_PROBE_DEADLINE_AT, epoch seconds), so the child's
# own start-up is counted against it.
DEADLINE_ENV = "SVC_PROBE_DEADLINE_S"
DEADLINE_AT_ENV = "SVC_PROBE_DEADLINE_AT"
DEFAULT_DEADLINE_S = 30.0
MIN_DEADLINE_S = 0.1
# One request's socket timeout in the probe child, whatever the vendor.
DEFAULT_PROBE_TIMEOUT_S = 10.0

# The quota sampler (docs/posture.md).
DEFAULT_QUOTA_INTERVAL_S = 300.0
# 3 polls an hour per host: up to ten hosts of one login (before the one-poller
# rule) stay within the endpoint's ~30 requests an hour.
MIN_QUOTA_INTERVAL_S = 180.0

# Cluster liveness (docs/liveness.md).
INTERVAL_ENV = "EXECUTION_CORE_LIVENESS_PUBLISH_INTERVAL_MS"
DEFAULT_INTERVAL_MS = 120000
# Shorter intervals exist for tests; below this a tracker would rate-limit anyway.
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 24 * 3600 * 1000
READ_SOURCE_ENV = "SVC_LIVENESS_READ_SOURCE"
PROMETHEUS_URL_ENV = "SVC_PROMETHEUS_URL"

# Steering: the automatic switch (off unless set) and the guard's wait for the monitor.
AUTO_SWITCH_ENV = "SVC_AUTO_SWITCH_AT"
GUARD_BUDGET_ENV = "SVC_GUARD_BUDGET_MS"
DEFAULT_GUARD_BUDGET_MS = 250
ADVICE_WAIT_ENV = "SVC_ADVICE_WAIT_S"
DEFAULT_ADVICE_WAIT_S = 600
MAX_ADVICE_WAIT_S = 7 * 86400
LOKI_URL_ENV = "SVC_LOKI_URL"

# The tracker the anchor lives on (docs/liveness.md), and the rate-limit window its budget is counted over.
DEFAULT_TRACKER_URL = "https://api.linear.app/graphql"
WINDOW_ENV = "SVC_TRACKER_RATE_WINDOW_MS"
DEFAULT_WINDOW_MS = 3600 * 1000

# The file locations a variable may move (docs/settings.md): the accounts env
# file, the interactive login's credentials, the project repository.
ACCOUNTS_ENV_ENV = "SVC_ACCOUNTS_ENV"
LOGIN_CREDENTIALS_ENV = "SVC_LOGIN_CREDENTIALS"
REPO_ROOT_ENV = "SVC_REPO_ROOT"

# The vendors registered beside the built-in ones: importable modules, comma-separated,
# each with a `VENDOR` (docs/vendors.md).
VENDORS_ENV = "SVC_VENDORS"

# The scrape listener (docs/fleet-prometheus.md): a second listener serving /metrics and /healthz
# alone, its TLS certificate and key, and the operator's acceptance of plain HTTP off the loopback.
METRICS_BIND_ENV = "SVC_METRICS_BIND"
METRICS_TLS_CERT_ENV = "SVC_METRICS_TLS_CERT"
METRICS_TLS_KEY_ENV = "SVC_METRICS_TLS_KEY"
METRICS_PLAIN_HTTP_ENV = "SVC_METRICS_PLAIN_HTTP"

# The cluster commands: how `svc-cluster sync` decrypts the cluster's secrets, how long a
# git command may take, how long `svc-stack` waits for the monitor to start and to stop.
DECRYPT_CMD_ENV = "SVC_DECRYPT_CMD"
DEFAULT_DECRYPT_CMD = "sops --decrypt"
DEFAULT_GIT_TIMEOUT_S = 120.0
DEFAULT_STACK_START_TIMEOUT_S = 20.0
DEFAULT_STACK_STOP_TIMEOUT_S = 10.0


class InvalidSetting(SvcpostureError, ValueError):
    """An environment variable or argument that does not hold a usable value."""

    __module__ = FACE


def env_number(environ: Mapping[str, str], name: str, default: Number, *, low: Number,
               high: Optional[Number] = None, kind: type = float, strict: bool = False) -> Number:
    """The value of `name` as `kind`, within [low, high]: the two rules for a bad value.

    Unset or blank gives `default`. Anything unparseable, non-finite or out of
    range gives `default` (a knob that only tunes timing: a typo must not stop
    a node), or raises InvalidSetting naming the variable when `strict` is true
    (a setting that decides what the monitor serves).
    """
    import math

    raw = environ.get(name)
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    try:
        value = kind(text)
    except ValueError:
        if strict:
            noun = "an integer" if kind is int else "a number"
            raise InvalidSetting("%s=%r is not %s" % (name, text, noun)) from None
        return default
    # NaN fails every comparison, so it lands here as out of range too.
    if not (value >= low and (high is None or value <= high)) or not math.isfinite(value):
        if strict:
            shown = "%d" % value if kind is int else text
            raise InvalidSetting("%s=%s is outside %s..%s" % (name, shown, low, high))
        return default
    return value


def parse_port(raw: str, source: str) -> int:
    """A TCP port 0..65535 from text; InvalidSetting names `source` otherwise."""
    try:
        port = int(raw.strip())
    except ValueError:
        raise InvalidSetting("%s: %r is not a port number" % (source, raw)) from None
    if not 0 <= port <= 65535:
        raise InvalidSetting("%s: %d is not in 0..65535" % (source, port))
    return port


def probing_on(environ: Mapping[str, str]) -> bool:
    """Whether the node probes its provider: yes unless SVC_ACCOUNTS_PROBE=0."""
    return environ.get("SVC_ACCOUNTS_PROBE", "").strip() != "0"


def monitor_address(environ: Mapping[str, str], strict: bool = True) -> Tuple[str, int]:
    """(bind, port) from SVC_MONITOR_BIND and SVC_MONITOR_PORT, else 127.0.0.1 and 7400.

    strict: a bad port raises InvalidSetting (the monitor must not start on a
    port nobody asked for); otherwise it counts as unset.
    """
    bind = (environ.get("SVC_MONITOR_BIND") or "").strip() or DEFAULT_BIND
    raw = (environ.get("SVC_MONITOR_PORT") or "").strip()
    port = DEFAULT_PORT
    if raw:
        try:
            port = parse_port(raw, "SVC_MONITOR_PORT")
        except InvalidSetting:
            if strict:
                raise
    return bind, port


def parse_listen_address(raw: str, source: str) -> Tuple[str, int]:
    """(host, port) from `HOST:PORT` (IPv6 in brackets: `[::1]:7401`); InvalidSetting names `source`.

    The host is required: an empty one would bind every address, which must be
    written out (`0.0.0.0:7401`) to be asked for. An IPv6 address without
    brackets is refused, since where its port begins cannot be told."""
    text = raw.strip()
    host, colon, port_text = text.rpartition(":")
    if not colon or not host:
        raise InvalidSetting("%s=%r is not HOST:PORT (e.g. 0.0.0.0:7401, or [::]:7401 for IPv6)" % (source, text[:80]))
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        raise InvalidSetting("%s=%r: write an IPv6 address in brackets, e.g. [::1]:7401" % (source, text[:80]))
    host = host[1:-1] if host.startswith("[") else host
    if not host or any(c.isspace() or c in "/@[]" for c in host):
        raise InvalidSetting("%s=%r is not HOST:PORT (e.g. 0.0.0.0:7401)" % (source, text[:80]))
    return host, parse_port(port_text, source)


# How monitor_url finds the monitor, for every client's --help.
MONITOR_URL_RULE = ("127.0.0.1 at $SVC_MONITOR_PORT and $SVC_MONITOR_BIND when either is set, "
                    "else the url in ~/svc/run/monitor.json, else http://127.0.0.1:%d" % DEFAULT_PORT)


# What every client that finds no monitor says next, after the URL it tried.
MONITOR_START_HINT = "start one with `svc-monitor` (or `svc-stack start` to run it in the background)"


def monitor_url(environ: Mapping[str, str]) -> str:
    """Where a terminal client looks for the monitor when it is given no --url: the one rule.

    SVC_MONITOR_PORT or SVC_MONITOR_BIND, when either is set, name it (the
    monitor listens there); otherwise the URL the running monitor recorded in
    ~/svc/run/monitor.json (a monitor started with --port); otherwise
    http://127.0.0.1:7400. Every client (statusline, HUD, guard, switch, the
    MCP server, init's hints) calls this, so no two of them look in different
    places, and each names the URL it tried when nothing answers.
    """
    if (environ.get("SVC_MONITOR_PORT") or "").strip() or (environ.get("SVC_MONITOR_BIND") or "").strip():
        bind, port = monitor_address(environ, strict=False)
        return "http://%s:%d" % (_client_host(bind), port or DEFAULT_PORT)
    recorded = _recorded_monitor_url(environ)
    return recorded if recorded is not None else "http://127.0.0.1:%d" % DEFAULT_PORT


def _client_host(bind: str) -> str:
    """The host a client on this machine reaches a monitor bound to `bind` at."""
    if bind in ("", "0.0.0.0", "*"):
        return "127.0.0.1"
    if bind == "::":
        return "[::1]"
    return "[%s]" % bind if ":" in bind and not bind.startswith("[") else bind


def _recorded_monitor_url(environ: Mapping[str, str]) -> Optional[str]:
    """The url field of ~/svc/run/monitor.json, or None (no such file, or it is not a URL).

    The path is built here rather than through Paths: the statusline calls this
    on every render, and importing pathlib costs more than the rest of it. A
    HOME that is unset, empty or relative names no node.
    """
    import os

    home = environ.get("HOME", "")
    if not home or not os.path.isabs(home):
        return None
    from ._text import loads_bounded

    try:
        with open(os.path.join(home, "svc", "run", "monitor.json"), "rb") as fh:
            record = loads_bounded(fh.read(MAX_MONITOR_RECORD + 1), MAX_MONITOR_RECORD)
    except (OSError, ValueError):
        return None
    url = record.get("url") if isinstance(record, dict) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or len(url) > 2048:
        return None
    return url.rstrip("/")


def terminal_columns(environ: Mapping[str, str], fd: int) -> Optional[int]:
    """How many columns a line written to `fd` has: $COLUMNS when it is a positive number, else the
    terminal's own width when `fd` is one; None when neither says (a pipe, a file)."""
    raw = (environ.get("COLUMNS") or "").strip()
    if raw.isascii() and raw.isdigit() and 0 < int(raw) <= 100000:
        return int(raw)
    import os
    try:
        columns = os.get_terminal_size(fd).columns
    except (OSError, ValueError):
        return None
    return columns if columns > 0 else None


def statusline_budget_ms(environ: Mapping[str, str]) -> int:
    """$SVC_STATUSLINE_BUDGET_MS (10 to 60000), else 250; junk means the default."""
    return _budget_ms(environ.get("SVC_STATUSLINE_BUDGET_MS", ""))


def _budget_ms(raw: str) -> int:
    if raw.isdigit() and raw.isascii() and len(raw) <= 6 and 10 <= int(raw) <= 60000:
        return int(raw)
    return DEFAULT_GUARD_BUDGET_MS


def guard_budget_ms(environ: Mapping[str, str]) -> int:
    """$SVC_GUARD_BUDGET_MS (10 to 60000; e.g. for a monitor behind a remote proxy), else 250."""
    return _budget_ms(environ.get(GUARD_BUDGET_ENV, ""))


def auto_switch_at(environ: Mapping[str, str]) -> Optional[float]:
    """$SVC_AUTO_SWITCH_AT as a percentage 1..100; None when unset; ValueError when it is junk."""
    raw = (environ.get(AUTO_SWITCH_ENV) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw.rstrip("%"))
    except ValueError:
        raise ValueError("%s must be a percentage from 1 to 100, not %r" % (AUTO_SWITCH_ENV, raw[:40])) from None
    if not 1 <= value <= 100:
        raise ValueError("%s must be a percentage from 1 to 100, not %r" % (AUTO_SWITCH_ENV, raw[:40]))
    return value


def advice_wait_s(environ: Mapping[str, str]) -> int:
    """$SVC_ADVICE_WAIT_S: how soon a holding window must reset for the advice to
    wait rather than switch (whole seconds 0..604800; 0 never waits), else 600;
    ValueError when it is junk."""
    raw = (environ.get(ADVICE_WAIT_ENV) or "").strip()
    if not raw:
        return DEFAULT_ADVICE_WAIT_S
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 7 or int(raw) > MAX_ADVICE_WAIT_S:
        raise ValueError("%s must be a whole number of seconds from 0 to %d, not %r"
                         % (ADVICE_WAIT_ENV, MAX_ADVICE_WAIT_S, raw[:40]))
    return int(raw)


def publish_interval_ms(environ: Mapping[str, str]) -> int:
    """The liveness publish interval (120000 ms; 100 ms to a day, else the default)."""
    return int(env_number(environ, INTERVAL_ENV, DEFAULT_INTERVAL_MS, low=MIN_INTERVAL_MS, high=MAX_INTERVAL_MS,
                          kind=int))


def read_source(environ: Mapping[str, str]) -> str:
    """Where peers' liveness is read: "loki", "prometheus", or (anything else) "tracker"."""
    source = (environ.get(READ_SOURCE_ENV) or "").strip().lower()
    return source if source in ("loki", "prometheus") else "tracker"


def reads_from_loki(environ: Mapping[str, str]) -> bool:
    return read_source(environ) == "loki"


def tracker_url(environ: Mapping[str, str]) -> str:
    return (environ.get("SVC_TRACKER_URL") or "").strip() or DEFAULT_TRACKER_URL


def window_ms(environ: Mapping[str, str]) -> int:
    """The length of the tracker's rate-limit window (an hour; tests scale it down)."""
    return int(env_number(environ, WINDOW_ENV, DEFAULT_WINDOW_MS, low=1000, high=7 * 86400 * 1000, kind=int))


def sweep_deadline_s(environ: Mapping[str, str]) -> float:
    """$SVC_PROBE_DEADLINE_S (30 s, at least 0.1 s; a bad value gives the default)."""
    return env_number(environ, DEADLINE_ENV, DEFAULT_DEADLINE_S, low=MIN_DEADLINE_S)


def sweep_deadline_at(environ: Mapping[str, str]) -> float:
    """$SVC_PROBE_DEADLINE_AT, the parent's kill instant in epoch seconds; 0 when unset or junk."""
    return env_number(environ, DEADLINE_AT_ENV, 0.0, low=0.0)


def probe_timeout_s(environ: Mapping[str, str]) -> float:
    """$SVC_PROBE_TIMEOUT_S: one provider request's timeout in the probe child (10 s, at least 0.01 s)."""
    return env_number(environ, "SVC_PROBE_TIMEOUT_S", DEFAULT_PROBE_TIMEOUT_S, low=0.01)


def probe_interval_s(environ: Mapping[str, str]) -> float:
    """$SVC_PROBE_INTERVAL_S (300 s, at least 0.01 s; a bad value gives the default).

    The monitor's schedule, and what a terminal client counts a reading stale
    by: a client cannot ask the monitor for its interval, so it reads the same
    variable by the same rule; both normally come from the node's service
    environment."""
    return env_number(environ, "SVC_PROBE_INTERVAL_S", DEFAULT_INTERVAL_S, low=0.01)


# ---------------------------------------------------------------- file locations

def accounts_env_path(environ: Mapping[str, str]) -> Optional[str]:
    """$SVC_ACCOUNTS_ENV, the accounts env file's path when it is not the default; None when unset or empty."""
    return environ.get(ACCOUNTS_ENV_ENV) or None


def login_credentials_path(environ: Mapping[str, str]) -> Optional[str]:
    """$SVC_LOGIN_CREDENTIALS, the interactive login's credentials file when it is not the default, or None."""
    return environ.get(LOGIN_CREDENTIALS_ENV) or None


def repo_root(environ: Mapping[str, str]) -> Optional[str]:
    """$SVC_REPO_ROOT, the project repository (before registry.json's repoRoot), or None."""
    return environ.get(REPO_ROOT_ENV) or None


# ---------------------------------------------------------------- the registry and the cluster commands

def vendor_modules(environ: Mapping[str, str]) -> List[str]:
    """The module names $SVC_VENDORS lists (comma-separated, blanks ignored)."""
    raw = environ.get(VENDORS_ENV) or ""
    return [part.strip() for part in raw.split(",") if part.strip()]


def decrypt_cmd(environ: Mapping[str, str]) -> str:
    """$SVC_DECRYPT_CMD, the command line that decrypts a cluster file (the path is appended),
    else `sops --decrypt`; `svc-cluster sync` splits it as the shell would."""
    return environ.get(DECRYPT_CMD_ENV) or DEFAULT_DECRYPT_CMD


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    """A positive number of seconds from $name; unset, junk, zero, negative or infinite gives `default`."""
    import math

    # math.ulp(0.0) is the smallest positive float: `low` is inclusive, zero must not pass.
    return float(env_number(environ, name, default, low=math.ulp(0.0)))


def git_timeout_s(environ: Mapping[str, str]) -> float:
    """$SVC_GIT_TIMEOUT_S: how long one git command on the cluster repo may take (120 s)."""
    return _seconds(environ, "SVC_GIT_TIMEOUT_S", DEFAULT_GIT_TIMEOUT_S)


def stack_start_timeout_s(environ: Mapping[str, str]) -> float:
    """$SVC_STACK_START_TIMEOUT_S: how long `svc-stack start` waits for the monitor to serve (20 s)."""
    return _seconds(environ, "SVC_STACK_START_TIMEOUT_S", DEFAULT_STACK_START_TIMEOUT_S)


def stack_stop_timeout_s(environ: Mapping[str, str]) -> float:
    """$SVC_STACK_STOP_TIMEOUT_S: how long `svc-stack stop` waits before SIGKILL (10 s)."""
    return _seconds(environ, "SVC_STACK_STOP_TIMEOUT_S", DEFAULT_STACK_STOP_TIMEOUT_S)


# ---------------------------------------------------------------- a vendor's own knobs

def knob_value(environ: Mapping[str, str], knob: Any) -> Any:
    """The value of a vendor's knob (a `vendor.Knob`) in `environ`: the one way a vendor's
    code reads its variables, in the monitor (through Settings) and in the probe child.

    Unset or blank gives the knob's default; otherwise its `parse` gets the text,
    stripped, and a ValueError from it gives the default too."""
    raw = environ.get(knob.name)
    if raw is None or not raw.strip():
        return knob.default
    try:
        return knob.parse(raw.strip())
    except ValueError:
        return knob.default


def as_text(text: str) -> str:
    """A knob's parser: the text as given (stripped)."""
    return text


def as_base_url(text: str) -> str:
    """A knob's parser: a base URL, without the trailing slashes a path is appended after."""
    return text.rstrip("/")


def vendor_knobs(environ: Mapping[str, str]) -> Tuple[Tuple[str, str, Any], ...]:
    """(vendor, variable, value) of every registered vendor's knobs, in registration order.

    A knob marked `internal` (the monitor's message to its own child) is no
    setting of the node and is left out."""
    from .vendor import optional_member
    from .vendors import registered

    return tuple((vendor.name, knob.name, knob_value(environ, knob))
                 for vendor in registered() for knob in (optional_member(vendor, "knobs") or ())
                 if not knob.internal)


def _http_knobs(environ: Mapping[str, str], strict: bool) -> Dict[str, Any]:
    # The monitor's command refuses a bad SVC_MONITOR_PORT itself (monitor_address, strict);
    # a library node is given its port, so the variable is no error there.
    bind, port = monitor_address(environ, strict=False)
    return dict(
        monitor_bind=bind,
        monitor_port=port,
        probe=probing_on(environ),
        max_streams=env_number(environ, "SVC_MONITOR_MAX_STREAMS", DEFAULT_MAX_STREAMS,
                               low=1, high=100000, kind=int, strict=strict),
        keepalive_s=env_number(environ, "SVC_SSE_KEEPALIVE_S", DEFAULT_KEEPALIVE_S,
                               low=0.05, high=3600.0, strict=strict),
        read_guard=environ.get("SVC_MONITOR_READ_GUARD", "") == "1",
        request_timeout_s=env_number(environ, "SVC_MONITOR_REQUEST_TIMEOUT_S", DEFAULT_REQUEST_TIMEOUT_S,
                                     low=0.1, high=300.0, strict=strict),
        max_connections=env_number(environ, "SVC_MONITOR_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS,
                                   low=16, high=1000000, kind=int, strict=strict),
        trusted_hosts=environ.get("SVC_MONITOR_TRUSTED_HOSTS", ""),
        trusted_origins=environ.get("SVC_MONITOR_TRUSTED_ORIGINS", ""),
        fleet_ttl_s=env_number(environ, "SVC_FLEET_TTL_S", DEFAULT_FLEET_TTL_S, low=0.0, high=MAX_FLEET_TTL_S))


def _scrape_knobs(environ: Mapping[str, str], strict: bool) -> Dict[str, Any]:
    """The scrape listener: where it listens (None: off), its certificate and key, and whether
    plain HTTP off the loopback is accepted. A bad address, or a certificate without its key
    (or the reverse), raises InvalidSetting; with strict=False the listener counts as off."""
    raw = (environ.get(METRICS_BIND_ENV) or "").strip()
    cert = (environ.get(METRICS_TLS_CERT_ENV) or "").strip()
    key = (environ.get(METRICS_TLS_KEY_ENV) or "").strip()
    try:
        bind = parse_listen_address(raw, METRICS_BIND_ENV) if raw else None
        if bool(cert) != bool(key):
            given, missing = (METRICS_TLS_CERT_ENV, METRICS_TLS_KEY_ENV) if cert else (METRICS_TLS_KEY_ENV,
                                                                                      METRICS_TLS_CERT_ENV)
            raise InvalidSetting("%s is set but %s is not: TLS needs both the certificate and its key"
                                 % (given, missing))
    except InvalidSetting:
        if strict:
            raise
        bind, cert, key = None, "", ""
    return dict(metrics_bind=bind, metrics_tls_cert=cert, metrics_tls_key=key,
                metrics_plain_http=environ.get(METRICS_PLAIN_HTTP_ENV, "").strip() == "1")


def _probe_knobs(environ: Mapping[str, str]) -> Dict[str, Any]:
    """The posture service's schedule: TTL, refresh floor (at most the TTL), interval, deadline, reset margin."""
    ttl_s = env_number(environ, "SVC_POSTURE_TTL_S", DEFAULT_TTL_S, low=0.0)
    return dict(
        posture_ttl_s=ttl_s,
        refresh_floor_s=min(env_number(environ, "SVC_REFRESH_FLOOR_S", DEFAULT_FLOOR_S, low=0.0), ttl_s),
        probe_interval_s=probe_interval_s(environ),
        probe_deadline_s=sweep_deadline_s(environ),
        # A rule of the provider's clock and roll-over (docs/posture.md), not a knob.
        reset_margin_s=DEFAULT_RESET_MARGIN_S)


def quota_interval_s(environ: Mapping[str, str]) -> float:
    """$SVC_QUOTA_POLL_INTERVAL_S (300 s), never below the usage endpoint's budget (180 s): how often
    the login's usage is sampled, and what a client counts the login's reading stale by."""
    return max(MIN_QUOTA_INTERVAL_S, float(env_number(environ, "SVC_QUOTA_POLL_INTERVAL_S",
                                                      DEFAULT_QUOTA_INTERVAL_S, low=0.0)))


def _quota_knobs(environ: Mapping[str, str], notes: List[Tuple[str, str]]) -> Dict[str, Any]:
    """The quota sampler: on unless SVC_QUOTA_SAMPLER=0; its interval never below the
    usage endpoint's budget (a note says so)."""
    asked = env_number(environ, "SVC_QUOTA_POLL_INTERVAL_S", DEFAULT_QUOTA_INTERVAL_S, low=0.0)
    if asked < MIN_QUOTA_INTERVAL_S:
        notes.append(("SVC_QUOTA_POLL_INTERVAL_S",
                      "SVC_QUOTA_POLL_INTERVAL_S=%g is below the usage endpoint's budget; polling every %g s"
                      % (asked, MIN_QUOTA_INTERVAL_S)))
    return dict(quota_sampler=environ.get("SVC_QUOTA_SAMPLER", "1").strip() != "0",
                quota_poll_interval_s=quota_interval_s(environ))


def _trajectory_knobs(environ: Mapping[str, str], notes: List[Tuple[str, str]]) -> Dict[str, Any]:
    """History retention, alert thresholds (their problems become notes) and the notify hook
    (in a cgroup of its own unless SVC_ALERT_HOOK_CGROUP=0)."""
    thresholds, problems = parse_thresholds(environ.get("SVC_ALERT_THRESHOLDS"))
    notes.extend(("SVC_ALERT_THRESHOLDS", problem) for problem in problems)
    return dict(history_days=int(env_number(environ, "SVC_HISTORY_DAYS", DEFAULT_HISTORY_DAYS, low=1, high=3650, kind=int)),
                alert_thresholds=tuple(thresholds),
                alert_cmd=environ.get("SVC_ALERT_CMD", ""),
                alert_hook_cgroup=environ.get("SVC_ALERT_HOOK_CGROUP", "").strip() != "0")


def parse_thresholds(text: Optional[str]) -> Tuple[Tuple[int, ...], List[str]]:
    """($SVC_ALERT_THRESHOLDS as sorted unique integers 1..100, problems found).

    Unset or blank gives the default 80,90. Each item that is not an integer
    from 1 to 100 is left out and named in a problem; duplicates collapse. A
    value with no valid item at all falls back to the default, with a problem.
    """
    if text is None or not text.strip():
        return DEFAULT_THRESHOLDS, []
    problems: List[str] = []
    found = set()
    for item in text.split(","):
        word = item.strip()
        if not word:
            problems.append("SVC_ALERT_THRESHOLDS has an empty item; ignored")
            continue
        if not (word.isascii() and word.isdigit()) or not 1 <= int(word) <= 100:
            problems.append("SVC_ALERT_THRESHOLDS item %r is not an integer from 1 to 100; ignored" % word[:40])
            continue
        if int(word) in found:
            problems.append("SVC_ALERT_THRESHOLDS repeats %s; counted once" % word)
        found.add(int(word))
    if not found:
        problems.append("SVC_ALERT_THRESHOLDS has no usable threshold; using the default 80,90")
        return DEFAULT_THRESHOLDS, problems
    return tuple(sorted(found)), problems


def _cluster_knobs(environ: Mapping[str, str]) -> Dict[str, Any]:
    """Liveness (publish interval, read source, Loki) and the tracker the anchor lives on
    (its URL, and the rate-limit window its budget is counted over)."""
    return dict(liveness_interval_ms=publish_interval_ms(environ),
                liveness_read_source=read_source(environ),
                loki_url=(environ.get(LOKI_URL_ENV) or "").strip(),
                tracker_url=tracker_url(environ),
                tracker_window_ms=window_ms(environ),
                prometheus_url=(environ.get(PROMETHEUS_URL_ENV) or "").strip())


def _steering_knobs(environ: Mapping[str, str], notes: List[Tuple[str, str]]) -> Dict[str, Any]:
    """The automatic switch's threshold (junk turns it off, with a note), the guard's budget,
    and how soon a reset is waited for rather than switched away from (the advice)."""
    try:
        at_pct = auto_switch_at(environ)
    except ValueError as exc:
        notes.append((AUTO_SWITCH_ENV, "auto switch off: %s" % exc))
        at_pct = None
    try:
        wait_s = advice_wait_s(environ)
    except ValueError:  # a timing knob: a typo falls back to the default
        wait_s = DEFAULT_ADVICE_WAIT_S
    return dict(auto_switch_at=at_pct, guard_budget_ms=guard_budget_ms(environ), advice_wait_s=wait_s)


def _parse(environ: Mapping[str, str], strict: bool) -> Dict[str, Any]:
    notes: List[Tuple[str, str]] = []
    values = _http_knobs(environ, strict)
    values.update(_scrape_knobs(environ, strict))
    values.update(_probe_knobs(environ))
    values.update(_quota_knobs(environ, notes))
    values.update(_trajectory_knobs(environ, notes))
    values.update(_cluster_knobs(environ))
    values.update(_steering_knobs(environ, notes))
    values["vendor_knobs"] = vendor_knobs(environ)
    values["notes"] = tuple(notes)
    return values


class Settings:
    """What the monitor was told by its environment; frozen once built.

    Settings() is the defaults; Settings(name=value, ...) changes some of them
    (a name that is no setting is a TypeError). See the module docstring for
    how bad values are handled.
    """

    __slots__ = ("monitor_bind", "monitor_port", "probe", "max_streams", "keepalive_s", "read_guard", "request_timeout_s",
                 "max_connections", "trusted_hosts", "trusted_origins", "fleet_ttl_s",
                 "metrics_bind", "metrics_tls_cert", "metrics_tls_key", "metrics_plain_http",
                 "posture_ttl_s", "refresh_floor_s", "probe_interval_s", "probe_deadline_s", "reset_margin_s",
                 "quota_sampler", "quota_poll_interval_s",
                 "history_days", "alert_thresholds", "alert_cmd", "alert_hook_cgroup",
                 "liveness_interval_ms", "liveness_read_source", "loki_url", "tracker_url", "tracker_window_ms",
                 "prometheus_url", "auto_switch_at", "guard_budget_ms", "advice_wait_s", "vendor_knobs", "notes")

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(self.__slots__))
        if unknown:
            raise TypeError("Settings has no setting %s" % ", ".join(unknown))
        # The defaults are what an empty environment gives: one home per default.
        full = values if len(values) == len(self.__slots__) else dict(_parse({}, True), **values)
        for name in self.__slots__:
            object.__setattr__(self, name, full[name])

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, strict: bool = True) -> "Settings":
        """The settings `environ` gives. strict=False (for commands that serve
        nothing, such as `svc-cluster status`) lets a bad SVC_MONITOR_* value
        fall back to its default instead of raising InvalidSetting."""
        return cls(**_parse(environ, strict))

    def vendor_knob(self, name: str) -> Any:
        """The value of the registered vendors' knob `name` (KeyError when no vendor declares it)."""
        for _vendor, variable, value in self.vendor_knobs:
            if variable == name:
                return value
        raise KeyError(name)

    def notes_on(self, name: str) -> List[str]:
        """What parsing `name` corrected, for the service that owns it to log."""
        return [message for variable, message in self.notes if variable == name]

    def replace(self, **changes: Any) -> "Settings":
        """A copy with `changes` applied (the object itself never changes)."""
        values = {name: getattr(self, name) for name in self.__slots__}
        values.update(changes)
        return type(self)(**values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Settings are frozen; use replace()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Settings are frozen; use replace()")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def __repr__(self) -> str:
        return "Settings(%s)" % ", ".join("%s=%r" % (n, getattr(self, n)) for n in self.__slots__)
