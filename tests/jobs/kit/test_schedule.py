"""The non-member month of a scheduled regeneration, derived from the run date."""
from __future__ import annotations

from datetime import date

import pytest

from jobs.kit import schedule


@pytest.mark.parametrize("today, lag, month", [
    (date(2026, 11, 22), 1, "2026-10"),
    (date(2026, 1, 2), 1, "2025-12"),  # across a year
    (date(2026, 3, 31), 0, "2026-03"),
    (date(2026, 3, 1), 14, "2025-01"),
])
def test_auto_month(today, lag, month):
    assert schedule.resolve_month("auto", today=today, lag_months=lag) == month


def test_explicit_month_and_errors():
    assert schedule.resolve_month("2024-02") == "2024-02"
    for bad in ("2024-13", "2024-2", "last", ""):
        with pytest.raises(ValueError):
            schedule.resolve_month(bad)
    with pytest.raises(ValueError):
        schedule.resolve_month("auto", today=date(2026, 1, 1), lag_months=-1)


def test_window_and_overrides():
    assert schedule.month_window("2025-12") == ("2025-12-01", "2026-01-01")
    assert schedule.month_overrides("2026-10") == ["cutoffs.nonmember_after=2026-10-01",
                                                   "cutoffs.nonmember_before=2026-11-01"]


def test_run_date_from_the_environment(monkeypatch):
    monkeypatch.setenv(schedule.RUN_DATE_ENV, "2027-01-15")
    assert schedule.run_date() == date(2027, 1, 15)
    assert schedule.resolve_month("auto") == "2026-12"
    monkeypatch.setenv(schedule.RUN_DATE_ENV, "15/01/2027")
    with pytest.raises(ValueError, match="ISO date"):
        schedule.run_date()


def test_placeholders():
    values = schedule.placeholders("2026-10", today=date(2026, 11, 2))
    assert schedule.fill("s3://b/stackmia-{nonmember_month}", values) == "s3://b/stackmia-2026-10"
    assert schedule.fill("source.yymm_to={nonmember_yymm}", values) == "source.yymm_to=2610"
    assert schedule.fill("x-{run_date}", values) == "x-2026-11-02"
    assert schedule.fill("filters.title_patterns=['^\\d{4} in']", values) == "filters.title_patterns=['^\\d{4} in']"
    with pytest.raises(ValueError, match="unknown placeholder"):
        schedule.fill("s3://b/{nonmember_mnth}", values)
