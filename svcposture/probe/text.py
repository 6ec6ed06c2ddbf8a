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


def _vendors() -> Tuple[Any, ...]:
    from ..vendors import registered
    return registered()


def _row_line(row: Mapping[str, Any]) -> str:
    """One account of a headers report: label, email, then its error or its windows."""
    mark = "*" if row.get("active") else " "
    head = "%s%s %s:" % (mark, printable(row.get("label")), printable(row.get("email") or "-"))
    err = row.get("error")
    if isinstance(err, dict):
        fix = "; fix: %s" % printable(err["fix"]) if err.get("fix") else ""
        return "%s error %s: %s%s" % (head, printable(err.get("kind")), printable(err.get("message")), fix)
    parts = ["%s %s %s" % (name, pct_text(row[field].get("pct")), row[field].get("status"))
             for field, name in (("fiveHour", "5h"), ("sevenDay", "7d")) if isinstance(row.get(field), dict)]
    status = " %s" % printable(row["overallStatus"]) if row.get("overallStatus") else ""
    how = ""
    if row.get("source") or row.get("skipped"):
        how = " [%s]" % printable(row.get("source") or "no new sample (%s)" % row.get("skipped"))
    return "%s%s %s%s" % (head, status, " ".join(parts) or "-", how)


def _human_accounts(result: Dict[str, Any]) -> str:
    """Every vendor's accounts of a headers report, a line each, under the vendor's name."""
    lines: List[str] = []
    for vendor in _vendors():
        block = result.get(vendor.name)
        if not isinstance(block, dict):
            continue
        rows = [row for row in block.get("accounts") or [] if isinstance(row, dict)]
        lines.append("%s:" % vendor.display_name)
        lines += [_row_line(row) for row in rows] or ["  no usable %s account" % vendor.display_name]
    return "\n".join(lines) if lines else "no usable account (probe disabled)"


def _labels(block: Mapping[str, Any], key: str) -> List[str]:
    value = block.get(key)
    return [printable(u)[:64] for u in value if isinstance(u, str)] if isinstance(value, list) else []


def _human_check(result: Dict[str, Any]) -> str:
    lines: List[str] = []
    for vendor in _vendors():
        block = result.get(vendor.name)
        if not isinstance(block, dict):
            continue
        lines += ["%s usable: %s" % (vendor.display_name, ", ".join(_labels(block, "usable")) or "-"),
                  "%s unusable: %s" % (vendor.display_name, ", ".join(_labels(block, "unusable")) or "-"),
                  "%s active: %s" % (vendor.display_name, printable(block.get("active") or "-")),
                  "%s duplicate active: %s" % (vendor.display_name,
                                               ", ".join(_labels(block, "duplicateActive")) or "-")]
    return "\n".join(lines) if lines else "no account line in the accounts env file"


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
        return _human_check(result)
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
    found = [p for vendor in _vendors() if isinstance(result.get(vendor.name), dict)
             for p in (result[vendor.name].get("placeholders") or []) if isinstance(p, dict)]
    if found:
        where = ", ".join("line %d (%s)" % (p["line"], printable(p["label"])) for p in found[:20]
                          if isinstance(p, dict) and isinstance(p.get("line"), int) and isinstance(p.get("label"), str))
        notes.append("%s: the placeholder %s is still there on %s: paste each account's token over it"
                     % (printable(path), PLACEHOLDER, where))
    return notes


def check_summary(vendor: Any, block: Any) -> Tuple[str, bool, str]:
    """(detail, any usable account, warning) of one vendor's lines in a check report, for the doctor;
    empty when the file has no line of it."""
    if not isinstance(block, dict):
        return "", False, ""
    usable, unusable, duplicates = _labels(block, "usable"), _labels(block, "unusable"), _labels(block, "duplicateActive")
    active = block.get("active") if isinstance(block.get("active"), str) else None
    detail = "%s: %d usable account%s%s" % (vendor.display_name, len(usable), "" if len(usable) == 1 else "s",
                                           " (%s)" % ", ".join(usable) if usable else "")
    if unusable:
        detail += ", unusable (empty or placeholder): %s" % ", ".join(unusable)
    if usable:
        detail += ", active %s" % printable(active)[:64] if active else \
            ", none is the active one (%s names none of them)" % vendor.lines.active_var
    warning = ("several %s lines are the active one (%s), the first is used"
               % (vendor.display_name, ", ".join(duplicates)) if duplicates else "")
    return detail, bool(usable), warning
