"""Claude as a vendor (docs/vendors.md): the contract's accounts, behind the `Vendor` protocol.

Its posture is the contract's `/api/accounts` body, byte for byte, served
where no `provider` is asked for (the registry's default vendor). The
members delegate to the modules that own each part (accounts, provider,
child, summary, errors, sampler, loginview, setup, demo); nothing is decided here.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from .errors import ERROR_KINDS, error
from .accounts import LINES, NAME
from .knobs import KNOBS
from .setup import SETUP_HELP



class ClaudeSweep:
    """Claude's part of a child run: one header probe per usable `MODEL_TOKEN_*` entry."""

    def __init__(self, text: str, environ: Mapping[str, str]) -> None:
        from .accounts import entries_from_env, resolve_active

        self.text = text
        self.environ = environ
        self.entries, self.unusable = entries_from_env(text, environ)
        self.active, self.duplicates = resolve_active(self.entries)
        self.present = bool(self.entries)
        self.secrets: List[str] = [e["token"] for e in self.entries]
        self.futures: List[Any] = []

    def check(self) -> Optional[Dict[str, Any]]:
        """What `probe check` shows of the Claude lines (no network); None when the file has none."""
        from .accounts import placeholder_lines

        placeholders = placeholder_lines(self.text, self.environ)
        if not self.entries and not self.unusable and not placeholders:
            return None
        return {"usable": [e["label"] for e in self.entries], "unusable": self.unusable, "active": self.active,
                "duplicateActive": self.duplicates, "placeholders": placeholders}

    def submit(self, pool: Any, timeout_s: float, secrets: List[str]) -> List[Any]:
        from .provider import probe_account

        self.futures = [pool.submit(probe_account, e["token"], self.environ, timeout_s) for e in self.entries]
        return self.futures

    def block(self, cut: str = "sweep") -> Optional[Dict[str, Any]]:
        from .. import _time
        from .child import claude_rows

        if not self.entries:
            return None
        return {"available": True, "probedAt": _time.now_ms(), "active": self.active,
                "duplicateActive": self.duplicates, "accounts": claude_rows(self.entries, self.futures)}


class ClaudeVendor:
    """The `Vendor` protocol over Claude's modules."""

    name = NAME
    display_name = "Claude"
    lines = LINES
    error_kinds = ERROR_KINDS
    knobs = KNOBS
    setup_help = SETUP_HELP

    def sweep(self, text: str, environ: Mapping[str, str]) -> ClaudeSweep:
        return ClaudeSweep(text, environ)

    def request_timeout_s(self, environ: Mapping[str, str]) -> float:
        from ..settings import probe_timeout_s
        return probe_timeout_s(environ)

    def exchange_deadline_s(self, environ: Mapping[str, str]) -> float:
        # The contract bounds a Claude probe by its request timeout and the sweep
        # deadline alone; no shorter total is put on it.
        return float("inf")

    def parse_reply(self, reply: Any, now_s: float) -> Dict[str, Any]:
        """The unified rate-limit headers (lower-case names) as windows; ValueError when one does not parse."""
        from .provider import parse_unified_headers
        return parse_unified_headers(reply) or {}

    def error(self, kind: str, message: Optional[str] = None, http_status: Optional[int] = None) -> Dict[str, Any]:
        return error(kind, message, http_status)

    def clean_block(self, value: Any) -> Optional[Dict[str, Any]]:
        # The block is whitelisted at every depth by summary.derive_summary, which reads it.
        return dict(value) if isinstance(value, Mapping) else None

    def summarize(self, block: Optional[Mapping[str, Any]], node: str, probed_at: int,
                  memory: Mapping[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        from .summary import derive_summary
        return derive_summary(block if block is not None else {"available": False}, node, probed_at), {}

    def poll_memory(self) -> None:
        return None

    def login_sampler(self, paths: Any, *, node: str, log: Any, settings: Any, usage_owner: Any) -> Any:
        """The quota sampler: it polls this machine's Claude Code login (GET /api/login shows it)."""
        from .sampler import QuotaSampler
        return QuotaSampler(paths, node=node, log=log, environ=paths.environ, settings=settings,
                            usage_owner=usage_owner)

    @property
    def child_commands(self) -> Dict[str, Any]:
        """The interactive login's commands the token-scoped child runs: its usage, its email."""
        from .child import login, usage
        return {"usage": usage, "login": login}

    @property
    def demo(self) -> Any:
        """Its part of `svc-monitor demo`: three accounts, this machine's login, the provider's answers."""
        from .demo import DEMO
        return DEMO

    @staticmethod
    def error_health(error: Any) -> Optional[str]:
        """The health a Claude account's error means (refused, limited, unreachable), else None."""
        from .errors import health_of_error
        return health_of_error(error)


VENDOR = ClaudeVendor()
