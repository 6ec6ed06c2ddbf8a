"""Account lines the shell takes differently than their author meant (docs/posture.md).

The accounts env file is sourced by /bin/sh, which accepts some mistakes
without a word: `MODEL_TOKEN_ACCT2 = tok` runs a command named
MODEL_TOKEN_ACCT2 (the account is dropped), `MODEL_TOKEN_ACCT2= tok` sets
it empty and runs the token, `MODEL_TOKEN_ACCT2=tok part` keeps `tok` alone
(or runs `part`), and an unclosed quote swallows the lines after it until
the shell reports the end of the file. `line_problems` finds these in the
text; each comes back as a line number, the variable, the label and a
problem word, never a value, so the report stays token-free. `sentence`
turns one into what an operator reads: the line, what the shell does, the fix.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .shellword import InvalidShellWordError, unclosed_quote, word_end

BLANK_AROUND = "blank-around-equals"
BLANK_AFTER = "blank-after-equals"
UNQUOTED_BLANK = "unquoted-blank"
UNCLOSED = "unclosed"
PROBLEMS = (BLANK_AROUND, BLANK_AFTER, UNQUOTED_BLANK, UNCLOSED)

_ASSIGN_RE = re.compile(r"^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)([ \t]*)=([ \t]*)")
# What may follow a value and a blank on its line: a comment, the next command, a redirection.
_AFTER_VALUE = "#;&|<>"


def _label(var: str, vendors: Sequence[Tuple[str, str]], exact: Sequence[str]) -> Optional[str]:
    """The account label of `var` (prefix + NAME), "" for an export variable, None for any other."""
    if var in exact:
        return ""
    for prefix, label_prefix in vendors:
        if var.startswith(prefix) and len(var) > len(prefix):
            return label_prefix + var[len(prefix):].lower()
    return None


def line_problem(line: str) -> Optional[Tuple[str, str]]:
    """(variable, problem) of one assignment line the shell would take wrongly, else None."""
    m = _ASSIGN_RE.match(line)
    if m is None:
        return None
    var, before, after = m.group(1), m.group(2), m.group(3)
    if before:
        return var, BLANK_AROUND
    rest = line[m.end():].strip(" \t\r")
    if after:
        # `VAR=  # comment` is an empty value; anything else after the blank is run as a command.
        return (var, BLANK_AFTER) if rest and rest[0] not in _AFTER_VALUE else None
    start = m.end()
    try:
        end = word_end(line, start)
    except InvalidShellWordError:
        return var, UNCLOSED
    tail = line[end:].strip(" \t\r")
    if tail and line[end] in " \t" and tail[0] not in _AFTER_VALUE:
        return var, UNQUOTED_BLANK
    return None


def line_problems(text: str, vendors: Sequence[Tuple[str, str]],
                  exact: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """[{line, var, label, problem}] for the account lines (`vendors`: (variable prefix,
    label prefix) pairs) and the export lines (`exact` variable names) of `text`, in file order."""
    found: List[Dict[str, Any]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        problem = line_problem(line)
        if problem is None:
            continue
        var, kind = problem
        label = _label(var, vendors, exact)
        if label is None:
            continue
        found.append({"line": number, "var": var, "label": label or None, "problem": kind})
    return found


def opened_quote_line(text: str) -> Optional[int]:
    """The first line that opens a quote and does not close it: where an
    unterminated quote began, when the shell reports the end of the file."""
    for number, line in enumerate(text.split("\n"), start=1):
        if unclosed_quote(line) is not None:
            return number
    return None


def sentence(problem: Mapping[str, Any]) -> str:
    """What the shell does with the line and how to write it; names the variable, never a value."""
    var = problem.get("var") if isinstance(problem.get("var"), str) else "the variable"
    kind = problem.get("problem")
    if kind == BLANK_AROUND:
        return ("a blank before '=' makes the shell run %s as a command, so the line sets nothing: "
                "write %s=<value> with no blank around '='" % (var, var))
    if kind == BLANK_AFTER:
        return ("a blank after '=' leaves %s empty and makes the shell run the value as a command: "
                "write %s=<value> with no blank around '='" % (var, var))
    if kind == UNQUOTED_BLANK:
        return ("the value of %s has a blank outside quotes, where the shell ends it (the rest becomes "
                "another word of the command): quote the value, %s=\"<value>\"" % (var, var))
    if kind == UNCLOSED:
        return ("a quote, $(, ${, backquote or line-ending backslash in the value of %s is not closed on its "
                "line: keep the whole value on its line" % var)
    return "the shell does not take this line as an assignment of %s: fix the line" % var
