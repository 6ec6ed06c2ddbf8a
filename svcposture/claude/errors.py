"""Claude's error vocabulary (docs/posture.md): the kinds and sentences of a Claude account's errors.

The kinds are the contract's (`transport`, `timeout`, `auth`, `http`,
`no_headers`, `parse`, `config`, `internal`); a probe run's own errors (the
accounts env file, the child, the sweep deadline) come from the package's
vocabulary (svcposture.errors) and are part of this one, so that a Claude
body carries either with the same rules.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ..errors import MESSAGES as RUN_MESSAGES
from ..errors import Sentences, Vocabulary

MESSAGES: Dict[str, Sentences] = {
    "transport": Sentences(unreachable="The provider could not be reached."),
    "timeout": Sentences(no_answer="The provider did not answer in time.",
                         sweep_deadline=RUN_MESSAGES["timeout"].sweep_deadline),
    "auth": Sentences(refused="The provider refused the token.",
                      no_access_token="The login credentials hold no access token."),
    "http": Sentences(unexpected_status="The provider answered with an unexpected HTTP status.",
                      usage_rate_limited="The provider is rate limiting the usage probe."),
    "no_headers": Sentences(missing="The provider's reply carried no rate-limit headers."),
    "parse": Sentences(headers="The provider's rate-limit headers could not be parsed.",
                       usage_reply="The provider's usage reply could not be parsed."),
    "config": Sentences(**dict(RUN_MESSAGES["config"].__dict__,
                               credentials_shape="The login credentials file is not valid JSON of the expected shape.",
                               credentials_unreadable="The login credentials file cannot be read.",
                               no_credentials="No login credentials file was found.")),
    "internal": Sentences(**RUN_MESSAGES["internal"].__dict__),
}
ERROR_KINDS = tuple(MESSAGES)
KNOWN_MESSAGES = frozenset(m for msgs in MESSAGES.values() for m in msgs)
CLAUDE_ERRORS = Vocabulary(MESSAGES)


def error(kind: str, message: Optional[str] = None, http_status: Optional[int] = None) -> Dict[str, Any]:
    """A Claude account's error; a message outside the vocabulary falls back to the kind's default."""
    return CLAUDE_ERRORS.error(kind, message, http_status)


def clean_error(value: Any, with_status: bool = True) -> Optional[Dict[str, Any]]:
    """An error someone else built (the child's JSON), whitelisted into Claude's vocabulary.

    None stays None. A kind or message outside the vocabulary is replaced by
    the default, never copied; `httpStatus` survives only as an int 100..599.
    """
    return CLAUDE_ERRORS.clean(value, with_status)


def health_of_error(error: Any) -> Optional[str]:
    """The account health a Claude error means (docs/posture.md): the token refused, the reader
    rate-limited (a 429 that carried no rate-limit headers to read), the provider not reached;
    None for any other error."""
    if not isinstance(error, Mapping):
        return None
    kind = error.get("kind")
    if kind == "auth":
        return "refused"
    if kind in ("http", "no_headers") and error.get("httpStatus") == 429:
        return "limited"
    if kind in ("transport", "timeout"):
        return "unreachable"
    return None
