"""The registered vendors (docs/vendors.md), which vendor an account belongs to, and `?provider=`.

A node's accounts belong to vendors, each a package implementing the `Vendor`
protocol (`vendor.py`): Claude (the contract's accounts, `MODEL_TOKEN_*`
lines), Codex (`CODEX_HOME_*` lines), GitHub Copilot (`COPILOT_TOKEN_*`),
z.ai (`ZAI_API_KEY_*`) and Kimi (`KIMI_API_KEY_*`) are built in; another is registered
with `register_vendor(vendor)` or named in `$SVC_VENDORS` (importable modules,
comma-separated, each with a `VENDOR`; `settings.vendor_modules` reads it and
`load_vendor_modules` registers them). Every vendor-neutral part of the
package loops over `registered()`, in registration order, Claude first.

A label tells its vendor: every vendor but the first has a label prefix
(`codex-`), and a Claude label comes from a shell variable's suffix, which
cannot hold a hyphen, so labels never collide.

A node's heartbeat carries each vendor's active-account block (docs/fleet.md):
the default vendor's under `account` (the contract's block), every other's
under the vendor's own name (`codex`). `block_key` is that rule, for the
publisher and every fleet reader; so that a block never lands on one of the
heartbeat's or a status row's own fields, no vendor may be named like one.

`GET /api/accounts` and its stream take `provider=<name>`; without it the
contract's Claude body is served unchanged. Anything else is a 400 with the
JSON error built here, so every route says the same thing.
"""
from __future__ import annotations

import threading

from ._text import account_label

# Annotations only (the statusline imports this module on every render; typing costs more than it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, List, Optional, Tuple

DEFAULT_PROVIDER = "claude"
PROVIDER_PARAM = "provider"
# The heartbeat's and a fleet status row's field for the default vendor's active-account block.
DEFAULT_BLOCK_KEY = "account"
# Fields of the heartbeat and of a status row that a vendor's block, kept under its name, would overwrite.
_FLEET_FIELDS = frozenset(("account", "accounts", "host", "quota", "state", "version"))
# The built-in vendors' modules, relative to this package; the first is the default vendor.
_BUILT_IN = (".claude.vendor", ".codex.vendor", ".copilot.vendor", ".zai.vendor", ".kimi.vendor")

_lock = threading.Lock()
_vendors: List[Any] = []


def _load_built_in() -> None:
    import importlib

    for module in _BUILT_IN:
        _add(importlib.import_module(module, __package__).VENDOR)


def _add(vendor: Any) -> None:
    from .vendor import InvalidVendor, check_vendor, knob_names

    check_vendor(vendor)
    if vendor.name in _FLEET_FIELDS:
        raise InvalidVendor("a vendor may not be named %s: the heartbeat has a field of that name" % vendor.name)
    if _vendors and not vendor.lines.label_prefix and vendor not in _vendors:
        raise InvalidVendor("vendor %s needs a label prefix (only the default vendor has none)" % vendor.name)
    for known in _vendors:
        if known is vendor:
            return
        if known.name == vendor.name:
            raise InvalidVendor("a vendor named %s is already registered" % vendor.name)
        if known.lines.entry_prefix.startswith(vendor.lines.entry_prefix) \
                or vendor.lines.entry_prefix.startswith(known.lines.entry_prefix) \
                or known.lines.active_var == vendor.lines.active_var:
            raise InvalidVendor("vendor %s: its env lines overlap %s's" % (vendor.name, known.name))
        if known.lines.label_prefix == vendor.lines.label_prefix:
            raise InvalidVendor("vendor %s: its label prefix is %s's" % (vendor.name, known.name))
        if set(knob_names(known)) & set(knob_names(vendor)):
            raise InvalidVendor("vendor %s: its knobs overlap %s's" % (vendor.name, known.name))
    _vendors.append(vendor)


def registered() -> Tuple[Any, ...]:
    """Every registered vendor, the built-in ones first (loaded on first use)."""
    with _lock:
        if not _vendors:
            _load_built_in()
        return tuple(_vendors)


def register_vendor(vendor: Any) -> None:
    """Register one more vendor for this process (and, through $SVC_VENDORS, its children).

    Raises vendor.InvalidVendor when it lacks a member of the protocol, or its
    name, label prefix or env lines are taken. Registering the same object twice is a no-op.
    """
    registered()
    with _lock:
        _add(vendor)


def load_vendor_modules(names: Iterable[str], source: str = "") -> None:
    """Import each named module and register its `VENDOR` (InvalidVendor when one cannot be).

    `source` names where the names came from (the variable), for the error:
    the entry points of svc-monitor and svc-cluster pass `settings.vendor_modules(environ)`."""
    import importlib

    from .vendor import InvalidVendor

    for name in names:
        try:
            vendor = importlib.import_module(name).VENDOR
        except (ImportError, AttributeError) as exc:
            raise InvalidVendor("%s%s: %s" % (source + "=" if source else "", name, exc)) from None
        register_vendor(vendor)


def provider_names() -> Tuple[str, ...]:
    """The registered vendors' names, the default first."""
    return tuple(v.name for v in registered())


def block_key(provider: str) -> str:
    """The heartbeat field (and fleet status row field) holding `provider`'s active-account block:
    `account` for the default vendor, the vendor's own name for every other."""
    return DEFAULT_BLOCK_KEY if provider == DEFAULT_PROVIDER else provider


