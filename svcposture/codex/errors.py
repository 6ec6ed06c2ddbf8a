"""The fixed vocabulary of a Codex account's errors, and the fix shown with each.

As for Claude's accounts (`..errors`), an error is data travelling from the
child to the surfaces: `{"kind", "message", "httpStatus", "fix"}`, where the
message is one of the sentences below and the fix is one of the templates
below filled with the entry's directory. Nothing else (no reply body, no
exception text) can ride along, since any of it could quote a token.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional

from .._text import has_control
from ..errors import Sentences, Vocabulary

CODEX_ERROR_KINDS = ("unauthorized", "config", "transport", "timeout", "http", "parse", "internal")

CODEX_MESSAGES: Dict[str, Sentences] = {
    "unauthorized": Sentences(refused="The Codex login's token was refused or has expired."),
    "config": Sentences(
        not_absolute="The Codex home is not an absolute directory.",
        no_directory="The Codex home directory does not exist.",
        no_auth_file="The Codex login has no auth.json.",
        symlink="The Codex auth.json is a symbolic link; it is not read.",
        loose_mode="The Codex auth.json is readable or writable by group or others; it is not read.",
        foreign_owner="The Codex auth.json is owned by another user; it is not read.",
        too_large="The Codex auth.json is too large.",
        bad_shape="The Codex auth.json is not valid JSON of the expected shape.",
        api_key_only="The Codex login is an API key, which has no usage limits to read.",
        unreadable="The Codex auth.json cannot be read.",
        not_regular_file="The Codex auth.json is not a regular file."),
    "transport": Sentences(unreachable="The Codex usage endpoint could not be reached."),
    "timeout": Sentences(no_answer="The Codex usage endpoint did not answer in time.",
                         sweep_deadline="The Codex probe did not finish before the sweep deadline."),
    "http": Sentences(unexpected_status="The Codex usage endpoint answered with an unexpected HTTP status.",
                      rate_limited="The Codex usage endpoint is rate limiting this login."),
    "parse": Sentences(unreadable="The Codex usage reply could not be parsed.",
                       no_windows="The Codex usage reply held no window that could be read."),
    "internal": Sentences(no_result="The Codex probe failed without a result."),
}
CODEX_ERRORS = Vocabulary(CODEX_MESSAGES)

# What the operator does about it. `{dir}` is the entry's directory as the file gave it.
FIXES = {
    "login": "run `codex login` with CODEX_HOME={dir}",
    "chmod": "run `chmod 600 {dir}/auth.json`",
    "absolute": "set the CODEX_HOME_ line to an absolute directory",
    # The directory of a line that names no directory is not shown: it could be any text at all.
    "mkdir": "create the directory and run `codex login` with CODEX_HOME set to it",
    "link": "replace the link {dir}/auth.json by the file itself (`codex login` with CODEX_HOME={dir})",
}
# A directory shown in a fix: printable, bounded; anything else is not shown.
MAX_DIR_SHOWN = 1024
_SHOWN_DIR_RE = "(/[^\\x00-\\x1f\\x7f-\\x9f]{0,%d})" % MAX_DIR_SHOWN
_FIX_RES = tuple(re.compile("^" + re.escape(t).replace(re.escape("{dir}"), _SHOWN_DIR_RE) + "$")
                 for t in FIXES.values())


def shown_dir(directory: str) -> Optional[str]:
    """The directory as a fix may show it, or None (relative, unprintable or too long)."""
    if not directory.startswith("/") or len(directory) > MAX_DIR_SHOWN or has_control(directory):
        return None
    return directory


def fix_text(which: str, directory: str) -> Optional[str]:
    shown = shown_dir(directory)
    template = FIXES[which]
    if "{dir}" in template and shown is None:
        return None
    return template.format(dir=shown)


def codex_error(kind: str, message: Optional[str] = None, http_status: Optional[int] = None,
                fix: Optional[str] = None) -> Dict[str, Any]:
    """An error in the Codex vocabulary (with the fix to show); a message outside it falls back to the default."""
    return dict(CODEX_ERRORS.error(kind, message, http_status), fix=fix)


def config_error(name: str, fix: Optional[str] = None) -> Dict[str, Any]:
    """A config error by its sentence's name (`config_error("symlink", ...)`)."""
    return codex_error("config", getattr(CODEX_MESSAGES["config"], name), fix=fix)


def _clean_fix(value: Any) -> Optional[str]:
    if not isinstance(value, str) or len(value) > MAX_DIR_SHOWN * 3:
        return None
    if any(pattern.match(value) for pattern in _FIX_RES):
        return value
    return None


def clean_codex_error(value: Any) -> Optional[Dict[str, Any]]:
    """An error someone else built (the child's JSON), whitelisted into the vocabulary; None stays None."""
    clean = CODEX_ERRORS.clean(value)
    if clean is None:
        return None
    return dict(clean, fix=_clean_fix(value.get("fix") if isinstance(value, Mapping) else None))


def health_of_error(error: Any) -> Optional[str]:
    """The account health a Codex login's error means (docs/posture.md): its token refused or
    expired, the usage endpoint rate-limiting it, the endpoint not reached; None for any other."""
    if not isinstance(error, dict):
        return None
    kind = error.get("kind")
    if kind == "unauthorized":
        return "refused"
    if kind == "http" and (error.get("httpStatus") == 429 or error.get("message") == CODEX_MESSAGES["http"].rate_limited):
        return "limited"
    if kind in ("transport", "timeout"):
        return "unreachable"
    return None
