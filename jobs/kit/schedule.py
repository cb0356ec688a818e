"""Scheduled regeneration: which month is the fresh non-member month of a run.

A benchmark regenerated every month takes its non-members from one recent month that no model trained before the
run can have seen. `--nonmember-month auto` picks it from the run date:

    run date 2026-11-22, lag 1  ->  non-member month 2026-10  ->  cutoffs.nonmember_after  = 2026-10-01
                                                                  cutoffs.nonmember_before = 2026-11-01

The lag (default 1: the last complete month) leaves room for a dump or an API that lags behind real time.
`YYYY-MM` picks a month explicitly (a backfill). The run date is today in UTC, or TIDEMARK_RUN_DATE (ISO date),
so a re-run of a scheduled job for a given period is reproducible. The values are applied as ordinary
`--set cutoffs.*` overrides, so the release manifest records them like any other override.

Placeholders in `--out` and in `--set` values are filled from the chosen month:
`{nonmember_month}` (2026-10), `{nonmember_yymm}` (2610, arXiv's id month), `{run_date}` (2026-11-22).
"""
from __future__ import annotations

import os
import re
from datetime import date, datetime, timezone

RUN_DATE_ENV = "TIDEMARK_RUN_DATE"
MONTH_ENV = "TIDEMARK_NONMEMBER_MONTH"
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


def run_date(value: str | None = None) -> date:
    """`value`, else TIDEMARK_RUN_DATE, else today (UTC)."""
    raw = value or os.environ.get(RUN_DATE_ENV)
    if raw:
        try:
            return date.fromisoformat(str(raw).strip()[:10])
        except ValueError as exc:
            raise ValueError(f"run date must be an ISO date (YYYY-MM-DD), got {raw!r}") from exc
    return datetime.now(timezone.utc).date()


def shift_month(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + delta
    return index // 12, index % 12 + 1


def resolve_month(spec: str, *, today: date | None = None, lag_months: int = 1) -> str:
    """'auto' -> the month `lag_months` before the run date's month; 'YYYY-MM' -> itself (validated)."""
    spec = str(spec).strip()
    if spec.lower() == "auto":
        if lag_months < 0:
            raise ValueError("the non-member lag must be 0 or more months")
        day = today or run_date()
        y, m = shift_month(day.year, day.month, -lag_months)
        return f"{y:04d}-{m:02d}"
    match = _MONTH.match(spec)
    if not match or not 1 <= int(match.group(2)) <= 12:
        raise ValueError(f"non-member month must be 'auto' or YYYY-MM, got {spec!r}")
    return spec


def month_window(month: str) -> tuple[str, str]:
    """('YYYY-MM-01', first day of the next month) for a 'YYYY-MM' month."""
    y, m = (int(x) for x in month.split("-"))
    ny, nm = shift_month(y, m, 1)
    return f"{y:04d}-{m:02d}-01", f"{ny:04d}-{nm:02d}-01"


def month_overrides(month: str) -> list[str]:
    after, before = month_window(month)
    return [f"cutoffs.nonmember_after={after}", f"cutoffs.nonmember_before={before}"]


def placeholders(month: str | None, today: date | None = None) -> dict[str, str]:
    day = today or run_date()
    values = {"run_date": day.isoformat()}
    if month:
        values.update(nonmember_month=month, nonmember_yymm=month[2:4] + month[5:7])
    return values


def fill(text: str, values: dict[str, str]) -> str:
    """Replace `{name}` placeholders that `values` knows; an unknown `{...}` is an error (a typo in a schedule
    would otherwise write every period to the same place)."""
    def sub(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            known = ", ".join(sorted(values)) or "none (no --nonmember-month given)"
            raise ValueError(f"unknown placeholder {{{name}}} in {text!r}; known: {known}")
        return values[name]

    return re.sub(r"\{([a-z_]+)\}", sub, text)