def block_keys() -> Tuple[Tuple[str, str], ...]:
    """(provider, block_key(provider)) of each registered vendor, the default first: read once
    by a fleet reader, which then looks up every host's blocks without the registry's lock."""
    return tuple((name, block_key(name)) for name in provider_names())


def names_text() -> str:
    """The registered names for a usage message: `claude or codex`, `claude, codex or other`."""
    names = provider_names()
    return names[0] if len(names) == 1 else "%s or %s" % (", ".join(names[:-1]), names[-1])


def vendor_named(name: Any) -> Optional[Any]:
    for vendor in registered():
        if vendor.name == name:
            return vendor
    return None


def default_vendor() -> Any:
    """The vendor whose posture /api/accounts serves without a `provider` parameter (the contract's)."""
    return vendor_named(DEFAULT_PROVIDER) or registered()[0]


def others() -> Tuple[Any, ...]:
    """Every vendor but the default one: those whose posture answers `?provider=<name>`."""
    return registered()[1:]


def provider_of_label(label: Any) -> str:
    """The vendor of an account label: the one whose label prefix it carries, else the default."""
    # Every prefix ends in `-`, which a default label never holds: no registry to load for those.
    if isinstance(label, str) and "-" in label:
        for vendor in others():
            if label.startswith(vendor.lines.label_prefix):
                return vendor.name
    return DEFAULT_PROVIDER


# A prefixed label's name: what a Claude label may hold (no `re`: the statusline imports this module).
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
MAX_NAME = 64


def is_account_label(value: Any) -> bool:
    """A label of any vendor: Claude's (`acct2`) or a prefixed one (`codex-work`); the whole string."""
    if not isinstance(value, str):
        return False
    for vendor in others():
        prefix = vendor.lines.label_prefix
        if value.startswith(prefix):
            name = value[len(prefix):]
            return 0 < len(name) <= MAX_NAME and _NAME_CHARS.issuperset(name)
    return account_label(value) is not None


def _unquote(text: str) -> Optional[str]:
    if "%" not in text and "+" not in text:
        return text
    from urllib.parse import unquote_plus
    try:
        return unquote_plus(text, errors="strict")
    except UnicodeDecodeError:
        return None


def provider_from_query(query: str) -> Tuple[Optional[str], Optional[Dict[str, str]]]:
    """(provider, None) of a request's query string, or (None, the 400 body) when it is bad.

    No `provider` parameter means Claude. It must appear at most once, and its
    value must be exactly a registered vendor's name (percent-encoding allowed);
    an empty, repeated, differently cased or unknown value is refused rather
    than guessed, so a typo never silently shows another vendor.
    """
    if not query or PROVIDER_PARAM not in query:
        return DEFAULT_PROVIDER, None
    values = [part.partition("=")[2] for part in query.split("&") if part.partition("=")[0] == PROVIDER_PARAM]
    if not values:
        return DEFAULT_PROVIDER, None
    value = _unquote(values[0]) if len(values) == 1 else None
    if value is None or value not in provider_names():
        return None, bad_provider_body()
    return value, None


def with_provider(path: str, provider: Optional[str]) -> str:
    """`path` as a client asks the monitor for one vendor's accounts: the default vendor's route
    takes no parameter (its body is the contract's), every other vendor's `?provider=<name>`;
    None is the default vendor."""
    if provider is None or provider == DEFAULT_PROVIDER:
        return path
    return "%s?%s=%s" % (path, PROVIDER_PARAM, provider)


def bad_provider_message() -> str:
    return "provider must be one of: %s (given once, or left out for %s)." % (
        ", ".join(provider_names()), DEFAULT_PROVIDER)


def bad_provider_body() -> Dict[str, str]:
    return {"error": "bad_request", "message": bad_provider_message()}


# ---------------------------------------------------------------- the calling agent's vendor

# Words in an agent's payload that name its vendor (model ids, provider names).
_CODEX_WORDS = ("codex", "openai", "gpt-", "gpt5", "o3", "o4-")
_CLAUDE_WORDS = ("claude", "anthropic", "opus", "sonnet", "haiku")


def _vendor_word(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return None
    word = value.strip().lower()[:80]
    if word.startswith(_CLAUDE_WORDS) or "claude" in word:
        return "claude"
    if word.startswith(_CODEX_WORDS) or "codex" in word:
        return "codex"
    return None


def provider_of_payload(payload: Any) -> Optional[str]:
    """The vendor of the agent that sent this statusLine JSON, or None when it does not say.

    Looked for, in order: a provider name (`provider`, `model_provider`,
    `vendor`), the model (`model.id`, `model.display_name`, or `model` as a
    string), then the shape of `rate_limits` (Codex's `primary`/`secondary`,
    Claude's `five_hour`/`seven_day`).
    """
    if not isinstance(payload, dict):
        return None
    for key in ("provider", "model_provider", "vendor"):
        found = _vendor_word(payload.get(key))
        if found:
            return found
    model = payload.get("model")
    candidates = [model.get("id"), model.get("display_name")] if isinstance(model, dict) else [model]
    for value in candidates:
        found = _vendor_word(value)
        if found:
            return found
    limits = payload.get("rate_limits")
    if isinstance(limits, dict):
        if "primary" in limits or "secondary" in limits:
            return "codex"
        if "five_hour" in limits or "seven_day" in limits:
            return "claude"
    return None
