"""Mistakes a new operator makes in the accounts env file, through the real commands
(`python -m svcposture.probe check`, `svc-cluster doctor`, `svc-monitor switch`):
each is named with its line and the fix, and no token (nor any part of one) is printed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

from tests.support.cli import cli
from tests.support.home import canary, clean_env

TOK1 = canary("lint1")
TOK2 = canary("lint2")
# A token pasted with a blank in it: neither half may ever be printed.
HEAD, TAIL = TOK2[:18], TOK2[18:]


def _home(tmp_path: Path, text: str, mode: int = 0o600) -> Tuple[Path, Dict[str, str]]:
    home = tmp_path / "home"
    (home / ".config" / "svc").mkdir(parents=True, mode=0o700)
    path = home / ".config" / "svc" / "model-accounts.env"
    path.write_text(text)
    path.chmod(mode)
    env = dict(clean_env(home), SVC_PROVIDER_URL="http://127.0.0.1:9", SVC_QUOTA_SAMPLER="0",
               SVC_MONITOR_PORT="9")
    return path, env


def _clean(text: str) -> str:
    assert "Traceback" not in text, text
    for secret in (TOK1, TOK2, HEAD, TAIL, TOK1[-16:], TOK2[-16:]):
        assert secret not in text, "a token leaked"
    return text


def check_text(env: Dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-m", "svcposture.probe", "check"], env=env, capture_output=True,
                          text=True, timeout=60)
    return _clean(done.stdout + done.stderr)


def check_json(env: Dict[str, str]) -> Any:
    done = subprocess.run([sys.executable, "-m", "svcposture.probe", "check", "--json"], env=env,
                          capture_output=True, text=True, timeout=60)
    _clean(done.stdout + done.stderr)
    return json.loads(done.stdout)


def doctor_check(env: Dict[str, str]) -> Dict[str, str]:
    done = cli(env, "cluster", "doctor", "--json")
    _clean(done.stdout + done.stderr)
    return next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "accounts-env")


def switch_to(env: Dict[str, str], label: str) -> Tuple[int, str, str]:
    done = cli(env, "monitor", "switch", "--to", label)
    _clean(done.stdout + done.stderr)
    return done.returncode, done.stdout, done.stderr


ACTIVE2 = 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT2"\n'


@pytest.mark.parametrize("template,words,status", [
    ('MODEL_TOKEN_ACCT2 = "{tok}"  # two@example.com', "blank", "WARN"),
    # `export NAME =value` stops the shell (a bad variable name): nothing is sourced at all.
    ('export MODEL_TOKEN_ACCT2 ="{tok}"', "blank", "FAIL"),
    ('MODEL_TOKEN_ACCT2= "{tok}"  # two@example.com', "blank", "WARN"),
    ('MODEL_TOKEN_ACCT2={head} {tail}  # two@example.com', "quote", "WARN"),
    ('export MODEL_TOKEN_ACCT2={head} {tail}', "quote", "WARN"),
], ids=["blanks-around", "blank-before", "blank-after", "unquoted-blank", "unquoted-blank-export"])
def test_an_unusable_account_line_is_named_with_its_line_and_fix(tmp_path: Path, template: str, words: str,
                                                                  status: str) -> None:
    line = template.format(tok=TOK2, head=HEAD, tail=TAIL)
    text = '# accounts\nexport MODEL_TOKEN_ACCT1="%s"  # one@example.com\n%s\n%s' % (TOK1, line, ACTIVE2)
    path, env = _home(tmp_path, text)
    where = "%s:3:" % path

    out = check_text(env)
    assert where in out and words in out and "MODEL_TOKEN_ACCT2" in out, out
    report = check_json(env)
    assert [(p["line"], p["label"]) for p in report["lineProblems"]] == [(3, "acct2")], report

    check = doctor_check(env)
    assert check["status"] == status and where in check["detail"] and words in check["detail"], check
    assert "empty or placeholder" not in check["detail"], check

    code, out, err = switch_to(env, "acct2")
    assert code == 1 and out == "" and err.count("\n") == 1, (out, err)
    assert "line 3" in err and words in err, err
    assert path.read_text() == text


def test_a_usable_file_has_no_line_problems(tmp_path: Path) -> None:
    text = ('export MODEL_TOKEN_ACCT1="%s"  # one@example.com\nMODEL_TOKEN_ACCT2=%s; export OTHER=1\n'
            'MODEL_TOKEN_ACCT3=$(printf %%s "a b")  # from a store\nMODEL_TOKEN_ACCT4=  # empty\n%s'
            % (TOK1, TOK2, ACTIVE2))
    path, env = _home(tmp_path, text)
    assert check_json(env)["lineProblems"] == []
    check = doctor_check(env)
    assert check["status"] == "PASS", check
    assert switch_to(env, "acct1")[0] == 0


def test_doctor_warns_on_an_accounts_file_others_can_read(tmp_path: Path) -> None:
    text = 'export MODEL_TOKEN_ACCT1="%s"  # one@example.com\nexport MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n' \
           % TOK1
    path, env = _home(tmp_path, text, mode=0o644)
    check = doctor_check(env)
    assert check["status"] == "WARN", check
    assert "readable by group or others" in check["detail"] and "chmod 600 %s" % path in check["detail"], check
    path.chmod(0o640)
    assert doctor_check(env)["status"] == "WARN"
    path.chmod(0o600)
    assert doctor_check(env)["status"] == "PASS"


def test_an_unterminated_quote_is_named_at_the_line_it_opened(tmp_path: Path) -> None:
    text = '# accounts\nexport MODEL_TOKEN_ACCT1="%s  # one@example.com\n' \
           'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"\n' % TOK1
    path, env = _home(tmp_path, text)
    at = "%s:2:" % path
    out = check_text(env)
    assert at in out and "quote" in out and "%s:4:" % path not in out, out
    assert check_json(env)["line"] == 2
    check = doctor_check(env)
    assert check["status"] == "FAIL" and at in check["detail"] and "%s:4:" % path not in check["detail"], check
