"""Timestamps: UTC, `Z`, milliseconds, truncated, and ValueError for anything else."""
from __future__ import annotations

import datetime as dt
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcposture._time import iso_from_epoch, iso_from_ms, iso_now, month_key, normalize_iso, now_ms, parse_iso_ms

ISO_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def test_formats() -> None:
    assert iso_from_ms(0) == "1970-01-01T00:00:00.000Z"
    assert iso_from_ms(1700000000123) == "2023-11-14T22:13:20.123Z"
    assert iso_from_ms(-1) == "1969-12-31T23:59:59.999Z"
    assert ISO_MS_Z.match(iso_now())
    assert abs(parse_iso_ms(iso_now()) - now_ms()) < 60_000


@pytest.mark.parametrize("text, expected", [
    ("2026-03-01T10:00:00Z", "2026-03-01T10:00:00.000Z"),
    ("2026-03-01T10:00:00.1239Z", "2026-03-01T10:00:00.123Z"),       # truncated, never rounded
    ("2026-03-01T10:00:00.999999+00:00", "2026-03-01T10:00:00.999Z"),
    ("2026-03-01T01:30:00+02:00", "2026-02-28T23:30:00.000Z"),       # offset, crosses a month
    ("2026-03-01T01:30:00-0530", "2026-03-01T07:00:00.000Z"),
    ("2026-03-01 10:00:00", "2026-03-01T10:00:00.000Z"),             # naive means UTC
    ("  2026-03-01T10:00:00Z \n", "2026-03-01T10:00:00.000Z"),
    ("0999-01-01T00:00:00Z", "0999-01-01T00:00:00.000Z"),            # four-digit year kept
])
def test_normalize_iso(text: str, expected: str) -> None:
    assert normalize_iso(text) == expected


@pytest.mark.parametrize("junk", [
    "", "yesterday", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z",
    "2026-01-01", "2026-01-01T00:00:00+25", "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",       # offset pushes out of range
    "2026-01-01T00:00:00Z\x00", "２０２６-01-01T00:00:00Z",
])
def test_normalize_iso_junk_is_value_error(junk: str) -> None:
    with pytest.raises(ValueError):
        normalize_iso(junk)
    with pytest.raises(ValueError):
        parse_iso_ms(junk)


@pytest.mark.parametrize("value", [None, 12, b"2026-01-01T00:00:00Z", ["x"]])
def test_normalize_iso_non_string(value) -> None:
    with pytest.raises(ValueError):
        normalize_iso(value)


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), float("-inf"), 1e20, -1e20, "soon"])
def test_iso_from_epoch_junk(seconds) -> None:
    with pytest.raises(ValueError):
        iso_from_epoch(seconds)


def test_iso_from_epoch_floors_to_milliseconds() -> None:
    assert iso_from_epoch(1.9999) == "1970-01-01T00:00:01.999Z"
    assert iso_from_epoch(1767225600) == "2026-01-01T00:00:00.000Z"
    assert iso_from_epoch("1767225600.5") == "2026-01-01T00:00:00.500Z"


@pytest.mark.parametrize("ms", [10 ** 20, -(10 ** 20)])
def test_iso_from_ms_out_of_range(ms: int) -> None:
    with pytest.raises(ValueError):
        iso_from_ms(ms)
    with pytest.raises(ValueError):
        month_key(ms)


def test_month_key_is_utc() -> None:
    jan31_late = parse_iso_ms("2026-01-31T23:59:59.999Z")
    assert month_key(jan31_late) == "2026-01"
    assert month_key(jan31_late + 1) == "2026-02"
    assert month_key(parse_iso_ms("2026-02-01T00:30:00+01:00")) == "2026-01"


@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(min_value=-62135596800000, max_value=253402300799999))
def test_roundtrip_and_agrees_with_datetime(ms: int) -> None:
    text = iso_from_ms(ms)
    assert ISO_MS_Z.match(text)
    assert parse_iso_ms(text) == ms
    assert normalize_iso(text) == text
    seconds, millis = divmod(ms, 1000)
    stamp = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=seconds)
    assert text == "%04d-%s.%03dZ" % (stamp.year, stamp.strftime("%m-%dT%H:%M:%S"), millis)
    assert month_key(ms) == text[:7]


@given(st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
       st.sampled_from(["Z", "", "+00:00", "+05:30", "-0800", "+14:00", "-12:00"]),
       st.integers(min_value=0, max_value=9))
@settings(max_examples=400, deadline=None)
def test_parse_iso_ms_is_the_normalized_instant(moment: dt.datetime, zone: str, digits: int) -> None:
    # The milliseconds are those of the normalized text, read back as the package writes it.
    frac = ("%06d" % moment.microsecond + "987")[:digits]
    text = moment.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0") + ("." + frac if frac else "") + zone
    try:
        norm = normalize_iso(text)
    except ValueError:
        return  # an offset past year 1 or 9999
    seconds = dt.datetime.strptime(norm[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.timezone.utc)
    assert parse_iso_ms(text) == int(seconds.timestamp()) * 1000 + int(norm[20:23])
    assert iso_from_ms(parse_iso_ms(text)) == norm
