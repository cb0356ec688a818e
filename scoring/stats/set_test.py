"""A set-level answer without known membership: is a suspect set (label 1: a benchmark's test split, books an
author says were taken) scored as more member-like than a reference set (label 0: items the model cannot have
seen: written after its cutoff, or freshly for the test)? One statistic, named before looking (--set-test), and a
one-sided Mann-Whitney U of suspect > reference (scoring/stats/rank_test.py). Its p-value is the chance of a
difference this large if the model treated both sets alike, so it is a false-positive rate only where the two
sets are exchangeable apart from training: a reference set from another time or source differs in ways the
detector also sees (the blind baseline beside it measures how much).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

MEANING = ("p is the probability of scores this much higher on the suspect set if the model had not seen it, "
           "assuming the two sets are alike apart from that (drawn from the same distribution); it is not the "
           "probability that the model saw them, and a reference set from another time or source can give a small p "
           "by its differences alone: compare with the blind baseline, which sees only the texts.")


def resolve_column(spec: str, methods) -> str:
    """The score column --set-test names (a column, or a detector name with one column in this run)."""
    columns = [m.column for m in methods]
    if spec in columns:
        return spec
    named = [m.column for m in methods if m.name == spec]
    if len(named) == 1:
        return named[0]
    raise ValueError(f"--set-test {spec!r} names no single score column of this run; columns: {', '.join(columns)}")


def suspect_vs_reference(scores: pa.Table, column: str) -> dict:
    """The one-sided rank test of the label-1 rows' scores against the label-0 rows' (evaluated rows with a score)."""
    from scoring.stats.rank_test import planted_vs_holdout

    s = np.asarray(scores.column(column).to_numpy(zero_copy_only=False), dtype=np.float64)
    y = np.asarray(scores.column("label").to_numpy(zero_copy_only=False))
    keep = np.isfinite(s) & np.asarray(scores.column("in_eval").to_numpy(zero_copy_only=False), dtype=bool)
    res = planted_vs_holdout(s[keep & (y == 1)], s[keep & (y == 0)])
    return {"column": column, "test": "one-sided Mann-Whitney U, suspect (label 1) > reference (label 0)",
            "u": res["u"], "p_value": res["p_value"], "auc": res["auc"], "method": res["method"],
            "n_suspect": res["n_plant"], "n_reference": res["n_holdout"],
            "mean_suspect": float(np.mean(s[keep & (y == 1)])), "mean_reference": float(np.mean(s[keep & (y == 0)])),
            "meaning": MEANING}
