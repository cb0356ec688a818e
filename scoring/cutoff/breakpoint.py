"""The *new documents* estimator: where does member-likeness step down over time?

Documents written before a model's training cutoff can be in its training data, documents written after cannot, so a
detector's score (larger = more member-like) steps down at the cutoff. Texts also drift (topics, names, length),
and a drift is a slope, not a step: the fit allows a line on each side, so only a *jump* between two lines is read
as a cutoff.

    H0:    score = a + b·month                                        (a trend, no cutoff in the range)
    H1(τ): score = a1 + b1·month for months ≤ τ,  a2 + b2·month after   (a break after month τ, a line each side)

Fitting per-document scores by least squares is fitting the month means weighted by their document counts (the
spread inside a month is the same under both models), so everything below works on month means with weights n_m.
A break is admissible where each side has at least `min_side` months with documents and the fitted score *drops*
across it (the post-break line starts below where the pre-break line ends, at the boundary between the two
months): a rise is not a cutoff. The best break τ̂ minimises the H1 residual sum of squares among admissible
breaks, and the statistic is the share of H0's residual sum of squares it removes, R = 1 − RSS1(τ̂)/RSS0.

- **p_no_cutoff**: a permutation test of H0. The H0 residuals of the month means (scaled by √n_m) are shuffled
  across months, B times; p = (1 + #{R* ≥ R}) / (B + 1). The resampled unit is a month, not a document, so a month
  whose topics make all its documents odd (one news event, one site migration) counts once, as it should: a
  document-level shuffle would treat such a month as strong evidence. Adding any line to the data changes neither
  R nor the sign of a drop, so no trend, fitted or true, can make a step appear.
- **cutoff_ci**: documents are resampled with replacement within their months (the months and their counts stay),
  the break is refitted each time, and the CI is the percentile interval of the refitted break months, widened to
  bracket τ̂. Resamples in which no admissible break exists are counted (`bootstrap_found_share`).
- **per_period**: each month's mean score with the percentile interval of its resampled means.

What it cannot tell apart: a step in the *texts* at some month (a change of source, of filter, of site software)
from a step in the *model*. A reference model (`--ref-model`, differential scores) removes what every model sees.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scoring.cutoff.periods import month_label

ESTIMATOR = "new_documents"


@dataclass(frozen=True)
class CutoffSettings:
    """The estimators' settings (both use `permutations`, `bootstrap`, `alpha`, `level` and `seed`)."""

    min_side: int = 3  # months with documents on each side of a break (new documents)
    permutations: int = 9999  # resamples for p_no_cutoff: p can reach 1/(B+1) = 1e-4
    bootstrap: int = 1000  # resamples for the CIs
    alpha: float = 0.01  # a cutoff is reported where p_no_cutoff < alpha
    level: float = 0.95  # CI level
    seed: int = 0


@dataclass(frozen=True)
class MonthData:
    """Per-document scores grouped by month: the months with documents (sorted), their counts and means, and the
    scores in month order (for resampling)."""

    months: np.ndarray  # int, month_index of each month with documents
    n: np.ndarray  # documents per month
    mean: np.ndarray
    values: np.ndarray  # scores sorted by month
    offsets: np.ndarray  # values[offsets[j]:offsets[j+1]] are month j's

    @classmethod
    def of(cls, months, scores) -> "MonthData":
        months = np.asarray(months, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float64)
        keep = np.isfinite(scores)
        months, scores = months[keep], scores[keep]
        order = np.argsort(months, kind="stable")
        months, scores = months[order], scores[order]
        uniq, start, n = np.unique(months, return_index=True, return_counts=True)
        sums = np.add.reduceat(scores, start) if scores.size else np.zeros(0)
        return cls(uniq, n, sums / np.maximum(n, 1), scores, np.r_[start, scores.size])


