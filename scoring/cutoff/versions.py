"""The *versions* estimator: which month's versions of the same documents does the model find most familiar?

Dated Data (Cheng et al., COLM 2024) scores every monthly version of the same Wikipedia articles: a model trained
on a snapshot of month M has seen the month-M versions (and, less, the versions near it), so their perplexity is
lowest. A resource's own difficulty is the same in all its versions, so scores are normalised within each
`group` (one resource): each score minus the group's mean over its months (`center`, the log-perplexity analogue
of Dated Data's per-document normalisation), or also divided by the group's spread (`zscore`; a group whose
versions all score alike then carries no weight). The curve is the mean normalised score per month over the
groups that have a version that month; larger = more familiar, since every detector's score is larger for members.

- **cutoff**: the month with the highest mean normalised score (Dated Data's effective cutoff: the lowest
  normalised perplexity).
- **cutoff_ci**: groups are resampled with replacement; the CI is the percentile interval of the resampled
  curves' best months, widened to bracket the estimate. The per-month band is the percentile interval of each
  month's resampled mean.
- **p_no_cutoff**: a permutation test of "no month's versions are more familiar than the others": within every
  group, its scores are shuffled across its months, B times. The statistic is the largest month's t: its mean
  normalised score over that mean's standard error across groups, so that a month whose scores spread more (a
  month few groups have; the ends of a range of chained versions, each month's an edit of the last) does not
  stand out for its spread alone. Against chained versions the shuffle stays at its rate or below (adjacent
  months move together; tests/scoring/cutoff/test_versions.py measures a random walk of versions).
  p = (1 + #{S* ≥ S}) / (B + 1). The cutoff itself stays the month of the highest mean (Dated Data's definition).

What it cannot tell apart: a month whose versions are easier for *every* model (later versions of an article are
often longer and more polished) from a month the model read. A most-familiar month at the range's last month is
what such a drift gives; a reference model (`--ref-model`, differential scores) removes it.
"""
from __future__ import annotations

import numpy as np

from scoring.cutoff.breakpoint import CutoffSettings, percentile_interval
from scoring.cutoff.periods import month_label

ESTIMATOR = "versions"
NORMALISATIONS = ("center", "zscore")


def version_matrix(groups, months, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group × month matrix of scores, NaN where a group has no version that month; the months; the group keys).
    Two rows of one group in one month are averaged."""
    groups = np.asarray(groups, dtype=object)
    months = np.asarray(months, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    keep = np.isfinite(scores)
    groups, months, scores = groups[keep], months[keep], scores[keep]
    g_keys, g_idx = np.unique(groups.astype(str), return_inverse=True)
    m_keys, m_idx = np.unique(months, return_inverse=True)
    total = np.zeros((g_keys.size, m_keys.size))
    count = np.zeros_like(total)
    np.add.at(total, (g_idx, m_idx), scores)
    np.add.at(count, (g_idx, m_idx), 1.0)
    with np.errstate(invalid="ignore"):
        return np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan), m_keys, g_keys


def normalise(matrix: np.ndarray, how: str = "center") -> np.ndarray:
    """Scores minus each group's mean over its months (and, for zscore, over its standard deviation; a group whose
    versions score alike becomes all zeros)."""
    if how not in NORMALISATIONS:
        raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {how!r}")
    out = matrix - np.nanmean(matrix, axis=1, keepdims=True)
    if how == "zscore":
        sd = np.nanstd(matrix, axis=1, keepdims=True)
        out = np.where(sd > 0, out / np.where(sd > 0, sd, 1.0), 0.0) * np.isfinite(matrix)
        out[~np.isfinite(matrix)] = np.nan
    return out


def _curve(z: np.ndarray) -> np.ndarray:
    """The mean normalised score per month; NaN for a month no group has (a resample may draw none that has it)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(z, axis=-2)


