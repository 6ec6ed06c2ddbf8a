"""A probe's result in words, for a person: `python -m svcposture.probe` without `--json`, the doctor, first run.

Pure functions of the token-free result the child printed (docs/posture.md).
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Tuple

from .._text import is_int, pct_text, printable
from ..envfile.entries import PLACEHOLDER
from ..envfile.lint import PROBLEMS, UNCLOSED, sentence


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
        parts = ["%s %s %s" % (name, pct_text(row[field]["pct"]), row[field]["status"])
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
                parts.append("%s %s %s" % (name, pct_text(window.get("pct")), window.get("status")))
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


_VAR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}\Z")


def valid_line_problems(result: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The report's `lineProblems` that have the shape the child builds (at most 50)."""
    found = result.get("lineProblems")
    if not isinstance(found, list):
        return []
    return [p for p in found[:50] if isinstance(p, dict) and is_int(p.get("line")) and p["line"] > 0
            and p.get("problem") in PROBLEMS and isinstance(p.get("var"), str) and _VAR_RE.match(p["var"])]


def line_problem_notes(result: Mapping[str, Any], path: "os.PathLike[str] | str") -> List[str]:
    """`FILE:LINE: what the shell does with it: the fix`, one per line the shell takes wrongly."""
    return ["%s:%d: %s" % (printable(path), p["line"], sentence(p)) for p in valid_line_problems(result)]


def accounts_notes(result: Mapping[str, Any], path: "os.PathLike[str] | str") -> List[str]:
    """What a probe or check result says about the accounts env file at `path`,
    for a person: the line of a shell syntax error (or of the quote that never closed), the lines
    the shell takes wrongly, the lines still holding the placeholder."""
    notes = []
    line = result.get("line")
    if isinstance(line, int) and not isinstance(line, bool) and line > 0 and result.get("error"):
        if result.get("unclosedQuote") is True:
            notes.append("%s:%d: a quote opened on this line is never closed, so the shell read on to the end of "
                         "the file and stopped there; the file was not sourced and no account was probed: close "
                         "the quote on this line" % (printable(path), line))
        else:
            notes.append("%s:%d: the shell stopped at a syntax error on this line, so the file was not sourced "
                         "and no account was probed; fix the line" % (printable(path), line))
    notes += [note for p, note in zip(valid_line_problems(result), line_problem_notes(result, path))
              if not (result.get("unclosedQuote") is True and p["line"] == line and p["problem"] == UNCLOSED)]
    found = result.get("placeholders")
    if isinstance(found, list) and found:
        where = ", ".join("line %d (%s)" % (p["line"], printable(p["label"])) for p in found[:20]
                          if isinstance(p, dict) and isinstance(p.get("line"), int) and isinstance(p.get("label"), str))
        notes.append("%s: the placeholder %s is still there on %s: paste each account's token over it"
                     % (printable(path), PLACEHOLDER, where))
    return notes


def codex_check_summary(block: Any) -> Tuple[str, bool, str]:
    """(detail, any usable login, warning) of a check report's Codex lines, for the doctor; empty without any."""
    if not isinstance(block, dict):
        return "", False, ""
    def labels(key: str) -> List[str]:
        value = block.get(key)
        return [u[:64] for u in value if isinstance(u, str)] if isinstance(value, list) else []

    usable, unusable, duplicates = labels("usable"), labels("unusable"), labels("duplicateActive")
    active = block.get("active") if isinstance(block.get("active"), str) else None
    detail = "; Codex: %d usable login%s%s" % (len(usable), "" if len(usable) == 1 else "s",
                                                " (%s)" % ", ".join(usable) if usable else "")
    if unusable:
        detail += ", unusable (empty or placeholder): %s" % ", ".join(unusable)
    if usable:
        detail += ", active %s" % active[:64] if active else ", none is CODEX_HOME"
    warning = ("; several Codex lines name CODEX_HOME (%s), the first is used" % ", ".join(duplicates)
               if duplicates else "")
    return detail, bool(usable), warning
