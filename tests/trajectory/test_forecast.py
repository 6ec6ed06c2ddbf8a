"""The burn-rate forecast (docs/trajectory.md): a pure function, checked by properties."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcposture import SvcpostureError
from svcposture._time import iso_from_ms
from svcposture.trajectory.forecast import LOOKBACK_MS, MIN_SPAN_MS, forecast

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
MINUTE = 60_000
WINDOWS = ("five_hour", "seven_day")
SPELLINGS = {"five_hour": "fiveHour", "seven_day": "sevenDay"}
PROPS = settings(max_examples=200, deadline=None, database=None)


@st.composite
def linear_series(draw, window=None):
    """(window, points, rate): a constant rate sampled at distinct times in the lookback,
    newest (at NOW) first."""
    window = window or draw(st.sampled_from(WINDOWS))
    lookback, span = LOOKBACK_MS[window], MIN_SPAN_MS[window]
    rate = draw(st.integers(0, 600)) / 10.0
    ages = draw(st.lists(st.integers(1, lookback), min_size=2, max_size=119, unique=True))
    if max(ages) < span:
        ages.append(draw(st.integers(span, lookback)))
    ages = sorted(set(ages) | {0})
    oldest = NOW - max(ages)
    base = draw(st.floats(0, 90))
    points = [(NOW - age, base + rate * (NOW - age - oldest) / HOUR) for age in ages]
    return window, points, rate


@PROPS
@given(linear_series(), st.booleans())
def test_a_constant_rate_is_recovered_exactly(series, camel):
    window, points, rate = series
    result = forecast(points, now_ms=NOW, resets_at_ms=NOW + 2 * HOUR,
                      window=SPELLINGS[window] if camel else window)
    assert result is not None
    assert result["ratePctPerHour"] == rate
    assert result["samples"] == len(points)
    pct = points[0][1]  # the newest
    assert result["pctAtReset"] == pytest.approx(pct + rate * 2, abs=0.051)


@PROPS
@given(linear_series(), st.randoms(use_true_random=False))
def test_the_result_does_not_depend_on_the_order_of_the_points(series, rnd):
    window, points, _ = series
    # Jitter the values so the sums are not exact, then shuffle.
    points = [(t, p + rnd.random() * 3) for t, p in points]
    expected = forecast(points, now_ms=NOW, resets_at_ms=NOW + HOUR, window=window)
    shuffled = list(points)
    rnd.shuffle(shuffled)
    assert forecast(shuffled, now_ms=NOW, resets_at_ms=NOW + HOUR, window=window) == expected
    assert forecast(tuple(reversed(points)), now_ms=NOW, resets_at_ms=NOW + HOUR, window=window) == expected
    assert forecast(iter(shuffled), now_ms=NOW, resets_at_ms=NOW + HOUR, window=window) == expected


@PROPS
@given(st.sampled_from(WINDOWS), st.lists(st.tuples(st.integers(0, 10 ** 7), st.floats(0, 200)), max_size=2))
def test_fewer_than_three_points_is_no_forecast(window, points):
    points = [(NOW - age, pct) for age, pct in points]
    assert forecast(points, now_ms=NOW, resets_at_ms=NOW + HOUR, window=window) is None


@PROPS
@given(st.sampled_from(WINDOWS), st.data())
def test_a_span_shorter_than_the_minimum_is_no_forecast(window, data):
    span = MIN_SPAN_MS[window]
    ages = data.draw(st.lists(st.integers(0, span - 1), min_size=3, max_size=50))
    start = data.draw(st.integers(0, LOOKBACK_MS[window] - span))
    points = [(NOW - start - age, 50.0 + age / 1e6) for age in ages]
    assert forecast(points, now_ms=NOW, resets_at_ms=None, window=window) is None


def test_points_outside_the_lookback_or_in_the_future_do_not_count():
    points = [(NOW - 20 * MINUTE, 10.0), (NOW, 20.0)]
    assert forecast(points + [(NOW - 61 * MINUTE, 0.0)], now_ms=NOW, resets_at_ms=None, window="five_hour") is None
    assert forecast(points + [(NOW + MINUTE, 30.0)], now_ms=NOW, resets_at_ms=None, window="five_hour") is None
    full = forecast(points + [(NOW - 60 * MINUTE, 0.0)], now_ms=NOW, resets_at_ms=None, window="five_hour")
    assert full is not None and full["samples"] == 3
    # The 7-day window looks back 24 h and wants 2 h of span.
    day = [(NOW - 23 * HOUR, 10.0), (NOW - 12 * HOUR, 20.0), (NOW, 30.0)]
    assert forecast(day, now_ms=NOW, resets_at_ms=None, window="sevenDay")["samples"] == 3
    assert forecast(day, now_ms=NOW, resets_at_ms=None, window="fiveHour") is None


def test_bad_pcts_are_ignored():
    good = [(NOW - 30 * MINUTE, 10.0), (NOW - 15 * MINUTE, 15.0), (NOW, 20.0)]
    for bad in (math.nan, math.inf, -1.0):
        mixed = good[:1] + [(NOW - 20 * MINUTE, bad)] + good[1:]
        assert forecast(mixed, now_ms=NOW, resets_at_ms=None, window="five_hour") == \
            forecast(good, now_ms=NOW, resets_at_ms=None, window="five_hour")


@PROPS
@given(st.sampled_from(WINDOWS), st.lists(st.floats(0.1, 30), min_size=2, max_size=40), st.floats(0, 99))
def test_a_falling_series_has_rate_zero_and_no_wall(window, drops, last):
    step = LOOKBACK_MS[window] // (len(drops) + 1)
    pct, points = last, [(NOW, last)]
    for i, drop in enumerate(drops, start=1):
        pct += drop
        points.append((NOW - i * step, pct))
    result = forecast(points, now_ms=NOW, resets_at_ms=NOW + HOUR, window=window)
    assert result is not None
    assert result["ratePctPerHour"] == 0.0
    assert result["wallAt"] is None and result["beforeReset"] is False
    # Half-up to 1 decimal: within half a step of the last pct (0.15 -> 0.2 is 0.05 away, give or
    # take the float error of the subtraction).
    assert abs(result["pctAtReset"] - last) <= 0.05 + 1e-9


@PROPS
@given(linear_series(), st.floats(100, 400), st.integers(-HOUR, 10 * HOUR))
def test_wall_at_is_the_probe_time_when_already_at_100(series, top, reset_in):
    window, points, _ = series
    points = [(NOW, top)] + points[1:]
    result = forecast(points, now_ms=NOW, resets_at_ms=NOW + reset_in, window=window)
    assert result["wallAt"] == iso_from_ms(NOW)
    assert result["beforeReset"] is (NOW < NOW + reset_in)


def test_the_readme_example():
    points = [(NOW - 40 * MINUTE, 52.0), (NOW - 20 * MINUTE, 61.0), (NOW, 70.0)]
    result = forecast(points, now_ms=NOW, resets_at_ms=NOW + 3 * HOUR, window="five_hour")
    # 27 pct/h from 70: 30 pct to go takes 1 h 6 min 40 s.
    assert result == {"ratePctPerHour": 27.0, "wallAt": iso_from_ms(NOW + 4_000_000), "beforeReset": True,
                      "pctAtReset": 151.0, "samples": 3}
    late = forecast(points, now_ms=NOW, resets_at_ms=NOW + HOUR, window="five_hour")
    assert late["beforeReset"] is False and late["pctAtReset"] == 97.0
    assert forecast(points, now_ms=NOW, resets_at_ms=None, window="five_hour")["pctAtReset"] is None


def test_rate_is_rounded_half_up_to_one_decimal():
    # 0.25 pct/h exactly: half-up gives 0.3 (round() would give 0.2).
    points = [(NOW - 60 * MINUTE, 10.0), (NOW - 30 * MINUTE, 10.125), (NOW, 10.25)]
    assert forecast(points, now_ms=NOW, resets_at_ms=None, window="five_hour")["ratePctPerHour"] == 0.3


def test_an_unknown_window_is_refused():
    with pytest.raises(SvcpostureError):
        forecast([], now_ms=NOW, resets_at_ms=None, window="monthly")
    with pytest.raises(ValueError):
        forecast([], now_ms=NOW, resets_at_ms=None, window="5h")
