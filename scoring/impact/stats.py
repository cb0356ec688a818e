"""How much leaked items moved a benchmark score, from per-item scores (1/0 for right/wrong, or a real metric).

Three readings, from weakest assumption to strongest:
- `clean_vs_full`: the score on the clean items next to the score on all of them (lm-eval's decontaminated score).
  Honest, but the clean items are not a random subset: leaked items are often the older, more-quoted, easier ones.
- `gap_test`: leaked items score higher than clean ones, and by how much. A gap is evidence of memorisation only if
  the two groups are equally hard, which the test cannot know.
- `difference_in_differences`: the same gap measured on reference models that cannot have seen the items; what is
  left of the target's gap after subtracting theirs is the part the items' ease does not explain.

Every interval is a percentile bootstrap over items (seeded, so a report reproduces); binary means use Wilson.
Non-finite scores (an item the model was not scored on) are dropped and counted in `n_dropped`.
"""
from __future__ import annotations

import numpy as np

from scoring.stats.proportions import bootstrap_mean_ci, resampled_rows, wilson_ci


def _scores(name: str, values) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    return a


def _mask(name: str, values, n: int) -> np.ndarray:
    a = np.asarray(values)
    if a.ndim != 1 or a.size != n:
        raise ValueError(f"{name} must be a 1-D mask of the {n} items, got shape {a.shape}")
    if a.dtype.kind != "b" and not (a.dtype.kind in "iu" and np.isin(a, (0, 1)).all()):
        raise ValueError(f"{name} must be booleans (or 0/1 integers), got dtype {a.dtype}")
    return a.astype(bool)


def _check_boot(n_boot: int, level: float) -> None:
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")


def _binary(s: np.ndarray) -> bool:
    return bool(np.all((s == 0) | (s == 1)))


def _percentile(values: np.ndarray, level: float) -> list[float] | None:
    if not values.size:
        return None
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return [float(lo), float(hi)]


def _no_gap(n_leaked: int, n_clean: int, n_dropped: int, verb: str, dropped_why: str) -> str:
    """Why a gap is None, with the counts: no scored item at all, or none on one side of it."""
    dropped = f"; {n_dropped:,} items {dropped_why} left out" if n_dropped else ""
    if not n_leaked and not n_clean:
        return f"no item is left to {verb} ({n_dropped:,} items {dropped_why})"
    if not n_leaked:
        return f"no leaked items among the {n_clean:,} scored ones: there is no gap to {verb}{dropped}"
    return f"no clean items: all {n_leaked:,} scored items leaked, there is no gap to {verb}{dropped}"


