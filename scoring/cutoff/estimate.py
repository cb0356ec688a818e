"""From a scored, dated table to the cutoff answers: one per source and detector (a pure function of rows.parquet,
so `tidemark cutoff --from-rows` recomputes every answer without the model).

rows.parquet holds, per scored row: `id`, `date` (as given), `period` (its month, YYYY-MM), `source`, `group` (null
where the row has none) and one float column per detector (larger = more member-like); with a reference model,
`ref:<column>` beside each, and the estimate reads the differential `<column> - ref:<column>` (what the target
finds familiar beyond what a model that cannot have read the range does).

The estimator per source: `versions` where every row of the source has a group (the same resources at several
months: scoring/cutoff/versions.py), `new_documents` otherwise (scoring/cutoff/breakpoint.py); `--estimator`
forces one. The answer's keys are the same for both: cutoff, cutoff_ci, p_no_cutoff, estimator, detector,
per_period, and the estimator's own facts.
"""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pyarrow as pa

from scoring.cutoff.breakpoint import CutoffSettings, estimate_break
from scoring.cutoff.periods import month_of
from scoring.cutoff.versions import estimate_versions

ESTIMATORS = ("auto", "versions", "new_documents")
REF_PREFIX = "ref:"
ALL_SOURCES = "all"
META_COLUMNS = ("id", "date", "period", "source", "group")


def score_columns(table: pa.Table) -> list[str]:
    """The detector columns of a rows table, in order (not the reference model's)."""
    return [c for c in table.column_names if c not in META_COLUMNS and not c.startswith(REF_PREFIX)]


def differential(table: pa.Table, column: str) -> tuple[np.ndarray, bool]:
    """(the scores the estimate reads, whether they are target minus reference)."""
    s = np.asarray(table.column(column).to_numpy(zero_copy_only=False), dtype=np.float64)
    ref = REF_PREFIX + column
    if ref in table.column_names:
        return s - np.asarray(table.column(ref).to_numpy(zero_copy_only=False), dtype=np.float64), True
    return s, False


def choose_estimator(groups: list, asked: str) -> str:
    if asked not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {asked!r}")
    if asked != "auto":
        return asked
    return "versions" if groups and all(g not in (None, "") for g in groups) else "new_documents"


def estimate_one(months, groups, scores, estimator: str, settings: CutoffSettings, normalisation: str) -> dict:
    if estimator == "versions":
        if any(g in (None, "") for g in groups):
            raise ValueError("--estimator versions needs a `group` on every row (the same resource at several dates)")
        return estimate_versions(groups, months, scores, settings, normalisation)
    return estimate_break(months, scores, settings)


def estimate_table(table: pa.Table, *, columns: list[str] | None = None, estimator: str = "auto",
                   settings: CutoffSettings = CutoffSettings(), normalisation: str = "center") -> dict:
    """report.json's answers: the first source's first detector at the top level, the first source's other
    detectors under `detectors`, and every source (with the same keys, plus `source`) under `sources`."""
    columns = columns or score_columns(table)
    if not columns:
        raise ValueError("the rows table has no score column")
    months = np.fromiter((month_of(p) for p in table.column("period").to_pylist()), dtype=np.int64,
                         count=table.num_rows)
    sources = [s if s not in (None, "") else ALL_SOURCES for s in table.column("source").to_pylist()]
    groups = table.column("group").to_pylist()
    names = sorted(set(sources))
    records = []
    for name in names:
        mask = np.fromiter((s == name for s in sources), dtype=bool, count=len(sources))
        g = [x for x, keep in zip(groups, mask) if keep]
        chosen = choose_estimator(g, estimator)
        answers = []
        for col in columns:
            scores, is_diff = differential(table, col)
            rec = estimate_one(months[mask], g, scores[mask], chosen, settings, normalisation)
            answers.append({"source": name, "detector": col, "differential": is_diff, **rec})
        records.append({**answers[0], "detectors": {a["detector"]: _strip(a) for a in answers[1:]}})
    top = dict(records[0])
    return {**top, "sources": records, "settings": {**asdict(settings), "estimator": estimator,
                                                    "normalisation": normalisation}}


def _strip(answer: dict) -> dict:
    return {k: v for k, v in answer.items() if k != "source"}


def member_window(cutoff_ci: list[str] | None, gap_months: int) -> dict | None:
    """The release cutoffs a measured cutoff implies: members created before the month after the CI's first month,
    less the gap; non-members created on or after the month after the CI's last month, plus the gap. None where
    no cutoff was found (then the dates say nothing: choose non-members another way)."""
    from scoring.cutoff.periods import month_start

    if not cutoff_ci:
        return None
    if gap_months < 0:
        raise ValueError(f"the gap is a number of months, at least 0; got {gap_months}")
    lo, hi = (month_of(m) for m in cutoff_ci)
    return {"member_before": month_start(lo + 1 - gap_months).date().isoformat(),
            "nonmember_after": month_start(hi + 1 + gap_months).date().isoformat()}
