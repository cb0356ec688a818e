"""Months as integers: what a dated row's `date` becomes before any estimate.

A month is `year * 12 + (month - 1)`, so that consecutive months differ by one and a gap between two months in a
dated set is a gap on the time axis too (a trend fitted against it is a trend per month, not per row). A date is
read as an ISO date (`2018-03-14`), an ISO date-time (`2018-03-14T09:26:53`, with or without a zone; one with a
zone is taken in UTC, as Stack Exchange and Wikipedia give theirs), a month (`2018-03`), or a Python `date` or
`datetime` (what Parquet timestamp and date columns read as). A number is refused rather than guessed at (seconds
or milliseconds since the epoch, or a year?). A value that is none of these raises `DateError` with the reason the
job's quarantine records.
"""
from __future__ import annotations

import re
from datetime import date, datetime, timezone

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")


class DateError(ValueError):
    """A date that is not an ISO date, date-time or month."""


def month_index(year: int, month: int) -> int:
    if not 1 <= month <= 12:
        raise DateError(f"month {month} is not 1..12")
    return year * 12 + month - 1


def month_label(index: int) -> str:
    """`2018-03` for the month `month_index(2018, 3)`."""
    year, month0 = divmod(int(index), 12)
    return f"{year:04d}-{month0 + 1:02d}"


def month_of(value) -> int:
    """The month of a date, as `month_index`; raises DateError (with what was wrong) for anything else."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return month_index(value.year, value.month)
    if isinstance(value, date):
        return month_index(value.year, value.month)
    if not isinstance(value, str):
        raise DateError(f"date {value!r} is a {type(value).__name__}, not an ISO date or YYYY-MM")
    text = value.strip()
    if not text:
        raise DateError("date is empty")
    m = _MONTH.match(text)
    if m:
        return month_index(int(m.group(1)), int(m.group(2)))
    m = _DAY.match(text)
    if m:
        try:
            return month_of(date(int(m.group(1)), int(m.group(2)), int(m.group(3))))
        except ValueError as exc:
            raise DateError(f"date {value!r}: {exc}") from None
    try:
        return month_of(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        raise DateError(f"date {value!r} is not an ISO date (YYYY-MM-DD), date-time or month (YYYY-MM)") from None


def parse_month_range(spec: str) -> tuple[int, int]:
    """`2016-01..2024-06` → (first, last) month, both included."""
    first, sep, last = spec.partition("..")
    if not sep:
        raise DateError(f"a month range is FIRST..LAST, e.g. 2016-01..2024-06; got {spec!r}")
    a, b = month_of(first.strip()), month_of(last.strip())
    if b < a:
        raise DateError(f"month range {spec!r} ends before it starts")
    return a, b


def month_start(index: int) -> datetime:
    """The first instant of a month, in UTC."""
    year, month0 = divmod(int(index), 12)
    return datetime(year, month0 + 1, 1, tzinfo=timezone.utc)


def month_end(index: int) -> datetime:
    """The last second of a month, in UTC (a Wikipedia version "as of the month's end" is the revision current
    then)."""
    from datetime import timedelta

    return month_start(index + 1) - timedelta(seconds=1)
