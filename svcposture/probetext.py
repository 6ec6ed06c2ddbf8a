"""A probe's result in words, for a person: `python -m svcposture.probe` without `--json`, the doctor, first run.

Pure functions of the token-free result the child printed (docs/posture.md).
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping

from ._text import printable
from .envfile import PLACEHOLDER


def _human_codex(block: Any) -> List[str]:
    """One line per Codex login of a headers report; nothing without a Codex line."""
    if not isinstance(block, dict):
        return []
    lines = []
    for row in block.get("accounts") or []:
        mark = "*" if row.get("active") else " "
        head = "%s%s %s:" % (mark, row.get("label"), row.get("email") or "-")
        err = row.get("error")
        if err:
            fix = "; fix: %s" % err["fix"] if err.get("fix") else ""
            lines.append("%s error %s: %s%s" % (head, err.get("kind"), err.get("message"), fix))
            continue
        parts = ["%s %s%% %s" % (name, row[field]["pct"], row[field]["status"])
                 for field, name in (("fiveHour", "5h"), ("sevenDay", "7d")) if row.get(field)]
        how = row.get("source") or "no new sample (%s)" % (row.get("skipped") or "-")
        lines.append("%s %s [%s]" % (head, " ".join(parts) or "-", how))
    return lines or ["no usable Codex login"]


def _human_accounts(result: Dict[str, Any]) -> str:
    codex = _human_codex(result.get("codex"))
    if not result.get("available"):
        return "\n".join(["no usable account (probe disabled)"] + codex)
    lines = []
    for acct in result.get("accounts", []):
        mark = "*" if acct.get("active") else " "
        err = acct.get("error")
        if err:
            lines.append("%s%s %s: error %s" % (mark, acct.get("label"), acct.get("email") or "-", err.get("kind")))
            continue
        parts = []
        for field, name in (("fiveHour", "5h"), ("sevenDay", "7d")):
            window = acct.get(field)
            if window:
                parts.append("%s %s%% %s" % (name, window.get("pct"), window.get("status")))
        lines.append("%s%s %s: %s %s" % (mark, acct.get("label"), acct.get("email") or "-",
                                         acct.get("overallStatus"), " ".join(parts)))
    return "\n".join(lines + codex)


def _human_codex_check(block: Any) -> List[str]:
    if not isinstance(block, dict):
        return []
    return ["codex usable: %s" % (", ".join(block.get("usable") or []) or "-"),
            "codex unusable: %s" % (", ".join(block.get("unusable") or []) or "-"),
            "codex active: %s" % (block.get("active") or "-")]


def human(subcommand: str, result: Dict[str, Any]) -> str:
    if result.get("error"):
        return "error (%s): %s" % (result["error"].get("kind"), result["error"].get("message"))
    if subcommand == "login":
        return "email: %s" % (result.get("email") or "-")
    if subcommand == "usage":
        if not result.get("ok"):
            return "usage probe failed"
        lines = ["email: %s" % (result.get("email") or "-")]
        lines += ["%s: %s" % (k, v) for k, v in sorted(result.get("values", {}).items())]
        return "\n".join(lines)
    if subcommand == "check":
        return "\n".join([
            "usable: %s" % (", ".join(result.get("usable") or []) or "-"),
            "unusable: %s" % (", ".join(result.get("unusable") or []) or "-"),
            "active: %s" % (result.get("active") or "-"),
            "duplicate active: %s" % (", ".join(result.get("duplicateActive") or []) or "-"),
        ] + _human_codex_check(result.get("codex")))
    return _human_accounts(result)


def accounts_notes(result: Mapping[str, Any], path: "os.PathLike[str] | str") -> List[str]:
    """What a probe or check result says about the accounts env file at `path`,
    for a person: the line of a shell syntax error, the lines still holding the placeholder."""
    notes = []
    line = result.get("line")
    if isinstance(line, int) and not isinstance(line, bool) and line > 0 and result.get("error"):
        notes.append("%s:%d: the shell stopped at a syntax error on this line, so the file was not sourced "
                     "and no account was probed; fix the line" % (printable(path), line))
    found = result.get("placeholders")
    if isinstance(found, list) and found:
        where = ", ".join("line %d (%s)" % (p["line"], printable(p["label"])) for p in found[:20]
                          if isinstance(p, dict) and isinstance(p.get("line"), int) and isinstance(p.get("label"), str))
        notes.append("%s: the placeholder %s is still there on %s: paste each account's token over it"
                     % (printable(path), PLACEHOLDER, where))
    return notes
