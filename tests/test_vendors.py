"""The vendor registry and protocol (docs/vendors.md): names, labels, refusals, `?provider=`.

Registering changes the process, so a registration that succeeds runs in a
child Python; in this process only refusals (which change nothing) are tried.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.home import REPO
from tests.support.thirdvendor import VENDOR as ACME

from svcposture.settings import as_text
from svcposture.vendor import EnvLines, InvalidVendor, Knob, SetupHelp, check_vendor
from svcposture.vendors import (bad_provider_message, block_key, block_keys, is_account_label, names_text,
                                provider_from_query, provider_names, provider_of_label, register_vendor, registered,
                                vendor_named)

BUILT_IN = ("claude", "codex", "copilot", "zai", "kimi")


def test_the_built_in_vendors_in_order_with_their_lines() -> None:
    assert provider_names() == BUILT_IN
    claude, codex, copilot, zai, kimi = registered()
    assert claude.lines.label("ACCT2") == "acct2" and codex.lines.label("WORK") == "codex-work"
    assert claude.lines.export_line("ACCT2") == 'export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_ACCT2"'
    assert claude.lines.owns_var("MODEL_TOKEN_X") and codex.lines.owns_var("CODEX_HOME")
    assert not claude.lines.owns_var("CODEX_HOME_X") and not codex.lines.owns_var("MODEL_TOKEN_X")
    assert copilot.lines.export_line("WORK") == 'export COPILOT_GITHUB_TOKEN="$COPILOT_TOKEN_WORK"'
    assert zai.lines.export_line("WORK") == 'export ZAI_API_KEY="$ZAI_API_KEY_WORK"'
    assert kimi.lines.export_line("WORK") == 'export KIMI_API_KEY="$KIMI_API_KEY_WORK"'
    assert [v.lines.label("WORK") for v in (copilot, zai, kimi)] == ["copilot-work", "zai-work", "kimi-work"]
    assert names_text() == "claude, codex, copilot, zai or kimi"
    assert bad_provider_message() == ("provider must be one of: claude, codex, copilot, zai, kimi (given once, "
                                      "or left out for claude).")


def test_each_vendor_implements_every_member() -> None:
    for vendor in registered() + (ACME,):
        check_vendor(vendor)
        assert vendor.error("no such kind")["kind"] == "internal"
        assert set(vendor.error("timeout")) >= {"kind", "message", "httpStatus"}


@pytest.mark.parametrize("query, expected", [
    ("", ("claude", None)), ("provider=codex", ("codex", None)), ("provider=%63odex", ("codex", None)),
    ("provider=acme", (None, "bad")), ("provider=Codex", (None, "bad")), ("provider=codex&provider=codex",
                                                                         (None, "bad")),
])
def test_the_query_takes_registered_names_only(query: str, expected) -> None:
    provider, bad = provider_from_query(query)
    assert (provider, "bad" if bad else None) == expected


def test_labels_tell_their_vendor() -> None:
    assert provider_of_label("codex-work") == "codex" and provider_of_label("acct1") == "claude"
    assert provider_of_label("acme-one") == "claude"  # not registered here
    assert is_account_label("codex-work") and not is_account_label("codex-") and not is_account_label("a-b")


class _Copy:
    """ACME's members under another name and lines, to be refused for what it takes."""

    def __init__(self, name: str, lines: EnvLines) -> None:
        for member in ("display_name", "error_kinds", "sweep", "request_timeout_s", "exchange_deadline_s", "parse_reply", "error",
                       "clean_block", "summarize", "poll_memory"):
            setattr(self, member, getattr(ACME, member))
        self.name = name
        self.lines = lines


@pytest.mark.parametrize("vendor, says", [
    (object(), "lacks"),
    (_Copy("Bad Name", ACME.lines), "lower-case"),
    (_Copy("codex", ACME.lines), "already registered"),
    (_Copy("other", EnvLines("MODEL_TOKEN_X_", "OTHER", "other-", ())), "overlap"),
    (_Copy("other", EnvLines("OTHER_", "CODEX_HOME", "other-", ())), "overlap"),
    (_Copy("other", EnvLines("OTHER_", "OTHER", "codex-", ())), "label prefix"),
    (_Copy("other", EnvLines("OTHER_", "OTHER", "", ())), "needs a label prefix"),
    (_Copy("other", EnvLines("other_", "OTHER", "other-", ())), "upper-case"),
    # Its block would sit on the heartbeat's own field of that name (docs/fleet.md).
    (_Copy("quota", EnvLines("OTHER_", "OTHER", "other-", ())), "heartbeat has a field"),
    (_Copy("accounts", EnvLines("OTHER_", "OTHER", "other-", ())), "heartbeat has a field"),
    (_Copy("state", EnvLines("OTHER_", "OTHER", "other-", ())), "heartbeat has a field"),
])
def test_a_vendor_that_lacks_a_member_or_takes_anothers_is_refused(vendor, says: str) -> None:
    with pytest.raises(InvalidVendor, match=says):
        register_vendor(vendor)
    assert provider_names() == BUILT_IN


