"""Which vendor an account belongs to, and the `provider` query parameter (docs/codex.md).

Two vendors share one node: Claude (the contract's accounts, `MODEL_TOKEN_*`
lines) and Codex (`CODEX_HOME_*` lines). A Codex label is always
`codex-<name>`; a Claude label comes from a shell variable's suffix, which
cannot hold a hyphen, so the label alone tells the vendor and the two never
collide. Every surface that shows both vendors tags each row with its
`provider` from here.

`GET /api/accounts` and its stream take `provider=claude|codex`; without it
the contract's Claude body is served unchanged. Anything else is a 400 with
the JSON error built here, so every route says the same thing.
"""
from __future__ import annotations

from ._text import account_label

# Annotations only (the statusline imports this module on every render; typing costs more than it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional, Tuple

CLAUDE = "claude"
CODEX = "codex"
PROVIDERS = (CLAUDE, CODEX)
DEFAULT_PROVIDER = CLAUDE
CODEX_LABEL_PREFIX = "codex-"
PROVIDER_PARAM = "provider"
BAD_PROVIDER_MESSAGE = "provider must be one of: claude, codex (given once, or left out for claude)."


def provider_of_label(label: Any) -> str:
    """The vendor of an account label: `codex-*` is Codex, everything else Claude."""
    return CODEX if isinstance(label, str) and label.startswith(CODEX_LABEL_PREFIX) else CLAUDE


# A Codex label's name: what a Claude label may hold (no `re`: the statusline imports this module).
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
MAX_NAME = 64


def is_account_label(value: Any) -> bool:
    """A label of either vendor: Claude's (`acct2`) or Codex's (`codex-work`); the whole string."""
    if not isinstance(value, str):
        return False
    if value.startswith(CODEX_LABEL_PREFIX):
        name = value[len(CODEX_LABEL_PREFIX):]
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
    value must be exactly `claude` or `codex` (percent-encoding allowed);
    an empty, repeated, differently cased or unknown value is refused rather
    than guessed, so a typo never silently shows the other vendor.
    """
    if not query or PROVIDER_PARAM not in query:
        return DEFAULT_PROVIDER, None
    values = [part.partition("=")[2] for part in query.split("&") if part.partition("=")[0] == PROVIDER_PARAM]
    if not values:
        return DEFAULT_PROVIDER, None
    value = _unquote(values[0]) if len(values) == 1 else None
    if value is None or value not in PROVIDERS:
        return None, bad_provider_body()
    return value, None


def bad_provider_body() -> Dict[str, str]:
    return {"error": "bad_request", "message": BAD_PROVIDER_MESSAGE}


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