def _sums(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> tuple:
    """Prefix sums along the month axis of the weighted least-squares statistics of y (..., T)."""
    wy = w * y
    return (np.cumsum(w), np.cumsum(w * x), np.cumsum(w * x * x), np.cumsum(wy, axis=-1),
            np.cumsum(wy * x, axis=-1), np.cumsum(wy * y, axis=-1))


def _line(sw, sx, sxx, sy, sxy, syy):
    """(intercept, slope, residual sum of squares) of the weighted line through a segment with these sums."""
    xc = sxx - sx * sx / sw
    xyc = sxy - sx * sy / sw
    yc = syy - sy * sy / sw
    with np.errstate(invalid="ignore", divide="ignore"):
        b = np.where(xc > 0, xyc / np.where(xc > 0, xc, 1.0), 0.0)
    a = (sy - b * sx) / sw
    return a, b, np.maximum(yc - b * xyc, 0.0)


def break_scan(x: np.ndarray, w: np.ndarray, y: np.ndarray, min_side: int):
    """For month means y (..., T) at months x with weights w: (R per break, drop per break, RSS0), breaks after
    month j for j in [min_side - 1, T - min_side - 1]. R is 1 - RSS1/RSS0 where the fit drops across the break,
    else 0 (not admissible); drop is the pre-break line minus the post-break line at the boundary."""
    T = x.size
    js = np.arange(min_side - 1, T - min_side)
    pre = _sums(x, w, y)
    total = [s[..., -1:] for s in pre]
    left = [s[..., js] for s in pre]
    right = [t - s for t, s in zip(total, left)]
    a_l, b_l, rss_l = _line(*left)
    a_r, b_r, rss_r = _line(*right)
    _, _, rss0 = _line(*total)
    boundary = (x[js] + x[js + 1]) / 2.0
    drop = (a_l + b_l * boundary) - (a_r + b_r * boundary)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(rss0 > 0, 1.0 - (rss_l + rss_r) / np.where(rss0 > 0, rss0, 1.0), 0.0)
    r = np.where(drop > 0, np.clip(r, 0.0, 1.0), 0.0)
    return js, r, drop, rss0[..., 0]


def _best(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of the best admissible break, whether there is one) along the last axis."""
    j = np.argmax(r, axis=-1)
    return j, np.take_along_axis(r, j[..., None], axis=-1)[..., 0] > 0


def _trend(x, w, y):
    sums = [s[-1] for s in _sums(x, w, y)]
    a, b, _ = _line(*sums)
    return a, b


def permutation_p(data: MonthData, x: np.ndarray, statistic: float, settings: CutoffSettings) -> float:
    """p of R >= statistic under H0, by shuffling H0's scaled month residuals (module docstring)."""
    w = data.n.astype(np.float64)
    a, b = _trend(x, w, data.mean)
    scaled = (data.mean - (a + b * x)) * np.sqrt(w)
    rng = np.random.default_rng([settings.seed, 1])
    hits, done, chunk = 0, 0, max(1, 2_000_000 // max(1, x.size))
    while done < settings.permutations:
        k = min(chunk, settings.permutations - done)
        y = rng.permuted(np.broadcast_to(scaled, (k, x.size)), axis=1) / np.sqrt(w)
        _, r, _, _ = break_scan(x, w, y, settings.min_side)
        hits += int(np.sum(r.max(axis=-1) >= statistic - 1e-12))
        done += k
    return (1 + hits) / (settings.permutations + 1)


def resampled_means(data: MonthData, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, T) month means of documents drawn with replacement within each month."""
    out = np.empty((reps, data.months.size))
    for j in range(data.months.size):
        lo, hi = int(data.offsets[j]), int(data.offsets[j + 1])
        vals = data.values[lo:hi]
        per = max(1, 4_000_000 // max(1, hi - lo))
        for s in range(0, reps, per):
            k = min(per, reps - s)
            out[s:s + k, j] = vals[rng.integers(0, hi - lo, size=(k, hi - lo))].mean(axis=1)
    return out


def percentile_interval(values: np.ndarray, level: float, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    tail = (1.0 - level) / 2.0
    return (np.quantile(values, tail, axis=axis, method="lower"),
            np.quantile(values, 1.0 - tail, axis=axis, method="higher"))


def estimate_break(months, scores, settings: CutoffSettings = CutoffSettings()) -> dict:
    """The new-documents answer for one detector's scores (larger = member) of documents dated by month index."""
    data = MonthData.of(months, scores)
    T, rows = int(data.months.size), int(data.n.sum())
    base = {"estimator": ESTIMATOR, "months": T, "rows": rows, "min_side": settings.min_side, "cutoff": None,
            "cutoff_ci": None, "p_no_cutoff": None, "best_break": None, "alpha": settings.alpha}
    if T < 2 * settings.min_side:
        return {**base, "per_period": _per_period(data, None, None, None), "not_tested": (
            f"{T} month(s) with documents; a break needs at least {settings.min_side} on each side "
            f"({2 * settings.min_side} in all)")}
    x = (data.months - data.months.mean()).astype(np.float64)
    w = data.n.astype(np.float64)
    js, r, drop, _ = break_scan(x, w, data.mean, settings.min_side)
    j, found = _best(r)
    statistic = float(r[j]) if found else 0.0
    p = permutation_p(data, x, statistic, settings) if found else 1.0
    rng = np.random.default_rng([settings.seed, 2])
    boots = resampled_means(data, settings.bootstrap, rng)
    _, r_b, drop_b, _ = break_scan(x, w, boots, settings.min_side)
    j_b, found_b = _best(r_b)
    fit = None
    out = {**base, "p_no_cutoff": p, "statistic": statistic, "permutations": settings.permutations,
           "bootstrap": settings.bootstrap, "bootstrap_found_share": float(found_b.mean())}
    if found:
        brk = int(js[j])
        left_fit, right_fit = _segment_fits(x, w, data.mean, brk)
        fit = np.r_[left_fit, right_fit]
        best = data.months[brk]
        chosen = data.months[js[j_b[found_b]]]
        lo, hi = percentile_interval(chosen, settings.level) if chosen.size else (best, best)
        ci = [month_label(min(int(lo), best)), month_label(max(int(hi), best))]
        d_lo, d_hi = percentile_interval(drop_b[:, j], settings.level)
        out.update(best_break=month_label(best), best_break_ci=ci,
                   drop={"size": float(drop[j]), "ci": [float(d_lo), float(d_hi)],
                         "at": f"between {month_label(best)} and {month_label(data.months[brk + 1])}"})
        if p < settings.alpha:
            out.update(cutoff=month_label(best), cutoff_ci=ci)
    a, b = _trend(x, w, data.mean)
    out["per_period"] = _per_period(data, boots, fit, a + b * x, settings.level)
    return out


def _segment_fits(x, w, y, brk: int) -> tuple[np.ndarray, np.ndarray]:
    """The fitted H1 values at each month: the pre-break line up to month `brk`, the post-break line after."""
    out = []
    for sl in (slice(0, brk + 1), slice(brk + 1, None)):
        a, b = _trend(x[sl], w[sl], y[sl])
        out.append(a + b * x[sl])
    return out[0], out[1]


def _per_period(data: MonthData, boots, fit, trend, level: float = 0.95) -> list[dict]:
    """One record per month with documents: n, mean score and its CI, and where fitted, the H1 fit at the best
    break (`fit`) and the H0 line (`trend`)."""
    lo, hi = percentile_interval(boots, level) if boots is not None else (data.mean, data.mean)
    out = []
    for k, (m, n, s, a, b) in enumerate(zip(data.months, data.n, data.mean, lo, hi)):
        rec = {"period": month_label(m), "n": int(n), "score": float(s), "ci_low": float(a), "ci_high": float(b)}
        if trend is not None:
            rec["trend"] = float(trend[k])
        if fit is not None:
            rec["fit"] = float(fit[k])
        out.append(rec)
    return out
