"""The canary test's statistics: do planted canaries score as more member-like than held-out ones?

One-sided Mann-Whitney U (planted > held-out, larger score = more member-like): exact for small sets without ties,
the normal approximation with tie and continuity corrections otherwise (scipy's implementation). Because the
roles were assigned by a seeded coin before publication, under the null (the model never saw the planted half)
every assignment is equally likely and P(p <= alpha) <= alpha: the p-value is the false-positive rate.
Several sets combine by Fisher's method (independent sets, independent coins).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def planted_vs_holdout(planted: Sequence[float], holdout: Sequence[float]) -> dict:
    """{u, p_value, auc, method, n_plant, n_holdout} for the one-sided test planted > held-out."""
    from scipy.stats import mannwhitneyu

    a, b = np.asarray(planted, dtype=np.float64), np.asarray(holdout, dtype=np.float64)
    if not a.size or not b.size:
        raise ValueError("both roles need at least one scored canary")
    ties = np.unique(np.concatenate([a, b])).size < a.size + b.size
    method = "exact" if a.size * b.size <= 2500 and not ties else "asymptotic"
    res = mannwhitneyu(a, b, alternative="greater", method=method)
    return {"u": float(res.statistic), "p_value": float(res.pvalue), "auc": float(res.statistic) / (a.size * b.size),
            "method": method, "n_plant": int(a.size), "n_holdout": int(b.size)}


def combined_p(p_values: Sequence[float]) -> dict:
    """Fisher's combination of independent sets' p-values."""
    from scipy.stats import combine_pvalues

    res = combine_pvalues(list(p_values), method="fisher")
    return {"method": "fisher", "statistic": float(res.statistic), "p_value": float(res.pvalue)}
