"""The accounts env file's Codex lines: `CODEX_HOME_<NAME>=<dir>  # <email>` (docs/codex.md).

A Codex account is a login's home directory (the CODEX_HOME that `codex login`
wrote `auth.json` into), not a token, so the line holds a path. The active
one is `export CODEX_HOME="$CODEX_HOME_<NAME>"`. As for Claude's lines, the
line parser reads names and comments only; the directories are taken from the
child's environment after the shell has sourced the file.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..envfile.entries import PLACEHOLDER, account_values, entry_line_numbers, parse_entries
from ..vendor import EnvLines

# The vendor's name (`provider` everywhere); its labels are `codex-<name>`.
VENDOR_NAME = "codex"
CODEX_HOME_PREFIX = "CODEX_HOME_"
ACTIVE_HOME_VAR = "CODEX_HOME"
CODEX_LABEL_PREFIX = VENDOR_NAME + "-"
# A Codex line's value still to be filled in (it is not a directory).
DIR_PLACEHOLDER = "PASTE_DIR_HERE"

# Codex's lines in the vendor's terms (docs/vendors.md).
LINES = EnvLines(CODEX_HOME_PREFIX, ACTIVE_HOME_VAR, CODEX_LABEL_PREFIX, (DIR_PLACEHOLDER, PLACEHOLDER))
_ENTRY_RE = LINES.entry_re()
_NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")


def codex_label(name: str) -> str:
    return CODEX_LABEL_PREFIX + name.lower()


def parse_codex_entries(text: str) -> List[Tuple[str, Optional[str]]]:
    """[(NAME, email)] in file order; a name defined twice keeps its first place and last email."""
    return parse_entries(text, _ENTRY_RE)


def _usable_dir(value: Optional[str]) -> bool:
    if value is None:
        return False
    value = value.strip()
    return bool(value) and value not in (DIR_PLACEHOLDER, PLACEHOLDER)


def _same_dir(a: str, b: str) -> bool:
    return bool(a) and bool(b) and os.path.normpath(a) == os.path.normpath(b)


def codex_entries_from_env(text: str, environ: Mapping[str, str]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Usable Codex entries (label, name, email, dir, active, line) in file order, plus unusable labels.

    Directories come from `environ` (the child's, after sourcing). Whether a
    directory is absolute and exists is judged per account later, so that a bad
    line is an error on that account and not a missing one. `line` is the
    file's line that assigns it (None for a variable set some other way).
    """
    found, unusable = account_values(text, environ, _ENTRY_RE, CODEX_HOME_PREFIX, codex_label, _usable_dir)
    active_dir = (environ.get(ACTIVE_HOME_VAR) or "").strip()
    lines = entry_line_numbers(text, _ENTRY_RE)
    entries = [{"label": label, "name": name, "email": email, "dir": directory,
                "active": _same_dir(directory, active_dir), "line": lines.get(name)}
               for name, label, email, directory in found]
    return entries, unusable


def resolve_codex_active(entries: List[Dict[str, Any]]) -> Tuple[Optional[str], List[str]]:
    """(active label, duplicates): the first entry naming $CODEX_HOME is active, in file order."""
    matching = [e["label"] for e in entries if e["active"]]
    first = matching[0] if matching else None
    for e in entries:
        e["active"] = e["label"] == first
    return first, (matching if len(matching) > 1 else [])


def has_codex_lines(text: str, environ: Mapping[str, str]) -> bool:
    """Whether the file defines any Codex account, usable or not."""
    return bool(parse_codex_entries(text)) or any(
        v.startswith(CODEX_HOME_PREFIX) and _NAME_RE.match(v[len(CODEX_HOME_PREFIX):]) for v in environ)
