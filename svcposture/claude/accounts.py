"""Claude's lines of the accounts env file: its entries, their emails, which one is active.

The file is POSIX sh (docs/posture.md): one `[export ]MODEL_TOKEN_<SUFFIX>=<value>  # <email>`
line per Claude account. Only the token-scoped child ever calls the functions that
look at values, and it takes the values from its own environment after the
shell has sourced the file: the line parser below reads names and comments,
never values, so no quoting rule of ours can disagree with the shell's.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..envfile.entries import PLACEHOLDER, account_values, entry_line_numbers, usable
from ..vendor import EnvLines

# The token variables, declared here once: _spawn strips exactly these (and the
# cloud token) from every child's environment.
ACCOUNT_TOKEN_PREFIX = "MODEL_TOKEN_"
ACTIVE_TOKEN_VAR = "MODEL_CODE_OAUTH_TOKEN"

# Claude's lines in the vendor's terms (docs/vendors.md): no label prefix, the token placeholder.
# The vendor's name: the `provider` value of its accounts everywhere.
NAME = "claude"
LINES = EnvLines(ACCOUNT_TOKEN_PREFIX, ACTIVE_TOKEN_VAR, "", (PLACEHOLDER,))
ENTRY_RE = LINES.entry_re()


def entry_lines(text: str) -> Dict[str, int]:
    """{SUFFIX: line number (1-based)} of the last line assigning each entry, the one the shell keeps."""
    return entry_line_numbers(text, ENTRY_RE)


def placeholder_lines(text: str, environ: Mapping[str, str]) -> List[Dict[str, Any]]:
    """[{label, line}] of the entries whose value, after sourcing, is still the placeholder.

    The value is only compared with PLACEHOLDER; labels and line numbers are all
    that leaves, so the report stays token-free.
    """
    found = []
    for suffix, number in sorted(entry_lines(text).items(), key=lambda item: item[1]):
        value = environ.get(ACCOUNT_TOKEN_PREFIX + suffix)
        if value is not None and value.strip() == PLACEHOLDER:
            found.append({"label": suffix.lower(), "line": number})
    return found


def entries_from_env(text: str, environ: Mapping[str, str]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Usable entries (label, email, token, active, line) in file order, plus unusable labels.

    Tokens come from `environ` (the child's own, after sourcing) only. An
    entry is marked active when its value equals the active-token variable;
    several may match, which `resolve_active` settles. `line` is the file's
    line that assigns it (None for a variable set some other way).
    """
    found, unusable = account_values(text, environ, ENTRY_RE, ACCOUNT_TOKEN_PREFIX, str.lower, usable)
    active_token = (environ.get(ACTIVE_TOKEN_VAR) or "").strip()
    lines = entry_lines(text)
    entries = [{"label": label, "email": email, "token": token, "active": bool(active_token) and token == active_token,
                "line": lines.get(suffix)} for suffix, label, email, token in found]
    return entries, unusable


def resolve_active(entries: List[Dict[str, Any]]) -> Tuple[Optional[str], List[str]]:
    """(active label, duplicate labels): the first match in file order is active.

    Marks every other entry inactive in place. The duplicates list names all
    entries that carried the active token when there were several (the doctor
    warns), else it is empty.
    """
    matching = [e["label"] for e in entries if e["active"]]
    first = matching[0] if matching else None
    for e in entries:
        e["active"] = e["label"] == first
    return first, (matching if len(matching) > 1 else [])
