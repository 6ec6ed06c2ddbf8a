"""One top-level member of a JSON object, read as a stream: the same answer as loading the whole
file, at every chunk boundary, and bounded on huge, truncated and hostile files."""
from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcposture.claude.jsonscan import InvalidScan, top_level_member

KEY = "oauthAccount"
leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20),
                 st.sampled_from([KEY, '"%s": {' % KEY, "\\", '"', "{[", "]}", "\u00e9\u2028"]))
value = st.recursive(leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                    st.dictionaries(st.sampled_from([KEY, "a", "b\"c", "\\"]),
                                                                    inner, max_size=4)), max_leaves=20)


def scan(raw: bytes, **bounds) -> object:
    return top_level_member(io.BytesIO(raw), KEY, limit=bounds.pop("limit", 10 ** 8), **bounds)


@settings(max_examples=300, deadline=None)
@given(obj=st.dictionaries(st.sampled_from([KEY, "x", "projects", "oauth", KEY + " "]), value, max_size=5),
       chunk=st.integers(1, 40), indent=st.sampled_from([None, 0, 2]))
def test_the_same_as_loading_the_whole_file(obj, chunk, indent):
    raw = json.dumps(obj, indent=indent, ensure_ascii=chunk % 2 == 0).encode("utf-8")
    assert scan(raw, chunk=chunk) == obj.get(KEY)


def test_nested_members_and_lookalike_text_never_count():
    raw = json.dumps({"projects": {"/p": {KEY: {"emailAddress": "nested@x.io"}}},
                      "note": '"%s": {"emailAddress": "decoy@x.io"}' % KEY, "list": [KEY, {KEY: 1}]}).encode()
    assert scan(raw) is None


@pytest.mark.parametrize("raw,bounds,why", [
    (b"[1, 2]", {}, "not a JSON object"), (b"", {}, "ends"), (b"{", {}, "ends"),
    (b'{"oauthAccount": {', {}, "ends"),
    (b'{"oauthAccount": ' + b"[" * 30000 + b"]" * 30000 + b"}", {}, "not JSON"),
    (b'{"oauthAccount": ' + b"[" * 100000, {}, "over 65536 bytes"),
    (b'{"a": "' + b"x" * 10000, {"chunk": 1024}, "ends"),
    (b'{"a": "' + b"x" * 5000 + b'"}', {"limit": 4000}, "over 4000 bytes"),
], ids=["array", "empty", "open", "cut-value", "deep", "huge-value", "long-string", "over-limit"])
def test_truncated_huge_and_hostile_files_are_refused(raw, bounds, why):
    with pytest.raises(InvalidScan, match=why):
        scan(raw, **bounds)


def test_a_large_file_is_streamed_past_its_history():
    history = {"/work/%05d" % i: {"history": [{"display": "x" * 300}]} for i in range(5000)}
    raw = json.dumps({"projects": history, KEY: {"emailAddress": "me@x.io"}}).encode()
    assert len(raw) > 1024 * 1024
    assert scan(raw, chunk=64 * 1024) == {"emailAddress": "me@x.io"}
    with pytest.raises(InvalidScan, match="over"):
        scan(raw, limit=1024 * 1024)


# ---------------------------------------------------------------- json.loads's answer, whatever the spelling

def spelled(name: str, escapes: list) -> str:
    """`name` as a JSON string, each character escaped (\\uXXXX, either case) where `escapes` says."""
    out = []
    for ch, how in zip(name, escapes + [0] * len(name)):
        out.append(json.dumps(ch)[1:-1] if how == 0 else ("\\u%04x" if how == 1 else "\\u%04X") % ord(ch))
    return '"%s"' % "".join(out)


member_name = st.one_of(st.sampled_from([KEY, "x", "projects", KEY[:-1], KEY + "s", "oauth\u00e9"]), st.text(max_size=8))


@settings(max_examples=400, deadline=None)
@given(members=st.lists(st.tuples(member_name, value, st.lists(st.integers(0, 2), max_size=14)), max_size=6),
       chunk=st.integers(1, 40), blank=st.sampled_from(["", " ", "\n  "]))
def test_duplicate_and_escaped_names_agree_with_json_loads(members, chunk, blank):
    text = "{" + ",".join("%s%s:%s%s" % (blank, spelled(name, escapes), blank, json.dumps(val))
                          for name, val, escapes in members) + blank + "}"
    raw = text.encode("utf-8")
    assert scan(raw, chunk=chunk) == json.loads(raw).get(KEY)


def test_the_last_of_two_members_and_an_escaped_name_count():
    raw = b'{"oauthAccount": {"emailAddress": "first@x.io"}, "p": [1], "oauthAccount": {"emailAddress": "last@x.io"}}'
    assert scan(raw) == json.loads(raw)["oauthAccount"] == {"emailAddress": "last@x.io"}
    raw = b'{"oauthAccount": 1, "oauth\\u0041ccount": {"emailAddress": "esc@x.io"}}'
    assert scan(raw) == json.loads(raw)["oauthAccount"] == {"emailAddress": "esc@x.io"}
    assert scan(b'\xef\xbb\xbf{"oauthAccount": 2}', chunk=1) == json.loads(b'\xef\xbb\xbf{"oauthAccount": 2}')[KEY]


@pytest.mark.parametrize("where", ["value", "name", "nested"])
def test_each_byte_is_examined_once_however_long_the_strings(where):
    # A string of 3 MB, read 64 KB at a time: a scan that started the string again at each chunk
    # would look at its bytes about 24 times (3 MB / 64 KB / 2) on average.
    long = "x" * (3 * 1024 * 1024)
    doc = {"value": {"a": long}, "name": {long: 1}, "nested": {"p": [{"h": [long, "\\\"" * 1000]}]}}[where]
    doc[KEY] = {"emailAddress": "me@x.io"}
    raw = json.dumps(doc).encode()
    stats: dict = {}
    assert top_level_member(io.BytesIO(raw), KEY, limit=10 ** 8, chunk=64 * 1024, stats=stats) == doc[KEY]
    assert stats["examined"] == len(raw)
