"""What the advice says about an account's health (docs/steering.md): its sentence and its fix.

An account whose health is not `ok` (docs/posture.md, "Health") was not read,
or not lately: its figures say nothing about its headroom, so the advice
never calls it full or roomy. It says what is wrong instead, and, for a
refused credential, what to do: the vendor's own command for a new one
(`setup_help.renew`, or the fix the vendor's error carries) and the line of
the accounts env file to paste it into.

Pure: the clock is given, and the vendor registry is only read.
"""
from __future__ import annotations

from .._names import HEALTH_OK, HEALTHS, LIMITED, REFUSED, STALE, UNREACHABLE, UNREAD
from .._text import duration, is_int, printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Optional

# A health in a few words, for lists ("no other account can take over (acct2: token refused)").
SHORT = {REFUSED: "token refused", LIMITED: "reading rate-limited", UNREACHABLE: "provider unreachable",
         STALE: "no fresh reading", UNREAD: "not read yet"}
# Where a fix says the credential goes when the node did not say which file.
SOME_FILE = "the accounts env file"
MAX_SHOWN = 200


def span(seconds: int) -> str:
    """A duration the one way every surface writes it (`2h 30m`, `45s`, `0s`)."""
    return duration(seconds * 1000) if seconds > 0 else "0s"


def health_of(view: "Mapping[str, Any]") -> str:
    """The view's health; a body from a monitor that predates health: ok without an error, else
    unread (an error is no reading)."""
    word = view.get("health")
    if isinstance(word, str) and word in HEALTHS:
        return word
    return HEALTH_OK if not view.get("error") else UNREAD


def _variable(provider: str, label: str) -> "Optional[str]":
    """The account's variable in the env file (MODEL_TOKEN_ACCT1), from its vendor's lines."""
    from ..vendors import vendor_named
    vendor = vendor_named(provider)
    if vendor is None or not label.startswith(vendor.lines.label_prefix):
        return None
    return vendor.lines.entry_prefix + label[len(vendor.lines.label_prefix):].upper()


def renew_fix(view: "Mapping[str, Any]", provider: str, accounts_file: "Optional[str]" = None) -> "Optional[str]":
    """What to do about a refused credential: the fix the vendor's error carries, else its
    `setup_help.renew` filled with the account's email and its line of the env file (its variable
    when the child could not say the line); None when the vendor says neither."""
    from ..vendor import optional_member
    from ..vendors import vendor_named

    error = view.get("error")
    carried = error.get("fix") if isinstance(error, dict) else None
    if isinstance(carried, str) and carried:
        return printable(carried)[:MAX_SHOWN * 3]
    vendor = vendor_named(provider)
    help_ = optional_member(vendor, "setup_help") if vendor is not None else None
    template = getattr(help_, "renew", "") if help_ is not None else ""
    label = view.get("label") if isinstance(view.get("label"), str) else "?"
    if not template:
        return None
    email = view.get("email")
    who = printable(email)[:MAX_SHOWN] if isinstance(email, str) and email else "the account behind %s" % label
    where_file = printable(accounts_file)[:MAX_SHOWN * 2] if accounts_file else SOME_FILE
    line, variable = view.get("envLine"), _variable(provider, label)
    if is_int(line) and line > 0:
        where = "%s line %d" % (where_file, line)
    elif variable is not None:
        where = "the %s line of %s" % (variable, where_file)
    else:
        where = where_file
    return template.format(who=who, where=where)


def _figures_age(view: "Mapping[str, Any]", now_ms: int) -> str:
    read_at = view.get("readAt")
    if not is_int(read_at):
        return ""
    return " (the figures shown are from %s ago)" % span(max(0, now_ms - read_at) // 1000)


def _message(view: "Mapping[str, Any]") -> str:
    error = view.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return ": %s" % printable(message)[:MAX_SHOWN].rstrip(".") if isinstance(message, str) and message else ""


def health_sentence(view: "Mapping[str, Any]", health: str, now_ms: int,
                    fix: "Optional[str]" = None) -> "Optional[str]":
    """What is wrong with an account that is not `ok`, with its label, and the fix of a refused
    credential: "acct1's token was refused by the provider (HTTP 401): run ..."; None for `ok`."""
    label = printable(view.get("label"))[:80] if isinstance(view.get("label"), str) else "?"
    error = view.get("error") if isinstance(view.get("error"), dict) else {}
    status = error.get("httpStatus")
    if health == REFUSED:
        http = " (HTTP %d)" % status if is_int(status) else ""
        return "%s's token was refused by the provider%s%s" % (label, http, ": " + fix if fix else "")
    if health == LIMITED:
        return "%s could not be read: the provider is rate-limiting its reading%s" % (label, _figures_age(view, now_ms))
    if health == UNREACHABLE:
        return "%s could not be read: the provider could not be reached%s" % (label, _figures_age(view, now_ms))
    if health == STALE:
        read_at = view.get("readAt")
        age = span(max(0, now_ms - read_at) // 1000) if is_int(read_at) else "a while"
        return "%s has had no good reading for %s%s" % (label, age, _message(view))
    if health == UNREAD:
        return "%s has not been read yet%s" % (label, _message(view))
    return None