def mean_ci(scores, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> dict:
    """{mean, ci: [lo, hi], n, n_dropped, method}. Scores all in {0, 1} get the Wilson interval ("wilson": exact
    enough near 0 and 1, no resampling noise); any other scores a percentile bootstrap of the mean ("bootstrap").
    With no finite score: mean, ci and method are None."""
    _check_boot(n_boot, level)
    s = _scores("scores", scores)
    keep = np.isfinite(s)
    s = s[keep]
    out = {"mean": None, "ci": None, "n": int(s.size), "n_dropped": int((~keep).sum()), "method": None}
    if not s.size:
        return out
    if _binary(s):
        lo, hi = wilson_ci(int(s.sum()), int(s.size), alpha=1 - level)
        out["method"] = "wilson"
    else:
        lo, hi = bootstrap_mean_ci(s, n=n_boot, seed=seed, alpha=1 - level)
        out["method"] = "bootstrap"
    out.update(mean=float(s.mean()), ci=[float(lo), float(hi)])
    return out


def clean_vs_full(scores, clean_mask, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> dict:
    """The score on every item next to the score on the clean ones.

    Returns {full_score, clean_score, clean_ci, clean_method, diff, diff_ci, relative_change, n, n_clean,
    n_dropped, reason}: diff = full − clean (positive: the leaked items lift the reported score), relative_change
    = diff / clean (None when clean is 0). diff_ci resamples all items with replacement and recomputes both scores
    on the same resample, so the share of clean items varies as it would between benchmark draws; resamples with no
    clean item are left out (counted in `n_degenerate`). When there are no clean items (or no items at all) the
    clean-side values are None and `reason` says why."""
    _check_boot(n_boot, level)
    s = _scores("scores", scores)
    c = _mask("clean_mask", clean_mask, s.size)
    keep = np.isfinite(s)
    s, c = s[keep], c[keep]
    out = {"full_score": None, "clean_score": None, "clean_ci": None, "clean_method": None, "diff": None,
           "diff_ci": None, "relative_change": None, "n": int(s.size), "n_clean": int(c.sum()),
           "n_dropped": int((~keep).sum()), "n_degenerate": 0, "reason": None}
    if not s.size:
        out["reason"] = f"no scored items (none of the {out['n_dropped']:,} items has a score)"
        return out
    full = float(s.mean())
    out["full_score"] = full
    if not c.any():
        out["reason"] = (f"every scored item is leaked ({s.size:,} of {s.size:,}): there is no clean score to "
                         "compare with")
        return out
    clean = mean_ci(s[c], level=level, n_boot=n_boot, seed=seed)
    diff = full - clean["mean"]
    rng = np.random.default_rng(seed)
    sc, cf = s * c, c.astype(np.float64)
    # per resample: (sum of scores, sum of clean scores, number of clean items)
    sums = resampled_rows(rng, n_boot, s.size,
                          lambda idx: np.stack([s[idx].sum(1), sc[idx].sum(1), cf[idx].sum(1)], axis=1))
    ok = sums[:, 2] > 0
    diffs = sums[ok, 0] / s.size - sums[ok, 1] / sums[ok, 2]
    out.update(clean_score=clean["mean"], clean_ci=clean["ci"], clean_method=clean["method"], diff=float(diff),
               diff_ci=_percentile(diffs, level), n_degenerate=int((~ok).sum()),
               relative_change=float(diff / clean["mean"]) if clean["mean"] != 0 else None)
    return out


def _permutation_p(s: np.ndarray, leaked: np.ndarray, permutations: int, rng: np.random.Generator) -> float:
    """(1 + #{shuffles whose leaked mean ≥ the observed one}) / (permutations + 1). With the group sizes fixed the
    gap is increasing in the leaked group's sum, so the sum is what is compared."""
    n, m = s.size, int(leaked.sum())
    observed = float(s[leaked].sum())
    # A shuffle that picks the observed items sums them in another order: allow for the rounding, or exact ties
    # (which must count) would be lost at random.
    tol = 1e-12 * max(1.0, float(np.abs(s).sum()))
    hits, step = 0, max(1, (1 << 20) // n)  # ≤ 1M floats per block
    for b in range(0, permutations, step):
        rows = rng.permuted(np.broadcast_to(s, (min(step, permutations - b), n)), axis=1)
        hits += int(np.count_nonzero(rows[:, :m].sum(1) >= observed - tol))
    return (1 + hits) / (permutations + 1)


def gap_test(scores, leaked_mask, level: float = 0.95, n_boot: int = 2000, permutations: int = 10000,
             seed: int = 0) -> dict:
    """Do leaked items score higher than clean ones? gap = mean(leaked) − mean(clean).

    Returns {gap, gap_ci, p_value, p_method, mean_leaked, mean_clean, n_leaked, n_clean, n_dropped, reason}.
    - gap_ci: stratified percentile bootstrap (leaked items resampled among leaked, clean among clean: the group
      sizes are fixed by the data, not a random draw).
    - p_value: one-sided, H1 "leaked items score higher", under H0 "the leaked label is unrelated to the score"
      (exchangeable labels). For 0/1 scores it is EXACT: given the margins (n items, K right, m leaked) the number
      of right answers among the leaked items is hypergeometric under every relabelling, and the gap increases with
      it, so p = P(X ≥ x) = hypergeom.sf(x − 1, n, K, m), which is Fisher's exact test, one-sided (p_method
      "exact (hypergeometric)"). It has no floor: strong evidence gives p far below 0.001 (e.g. 45/50 vs 25/50
      right: p ≈ 1e-5). Other scores get a Monte-Carlo permutation test (p_method "permutation"),
      p = (1 + #{shuffled gap ≥ observed}) / (permutations + 1), which never reports less than
      1 / (permutations + 1) (≈ 1e-4 at the default 10,000): raise `permutations` to resolve smaller p.

    With no leaked (or no clean) item there is nothing to compare: gap, gap_ci and p_value are None and `reason`
    says why."""
    _check_boot(n_boot, level)
    if permutations < 1:
        raise ValueError(f"permutations must be at least 1, got {permutations}")
    s = _scores("scores", scores)
    leaked = _mask("leaked_mask", leaked_mask, s.size)
    keep = np.isfinite(s)
    s, leaked = s[keep], leaked[keep]
    n_leaked, n_clean = int(leaked.sum()), int((~leaked).sum())
    out = {"gap": None, "gap_ci": None, "p_value": None, "p_method": None, "mean_leaked": None,
           "mean_clean": None, "n_leaked": n_leaked, "n_clean": n_clean, "n_dropped": int((~keep).sum()),
           "reason": None}
    if not n_leaked or not n_clean:
        out["reason"] = _no_gap(n_leaked, n_clean, out["n_dropped"], "measure", "without a score")
        if n_leaked:
            out["mean_leaked"] = float(s[leaked].mean())
        if n_clean:
            out["mean_clean"] = float(s[~leaked].mean())
        return out
    s_leaked, s_clean = s[leaked], s[~leaked]
    rng = np.random.default_rng(seed)
    boot = (resampled_rows(rng, n_boot, n_leaked, lambda idx: s_leaked[idx].mean(1))
            - resampled_rows(rng, n_boot, n_clean, lambda idx: s_clean[idx].mean(1)))
    if _binary(s):
        from scipy.stats import hypergeom

        x, total = int(s_leaked.sum()), int(s.sum())
        p, method = float(hypergeom.sf(x - 1, s.size, total, n_leaked)), "exact (hypergeometric)"
    else:
        p, method = _permutation_p(s, leaked, permutations, rng), "permutation"
    out.update(gap=float(s_leaked.mean() - s_clean.mean()), gap_ci=_percentile(boot, level), p_value=p,
               p_method=method, mean_leaked=float(s_leaked.mean()), mean_clean=float(s_clean.mean()))
    return out


def difference_in_differences(target, references, leaked_mask, level: float = 0.95, n_boot: int = 2000,
                              seed: int = 0) -> dict:
    """The target's leaked-vs-clean gap minus the reference models' mean gap, on the same items.

    `references` is (n_refs × n_items), the same items in the same order as `target`. did = gap(target) −
    mean_r gap(reference r). Assumption: the references are uncontaminated on these items, so their gap measures
    only how much easier the leaked items are, and that ease would lift the target's gap by as much (a common
    trend, on the score scale: near a ceiling the same ease moves a strong model less). Then did is the part of
    the target's gap that exposure added.

    The CI is a paired, stratified percentile bootstrap over items: each resample draws leaked items among leaked
    and clean among clean, and the same drawn items score every model, so an item's difficulty enters the target
    and the references alike and cancels. (did is the gap of the per-item difference target − mean(references),
    which is what is resampled.)

    Items missing (non-finite) for any model are dropped for all and counted. Returns {did, did_ci, target_gap,
    reference_gap (mean over references), reference_gaps (one per reference), n_leaked, n_clean, n_references,
    n_dropped, reason}; with no leaked or no clean item the gaps are None and `reason` says why."""
    _check_boot(n_boot, level)
    t = _scores("target", target)
    refs = np.asarray(references, dtype=np.float64)
    refs = refs[None, :] if refs.ndim == 1 else refs
    if refs.ndim != 2 or refs.shape[0] < 1:
        raise ValueError(f"references must be (n_refs × n_items) with at least one reference, got {refs.shape}")
    if refs.shape[1] != t.size:
        raise ValueError(f"target has {t.size} items, references {refs.shape[1]}")
    leaked = _mask("leaked_mask", leaked_mask, t.size)
    keep = np.isfinite(t) & np.isfinite(refs).all(0)
    t, refs, leaked = t[keep], refs[:, keep], leaked[keep]
    n_leaked, n_clean = int(leaked.sum()), int((~leaked).sum())
    out = {"did": None, "did_ci": None, "target_gap": None, "reference_gap": None, "reference_gaps": None,
           "n_leaked": n_leaked, "n_clean": n_clean, "n_references": int(refs.shape[0]),
           "n_dropped": int((~keep).sum()), "reason": None}
    if not n_leaked or not n_clean:
        out["reason"] = _no_gap(n_leaked, n_clean, out["n_dropped"], "compare",
                                "without a score from the target and every reference model")
        return out
    target_gap = float(t[leaked].mean() - t[~leaked].mean())
    ref_gaps = refs[:, leaked].mean(1) - refs[:, ~leaked].mean(1)
    d = t - refs.mean(0)
    d_leaked, d_clean = d[leaked], d[~leaked]
    rng = np.random.default_rng(seed)
    boot = (resampled_rows(rng, n_boot, n_leaked, lambda idx: d_leaked[idx].mean(1))
            - resampled_rows(rng, n_boot, n_clean, lambda idx: d_clean[idx].mean(1)))
    out.update(did=target_gap - float(ref_gaps.mean()), did_ci=_percentile(boot, level), target_gap=target_gap,
               reference_gap=float(ref_gaps.mean()), reference_gaps=[float(g) for g in ref_gaps])
    return out
