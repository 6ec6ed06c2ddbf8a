"""`svc-monitor init`: a fresh machine becomes a node, and nothing that exists is ever overwritten."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.cli import assert_clean, cli
from tests.support.home import REPO, clean_env, mode, snapshot

PLACEHOLDER_LINE = "MODEL_TOKEN_ACCT%d=PASTE_TOKEN_HERE  # you@example.com"
STATUSLINE = '{"statusLine": {"type": "command", "command": "svc-monitor statusline"}}'


def init(env, *args, **kw):
    done = cli(env, "monitor", "init", *args, **kw)
    assert_clean(done)
    return done


def init_json(env, *args):
    done = init(env, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def config_dir(home: Path) -> Path:
    return home / ".config" / "svc"


def probe_check(env) -> dict:
    """The no-network accounts check the doctor runs: the file as the probe child sources it."""
    done = subprocess.run([sys.executable, "-m", "svcposture.probe", "check", "--json"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


# The file init writes for the built-in vendors, word for word: Claude's placeholder entries and where its
# token comes from, then the commented example of Codex, Copilot, z.ai and Kimi (each vendor's
# `setup_help`, docs/vendors.md).
WRITTEN = [
    "# The model-provider accounts of this node, sourced as POSIX sh by the monitor's probe child.",
    "# Replace each PASTE_TOKEN_HERE with the account's token and you@example.com with its email.",
    '# To get a Claude token that lasts a year: run `claude setup-token` signed in as that account,',
    '# and paste the sk-ant-oat01-... it prints.',
    '# The active account is the one MODEL_CODE_OAUTH_TOKEN names. Keep this file mode 0600:',
    '# a file that group or others can write is refused.',
    'MODEL_TOKEN_ACCT1=PASTE_TOKEN_HERE  # you@example.com',
    'MODEL_TOKEN_ACCT2=PASTE_TOKEN_HERE  # you@example.com',
    'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"',
    '#',
    '# Codex logins (optional): one line per login, naming the CODEX_HOME directory `codex login`',
    '# wrote auth.json into; the probe child reads it there. The active one is what CODEX_HOME names.',
    '# To get one: mkdir -p ~/.codex-work && CODEX_HOME=~/.codex-work codex login',
    '# CODEX_HOME_WORK="$HOME/.codex"  # you@example.com',
    '# export CODEX_HOME="$CODEX_HOME_WORK"',
    '#',
    '# Copilot keys (optional): one line per key; the active one is what COPILOT_GITHUB_TOKEN names.',
    "# To get a GitHub token with the account's Copilot seat: gh auth login, then gh auth token;",
    '# or the oauth_token in ~/.config/github-copilot/apps.json of an editor signed in to Copilot.',
    '# COPILOT_TOKEN_WORK=PASTE_TOKEN_HERE  # you@example.com',
    '# export COPILOT_GITHUB_TOKEN="$COPILOT_TOKEN_WORK"',
    '#',
    '# z.ai keys (optional): one line per key; the active one is what ZAI_API_KEY names.',
    '# To get a z.ai key: create one at https://z.ai/manage-apikey/apikey-list, signed in as the',
    '# account with the GLM Coding Plan (the key Claude Code is given as ANTHROPIC_AUTH_TOKEN).',
    '# ZAI_API_KEY_WORK=PASTE_TOKEN_HERE  # you@example.com',
    '# export ZAI_API_KEY="$ZAI_API_KEY_WORK"',
    '#',
    '# Kimi keys (optional): one line per key; the active one is what KIMI_API_KEY names.',
    '# To get a Kimi Code key: create one in the Kimi Code console (https://www.kimi.com/code/console);',
    '# a Moonshot Open Platform key has no coding plan to read.',
    '# KIMI_API_KEY_WORK=PASTE_TOKEN_HERE  # you@example.com',
    '# export KIMI_API_KEY="$KIMI_API_KEY_WORK"',
]
FIRST_STEP = ("Get a long-lived token for each Claude account: run `claude setup-token` signed in as it "
              "(it prints sk-ant-oat01-...); for a Codex login: CODEX_HOME=<dir> codex login; "
              "for a Copilot account: gh auth token (signed in as its GitHub user); "
              "for a z.ai GLM Coding Plan: an API key from https://z.ai/manage-apikey/apikey-list; "
              "for a Kimi Code plan: an API key from https://www.kimi.com/code/console")


def test_the_file_and_the_first_step_word_for_word(home: Path, env: dict) -> None:
    report = init_json(env, "--host-name", "node-a")
    assert (config_dir(home) / "model-accounts.env").read_text() == "\n".join(WRITTEN) + "\n"
    assert report["nextSteps"][0] == FIRST_STEP


def test_bare_home_gets_config_dir_accounts_file_and_host_name(home: Path, env: dict) -> None:
    done = init(env, "--host-name", "node-a")
    assert done.returncode == 0, done.stderr
    cfg = config_dir(home)
    accounts = cfg / "model-accounts.env"
    assert mode(home / ".config") == 0o700 and mode(cfg) == 0o700
    assert mode(accounts) == 0o600 and mode(cfg / "node.json") == 0o600
    lines = accounts.read_text().splitlines()
    assert [l for l in lines if not l.startswith("#")] == [
        PLACEHOLDER_LINE % 1, PLACEHOLDER_LINE % 2, 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT1"']
    assert json.loads((cfg / "node.json").read_text()) == {"svc": {"host": {"name": "node-a"}}}
    out = done.stdout
    for path in (cfg, accounts, cfg / "node.json"):
        assert "created     %s  (" % path in out
    assert "left alone" not in out and "Nothing changed" not in out
    # the next steps: paste tokens, start the monitor, open the URL, the statusline setting
    assert "Paste each account's token over PASTE_TOKEN_HERE" in out and str(accounts) in out
    # ... after saying how to get one, for each vendor; the file's comments say it too.
    assert "claude setup-token" in out and "CODEX_HOME=<dir> codex login" in out
    text = accounts.read_text()
    assert "`claude setup-token`" in text and "CODEX_HOME=~/.codex-work codex login" in text
    assert "svc-monitor" in out and "http://127.0.0.1:7400/" in out and STATUSLINE in out
    # placeholders are no usable account until a token is pasted in
    assert probe_check(env) == {"available": False, "lineProblems": [], "claude": {
        "usable": [], "unusable": ["acct1", "acct2"], "active": None, "duplicateActive": [],
        "placeholders": [{"label": "acct1", "line": 7}, {"label": "acct2", "line": 8}]}}
    text = accounts.read_text().replace("PASTE_TOKEN_HERE", "tok-one", 1).replace("PASTE_TOKEN_HERE", "tok-two")
    accounts.write_text(text.replace("you@example.com", "ada@example.com", 1))
    check = probe_check(env)
    assert check["claude"]["usable"] == ["acct1", "acct2"] and check["claude"]["active"] == "acct1"


def test_default_host_name_is_the_os_short_name(home: Path, env: dict) -> None:
    report = init_json(env)
    short = os.uname().nodename.split(".")[0]
    assert report["hostName"] == short
    assert json.loads((config_dir(home) / "node.json").read_text())["svc"]["host"]["name"] == short


@pytest.mark.parametrize("count", [1, 5, 20])
def test_accounts_option_sets_the_number_of_placeholders(home: Path, env: dict, count: int) -> None:
    init_json(env, "--accounts", str(count))
    text = (config_dir(home) / "model-accounts.env").read_text()
    assert [l for l in text.splitlines() if l.startswith("MODEL_TOKEN_")] == \
        [PLACEHOLDER_LINE % k for k in range(1, count + 1)]


def test_existing_files_are_left_alone_and_reported(home: Path, env: dict) -> None:
    cfg = config_dir(home)
    cfg.mkdir(parents=True)
    os.chmod(str(cfg), 0o750)
    accounts = cfg / "model-accounts.env"
    accounts.write_text("MODEL_TOKEN_MINE=sk-secret-value  # me@example.com\n")
    os.chmod(str(accounts), 0o600)
    (cfg / "node.json").write_text('{"svc": {"host": {"name": "keep-me"}}, "other": 1}\n')
    before = snapshot(home)
    report = init_json(env, "--host-name", "new-name")
    assert report["changed"] is False and report["created"] == []
    assert [(i["what"], i["path"]) for i in report["leftAlone"]] == [
        ("config directory", str(cfg)), ("accounts env file", str(accounts)), ("host name", str(cfg / "node.json"))]
    assert "not written" in report["leftAlone"][2]["detail"] and report["hostName"] == "keep-me"
    assert snapshot(home) == before and mode(cfg) == 0o750
    assert "sk-secret-value" not in json.dumps(report)


def test_some_files_there_only_the_missing_ones_are_created(home: Path, env: dict) -> None:
    cfg = config_dir(home)
    cfg.mkdir(parents=True, mode=0o700)
    (cfg / "node.json").write_text('{"other": {"key": true}}\n')
    accounts = cfg / "model-accounts.env"
    accounts.write_text("# mine\n")
    os.chmod(str(accounts), 0o664)  # unsafe: left alone, but the report says why the monitor refuses it
    done = init(env, "--host-name", "node-b")
    assert done.returncode == 0
    assert "left alone  %s  (accounts env file: exists with mode 0664" % accounts in done.stdout
    assert "chmod 600" in done.stdout and mode(accounts) == 0o664 and accounts.read_text() == "# mine\n"
    assert "created     %s  (host name: svc.host.name = 'node-b')" % (cfg / "node.json") in done.stdout
    assert json.loads((cfg / "node.json").read_text()) == {"other": {"key": True}, "svc": {"host": {"name": "node-b"}}}


def test_host_name_in_config_json_counts_as_set(home: Path, env: dict) -> None:
    cfg = config_dir(home)
    cfg.mkdir(parents=True, mode=0o700)
    (cfg / "config.json").write_text('{"svc": {"host": {"name": "legacy"}}}')
    report = init_json(env)
    assert report["hostName"] == "legacy" and not (cfg / "node.json").exists()


def test_run_twice_changes_nothing_and_says_so(home: Path, env: dict) -> None:
    first = init(env)
    assert first.returncode == 0 and "created" in first.stdout
    before = snapshot(home)
    second = init(env)
    assert second.returncode == 0
    assert "Nothing changed" in second.stdout and "  created " not in second.stdout
    assert second.stdout.count("left alone") == 3
    assert snapshot(home) == before
    assert init_json(env)["changed"] is False


def test_json_report_shape(home: Path, env: dict) -> None:
    report = init_json(env, "--host-name", "node-a", "--accounts", "3")
    assert set(report) == {"home", "changed", "created", "leftAlone", "hostName", "accountsEnv", "url",
                           "nextSteps"}
    assert report["changed"] is True and report["home"] == str(home) and report["hostName"] == "node-a"
    assert report["accountsEnv"] == str(config_dir(home) / "model-accounts.env")
    assert [i["what"] for i in report["created"]] == ["config directory", "accounts env file", "host name"]
    assert all(set(i) == {"path", "what", "detail"} for i in report["created"])
    assert report["url"] == "http://127.0.0.1:7400/" and len(report["nextSteps"]) == 5
    assert STATUSLINE in report["nextSteps"][4]
    # Where each vendor's long-lived credential comes from comes first.
    assert "claude setup-token" in report["nextSteps"][0] and "CODEX_HOME=<dir> codex login" in report["nextSteps"][0]


def test_url_follows_svc_monitor_port(home: Path, env: dict) -> None:
    assert init_json(dict(env, SVC_MONITOR_PORT="7411"))["url"] == "http://127.0.0.1:7411/"
    assert init_json(dict(env, SVC_MONITOR_PORT="junk"))["url"] == "http://127.0.0.1:7400/"


def test_svc_accounts_env_override_is_where_the_file_goes(tmp_path: Path, home: Path, env: dict) -> None:
    target = tmp_path / "elsewhere" / "deep" / "accounts.env"
    report = init_json(dict(env, SVC_ACCOUNTS_ENV=str(target)))
    assert report["accountsEnv"] == str(target) and mode(target) == 0o600
    assert mode(target.parent) == 0o700 and mode(target.parent.parent) == 0o700


NOBODY = {"user": 65534, "group": 65534, "extra_groups": []}


def unprivileged():
    """(interpreter, subprocess options) of a process that a 0555 directory stops.

    Root writes anywhere, so under root the child runs as nobody, with the
    first interpreter nobody can start (a pyenv one under /root is not)."""
    if os.geteuid() != 0:
        return sys.executable, {}
    for python in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        try:
            ok = subprocess.run([python, "-c", "import sys; assert sys.version_info >= (3, 9)"],
                                capture_output=True, timeout=60, cwd="/", **NOBODY).returncode == 0
        except OSError:
            ok = False
        if ok:
            return python, NOBODY
    raise AssertionError("running as root and no Python 3.9+ that user nobody can run")


def readable_package_copy() -> Path:
    """A directory every user can read holding a copy of svcposture/, for a child run as another user:
    the checkout itself may sit where that user cannot read (a clone under /root or in a 0700 home)."""
    root = Path(tempfile.mkdtemp(prefix="svc-readable-pkg-"))
    shutil.copytree(str(REPO / "svcposture"), str(root / "svcposture"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    for where, dirs, files in os.walk(str(root)):
        os.chmod(where, 0o755)
        for name in files:
            os.chmod(os.path.join(where, name), 0o644)
    return root


def test_read_only_home_is_a_clear_error(tmp_path: Path) -> None:
    python, options = unprivileged()
    ro_home = Path(tempfile.mkdtemp(prefix="svc-ro-home-"))
    package_root = readable_package_copy() if options else REPO
    try:
        os.chmod(str(ro_home), 0o555)
        env = dict(clean_env(ro_home), PYTHONPATH=str(package_root))
        done = subprocess.run([python, "-m", "svcposture", "monitor", "init"], env=env,
                              capture_output=True, text=True, timeout=60, cwd="/", **options)
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert done.stdout == "" and "Traceback" not in done.stderr
        assert done.stderr == "svc-monitor init: cannot create %s: Permission denied\n" % (ro_home / ".config")
        assert os.listdir(str(ro_home)) == []
    finally:
        os.chmod(str(ro_home), 0o700)
        os.rmdir(str(ro_home))
        if package_root != REPO:
            shutil.rmtree(str(package_root))


@pytest.mark.parametrize("args, message", [
    (("--accounts", "0"), "--accounts must be a number in 1..20"),
    (("--accounts", "21"), "--accounts must be a number in 1..20"),
    (("--accounts", "two"), "--accounts must be a number in 1..20"),
    (("--accounts", ""), "--accounts must be a number in 1..20"),
    (("--host-name", "bad name"), "--host-name 'bad name'"),
    (("--host-name", "-x"), "--host-name"),
    (("--host-name", "a" * 64), "--host-name"),
    (("--host-name", "ev\x1b[31mil"), "--host-name 'ev?[31mil'"),
    (("--host-name", ""), "--host-name ''"),
    (("--bogus",), "unrecognized arguments"),
])
def test_bad_options_exit_2_with_one_line_and_write_nothing(home: Path, env: dict, args, message) -> None:
    done = init(env, *args)
    assert done.returncode == 2 and done.stdout == ""
    assert message in done.stderr and "\x1b" not in done.stderr
    assert os.listdir(str(home)) == []


@pytest.mark.parametrize("content", [b"", b"{", b'{"svc": ', b"\xff\xfe", b"null", b"[" * 100000, b" " * 5_000_000],
                         ids=["empty", "truncated", "cut", "not-utf8", "null", "deep", "huge"])
def test_corrupt_node_json_stops_init_before_anything_is_created(home: Path, env: dict, content: bytes) -> None:
    cfg = config_dir(home)
    cfg.mkdir(parents=True, mode=0o700)
    (cfg / "node.json").write_bytes(content)
    done = init(env)
    assert done.returncode == 2 and done.stdout == ""
    assert str(cfg / "node.json") in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert sorted(os.listdir(str(cfg))) == ["node.json"] and (cfg / "node.json").read_bytes() == content


def test_hostile_accounts_paths_are_never_followed_or_replaced(tmp_path: Path, home: Path, env: dict) -> None:
    cfg = config_dir(home)
    cfg.mkdir(parents=True, mode=0o700)
    outside = tmp_path / "outside.env"
    (cfg / "model-accounts.env").symlink_to(outside)  # dangling: creating through it would write outside
    report = init_json(env)
    assert not outside.exists() and (cfg / "model-accounts.env").is_symlink()
    assert report["leftAlone"][1]["what"] == "accounts env file"
    assert "not a regular file" in report["leftAlone"][1]["detail"] or "exists" in report["leftAlone"][1]["detail"]
    (cfg / "model-accounts.env").unlink()
    (cfg / "model-accounts.env").mkdir()
    report = init_json(env)
    assert report["leftAlone"][1]["detail"].startswith("exists but is not a regular file")
    assert stat.S_ISDIR(os.lstat(str(cfg / "model-accounts.env")).st_mode)


def test_home_path_with_control_characters_is_printed_safely(tmp_path: Path) -> None:
    home = tmp_path / "h\x1b]0;pwn\x07ome"
    home.mkdir()
    done = init(clean_env(home))
    assert done.returncode == 0 and "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert (home / ".config" / "svc" / "model-accounts.env").exists()
