"""Corpus contamination audits (Shi et al.'s book audit; Ye et al.'s benchmark rates), as Ray-free pieces:

  documents ──► seeded snippets ──► (scored elsewhere, on the actor pool) ──► flags at a calibrated threshold
            ──► per-document rates with binomial CIs, corpus mean, flagged share, FPR-corrected share, evidence.

Snippets of one document share its membership, so every corpus-level interval resamples *documents*
(scoring/stats/proportions.py), never snippets; the per-document binomial CI is the one place snippets are the unit.
The audit's report (Markdown, page and plots) is scoring/reports/audit_report.py's and audit_page.py's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from scoring.stats.metrics import Threshold, calibrate_threshold
from scoring.stats.proportions import (between_document_variance, binomial_ci, binomial_cis, bootstrap_mean_ci,
                                 cluster_proportion, finite_corpus_var_r, fpr_corrected, fpr_corrected_bootstrap_ci,
                                 fpr_corrected_delta_ci, satterthwaite_df)
from scoring.lm.views import stable_seed


# ---- snippets -------------------------------------------------------------------------------------------------
def plan_snippets(doc: Mapping, n: int, words: int, seed: int, whole: bool = False) -> list[dict]:
    """Up to `n` random `words`-word snippets of a document, at distinct start words drawn with a seed that
    depends only on (seed, document id), so a document gets the same snippets whatever else is audited.
    A document no longer than `words` (or any document when `whole`) is one snippet: itself."""
    tokens = doc["text"].split()
    if whole or len(tokens) <= words:
        return [{"doc_id": doc["id"], "index": 0, "start_word": 0, "n_words": len(tokens), "text": " ".join(tokens)}]
    n_starts = len(tokens) - words + 1
    rng = np.random.default_rng(stable_seed(seed, doc["id"]) % (2**63))
    starts = np.sort(rng.choice(n_starts, size=min(n, n_starts), replace=False))
    return [{"doc_id": doc["id"], "index": j, "start_word": int(s), "n_words": words,
             "text": " ".join(tokens[s:s + words])} for j, s in enumerate(starts)]


def chunk_document(doc: Mapping, words: int, min_words: int = 1) -> list[dict]:
    """Consecutive `words`-word chunks (the unlearning audit's unit); a last chunk under `min_words` is dropped."""
    tokens = doc["text"].split()
    out = []
    for j, s in enumerate(range(0, len(tokens), words)):
        part = tokens[s:s + words]
        if len(part) >= min_words or (j == 0 and part):
            out.append({"doc_id": doc["id"], "index": j, "start_word": s, "n_words": len(part), "text": " ".join(part)})
    return out


# ---- calibration -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Calibration:
    threshold: Threshold
    n_members: int
    n_non_members: int
    tpr: float
    fpr: float
    var_tpr: float  # of the calibration estimate t (cluster-robust over documents)
    var_fpr: float
    doc_var_tpr: float  # spread of single member documents' flag rates around t
    doc_var_fpr: float
    n_member_docs: int | None = None  # calibration documents per class: the variances' degrees of freedom
    n_non_member_docs: int | None = None


def calibrate(labels: Sequence[int], scores: Sequence[float], clusters: Sequence[object], objective: str = "accuracy",
              target_fpr: float = 0.05) -> Calibration:
    """Threshold by max accuracy (Shi et al.) or the lowest one at FPR ≤ target; then TPR/FPR at it with
    cluster-robust variances (the correction's inputs). NaN scores are left out."""
    y = np.asarray(labels, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    c = np.asarray([str(x) for x in clusters], dtype=object)
    ok = np.isfinite(s)
    y, s, c = y[ok], s[ok], c[ok]
    if not (0 < y.sum() < y.size):
        raise ValueError(f"calibration needs scored members and non-members; got {int(y.sum())} members, "
                         f"{int((1 - y).sum())} non-members")
    th = calibrate_threshold(y, s, objective=objective, target_fpr=target_fpr)
    flags = s >= th.value
    tpr, var_t, _ = cluster_proportion(flags[y == 1], c[y == 1])
    fpr, var_f, _ = cluster_proportion(flags[y == 0], c[y == 0])
    doc_rates = {cls: _rates_per_cluster(flags[y == cls], c[y == cls]) for cls in (0, 1)}
    return Calibration(th, int(y.sum()), int((1 - y).sum()), tpr, fpr, var_t, var_f,
                       between_document_variance(doc_rates[1], tpr), between_document_variance(doc_rates[0], fpr),
                       len(doc_rates[1]), len(doc_rates[0]))


# ---- aggregation ---------------------------------------------------------------------------------------------
def _rates_per_cluster(flags: np.ndarray, clusters: np.ndarray) -> list[float]:
    """The flag rate of each cluster, in sorted cluster order: one pass (a mask per cluster was O(docs x n))."""
    _, inverse = np.unique(clusters, return_inverse=True)
    return [float(x) for x in np.bincount(inverse, weights=flags) / np.bincount(inverse)]


def document_rates(snippets: Sequence[Mapping], threshold: float, ci_method: str = "wilson",
                   top_k: int = 3) -> list[dict]:
    """Per document: snippets scored, flagged, contamination rate with its binomial CI, and the top-scoring
    snippets as evidence. `snippets` carry doc_id, index, start_word, text, score. (The audit job works on arrays
    with `rates_by_document` and `top_snippets`; this is the same arithmetic over dicts.)"""
    doc_ids = list(dict.fromkeys(s["doc_id"] for s in snippets))
    code_of = {d: i for i, d in enumerate(doc_ids)}
    codes = np.asarray([code_of[s["doc_id"]] for s in snippets], dtype=np.int64)
    scores = np.asarray([s["score"] for s in snippets], dtype=np.float64)
    rates = rates_by_document(codes, scores, threshold, len(doc_ids), ci_method)
    top = top_snippets(codes, scores, top_k)
    out = []
    for i, doc_id in enumerate(doc_ids):
        out.append({"id": doc_id, **{k: rates[k][i].item() for k in ("n_snippets", "n_flagged", "rate", "max_score")},
                    "rate_ci": [rates["rate_lo"][i].item(), rates["rate_hi"][i].item()],
                    "top_snippets": [{"index": snippets[j]["index"], "start_word": snippets[j]["start_word"],
                                      "score": float(scores[j]), "flagged": bool(scores[j] >= threshold),
                                      "text": snippets[j]["text"]} for j in top.get(i, [])]})
    return out


def rates_by_document(codes: np.ndarray, scores: np.ndarray, threshold: float, n_docs: int,
                      ci_method: str = "wilson") -> dict[str, np.ndarray]:
    """Per document code 0..n_docs-1 (every code has at least one snippet): snippets, flagged, rate, its binomial
    CI and the max score, as numpy columns. One pass with bincount; the CIs are vectorised."""
    n = np.bincount(codes, minlength=n_docs)
    k = np.bincount(codes, weights=(scores >= threshold), minlength=n_docs).astype(np.int64)
    finite = np.isfinite(scores)
    best = np.full(n_docs, -np.inf)
    np.maximum.at(best, codes[finite], scores[finite])
    best[~np.isfinite(best)] = np.nan  # a document whose snippets are all NaN has no max
    lo, hi = binomial_cis(k, n, ci_method)
    return {"n_snippets": n, "n_flagged": k, "rate": k / n, "rate_lo": lo, "rate_hi": hi, "max_score": best}


def top_snippets(codes: np.ndarray, scores: np.ndarray, top_k: int, wanted: np.ndarray | None = None) -> dict:
    """{document code: positions of its top_k snippets by score, best first (NaN last, ties in input order)},
    for the `wanted` codes only when given."""
    key = np.where(np.isfinite(scores), -scores, np.inf)
    order = np.lexsort((np.arange(codes.size), key, codes))
    if wanted is not None:
        order = order[np.isin(codes[order], wanted)]
    out: dict[int, list[int]] = {}
    for j in order.tolist():
        group = out.setdefault(int(codes[j]), [])
        if len(group) < top_k:
            group.append(j)
    return out


def corpus_summary(scores: np.ndarray, clusters: np.ndarray, rates: np.ndarray, calib: Calibration, *,
                   benchmark: bool, ci_method: str = "wilson", n_bootstrap: int = 2000, seed: int = 0,
                   calib_flags: tuple | None = None) -> dict:
    """Corpus-level numbers from the scored target snippets (`scores`, their document `clusters`) and the
    per-document `rates`. `calib_flags` = ((member flags, clusters), (non-member flags, clusters)) feeds the
    bootstrap of the FPR-corrected share."""
    th = calib.threshold.value
    flags = (np.asarray(scores, dtype=np.float64) >= th).astype(np.int64)
    clusters = np.asarray(clusters)
    r, var_r, _ = cluster_proportion(flags, clusters)
    rates = np.asarray(rates, dtype=np.float64)
    out: dict = {"n_documents": int(rates.size), "n_snippets": int(flags.size), "flagged_share": r}
    if benchmark:  # one example = one snippet: examples are the independent units
        out["flagged_share_ci"] = list(binomial_ci(int(flags.sum()), int(flags.size), ci_method))
        out["flagged_share_ci_method"] = ci_method
    else:
        has = rates.size > 0
        out["mean_rate"] = float(np.mean(rates)) if has else float("nan")
        out["mean_rate_ci"] = list(bootstrap_mean_ci(rates, n=n_bootstrap, seed=seed))
        out["median_rate"] = float(np.median(rates)) if has else float("nan")
        out["share_of_documents_over_50pct"] = float(np.mean(rates > 0.5)) if has else float("nan")
        z = 1.959963984540054
        se = float(np.sqrt(var_r)) if np.isfinite(var_r) else float("nan")
        out["flagged_share_ci"] = [max(0.0, r - z * se), min(1.0, r + z * se)]
        out["flagged_share_ci_method"] = "normal, cluster-robust over documents"
    est = fpr_corrected(r, calib.tpr, calib.fpr)
    raw = (r - calib.fpr) / (calib.tpr - calib.fpr) if calib.tpr > calib.fpr else float("nan")
    _, sizes = np.unique(clusters, return_counts=True)
    var_fixed = finite_corpus_var_r(raw, calib.doc_var_tpr, calib.doc_var_fpr, sizes)
    df = None
    if calib.n_member_docs and calib.n_non_member_docs and np.isfinite(raw):
        # Every variance here is estimated from the calibration documents of one class: with a handful of them,
        # a normal critical value is too optimistic, so use Student's t with Welch–Satterthwaite df.
        p = min(1.0, max(0.0, raw))
        w2 = float(np.sum((sizes / sizes.sum()) ** 2))
        df = satterthwaite_df([w2 * p * calib.doc_var_tpr, w2 * (1 - p) * calib.doc_var_fpr,
                               p * p * calib.var_tpr, (1 - p) ** 2 * calib.var_fpr],
                              [calib.n_member_docs - 1, calib.n_non_member_docs - 1] * 2)
    corr = {"estimate": est, "observed_rate": r, "tpr": calib.tpr, "fpr": calib.fpr,
            "ci": list(fpr_corrected_delta_ci(r, var_fixed, calib.tpr, calib.var_tpr, calib.fpr, calib.var_fpr,
                                              df=df)),
            "ci_df": df,
            "ci_method": "this corpus: delta method, Student t with Welch–Satterthwaite df; target noise from the "
                         "calibration documents' spread of flag rates, plus the calibration's own uncertainty in t "
                         "and f"}
    if calib_flags is not None:
        boot = fpr_corrected_bootstrap_ci((flags, clusters), calib_flags[0], calib_flags[1], n=n_bootstrap, seed=seed)
        corr["ci_population"] = boot["ci"]
        corr["ci_population_method"] = ("corpus as a sample of a population: cluster bootstrap resampling audited "
                                        "and calibration documents")
        corr["bootstrap_degenerate"] = boot["n_degenerate"]
    if not calib.tpr - calib.fpr > 0:
        corr["note"] = "the detector does not beat chance at this threshold (TPR ≤ FPR): no correction possible"
    out["fpr_corrected"] = corr
    return out
