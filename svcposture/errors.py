"""The package's error base and the fixed vocabulary of probe errors.

Every exception the package raises derives from SvcpostureError, so a script
can catch them all with one clause. Probe errors are not exceptions but data:
they travel from the token-scoped child to the API as
`{"kind", "message", "httpStatus"}`, and may only ever carry one of the
sentences below, never raw stderr or any text the child did not build itself.
"""
from __future__ import annotations

# typing only for annotations: the status line imports this on every render.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional, Tuple


class SvcpostureError(Exception):
    """Base of every error raised by svcposture."""


ERROR_KINDS = ("transport", "timeout", "auth", "http", "no_headers", "parse", "config", "internal")

# The only sentences an error may carry. Each kind has a default (the first).
MESSAGES: Dict[str, Tuple[str, ...]] = {
    "transport": ("The provider could not be reached.",),
    "timeout": ("The provider did not answer in time.",
                "The probe did not finish before the sweep deadline."),
    "auth": ("The provider refused the token.",
             "The login credentials hold no access token."),
    "http": ("The provider answered with an unexpected HTTP status.",
             "The provider is rate limiting the usage probe."),
    "no_headers": ("The provider's reply carried no rate-limit headers.",),
    "parse": ("The provider's rate-limit headers could not be parsed.",
              "The provider's usage reply could not be parsed."),
    "config": ("The accounts env file is writable by group or others; it is not sourced.",
               "The accounts env file cannot be read.",
               "The accounts env file is not a regular file.",
               "The accounts env file is too large.",
               "The login credentials file is not valid JSON of the expected shape.",
               "The login credentials file cannot be read.",
               "No login credentials file was found.",
               "The accounts env file is owned by another user; it is not sourced.",
               "The accounts env file's directory is not private (another user could swap the file); "
               "it is not sourced.",
               "The accounts env file is a symbolic link; it is not sourced.",
               "The accounts env file is not valid shell: the shell stopped at a syntax error."),
    "internal": ("The probe child failed without a result.",
                 "The probe child printed no valid result.",
                 "The probe child could not be started.",
                 "The probe was stopped because the monitor is stopping."),
}
KNOWN_MESSAGES = frozenset(m for msgs in MESSAGES.values() for m in msgs)


def error(kind: str, message: Optional[str] = None, http_status: Optional[int] = None) -> Dict[str, Any]:
    """An error in the fixed vocabulary; a message outside it falls back to the default."""
    if kind not in MESSAGES:
        kind = "internal"
    if message not in MESSAGES[kind]:
        message = MESSAGES[kind][0]
    status = http_status if isinstance(http_status, int) and not isinstance(http_status, bool) else None
    return {"kind": kind, "message": message, "httpStatus": status}


def clean_error(value: Any, with_status: bool = True) -> Optional[Dict[str, Any]]:
    """An error someone else built (the probe child's JSON), whitelisted into the vocabulary.

    None stays None. A kind or message outside the vocabulary is replaced by
    the default, never copied; `httpStatus` survives only as an int 100..599.
    Node-level errors in the posture body carry no status (`with_status=False`).
    """
    if value is None:
        return None
    from collections.abc import Mapping  # not at import: see the typing note above

    if not isinstance(value, Mapping):
        value = {}
    kind = value.get("kind")
    if kind not in ERROR_KINDS:
        kind = "internal"
    message = value.get("message")
    if message not in KNOWN_MESSAGES or message not in MESSAGES[kind]:
        message = MESSAGES[kind][0]
    out: Dict[str, Any] = {"kind": kind, "message": message}
    if with_status:
        status = value.get("httpStatus")
        out["httpStatus"] = status if isinstance(status, int) and not isinstance(status, bool) \
            and 100 <= status <= 599 else None
    return out
