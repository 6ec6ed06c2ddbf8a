"""The `Vendor` protocol over a key vendor's own parts (docs/vendors.md).

A key vendor's package declares its `VENDOR = KeyVendor(__package__, name, display_name, ...)`
in its `vendor` module: its name, its lines, its base-URL knob and its request (path and
Authorization scheme). The rest of what is its own sits in three modules beside it, which
KeyVendor imports when first needed: `setup` (its texts: the sentence for a refused key, the fix,
what `svc-monitor init` says), `reply` (`parse_reply(reply, now_s)`: fiveHour, sevenDay,
extraWindows and planType, quota.place; ValueError when the reply is not the vendor's,
exchange.BodyError for an error the vendor put in a 2xx body) and `demo` (`DEMO`, its demo part).
Everything else comes from this package, the same for every key vendor: the child sweep, the
deadlines, the block's whitelist, the posture summary and each error's health. Nothing is
remembered between runs (no poll memory): every run asks every key once.
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, Mapping, Optional, Tuple

from ..envfile.entries import PLACEHOLDER, PLACEHOLDER_EMAIL
from ..settings import as_base_url
from ..vendor import EnvLines, Knob, SetupHelp
from .errors import KINDS, KeyErrors, health_of

# One key's whole exchange ends after this many request timeouts, well inside the sweep's deadline.
EXCHANGE_TIMEOUTS = 1.5


def key_setup_help(lines: EnvLines, display_name: str, next_step: str, how: Tuple[str, ...]) -> SetupHelp:
    """What `svc-monitor init` writes about a key vendor: `how` (comment lines) says where a key
    comes from; the example is a commented entry line and its export line."""
    example = ("# %s keys (optional): one line per key; the active one is what %s names."
               % (display_name, lines.active_var),) + how + (
        "# %sWORK=%s  # %s" % (lines.entry_prefix, PLACEHOLDER, PLACEHOLDER_EMAIL),
        "# " + lines.export_line("WORK"))
    return SetupHelp(next_step=next_step, comment=how, example=example)


class KeyVendor:
    """A key vendor, as the registry holds it: every member of the protocol.

    `lines` is (entry prefix, active variable), the label prefix being `<name>-`; `url` is
    (its base-URL knob's variable, the default); `request` is (path, Authorization scheme)."""

    error_kinds = KINDS

    def __init__(self, package: str, name: str, display_name: str, *, lines: Tuple[str, str],
                 url: Tuple[str, str], request: Tuple[str, str]) -> None:
        self.package = package
        self.name = name
        self.display_name = display_name
        self.lines = EnvLines(lines[0], lines[1], name + "-", (PLACEHOLDER,))
        self.url = Knob(url[0], url[1], "the base URL the %s usage request goes to (GET %s)"
                        % (display_name, request[0]), as_base_url)
        self.knobs = (self.url,)
        self.path, self.scheme = request
        self._errors: Optional[KeyErrors] = None

    def _own(self, module: str) -> Any:
        """One of the vendor's own modules (`setup`, `reply`, `demo`), imported when first needed."""
        return importlib.import_module("." + module, self.package)

    @property
    def setup_help(self) -> SetupHelp:
        texts = self._own("setup")
        return key_setup_help(self.lines, self.display_name, texts.NEXT_STEP, texts.HOW)

    @property
    def errors(self) -> KeyErrors:
        """Its error vocabulary: the common sentences, and its own for a refused key."""
        if self._errors is None:
            texts = self._own("setup")
            self._errors = KeyErrors(self.display_name, texts.REFUSED, texts.FIX)
        return self._errors

    @property
    def demo(self) -> Any:
        return self._own("demo").DEMO

    def sweep(self, text: str, environ: Mapping[str, str]) -> Any:
        from .sweep import KeySweep
        return KeySweep(self, text, environ)

    def request_timeout_s(self, environ: Mapping[str, str]) -> float:
        from ..settings import probe_timeout_s
        return probe_timeout_s(environ)

    def exchange_deadline_s(self, environ: Mapping[str, str]) -> float:
        return EXCHANGE_TIMEOUTS * self.request_timeout_s(environ)

    def parse_reply(self, reply: Any, now_s: float) -> Dict[str, Any]:
        return self._own("reply").parse_reply(reply, now_s)

    def error(self, kind: str, message: Optional[str] = None, http_status: Optional[int] = None) -> Dict[str, Any]:
        return self.errors.error(kind, message, http_status)

    def clean_block(self, value: Any) -> Optional[Dict[str, Any]]:
        from .report import clean_block
        return clean_block(value, self.lines.label_prefix, self.name, self.errors)

    def summarize(self, block: Optional[Mapping[str, Any]], node: str, probed_at: int,
                  memory: Mapping[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """The posture body for `?provider=<name>` (pure): each row shows its own outcome."""
        from ..summary import account_view, disabled_body, posture_body

        if block is None or block.get("available") is not True:
            return disabled_body(node), {}
        views = [account_view(row, self.name, row) for row in block.get("accounts") or ()]
        probed = block.get("probedAt")
        return posture_body(node, probed if isinstance(probed, int) else probed_at, views), {}

    def poll_memory(self) -> None:
        return None

    @staticmethod
    def error_health(error: Any) -> Optional[str]:
        """The account health an error means (refused, limited, unreachable), else None."""
        return health_of(error)
