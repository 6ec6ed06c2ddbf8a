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
    (b'{"oauthAccount": {', {}, "not JSON"),
    (b'{"oauthAccount": ' + b"[" * 100000, {}, "not JSON"),
    (b'{"a": "' + b"x" * 10000, {"max_pending": 4096, "chunk": 1024}, "string over"),
    (b'{"a": "' + b"x" * 5000 + b'"}', {"limit": 4000}, "over 4000 bytes"),
], ids=["array", "empty", "open", "cut-value", "deep", "long-string", "over-limit"])
def test_truncated_huge_and_hostile_files_are_refused(raw, bounds, why):
    with pytest.raises(InvalidScan, match=why):
        scan(raw, **bounds)


def test_a_large_file_is_streamed_past_its_history():
    history = {"/work/%05d" % i: {"history": [{"display": "x" * 300}]} for i in range(5000)}
    raw = json.dumps({"projects": history, KEY: {"emailAddress": "me@x.io"}}).encode()
    assert len(raw) > 1024 * 1024
    assert scan(raw, max_pending=64 * 1024) == {"emailAddress": "me@x.io"}
    with pytest.raises(InvalidScan, match="over"):
        scan(raw, limit=1024 * 1024)
