"""Dates to months (scoring/cutoff/periods.py): what parses, what is refused and why."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from scoring.cutoff.periods import (DateError, month_end, month_index, month_label, month_of, month_start,
                                    parse_month_range)


@pytest.mark.parametrize("value, want", [
    ("2018-03", "2018-03"), ("2018-03-14", "2018-03"), ("2018-03-31T23:59:59", "2018-03"),
    ("2018-03-31T23:30:00-02:00", "2018-04"),  # in UTC that is April 1st
    ("2018-04-01T00:30:00+02:00", "2018-03"), ("2018-03-14T09:26:53Z", "2018-03"), (" 2018-03 ", "2018-03"),
    (date(1999, 12, 31), "1999-12"), (datetime(2020, 1, 1, tzinfo=timezone(timedelta(hours=5))), "2019-12"),
    (datetime(2020, 1, 1), "2020-01"),
])
def test_dates_to_months(value, want):
    assert month_label(month_of(value)) == want


@pytest.mark.parametrize("value, why", [
    ("", "empty"), ("2018-13", "not 1..12"), ("2018-02-30", "day is out of range"), ("March 2018", "not an ISO"),
    (1520000000, "int"), (None, "NoneType"), ("2018/03/01", "not an ISO"),
])
def test_what_is_refused_says_why(value, why):
    with pytest.raises(DateError, match=why):
        month_of(value)


def test_months_are_consecutive_integers():
    assert month_index(2019, 12) + 1 == month_index(2020, 1)
    assert month_label(month_index(2020, 1) - 1) == "2019-12"


def test_ranges_and_bounds():
    a, b = parse_month_range("2016-01..2024-06")
    assert (month_label(a), month_label(b), b - a) == ("2016-01", "2024-06", 101)
    with pytest.raises(DateError, match="ends before"):
        parse_month_range("2020-02..2020-01")
    with pytest.raises(DateError, match="FIRST..LAST"):
        parse_month_range("2020-02")
    assert month_start(a).isoformat() == "2016-01-01T00:00:00+00:00"
    assert month_end(month_index(2020, 2)).isoformat() == "2020-02-29T23:59:59+00:00"
