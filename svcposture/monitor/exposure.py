"""What the monitor exposes, where, and behind what: decided before anything listens.

plan_exposure(...) reads the start-up's choices (the main listener's address,
--allow-remote, the scrape listener's SVC_METRICS_* settings) with the files
they name (the bearer token file, the TLS certificate and key) and returns an
Exposure, or raises ExposureRefused with one sentence naming what is wrong
and the fix: `svc-monitor` prints it and exits 2, before the node is built.

The rules (docs/defences.md):

- The main listener serves every route (the pages, every account's email on
  /api/accounts, the fleet, the streams), so it stays on the loopback. An
  address off the loopback is refused, unless --allow-remote asks for it
  (a container, whose loopback no one else shares); then every route but
  /healthz needs the bearer token, wherever the listener is bound.
- The scrape listener (SVC_METRICS_BIND) serves /metrics and /healthz alone.
  Off the loopback, /metrics needs the bearer token, and the listener speaks
  TLS (SVC_METRICS_TLS_CERT and _KEY) unless SVC_METRICS_PLAIN_HTTP=1 accepts
  cleartext, which then gets one warning line.
- On the loopback, the scrape listener asks for the token only when the token
  file exists (a bad one is still refused): the main listener already serves
  the same /metrics there, to every local user, without one, so requiring it
  would protect nothing; and a file that exists is used, so that a Prometheus
  reaching the node through a tunnel sends the token it is configured with.
- The token is read once, here: the monitor keeps its SHA-256 alone (a
  changed file counts from the next start). It never goes into an argument,
  the environment, a log line or a reply.
"""
from __future__ import annotations

import os
from typing import Any, List, NamedTuple, Optional, Tuple

from ..errors import SvcpostureError
from ..paths import Paths
from ..remote.address import is_loopback
from ..remote.certificate import CertificateError, server_context, utc_text
from ..remote.token import TokenFileError, load_token_digest
from ..settings import METRICS_BIND_ENV, METRICS_PLAIN_HTTP_ENV, Settings
from .bearer import BearerCheck

__all__ = ["Exposure", "ExposureRefused", "ScrapePlan", "plan_exposure", "scrape_lines", "remote_note"]


class ExposureRefused(SvcpostureError):
    """The monitor will not listen as asked; the message is one sentence with the fix."""


class ScrapePlan(NamedTuple):
    """Where the scrape listener binds and what it asks of a client."""

    host: str
    port: int
    check: Optional[BearerCheck]   # None: /metrics is open (the loopback, no token file)
    tls: Any                       # an ssl.SSLContext, or None: plain HTTP
    tls_until: Optional[float]     # the certificate's notAfter
    plain_off_loopback: bool       # plain HTTP accepted off the loopback: one warning line


class Exposure(NamedTuple):
    """The main listener's gate (None: no token asked, the loopback) and the scrape listener (None: off)."""

    gate: Optional[BearerCheck]
    scrape: Optional[ScrapePlan]
    token_path: str
    notes: Tuple[str, ...]


def plan_exposure(paths: Paths, settings: Settings, *, bind: str, bind_source: str, allow_remote: bool,
                  now: float) -> Exposure:
    """The exposure asked for; ExposureRefused when it must not start (see the module's rules)."""
    token_path = str(paths.metrics_token)
    if not allow_remote and not is_loopback(bind):
        raise ExposureRefused(_remote_refusal(bind, bind_source, token_path))
    digest: List[bytes] = []  # the token's digest once read: one read serves both listeners
    gate = BearerCheck(_digest(token_path, digest, "--allow-remote")) if allow_remote else None
    scrape = _scrape_plan(settings, token_path, digest, now) if settings.metrics_bind is not None else None
    notes: List[str] = []
    if settings.metrics_bind is None and settings.metrics_tls_cert:
        notes.append("SVC_METRICS_TLS_CERT and SVC_METRICS_TLS_KEY are set but %s is not: no scrape listener "
                     "uses them" % METRICS_BIND_ENV)
    return Exposure(gate, scrape, token_path, tuple(notes))