@pytest.mark.parametrize("knobs, says", [
    (["SVC_OTHER_URL"], "tuple of Knob"),
    (("SVC_OTHER_URL",), "tuple of Knob"),
    ((Knob("OTHER_URL", "", "its URL", as_text),), "named SVC_"),
    ((Knob("SVC_other", "", "its URL", as_text),), "named SVC_"),
    ((Knob("SVC_OTHER_URL", "", "its URL", "not callable"),), "tuple of Knob"),
    ((Knob("SVC_OTHER_URL", "", "its URL", as_text),) * 2, "twice"),
    ((Knob("SVC_PROVIDER_URL", "", "its URL", as_text),), "knobs overlap claude's"),
])
def test_a_vendor_whose_knobs_are_malformed_or_taken_is_refused(knobs, says: str) -> None:
    vendor = _Copy("other", EnvLines("OTHER_", "OTHER", "other-", ()))
    vendor.knobs = knobs
    with pytest.raises(InvalidVendor, match=says):
        register_vendor(vendor)
    assert provider_names() == BUILT_IN
    vendor.knobs = (Knob("SVC_OTHER_URL", "", "its URL", as_text),)
    check_vendor(vendor)  # the same vendor with a knob of its own is a vendor


@pytest.mark.parametrize("setup_help", [
    ("for an other key: ask", ("# a comment",), ("# an example",)),
    SetupHelp("for an other key: ask", ("# a comment",), ("OTHER_KEY_WORK=live",)),
    SetupHelp("for an other key: ask", ("# a comment\nOTHER_KEY_WORK=live",), ()),
    SetupHelp("for an other key: ask", (), ("# caf\u00e9",)),
    SetupHelp(None, (), ()),
], ids=["not-a-SetupHelp", "live-line", "line-break", "not-ascii", "no-step"])
def test_setup_help_that_could_write_a_live_line_is_refused(setup_help) -> None:
    # init writes these lines into a file the probe child sources as shell: comments only.
    vendor = _Copy("other", EnvLines("OTHER_", "OTHER", "other-", ()))
    vendor.setup_help = setup_help
    with pytest.raises(InvalidVendor, match="setup_help"):
        check_vendor(vendor)
    vendor.setup_help = SetupHelp("for an other key: ask", ("# a comment",), ("# OTHER_KEY_WORK=x",))
    check_vendor(vendor)


def test_the_built_in_vendors_offer_their_setup_help_and_demo_part() -> None:
    for vendor in registered() + (ACME,):
        assert isinstance(vendor.setup_help, SetupHelp)
        part = vendor.demo
        assert part.accounts and all(a.label.startswith(vendor.lines.label_prefix) for a in part.accounts)
        assert all(knob in vendor.knobs for knob in part.url_knobs)


def test_a_registered_vendor_joins_every_loop_of_its_process() -> None:
    script = (
        "from svcposture.vendors import register_vendor, provider_names, provider_of_label, provider_from_query\n"
        "from svcposture._spawn import without_tokens\n"
        "from tests.support.thirdvendor import VENDOR\n"
        "register_vendor(VENDOR); register_vendor(VENDOR)\n"
        "assert provider_names() == ('claude', 'codex', 'copilot', 'zai', 'kimi', 'acme')\n"
        "assert provider_of_label('acme-one') == 'acme'\n"
        "assert provider_from_query('provider=acme') == ('acme', None)\n"
        "assert without_tokens({'ACME_KEY_ONE': 'k', 'ACME_KEY': 'k', 'KEEP': '1'}) == {'KEEP': '1'}\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=str(REPO), capture_output=True, timeout=60)
    assert done.stdout.strip() == b"ok", done.stderr.decode()


def test_each_vendors_block_is_under_account_for_the_default_and_its_name_for_others() -> None:
    assert [block_key(name) for name in provider_names()] == ["account", "codex", "copilot", "zai", "kimi"]
    assert block_keys() == (("claude", "account"), ("codex", "codex"), ("copilot", "copilot"), ("zai", "zai"),
                            ("kimi", "kimi"))
    # Any other name, registered or not, is its own field: the rule needs no registry.
    assert block_key("acme") == "acme"


def test_vendor_named_knows_only_the_registered() -> None:
    assert vendor_named("codex").name == "codex" and vendor_named("acme") is None and vendor_named(None) is None
