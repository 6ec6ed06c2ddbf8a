"""Codex as a vendor (docs/vendors.md): `CODEX_HOME_*` logins behind the `Vendor` protocol.

The members delegate to the modules that own each part (accounts, child,
usage, errors, report, summary, pollstate, setup, demo); nothing is decided here but the
total deadline of one login's exchange.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from .accounts import LINES, VENDOR_NAME
from .errors import CODEX_ERROR_KINDS
from .knobs import KNOBS
from .setup import SETUP_HELP

NAME = VENDOR_NAME
# One login's whole exchange (auth.json, session logs, the usage request and its
# reply, however slowly it trickles) ends after this many request timeouts, well
# inside the sweep's deadline.
EXCHANGE_TIMEOUTS = 1.5


class CodexVendor:
    """The `Vendor` protocol over the codex package's modules."""

    name = NAME
    display_name = "Codex"
    lines = LINES
    error_kinds = CODEX_ERROR_KINDS
    knobs = KNOBS
    setup_help = SETUP_HELP

    def sweep(self, text: str, environ: Mapping[str, str]) -> Any:
        from .child import CodexSweep
        return CodexSweep(text, environ)

    def request_timeout_s(self, environ: Mapping[str, str]) -> float:
        from ..settings import probe_timeout_s
        return probe_timeout_s(environ)

    def exchange_deadline_s(self, environ: Mapping[str, str]) -> float:
        return EXCHANGE_TIMEOUTS * self.request_timeout_s(environ)

    def parse_reply(self, reply: Any, now_s: float) -> Dict[str, Any]:
        """The usage reply's windows placed by their length; ValueError when it is not an object."""
        from .usage import parse_usage_reply
        return parse_usage_reply(reply, now_s)

    def error(self, kind: str, message: Optional[str] = None, http_status: Optional[int] = None) -> Dict[str, Any]:
        from .errors import codex_error
        return codex_error(kind, message, http_status)

    def clean_block(self, value: Any) -> Optional[Dict[str, Any]]:
        from .report import clean_codex_block
        return clean_codex_block(value)

    def summarize(self, block: Optional[Mapping[str, Any]], node: str, probed_at: int,
                  memory: Mapping[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        from .summary import codex_summary
        return codex_summary(block, node, probed_at, memory)

    def poll_memory(self) -> Any:
        from .pollstate import CodexPollState
        return CodexPollState()

    @property
    def demo(self) -> Any:
        """Its part of `svc-monitor demo`: one login and the usage endpoint's answers."""
        from .demo import DEMO
        return DEMO

    @staticmethod
    def error_health(error: Any) -> Optional[str]:
        """The health a Codex login's error means (refused, limited, unreachable), else None."""
        from .errors import health_of_error
        return health_of_error(error)


VENDOR = CodexVendor()
