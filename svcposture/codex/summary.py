"""The Codex accounts' posture (docs/codex.md): the posture body (docs/posture.md) for `?provider=codex`.

Codex accounts come out of the same child run as Claude's: the report of
`probe headers` carries a top-level `codex` block when the accounts env file
has a `CODEX_HOME_*` line. So the Codex posture rides on the Claude posture
service: the same probe schedule, TTL, refresh floor and single flight, and
no probe of its own. This module hooks into that service (its `derive` and
`probe_environ`), keeps the Codex summary beside Claude's, and serves it in
the posture body's shape: `active` is the `CODEX_HOME` account, window objects carry
`derived: true` (the vendor sends no status words), and each account adds
what the vendor reports beyond the contract's fields (`extraWindows`,
`codeReview`, `planType`, `credits`, `source`, `sampledAt`, `provider`).

A run that sent no request for an account (the usage floor, another host
polls it, no newer session line) reports the account without windows; the
last outcome seen for that label is shown instead, so the posture does not
blink between polls.

A node without a Codex line never gets a Codex summary, and every surface
that asks `shows()` says nothing about Codex.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..broadcast import Broadcast
from ..events import EventLogError
from ..summary import (advised_sibling, binding_window, derive_summary, disabled_body, error_summary,
                       is_node_error, node_status, reply)
from ..vendors import CODEX

log = logging.getLogger("svcposture.codexposture")

# How often the HRW candidates (roster and live hosts) are re-read for the child.
CANDIDATES_EVERY_S = 600.0
# What an account keeps of the child's row, beyond the posture fields.
SAMPLE_KEYS = ("fiveHour", "sevenDay", "extraWindows", "codeReview", "planType", "credits", "source", "sampledAt")


# ---------------------------------------------------------------- pure derivation

def _outcome(row: Mapping[str, Any], memory: Mapping[str, Dict[str, Any]]) -> Dict[str, Any]:
    """What to show for one row: its own sample or error, else the last one remembered for its label."""
    if row.get("error") is not None or row.get("source") is not None:
        return {key: row.get(key) for key in SAMPLE_KEYS + ("error",)}
    last = memory.get(row["label"])
    if last is not None:
        return dict(last)
    return {key: row.get(key) for key in SAMPLE_KEYS + ("error",)}


def codex_account_view(row: Mapping[str, Any], memory: Mapping[str, Dict[str, Any]]) -> Dict[str, Any]:
    """One Codex account in the posture account shape plus its vendor fields (pure).

    `row` is a row of the whitelisted `codex` block (codex.report.clean_codex_block).
    """
    shown = _outcome(row, memory)
    view: Dict[str, Any] = {
        "label": row["label"],
        "email": row.get("email"),
        "active": row.get("active") is True,
        "overallStatus": None,
        "representativeClaim": None,
        "bindingWindow": None,
        "bindingStatus": None,
        "fiveHour": shown.get("fiveHour"),
        "sevenDay": shown.get("sevenDay"),
        "error": shown.get("error"),
        "provider": CODEX,
        "extraWindows": shown.get("extraWindows") or [],
        "codeReview": shown.get("codeReview"),
        "planType": shown.get("planType"),
        "credits": shown.get("credits"),
        "source": shown.get("source"),
        "sampledAt": shown.get("sampledAt"),
    }
    view["bindingWindow"], view["bindingStatus"] = binding_window(view)
    return view


def codex_summary(block: Optional[Mapping[str, Any]], node: str, probed_at: int,
                  memory: Mapping[str, Dict[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]]]:
    """(the Codex summary, the memory after it) from one whitelisted `codex` block (pure).

    No block (no Codex line), or a block with no usable entry, is the disabled
    body. The memory maps each label still in the file to the last outcome
    (sample or error) it showed.
    """
    if block is None or block.get("available") is not True:
        return disabled_body(node), {}
    accounts: List[Dict[str, Any]] = []
    kept: Dict[str, Dict[str, Any]] = {}
    active: Optional[Dict[str, Any]] = None
    for row in block.get("accounts") or []:
        if not isinstance(row, Mapping) or not isinstance(row.get("label"), str) or row["label"] in kept:
            continue
        view = codex_account_view(row, memory)
        kept[row["label"]] = {key: view[key] for key in SAMPLE_KEYS + ("error",)}
        if view["active"]:
            if active is None:
                active = view
            else:
                view["active"] = False
        accounts.append(view)
    probed = block.get("probedAt")
    summary = {
        "available": True,
        "node": node,
        "probedAt": probed if isinstance(probed, int) and not isinstance(probed, bool) else probed_at,
        "status": node_status(active),
        "active": dict(active) if active is not None else None,
        "accounts": accounts,
        "siblingWithHeadroom": advised_sibling(accounts),
    }
    return summary, kept


# ---------------------------------------------------------------- the service

class CodexPosture:
    """The Codex half of a node's posture, fed by the Claude posture service's child runs.

    Built once per monitor over that service (which it hooks), it offers the
    reads the HTTP side needs: read(refresh), fresh_summary(), current(),
    account_status(), metrics() and a Broadcast of fresh bodies for the stream.
    """

    provider = CODEX

    def __init__(self, service: Any, *, node: str, latch: Any = None,
                 candidates: Optional[Callable[[], Optional[Tuple[Any, Any]]]] = None) -> None:
        from .pollstate import CodexPollState

        self.service = service
        self.node = node
        self.latch = latch
        self.broadcast = Broadcast()
        self.observers: List[Any] = []
        self.probe_runs = 0
        self.probe_errors = 0
        self.last_success_ms: Optional[int] = None
        self._poll_state = CodexPollState()
        # The roster and live hosts for one poller per login (None: a lone host polls every login).
        self.candidates_source = candidates
        self._candidates: Optional[Tuple[Any, Any]] = None
        self._candidates_mono: Optional[float] = None
        self._candidates_busy = False
        self._lock = threading.Lock()
        self._summary: Optional[Dict[str, Any]] = None
        self._memory: Dict[str, Dict[str, Any]] = {}
        self._seen = False
        # (key, bytes) of the newest cached read, kept by the HTTP side (one tuple assignment).
        self.reply_cache: Tuple[Any, bytes] = (None, b"")
        service.derive = self.derive
        service.probe_environ = self.child_environ

    # ------------------------------------------------------------ the hooks

    @property
    def probe_enabled(self) -> bool:
        return bool(self.service.probe_enabled)

    @property
    def interval_s(self) -> float:
        return float(self.service.interval_s)

    def child_environ(self) -> Mapping[str, str]:
        """The Claude service's environment plus SVC_CODEX_STATE (no token: samples' times and floors)."""
        with self._lock:
            candidates = self._candidates
        hosts, live = candidates if candidates is not None else (None, None)
        return self._poll_state.child_environ(self.service.environ, self.node, hosts, live)

    def derive(self, report: Any, node: str, probed_at: int) -> Dict[str, Any]:
        """The service's derivation: Claude's summary as always, the Codex block absorbed on the way."""
        try:
            self.absorb(report, probed_at)
        except Exception:  # noqa: BLE001 - Codex trouble never costs Claude's posture
            log.exception("the Codex part of the probe report could not be handled")
        return derive_summary(report, node, probed_at)

    def absorb(self, report: Any, probed_at: int) -> None:
        """Handle the Codex part of one child run: summary, latch, stream, observers."""
        from .report import clean_codex_block

        if isinstance(report, Mapping) and report.get("error") is not None:
            if not self._seen:
                return  # a node-level error on a node that never had a Codex line says nothing of Codex
            summary = error_summary(self.node, probed_at, report.get("error"))
        else:
            block = clean_codex_block(report.get("codex")) if isinstance(report, Mapping) else None
            if block is None and not self._seen:
                return
            self._seen = block is not None
            if block is not None:
                self._poll_state.absorb(block, probed_at)
                self._refresh_candidates()
            with self._lock:
                memory = self._memory
            summary, memory = codex_summary(block, self.node, probed_at, memory)
            with self._lock:
                self._memory = memory
        edge = self._handle(summary)
        # Observers first (the forecasts, then the advice, which names siblingWithHeadroom),
        # so that what is cached and pushed is the whole result, as for Claude's posture.
        for observer in list(self.observers):
            try:
                observer(summary, edge)
            except Exception:  # noqa: BLE001 - an observer never costs the result
                log.exception("a Codex posture observer failed")
        with self._lock:
            self._summary = summary
            self.broadcast.publish(reply(summary, cached=False))

    def _handle(self, summary: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
        """Count the run and feed the status latch with the active Codex account."""
        if summary.get("available") is not True:
            return None
        self.probe_runs += 1
        if summary.get("status") == "error":
            self.probe_errors += 1
        else:
            self.last_success_ms = summary["probedAt"]
        active = summary.get("active")
        if self.latch is None or is_node_error(summary) or not isinstance(active, Mapping):
            return None
        try:
            return self.latch.observe(active["label"], active["email"], summary["status"], active["bindingWindow"],
                                      provider=CODEX)
        except EventLogError:
            log.error("could not append account.status.changed for %s; retried on the next probe", active["label"])
        except OSError:
            log.error("could not advance the account status latch; retried on the next probe")
        return None

    def _refresh_candidates(self) -> None:
        """Re-read the HRW candidates in the background, at most every CANDIDATES_EVERY_S.

        They come from the roster and the liveness anchor (a tracker read), which
        must not delay a probe; the next run uses what this read found.
        """
        source = self.candidates_source
        now = time.monotonic()
        with self._lock:
            if source is None or self._candidates_busy or (
                    self._candidates_mono is not None and now - self._candidates_mono < CANDIDATES_EVERY_S):
                return
            self._candidates_busy = True
            self._candidates_mono = now

        def read() -> None:
            try:
                found = source()
            except Exception as exc:  # noqa: BLE001 - a lone host is the safe answer
                log.warning("Codex poll candidates could not be read (%s); polling as a lone host",
                            type(exc).__name__)
                found = None
            with self._lock:
                self._candidates = found
                self._candidates_busy = False

        threading.Thread(target=read, name="codex-candidates", daemon=True).start()

    # ------------------------------------------------------------ reads

    def shows(self) -> bool:
        """True while the node has Codex accounts to show (an available or error posture)."""
        with self._lock:
            summary = self._summary
        return summary is not None and summary.get("available") is True

    def summary(self) -> Optional[Dict[str, Any]]:
        with self._lock:
            return self._summary

    def read(self, refresh: bool = False) -> Dict[str, Any]:
        """The `?provider=codex` body; `refresh=True` is a forced refresh the guard approved.

        The Claude service decides whether a probe runs (TTL, floor, single
        flight); the reply is fresh (`cached: false`) when that read produced
        a new Codex summary.
        """
        if not self.service.probe_enabled:
            return disabled_body(self.node)
        before = self.summary()
        self.service.read(refresh=refresh)
        summary = self.summary()
        if summary is None:
            return disabled_body(self.node)
        return reply(summary, cached=summary is before)

    def fresh_summary(self) -> Optional[Dict[str, Any]]:
        """The summary a plain read would serve from cache right now, else None (see PostureService)."""
        if self.service.fresh_summary() is None:
            return None
        return self.summary() or disabled_body(self.node)

    def current(self) -> Optional[Dict[str, Any]]:
        """The newest result as a cached reply, without probing; None before the first result."""
        if not self.service.probe_enabled:
            return disabled_body(self.node)
        summary = self.summary()
        if summary is None:
            return None if self.service.current() is None else disabled_body(self.node)
        return reply(summary, cached=True)

    def account_status(self) -> str:
        summary = self.summary()
        if not self.service.probe_enabled or summary is None or summary.get("available") is not True:
            return "unavailable"
        return str(summary["status"])

    def metrics(self) -> Dict[str, Any]:
        summary = self.summary()
        return {"probeRuns": self.probe_runs, "probeErrors": self.probe_errors,
                "lastSuccessMs": self.last_success_ms,
                "last": reply(summary, cached=True) if summary is not None else None}

    def stop(self) -> None:
        self.broadcast.close()
