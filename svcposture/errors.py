"""The package's error base, and how a fixed vocabulary of probe errors is built.

Every exception the package raises derives from SvcpostureError, so a script
can catch them all with one clause. Probe errors are not exceptions but data:
they travel from the token-scoped child to the API as
`{"kind", "message", "httpStatus"}`, and may only ever carry one of their
vocabulary's sentences, never raw stderr or any text the child did not build
itself. Each vendor has its vocabulary (a `Vocabulary` in its package); the
one here is a probe run's own: the accounts env file, the child, the deadline.
"""
from __future__ import annotations

# typing only for annotations: the status line imports this on every render.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional, Tuple

from ._text import is_int


# The name the package is imported as: `svcposture`, or e.g. `host._vendor.svcposture`
# when vendored. The exceptions of the face report it as their module, so a
# traceback or repr names them as callers catch them (`svcposture.ConfigError`),
# and pickle finds them there.
FACE = __name__.rpartition(".")[0]


class SvcpostureError(Exception):
    """Base of every error raised by svcposture."""

    __module__ = FACE


class Sentences(tuple):
    """The sentences of one error kind, in order, each also by name: callers
    write `MESSAGES["config"].symlink`, not an index. The first is the default.
    A tuple, so `message in MESSAGES[kind]` and `[0]` keep working."""

    def __new__(cls, **by_name: str) -> "Sentences":
        sentences = super().__new__(cls, by_name.values())
        sentences.__dict__.update(by_name)
        return sentences

    @property
    def default(self) -> str:
        return self[0]



# The sentences of a probe run's own errors, whatever its vendor: the accounts env file the
# parent refused or the shell could not source, a child that failed, a sweep past its deadline.
MESSAGES: Dict[str, Sentences] = {
    "timeout": Sentences(sweep_deadline="The probe did not finish before the sweep deadline."),
    "config": Sentences(
        group_writable="The accounts env file is writable by group or others; it is not sourced.",
        unreadable="The accounts env file cannot be read.",
        not_regular_file="The accounts env file is not a regular file.",
        too_large="The accounts env file is too large.",
        foreign_owner="The accounts env file is owned by another user; it is not sourced.",
        open_directory="The accounts env file's directory is not private (another user could swap the file); "
                       "it is not sourced.",
        symlink="The accounts env file is a symbolic link; it is not sourced.",
        shell_syntax="The accounts env file is not valid shell: the shell stopped at a syntax error."),
    "internal": Sentences(no_result="The probe child failed without a result.",
                          bad_result="The probe child printed no valid result.",
                          not_started="The probe child could not be started.",
                          stopping="The probe was stopped because the monitor is stopping."),
}


class Vocabulary:
    """One vendor's fixed error vocabulary (docs/vendors.md): its kinds, each with its sentences.

    Every vendor's errors are built and whitelisted here, the same way: a kind
    outside the vocabulary becomes `internal`, a sentence outside its kind the
    kind's default, and `httpStatus` survives only as an int (100..599 when it
    came from outside)."""

    def __init__(self, messages: Dict[str, Sentences]) -> None:
        self.messages = messages
        self.kinds: Tuple[str, ...] = tuple(messages)

    def error(self, kind: str, message: Optional[str] = None,
              http_status: Optional[int] = None) -> Dict[str, Any]:
        """An error in the vocabulary; a message outside it falls back to the kind's default."""
        if kind not in self.kinds:
            kind = "internal"
        if message not in self.messages[kind]:
            message = self.messages[kind].default
        return {"kind": kind, "message": message, "httpStatus": http_status if is_int(http_status) else None}

    def clean(self, value: Any, with_status: bool = True) -> Optional[Dict[str, Any]]:
        """An error someone else built (a child's JSON), whitelisted into the vocabulary; None stays None."""
        if value is None:
            return None
        from collections.abc import Mapping  # not at import: see the typing note above

        if not isinstance(value, Mapping):
            value = {}
        kind = value.get("kind")
        if kind not in self.kinds:
            kind = "internal"
        message = value.get("message")
        if not isinstance(message, str) or message not in self.messages[kind]:
            message = self.messages[kind].default
        out: Dict[str, Any] = {"kind": kind, "message": message}
        if with_status:
            status = value.get("httpStatus")
            out["httpStatus"] = status if is_int(status) and 100 <= status <= 599 else None
        return out


# A probe run's node-level errors (a vendor's account errors are its own vocabulary).
PROBE_ERRORS = Vocabulary(MESSAGES)


def error(kind: str, message: Optional[str] = None, http_status: Optional[int] = None) -> Dict[str, Any]:
    """A probe run's error; a message outside the vocabulary falls back to the kind's default."""
    return PROBE_ERRORS.error(kind, message, http_status)


def clean_error(value: Any, with_status: bool = True) -> Optional[Dict[str, Any]]:
    """An error someone else built (the probe child's JSON), whitelisted into the vocabulary.

    None stays None. A kind or message outside the vocabulary is replaced by
    the default, never copied; `httpStatus` survives only as an int 100..599.
    Node-level errors in the posture body carry no status (`with_status=False`).
    """
    return PROBE_ERRORS.clean(value, with_status)