def _remote_refusal(bind: str, source: str, token_path: str) -> str:
    return ("%s is not a loopback address, and the monitor's every route (the pages, every account's email on "
            "/api/accounts, the fleet, the streams) would answer whoever reaches it: for Prometheus, set "
            "%s=%s:7401 instead (a listener serving /metrics alone, behind the bearer token in %s); for the "
            "pages, reach the monitor through an SSH tunnel (ssh -L 7400:127.0.0.1:7400 THIS-HOST) or a reverse "
            "proxy; in a container, add --allow-remote to put every route behind that token (docs/defences.md)"
            % (source, METRICS_BIND_ENV, bind if bind else "0.0.0.0", token_path))


def _digest(token_path: str, cache: List[bytes], needer: str) -> bytes:
    if not cache:
        try:
            cache.append(load_token_digest(token_path))
        except TokenFileError as exc:
            raise ExposureRefused("%s needs the bearer token, and %s" % (needer, exc)) from None
    return cache[0]


def _scrape_plan(settings: Settings, token_path: str, digest: List[bytes], now: float) -> ScrapePlan:
    host, port = settings.metrics_bind  # type: ignore[misc]
    source = "%s=%s" % (METRICS_BIND_ENV, _address(host, port))
    remote = not is_loopback(host)
    check = None
    if remote or os.path.lexists(token_path):
        check = BearerCheck(_digest(token_path, digest, source + (" (off the loopback)" if remote else "")))
    tls, until = None, None
    if settings.metrics_tls_cert:
        try:
            tls, until = server_context(settings.metrics_tls_cert, settings.metrics_tls_key, now)
        except CertificateError as exc:
            raise ExposureRefused("%s asks for TLS, and %s" % (source, exc)) from None
    elif remote and not settings.metrics_plain_http:
        raise ExposureRefused(
            "%s is off the loopback, and without TLS the bearer token and the metrics would cross the network "
            "in clear text: set SVC_METRICS_TLS_CERT and SVC_METRICS_TLS_KEY to a PEM certificate and its key, "
            "or set %s=1 to accept plain HTTP (docs/fleet-prometheus.md)" % (source, METRICS_PLAIN_HTTP_ENV))
    return ScrapePlan(host, port, check, tls, until, remote and tls is None)


def _address(host: str, port: int) -> str:
    return "%s:%d" % ("[%s]" % host if ":" in host else host, port)


# ---------------------------------------------------------------- what the start-up says

def remote_note(exposure: Exposure) -> str:
    """What the main listener's start-up line adds under --allow-remote ('' otherwise)."""
    if exposure.gate is None:
        return ""
    return ("; --allow-remote: every route but /healthz needs the bearer token of %s, so open the pages "
            "through a reverse proxy that adds the header Authorization: Bearer <token>" % exposure.token_path)


def scrape_lines(exposure: Exposure, url: str) -> Tuple[str, Optional[str]]:
    """(the scrape listener's start-up line, its warning line or None), once it listens at `url`."""
    plan = exposure.scrape
    assert plan is not None
    guard = ("/metrics needs the bearer token of %s" % exposure.token_path if plan.check is not None
             else "/metrics open (the loopback, and no token file at %s)" % exposure.token_path)
    wire = ("TLS 1.2 or later, the certificate valid until %s" % utc_text(plan.tls_until)
            if plan.tls is not None and plan.tls_until is not None else "plain HTTP")
    line = "svc-monitor scrape listener on %s: /metrics and /healthz only; %s; %s" % (url, guard, wire)
    warning = None
    if plan.plain_off_loopback:
        warning = ("WARNING: the scrape listener on %s speaks plain HTTP off the loopback (%s=1): whoever sees "
                   "the traffic reads the bearer token and the metrics; set SVC_METRICS_TLS_CERT and "
                   "SVC_METRICS_TLS_KEY to encrypt them" % (url, METRICS_PLAIN_HTTP_ENV))
    return line, warning