def _studentized(sums: np.ndarray, sumsq: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """max over months of each month's mean normalised score over its standard error (sums and sums of squares
    over groups, per month; the last axis is the month)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums / counts
        var = (sumsq - counts * mean * mean) / (counts - 1)
        t = mean / np.sqrt(np.maximum(var, 0.0) / counts)
    t = np.where((counts > 1) & np.isfinite(t), t, -np.inf)
    return t.max(axis=-1)


def statistic_of(z: np.ndarray) -> float:
    present = np.isfinite(z)
    return float(_studentized(np.nansum(z, axis=0), np.nansum(z * z, axis=0), present.sum(axis=0)))


def permutation_p(z: np.ndarray, statistic: float, settings: CutoffSettings) -> float:
    """p of S >= statistic with every group's scores shuffled across its own months (module docstring)."""
    present = np.isfinite(z)
    counts = present.sum(axis=0)
    patterns, which = np.unique(present, axis=0, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    rng = np.random.default_rng([settings.seed, 3])
    hits, done = 0, 0
    cells = max(1, int(present.sum()))
    chunk = max(1, 4_000_000 // cells)
    while done < settings.permutations:
        k = min(chunk, settings.permutations - done)
        sums, sumsq = np.zeros((k, z.shape[1])), np.zeros((k, z.shape[1]))
        for p, pattern in enumerate(patterns):
            cols = np.flatnonzero(pattern)
            block = z[which == p][:, cols]  # groups with this set of months: shuffle among those months
            shuffled = rng.permuted(np.broadcast_to(block, (k, *block.shape)), axis=2)
            sums[:, cols] += shuffled.sum(axis=1)
            sumsq[:, cols] += (shuffled * shuffled).sum(axis=1)
        hits += int(np.sum(_studentized(sums, sumsq, counts) >= statistic - 1e-9))
        done += k
    return (1 + hits) / (settings.permutations + 1)


def estimate_versions(groups, months, scores, settings: CutoffSettings = CutoffSettings(),
                      normalisation: str = "center") -> dict:
    """The versions answer for one detector's scores (larger = member) of group × month versions."""
    matrix, m_keys, _ = version_matrix(groups, months, scores)
    usable = np.isfinite(matrix).sum(axis=1) >= 2  # a group seen in one month says nothing about familiarity
    z = normalise(matrix[usable], normalisation)
    n_groups = int(usable.sum())
    base = {"estimator": ESTIMATOR, "normalisation": normalisation, "groups": n_groups,
            "groups_single_month": int((~usable).sum()), "months": int(m_keys.size),
            "rows": int(np.isfinite(matrix[usable]).sum()), "cutoff": None, "cutoff_ci": None,
            "p_no_cutoff": None, "best_break": None, "alpha": settings.alpha}
    if n_groups < 2 or m_keys.size < 2:
        return {**base, "per_period": [], "not_tested": (
            f"{n_groups} group(s) with versions in two or more months over {m_keys.size} month(s); the versions "
            "estimator needs at least 2 of each")}
    curve = _curve(z)
    best = int(np.nanargmax(curve))
    statistic = statistic_of(z)
    p = permutation_p(z, statistic, settings)
    rng = np.random.default_rng([settings.seed, 4])
    boot_curves = np.empty((settings.bootstrap, m_keys.size))
    for s in range(0, settings.bootstrap, 256):
        k = min(256, settings.bootstrap - s)
        pick = rng.integers(0, n_groups, size=(k, n_groups))
        boot_curves[s:s + k] = _curve(z[pick])
    finite = np.isfinite(boot_curves)
    best_b = np.nanargmax(np.where(finite, boot_curves, -np.inf), axis=1)
    lo, hi = percentile_interval(m_keys[best_b], settings.level)
    ci = [month_label(min(int(lo), int(m_keys[best]))), month_label(max(int(hi), int(m_keys[best])))]
    band_lo, band_hi = (np.nanquantile(boot_curves, q, axis=0, method=meth) for q, meth in
                        (((1 - settings.level) / 2, "lower"), ((1 + settings.level) / 2, "higher")))
    n_per = np.isfinite(z).sum(axis=0)
    per_period = [{"period": month_label(m), "n": int(n), "score": float(c), "ci_low": float(a), "ci_high": float(b)}
                  for m, n, c, a, b in zip(m_keys, n_per, curve, band_lo, band_hi)]
    edge = best in (0, m_keys.size - 1)
    out = {**base, "p_no_cutoff": p, "statistic": statistic, "permutations": settings.permutations,
           "bootstrap": settings.bootstrap, "best_break": month_label(m_keys[best]), "best_break_ci": ci,
           "at_range_edge": edge, "per_period": per_period}
    if p < settings.alpha:
        out.update(cutoff=month_label(m_keys[best]), cutoff_ci=ci)
    return out
