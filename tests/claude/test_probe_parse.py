"""Pure parts of the probe: header values, env file text, env file stat, usage mapping."""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcposture.probe import runner as probe
from svcposture.claude import accounts as accounts_text
from svcposture.claude import provider as wire
from svcposture.envfile.entries import parse_entries
from svcposture.probe.providerhttp import retry_after_s
from svcposture.claude.errors import MESSAGES as CLAUDE_MESSAGES, error as claude_error


@pytest.mark.parametrize("raw,pct", [
    ("0", 0.0), ("0.1", 10.0), ("0.12345", 12.3), ("0.00049", 0.0), ("0.0005", 0.1),
    ("0.1235", 12.4), ("0.1225", 12.3), ("0.12250", 12.3), ("1", 100.0), ("1.0449", 104.5),
    ("2.5", 250.0), (" 0.5 ", 50.0), ("1e-1", 10.0),
])
def test_pct_is_fraction_times_100_half_up_to_one_decimal(raw, pct):
    assert wire.pct_from_fraction(raw) == pct


def test_pct_uses_decimal_half_up_where_float_round_goes_down():
    # float: round(12.25, 1) == 12.2 (ties to even); the contract wants half-up.
    assert round(float("0.1225") * 100, 1) != 12.3
    assert wire.pct_from_fraction("0.1225") == 12.3
    assert wire.pct_from_fraction("0.0035") == 0.4


@pytest.mark.parametrize("raw", ["", "abc", "NaN", "inf", "-0.1", "0.1%", "1,5", "0x10", "1e999999",
                                 "9" * 5000, "sNaN"])
def test_pct_rejects_junk(raw):
    with pytest.raises(ValueError):
        wire.pct_from_fraction(raw)


def test_reset_epoch_to_iso_z():
    assert wire.iso_from_reset("1767225600") == "2026-01-01T00:00:00.000Z"
    assert wire.iso_from_reset("1767225600.5") == "2026-01-01T00:00:00.500Z"
    for junk in ("soon", "", "-5", "1e30", "nan", "1e999999", "-1e-999999"):
        with pytest.raises(ValueError):
            wire.iso_from_reset(junk)


def test_unified_headers_full_and_partial_windows():
    headers = {
        "anthropic-ratelimit-unified-status": "allowed_warning",
        "anthropic-ratelimit-unified-representative-claim": "seven_day",
        "anthropic-ratelimit-unified-7d-utilization": "0.91",
        "anthropic-ratelimit-unified-5h-status": "allowed",
        "content-type": "application/json",
    }
    view = wire.parse_unified_headers(headers)
    assert view == {
        "overallStatus": "allowed_warning",
        "representativeClaim": "seven_day",
        "fiveHour": {"pct": None, "resetsAt": None, "status": "allowed"},
        "sevenDay": {"pct": 91.0, "resetsAt": None, "status": None},
    }


def test_unified_headers_absent_gives_none_and_bad_values_raise():
    assert wire.parse_unified_headers({"content-type": "x"}) is None
    with pytest.raises(ValueError):
        wire.parse_unified_headers({"anthropic-ratelimit-unified-5h-utilization": "lots"})
    with pytest.raises(ValueError):
        wire.parse_unified_headers({"anthropic-ratelimit-unified-status": "<script>"})


def test_env_file_entries_labels_emails_and_comments():
    text = "\n".join([
        "# header comment MODEL_TOKEN_NOPE=x",
        'export MODEL_TOKEN_ACCT1="a#b"  # Alice <alice@example.com> and bob@example.com',
        "MODEL_TOKEN_Acct2='x # not-a@comment.com' # second@example.org",
        "MODEL_TOKEN_ACCT3=PASTE_TOKEN_HERE",
        "  MODEL_TOKEN_ACCT4=tok#notcomment@example.com",
        "MODEL_TOKEN_ACCT1=again # later@example.com",
        "garbage line ===",
        "MODEL_TOKEN_=x",
        "MODEL_TOKEN_BAD-NAME=x",
    ])
    assert parse_entries(text, accounts_text.ENTRY_RE) == [
        ("ACCT1", "later@example.com"),
        ("Acct2", "second@example.org"),
        ("ACCT3", None),
        ("ACCT4", None),
    ]


def test_entries_from_env_usable_active_and_duplicates():
    text = "MODEL_TOKEN_A=1 # a@x.io\nMODEL_TOKEN_B=2\nMODEL_TOKEN_C=3\nMODEL_TOKEN_D=4\n"
    env = {"MODEL_TOKEN_A": "PASTE_TOKEN_HERE", "MODEL_TOKEN_B": "same", "MODEL_TOKEN_C": "same",
           "MODEL_TOKEN_D": "   ", "MODEL_TOKEN_E": "extra", "MODEL_CODE_OAUTH_TOKEN": "same"}
    entries, unusable = accounts_text.entries_from_env(text, env)
    assert [e["label"] for e in entries] == ["b", "c", "e"]
    assert unusable == ["a", "d"]
    active, dups = accounts_text.resolve_active(entries)
    assert active == "b" and dups == ["b", "c"]
    assert [e["active"] for e in entries] == [True, False, False]


def test_no_active_when_oauth_token_unset_or_empty():
    entries, _ = accounts_text.entries_from_env("MODEL_TOKEN_A=1\n", {"MODEL_TOKEN_A": "1", "MODEL_CODE_OAUTH_TOKEN": ""})
    assert accounts_text.resolve_active(entries) == (None, [])


