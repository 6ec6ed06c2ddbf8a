"""svcposture._text's percent: one reader (read_pct) and one writer for a person (pct_text),
which every surface in Python uses, with the rule the pages' fmtPct has."""
from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.home import REPO
from svcposture._text import MAX_PCT, pct_figure, pct_text, read_number, read_pct


def test_a_percent_is_a_finite_number_from_0_to_the_bound() -> None:
    assert [read_pct(v) for v in (0, 42, 68.7, 100, 250.5, MAX_PCT)] == [0.0, 42.0, 68.7, 100.0, 250.5, MAX_PCT]
    assert all(type(read_pct(v)) is float for v in (0, 42, 68.7))
    for bad in (None, True, False, "42", -0.1, -5, MAX_PCT * 1.001, 10 ** 400, float("nan"), float("inf"),
                float("-inf"), [42], {"pct": 42}):
        assert read_pct(bad) is None, bad
    # A lower bound for a reader that takes less (the heartbeat's).
    assert read_pct(1e6, high=1e6) == 1e6 and read_pct(1e6 + 1, high=1e6) is None


def test_a_percent_sent_as_text_is_read_only_when_asked() -> None:
    assert read_pct("42.5") is None
    assert [read_pct(v, text=True) for v in ("42.5", " 7 ", "1e2", ".5", 12)] == [42.5, 7.0, 100.0, 0.5, 12.0]
    for bad in ("", "-1", "nan", "inf", "42%", "0x10", "4 2", "1" * 41, "1e999", True):
        assert read_pct(bad, text=True) is None, bad
    assert read_number("-1") == -1.0 and read_number("1e999") is None and read_number(False) is None


def test_a_percent_is_written_to_the_nearest_tenth() -> None:
    cases = {0: "0%", 0.04: "0%", 0.05: "0.1%", 12: "12%", 12.0: "12%", 68.7: "68.7%", 68.25: "68.3%",
             68.24: "68.2%", 99.6: "99.6%", 99.94: "99.9%", 99.95: "100%", 100: "100%", 100.0: "100%"}
    assert {value: pct_text(value) for value in cases} == cases


def test_past_the_limit_it_is_100_plus_and_no_number_is_the_callers_mark() -> None:
    for value in (100.01, 101, 250, 1e300):
        assert pct_text(value) == "100%+", value
    for value in (None, "42", True, float("nan"), float("inf"), 10 ** 400, [1]):
        assert pct_text(value) == "?" and pct_text(value, "--") == "--", value
    assert pct_text(-3) == "0%"  # no reading is below 0; a figure that is shows as none used
    assert pct_figure(42.5) == "42.5" and pct_figure(7) == "7"


@settings(max_examples=500, deadline=None, database=None)
@given(st.floats(min_value=0, max_value=100, allow_nan=False))
def test_the_text_is_the_pages_math_round_to_a_tenth(value: float) -> None:
    # fmtPct in the pages: (Math.round(p * 10) / 10) + "%", and Math.round(x) is floor(x + 0.5).
    expected = math.floor(value * 10 + 0.5) / 10
    text = pct_text(value)
    assert re.fullmatch(r"\d{1,3}(\.\d)?%", text), text
    assert float(text[:-1]) == expected
    assert not text.endswith(".0%")


# Figures at the edges of the rule: halves, the limit, past it, below 0, the largest.
EDGES = [0, 0.04, 0.05, 0.15, 0.25, 1.45, 12, 42.5, 68.25, 68.24, 68.7, 99.94, 99.95, 99.96, 100, 100.0000001,
         100.7, 101, 250.5, 1e6, MAX_PCT, -0.04, -3, 1 / 3, 2 / 3, 33.349999, 33.35, 7.05]


def _node() -> str:
    import os
    import shutil
    import pytest
    found = shutil.which("node")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("node missing under CI (scripts/run_tests.sh installs it)")
        pytest.skip("node not installed")
    return found


def test_the_pages_write_a_percent_by_the_same_rule() -> None:
    # The pages' own functions, run by a JavaScript engine on the same figures as pct_text: every
    # reading is written one way on every page and terminal.
    import json
    import subprocess
    values = EDGES + [i / 100 for i in range(0, 10001, 7)]
    for page, name, missing in (("dashboard.js", "fmtPct", "no reading"), ("fleet.js", "pctText", "\u2014")):
        source = (REPO / "svcposture" / "monitor" / "static" / page).read_text()
        found = re.search(r"\n(  function %s\(p\) \{\n.*?\n  \})\n" % name, source, re.S)
        assert found, "%s has no %s(p)" % (page, name)
        script = "%s\nprocess.stdout.write(JSON.stringify(%s.map(%s)));" % (
            found.group(1), json.dumps(values + [None, "42", float("nan")], allow_nan=True), name)
        done = subprocess.run([_node(), "-e", script], capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        written = json.loads(done.stdout)
        assert written == [pct_text(v) for v in values] + [missing] * 3, page
