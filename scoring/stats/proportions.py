"""Proportions with honest intervals, for audits: binomial CIs (Wilson, Clopper–Pearson), cluster-aware
estimates (snippets of one document are not independent), and the FPR correction of an observed flag rate.

The correction: a detector with true-positive rate t and false-positive rate f at its threshold flags a share
r = π·t + (1 − π)·f of a corpus whose true member share is π, so π = (r − f) / (t − f). r, t and f are all
estimates, so the interval propagates all three, clipped to [0, 1], in two readings:

- this corpus (finite): the audited documents are fixed, so the only noise in r is how far each document's flag
  rate strays from t (member) or f (non-member). That spread is measured on the calibration documents, and
  Var r ≈ Σ_d w_d² · (π s_t² + (1 − π) s_f²) with w_d the documents' snippet weights. Delta method.
- a population the corpus was sampled from: a cluster bootstrap that also resamples the audited documents
  (wider: it adds the spread of π itself between samples).
"""
from __future__ import annotations

import math
from statistics import NormalDist
from typing import Sequence

import numpy as np


def _z(alpha: float) -> float:
    return NormalDist().inv_cdf(1 - alpha / 2)


def wilson_ci(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (good coverage near 0 and 1, unlike the Wald one)."""
    if n <= 0:
        return (float("nan"), float("nan"))
    z, p = _z(alpha), k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At k = 0 (k = n) the bound is exactly 0 (1); say so rather than leave a 1e-17 rounding residue.
    return (0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half))


def clopper_pearson_ci(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Exact (conservative) binomial interval from Beta quantiles."""
    from scipy.stats import beta

    if n <= 0:
        return (float("nan"), float("nan"))
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return (lo, hi)


CI_METHODS = {"wilson": wilson_ci, "clopper-pearson": clopper_pearson_ci}


def binomial_ci(k: int, n: int, method: str = "wilson", alpha: float = 0.05) -> tuple[float, float]:
    if method not in CI_METHODS:
        raise ValueError(f"unknown CI method {method!r}: use {' or '.join(CI_METHODS)}")
    return CI_METHODS[method](int(k), int(n), alpha)


def binomial_cis(k: np.ndarray, n: np.ndarray, method: str = "wilson",
                 alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """`binomial_ci` over arrays of counts at once (an audit has one interval per document: a Python call per
    document held a tuple per document in the driver). Same arithmetic as the scalar functions above."""
    if method not in CI_METHODS:
        raise ValueError(f"unknown CI method {method!r}: use {' or '.join(CI_METHODS)}")
    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    lo, hi = np.full(k.shape, np.nan), np.full(k.shape, np.nan)
    ok = n > 0
    k, n = k[ok], n[ok]
    if method == "wilson":
        z = _z(alpha)
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
        lo[ok] = np.where(k == 0, 0.0, np.maximum(0.0, centre - half))
        hi[ok] = np.where(k == n, 1.0, np.minimum(1.0, centre + half))
    else:
        from scipy.stats import beta

        with np.errstate(invalid="ignore", divide="ignore"):  # k = 0 / k = n are set exactly below
            lo[ok] = np.where(k == 0, 0.0, beta.ppf(alpha / 2, k, n - k + 1))
            hi[ok] = np.where(k == n, 1.0, beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def fpr_corrected(r: float, t: float, f: float) -> float:
    """π = (r − f)/(t − f), clipped to [0, 1]; NaN when the detector does not beat chance (t ≤ f)."""
    if not (t - f > 0):
        return float("nan")
    return float(min(1.0, max(0.0, (r - f) / (t - f))))


def cluster_proportion(flags: Sequence[int], clusters: Sequence[object]) -> tuple[float, float, int]:
    """(share flagged, its cluster-robust variance, number of clusters). The share is Σ flags / n; the variance
    treats clusters (documents) as the independent units: n_c/(n_c − 1) · Σ_c (y_c − p·m_c)² / (Σ m_c)².
    With one item per cluster it is p(1 − p)/(n − 1)."""
    y, m = _cluster_sums(flags, clusters)
    n_c = y.size
    if n_c == 0:
        return float("nan"), float("nan"), 0
    p = float(y.sum() / m.sum())
    var = float(n_c / (n_c - 1) * np.sum((y - p * m) ** 2) / m.sum() ** 2) if n_c > 1 else float("nan")
    return p, var, n_c


def _cluster_sums(flags, clusters) -> tuple[np.ndarray, np.ndarray]:
    flags = np.asarray(flags, dtype=np.float64)
    c = np.asarray(clusters)
    # Integer codes (the audit job's, assigned in sorted id order) are grouped as they are; anything else by its
    # string form. Both order clusters by id, so a bootstrap draws the same documents either way.
    c = c if c.dtype.kind in "iu" else np.asarray([str(x) for x in c], dtype=object)
    _, inv = np.unique(c, return_inverse=True)
    y = np.bincount(inv, weights=flags) if flags.size else np.zeros(0)
    m = np.bincount(inv).astype(np.float64) if flags.size else np.zeros(0)
    return y, m


def between_document_variance(rates: Sequence[float], fallback_rate: float) -> float:
    """Spread of per-document flag rates among calibration documents of one class (ddof 1). With one-snippet
    documents (benchmark examples) this is about p(1 − p); with fewer than 2 documents fall back to that."""
    r = np.asarray(rates, dtype=np.float64)
    if r.size < 2:
        return float(fallback_rate * (1 - fallback_rate))
    return float(np.var(r, ddof=1))


def finite_corpus_var_r(pi: float, s2_member: float, s2_non_member: float, weights: Sequence[float]) -> float:
    """Var of the observed flag share r of a fixed corpus: Σ w_d² (π s_t² + (1 − π) s_f²), w_d = snippets of
    document d / all snippets, π clipped to [0, 1] (document memberships are unknown, so their mix is)."""
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    pi = min(1.0, max(0.0, pi)) if np.isfinite(pi) else 0.5
    return float(np.sum(w * w) * (pi * s2_member + (1 - pi) * s2_non_member))


def satterthwaite_df(components: Sequence[float], dfs: Sequence[float]) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of variance estimates: (Σ v)² / Σ (v² / df)."""
    v = np.asarray(components, dtype=np.float64)
    d = np.asarray(dfs, dtype=np.float64)
    keep = (v > 0) & (d > 0)
    if not keep.any():
        return float("inf")
    return float(v[keep].sum() ** 2 / np.sum(v[keep] ** 2 / d[keep]))


def fpr_corrected_delta_ci(r: float, var_r: float, t: float, var_t: float, f: float, var_f: float,
                           alpha: float = 0.05, df: float | None = None) -> tuple[float, float]:
    """Delta-method interval for π = (r − f)/(t − f): Var π ≈ [Var r + π² Var t + (1 − π)² Var f] / (t − f)²,
    using the unclipped π; the interval is then clipped to [0, 1]. With `df` the critical value is Student's t
    (the variances come from a handful of calibration documents), else the normal one."""
    d = t - f
    if not d > 0 or not all(np.isfinite([var_r, var_t, var_f])):
        return (float("nan"), float("nan"))
    pi = (r - f) / d
    se = math.sqrt(var_r + pi * pi * var_t + (1 - pi) ** 2 * var_f) / d
    if df is not None and np.isfinite(df):
        from scipy.stats import t as student_t

        crit = float(student_t.ppf(1 - alpha / 2, max(df, 1.0)))
    else:
        crit = _z(alpha)
    return (float(min(1.0, max(0.0, pi - crit * se))), float(min(1.0, max(0.0, pi + crit * se))))


def resampled_rows(rng: np.random.Generator, n: int, size: int, per_row, budget: int = 1 << 20) -> np.ndarray:
    """`per_row(idx)` over n bootstrap resamples of `size` indices, drawn in blocks of ≤ `budget` indices: the
    same numbers as one [n, size] draw (a Generator's stream does not depend on how the draw is cut), without the
    n × size array (1000 resamples of 160k documents were 1.3 GB per array)."""
    step = max(1, budget // max(1, size))
    return np.concatenate([per_row(rng.integers(0, size, size=(min(step, n - b), size)))
                           for b in range(0, n, step)]) if n else np.zeros(0)


def _boot_shares(flags, clusters, idx_rng: np.random.Generator, n: int) -> np.ndarray:
    y, m = _cluster_sums(flags, clusters)
    return resampled_rows(idx_rng, n, y.size, lambda idx: y[idx].sum(1) / m[idx].sum(1))


def fpr_corrected_bootstrap_ci(target: tuple[Sequence[int], Sequence[object]],
                               members: tuple[Sequence[int], Sequence[object]],
                               non_members: tuple[Sequence[int], Sequence[object]],
                               n: int = 2000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Percentile interval of π from a cluster bootstrap that resamples target documents, calibration members
    and calibration non-members independently (each given as (flags, cluster ids)). The threshold stays fixed.
    Resamples where t ≤ f are counted in `n_degenerate` and left out."""
    rng = np.random.default_rng(seed)
    r = _boot_shares(*target, rng, n)
    t = _boot_shares(*members, rng, n)
    f = _boot_shares(*non_members, rng, n)
    ok = (t - f) > 0
    pi = np.clip((r[ok] - f[ok]) / (t[ok] - f[ok]), 0.0, 1.0)
    if not pi.size:
        return {"ci": [float("nan"), float("nan")], "n": n, "n_degenerate": int((~ok).sum())}
    lo, hi = np.quantile(pi, [alpha / 2, 1 - alpha / 2])
    return {"ci": [float(lo), float(hi)], "n": n, "n_degenerate": int((~ok).sum())}


def bootstrap_mean_ci(values: Sequence[float], n: int = 2000, seed: int = 0, alpha: float = 0.05) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean (e.g. the mean contamination rate over documents)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not v.size:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = resampled_rows(rng, n, v.size, lambda idx: v[idx].mean(1))
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return (float(lo), float(hi))
