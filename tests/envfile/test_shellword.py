"""shellword and envlint as pure functions: where a value ends as /bin/sh reads it, and the
account lines the shell takes wrongly; hostile sizes and depths included."""
from __future__ import annotations

import subprocess

import pytest

from svcposture.envfile.lint import (
    BLANK_AFTER, BLANK_AROUND, UNCLOSED, UNQUOTED_BLANK, line_problem, line_problems, opened_quote_line, sentence,
)
from svcposture.envfile.shellword import InvalidShellWordError, syntax_error_line, unclosed_quote, word_end

WORDS = [
    ("plain", "plain"),
    ('"a b" rest', '"a b"'),
    ("'a b' rest", "'a b'"),
    ("$(printf '%s' 'a b') rest", "$(printf '%s' 'a b')"),
    ('"$(printf %s "a b")" rest', '"$(printf %s "a b")"'),
    ("`printf '%s' x` rest", "`printf '%s' x`"),
    ("${UNSET_FOR_TEST:-a b} rest", "${UNSET_FOR_TEST:-a b}"),
    ("$((1 + 2)) rest", "$((1 + 2))"),
    ("$( (printf x) ) rest", "$( (printf x) )"),
    ("a\\ b rest", "a\\ b"),
    ('"a\\" b" rest', '"a\\" b"'),
    ("x;y", "x"),
    ("x|cat", "x"),
    ("x&&true", "x"),
    ("x\r", "x"),
    ("", ""),
]


@pytest.mark.parametrize("text,word", WORDS)
def test_a_word_ends_where_the_shell_ends_it(text: str, word: str) -> None:
    assert text[:word_end(text)] == word
    # What is cut off is whole shell: nothing opened in it is left open.
    done = subprocess.run(["/bin/sh", "-n", "-c", "V=%s" % word], capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("text,opener", [("$(pass show", "$("), ("`pass", "`"), ("${X:-a b", "${"),
                                         ('"$(x)', '"'), ("'abc", "'"), ("abc\\", "\\"), ("$(" * 50000, "$(")])
def test_a_word_left_open_is_refused(text: str, opener: str) -> None:
    with pytest.raises(InvalidShellWordError) as info:
        word_end(text)
    assert info.value.opener == opener
    assert info.value.offset == (len(text) - 1 if opener == "\\" else 0)


def test_a_megabyte_word_is_read_in_one_pass() -> None:
    text = '"' + "a b " * 250000 + '" tail'
    assert text[word_end(text):] == " tail"


@pytest.mark.parametrize("line,problem", [
    ('MODEL_TOKEN_A = "x"', BLANK_AROUND),
    ('export MODEL_TOKEN_A ="x"', BLANK_AROUND),
    ("MODEL_TOKEN_A= x", BLANK_AFTER),
    ("MODEL_TOKEN_A=x y", UNQUOTED_BLANK),
    ('MODEL_TOKEN_A="x', UNCLOSED),
    ("MODEL_TOKEN_A=$(x", UNCLOSED),
    ("MODEL_TOKEN_A=  # empty on purpose", None),
    ("MODEL_TOKEN_A=", None),
    ('MODEL_TOKEN_A="x y"  # a@b.io', None),
    ("MODEL_TOKEN_A=x; export B=1", None),
    ("MODEL_TOKEN_A=x >/dev/null", None),
    ("MODEL_TOKEN_A=$(printf %s 'a b')", None),
    ("# MODEL_TOKEN_A = x", None),
    ("not an assignment at all", None),
])
def test_line_problems(line: str, problem: str) -> None:
    found = line_problem(line)
    assert (found[1] if found else None) == problem


def test_line_problems_name_lines_labels_and_never_a_value() -> None:
    secret = "sk-ant-oat01-SECRETVALUE"
    text = ("# accounts\nMODEL_TOKEN_ACCT2 = %s\nOTHER = 1\nCODEX_HOME_W=/a %s\n"
            "export MODEL_CODE_OAUTH_TOKEN =x\n" % (secret, secret))
    found = line_problems(text, [("MODEL_TOKEN_", ""), ("CODEX_HOME_", "codex-")],
                          ("MODEL_CODE_OAUTH_TOKEN", "CODEX_HOME"))
    assert [(p["line"], p["label"], p["problem"]) for p in found] == [
        (2, "acct2", BLANK_AROUND), (4, "codex-w", UNQUOTED_BLANK), (5, None, BLANK_AROUND)]
    for p in found:
        assert secret not in sentence(p) and p["var"] in sentence(p)
    assert secret[:12] not in repr(found)


def test_the_line_of_an_unclosed_quote() -> None:
    assert opened_quote_line('# it\'s fine\nA="x  # a\nB="$A"\n') == 2
    assert opened_quote_line('A="x" # it\'s a comment\n') is None
    assert unclosed_quote("A='x") == 2 and unclosed_quote("A='x'") is None


def test_syntax_error_line_keeps_only_the_number() -> None:
    assert syntax_error_line(b"/dev/stdin: 7: Syntax error: Unterminated quoted string\n", b"/dev/stdin") == 7
    assert syntax_error_line(b"/dev/stdin: line 3: syntax error near `x'\n", b"/dev/stdin") == 3
    assert syntax_error_line(b"/dev/stdin: line 3: foo: command not found\n", b"/dev/stdin") is None
    assert syntax_error_line(b"other: 7: Syntax error\n", b"/dev/stdin") is None