def env_state(path):
    """open_env_file's answer with the descriptor closed: (state, error)."""
    state, found = probe.open_env_file(path)
    if state == "ready":
        os.close(found)
        return state, None
    return state, found


def test_open_env_file_states(tmp_path):
    f = tmp_path / "acc.env"
    assert env_state(f) == ("missing", None)
    assert env_state(tmp_path / "nodir" / "x") == ("missing", None)
    f.write_text("")
    os.chmod(str(f), 0o600)
    assert env_state(f) == ("empty", None)
    # Writable by others is refused before the emptiness check: it is about to be sourced.
    for mode in (0o620, 0o602, 0o666):
        os.chmod(str(f), mode)
        state, err = env_state(f)
        assert state == "error" and err["kind"] == "config" and "writable" in err["message"]
    os.chmod(str(f), 0o600)
    f.write_text("MODEL_TOKEN_A=x\n")
    assert env_state(f) == ("ready", None)
    f.write_bytes(b"#" * (probe.MAX_ENV_FILE_BYTES + 1))
    assert env_state(f)[1]["kind"] == "config"
    state, err = env_state(tmp_path)
    assert state == "error" and err["kind"] == "config"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
def test_env_file_owned_by_another_user_is_refused(tmp_path):
    f = tmp_path / "acc.env"
    f.write_text("MODEL_TOKEN_A=x\n")
    os.chmod(str(f), 0o600)
    os.chown(str(f), 54321, -1)
    state, err = env_state(f)
    assert state == "error" and err["kind"] == "config" and "another user" in err["message"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_env_file_unreadable_is_config_error(tmp_path):
    f = tmp_path / "acc.env"
    f.write_text("MODEL_TOKEN_A=x\n")
    os.chmod(str(f), 0o200)
    state, err = env_state(f)
    assert state == "error" and err["kind"] == "config"


def test_error_vocabulary_replaces_foreign_text():
    assert claude_error("auth", "Bearer sk-secret refused", 401) == {
        "kind": "auth", "message": CLAUDE_MESSAGES["auth"].refused, "httpStatus": 401}
    assert claude_error("weird")["kind"] == "internal"
    assert claude_error("http", http_status=True)["httpStatus"] is None


def test_usage_values_mapping_and_truncation():
    body = {
        "five_hour": {"utilization": 12.5, "resets_at": "2026-01-01T04:59:59.600956+00:00"},
        "seven_day": {"utilization": 40, "resets_at": "2026-01-05T01:00:00+02:00"},
        "seven_day_opus": {"utilization": 77.0, "resets_at": None},
        "seven_day_sonnet": None,
        "extra_usage": {"anything": True},
    }
    assert wire.usage_values(body, "max", "default_claude_max_20x") == {
        "ratelimit.five_hour_pct": 12.5,
        "ratelimit.five_hour_resets_at": "2026-01-01T04:59:59.600Z",
        "ratelimit.seven_day_pct": 40,
        "ratelimit.seven_day_resets_at": "2026-01-04T23:00:00.000Z",
        "ratelimit.seven_day_large_pct": 77.0,
        "subscription.type": "max",
        "rate_limit.tier": "default_claude_max_20x",
    }
    assert wire.usage_values({}, None, None) == {}
    assert wire.usage_values({"seven_day_sonnet": {"utilization": 0}}, None, None) == {
        "ratelimit.seven_day_medium_pct": 0}


@pytest.mark.parametrize("body", [[], "x", None, 12, True])
def test_usage_values_rejects_a_reply_that_is_not_an_object(body):
    with pytest.raises(ValueError):
        wire.usage_values(body, None, None)


@pytest.mark.parametrize("body", [
    {"five_hour": "12"}, {"five_hour": {"utilization": "12"}}, {"five_hour": {"utilization": True}},
    {"seven_day": {"utilization": -1}}, {"five_hour": {"resets_at": 5}},
])
def test_usage_values_leaves_an_unreadable_window_out_on_its_own(body):
    good = {"seven_day_sonnet": {"utilization": 3.5}}
    assert wire.usage_values(dict(body, **good), None, None) == {"ratelimit.seven_day_medium_pct": 3.5}


def test_retry_after_seconds_and_http_date():
    assert retry_after_s("120") == 120.0
    assert retry_after_s(None) is None
    assert retry_after_s("soon") is None
    assert retry_after_s("-3") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_env_text_parser_never_raises_and_never_returns_values(text):
    for suffix, email in parse_entries(text, accounts_text.ENTRY_RE):
        assert suffix.replace("_", "").isalnum()
        assert email is None or "@" in email


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["status", "representative-claim", "5h-utilization", "5h-reset",
                                        "5h-status", "7d-utilization", "7d-reset", "7d-status"]),
                       st.text(max_size=30)))
def test_header_parser_raises_only_value_error(values):
    headers = {"anthropic-ratelimit-unified-" + k: v for k, v in values.items()}
    try:
        view = wire.parse_unified_headers(headers)
    except ValueError:
        return
    if values:
        assert set(view) == {"overallStatus", "representativeClaim", "fiveHour", "sevenDay"}


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.from_regex(r"\A[-+]?[0-9]{0,6}(\.[0-9]{0,8})?([eE][-+]?[0-9]{1,7})?\Z"), st.text(max_size=20)))
def test_numeric_header_values_raise_only_value_error(raw):
    for fn in (wire.pct_from_fraction, wire.iso_from_reset):
        try:
            out = fn(raw)
        except ValueError:
            continue
        assert isinstance(out, (float, str))
