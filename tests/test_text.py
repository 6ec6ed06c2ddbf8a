"""svcposture._text: JSON read exactly as json.loads reads it, patterns compiled on
first use, and a statusline render that imports none of the heavy modules."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.home import REPO
from svcposture import _text

FUZZ = settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10 ** 30, 10 ** 30), st.floats(allow_nan=True),
              st.text(max_size=20)),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=6), kids, max_size=4)),
    max_leaves=20)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _verdict(reader: Any, text: str) -> Any:
    try:
        return ("ok", reader(text))
    except ValueError:
        return ("error", None)
    except RecursionError:
        return ("error", None)


@FUZZ
@given(value=values, pad=st.sampled_from(["", " ", "\n\t ", "\r\n"]))
def test_documents_read_as_json_loads_reads_them(value: Any, pad: str) -> None:
    text = pad + json.dumps(value) + pad
    assert _same(_text.loads_bounded(text.encode(), 10 ** 6), json.loads(text))


@FUZZ
@given(text=st.one_of(st.text(max_size=40), st.text(alphabet='{}[]",:0123456789.eE+-tnfrualsNIy \\\n\x01', max_size=40)))
def test_anything_at_all_gets_json_loads_verdict(text: str) -> None:
    ours = _verdict(lambda t: _text.loads_bounded(t.encode("utf-8", "surrogatepass"), 10 ** 6), text)
    theirs = _verdict(json.loads, text)
    assert ours[0] == theirs[0], (text, ours, theirs)
    if ours[0] == "ok":
        assert _same(ours[1], theirs[1])


@pytest.mark.parametrize("raw", [b"", b"{", b"[1] x", b"\xef\xbb\xbf{}", b"[" * 100_000, b"1" * 5000, b"nul",
                                 b'"\x01"', b'{"a":}', b"[1,]", b"\xff", b"{} {}", b"\x00"])
def test_bad_documents_are_value_errors(raw: bytes) -> None:
    with pytest.raises(ValueError):
        _text.loads_bounded(raw, 10 ** 6)


def test_size_limit_and_constants() -> None:
    with pytest.raises(ValueError):
        _text.loads_bounded(b"[1, 2]", 5)
    assert _text.loads_bounded(b"[1, 2]", 6) == [1, 2]
    got = _text.loads_bounded(b'[NaN, Infinity, -Infinity, 1e400, 0.5, 10]', 100)
    assert math.isnan(got[0]) and got[1:4] == [float("inf"), float("-inf"), float("inf")] and got[4:] == [0.5, 10]


def test_patterns_and_controls() -> None:
    from svcposture._text import EMAIL_RE, LABEL_RE, WORD_RE
    assert EMAIL_RE.search("token  # ada@example.com").group(0) == "ada@example.com"
    assert WORD_RE.match("allowed_warning") and not WORD_RE.match("Allowed")
    assert LABEL_RE.match("acct2") and not LABEL_RE.match("a" * 65)
    assert _text.CONTROL_RE.search("a\x9bb")
    with pytest.raises(AttributeError):
        _text.NO_SUCH_PATTERN  # noqa: B018
    for text, expected in (("plain", False), ("a\x1b[2J", True), ("\x7f", True), ("\x9f", True), ("é\u202e", False)):
        assert _text.has_control(text) is expected, text
        assert bool(_text.CONTROL_RE.search(text)) is expected
    assert _text.printable("a\x1bb\nc\x85") == "a?b?c?"


def test_a_statusline_render_imports_nothing_heavy() -> None:
    """The modules a render needs, in an interpreter with no site module: no json, re,
    typing, datetime, socket wrapper, urllib or http (they cost more than the render)."""
    code = ("import sys; from svcposture.term import statusline; "
            "statusline.run(['--url', 'http://127.0.0.1:9'], {}, -1, 0.0); "
            "from svcposture.term import line; "
            "line.status_line(statusline.loads_bounded(b'{\"available\": true, \"status\": \"ok\", "
            "\"probedAt\": 1, \"active\": {\"label\": \"a\", \"fiveHour\": {\"pct\": 1, "
            "\"resetsAt\": \"2030-01-01T00:00:00.000Z\"}}}', 1000), now=0); "
            "print(' '.join(sorted(m for m in ('json', 're', 'typing', 'datetime', 'socket', 'urllib', "
            "'urllib.parse', 'http.client', 'argparse', 'pathlib') if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=str(REPO), capture_output=True, timeout=30,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == ""
