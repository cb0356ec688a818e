"""Blind-baseline shift audit: how well can a classifier that never sees the model tell members from non-members?

Das et al. (2024) showed that bag-of-words and date detection alone separate the members and non-members of
published membership benchmarks (AUC ≈0.99 on WikiMIA). Such a benchmark measures distribution shift, not
membership, so every release carries this audit and `evaluate` shows the blind AUC next to each detector's AUC.

Three blind classifiers, each an sklearn Pipeline fitted inside every cross-validation fold (so vocabularies,
IDF weights and year one-hots come from training folds only):

- ``bow``: TF-IDF word 1–2-grams + char_wb 3–5-grams, logistic regression;
- ``dates``: years / full dates / month names mentioned in the text (and their position relative to the cutoff);
- ``format``: length and formatting statistics (characters, words, punctuation, digits, case…), gradient boosting.

Scores are out-of-fold P(member), so larger = member like every detector. The headline blind AUC (overall and
per bucket) is the best of the three; taking a max over three classifiers is slightly optimistic, which errs on
the side of warning about a benchmark. Folds are stratified and grouped: items that share a group (the windows
of one document, or WikiMIA truncations that share a 32-word prefix) never straddle train and test folds.

Pure CPU + sklearn; no Ray, no LM. What the dates/format classifiers read: features.py; benchmarks and
releases: release.py; the report files: report.py.
"""
from __future__ import annotations

import math
import re
import sys
from collections import Counter
from typing import Any, Iterable, Sequence

import numpy as np

from curation.shift.features import date_feature_dicts, format_features, years_in
from curation.shift.bow import FoldTfidf, ngram_counts

CLASSIFIERS = ("bow", "dates", "format")
FLAG_AUC = 0.60  # same default as the debias target: above it, a blind classifier finds a usable shift
OVERALL = "all"
AUDIT_DEFAULTS: dict[str, Any] = {"enabled": True, "n_folds": 5, "n_bootstrap": 1000, "group_prefix_words": 32,
                                  "max_rows": 20_000}

# --------------------------------------------------------------------------------------------------------------
# Pipelines (module-level functions so they pickle)
# --------------------------------------------------------------------------------------------------------------
def _as_list(x) -> list[str]:
    return [str(t) for t in x]


def make_pipeline(name: str, *, cutoff_year: int | None = None, seed: int = 0, bow_blocks: Sequence = ()):
    """A fresh, unfitted sklearn Pipeline for one blind classifier. Everything data-dependent sits inside it.
    `bow` takes the n-gram count rows of `curation.shift.bow.ngram_counts` (its column `bow_blocks`); the others, texts."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer, MaxAbsScaler

    if name == "bow":
        return Pipeline([
            # TF-IDF of word 1–2-grams and char_wb 3–5-grams (curation/shift/bow.py VECTORISERS), fitted per fold.
            ("tfidf", FoldTfidf(bow_blocks)),
            # C=10: TF-IDF rows are unit-norm, so the default C=1 underfits small benchmarks badly.
            ("lr", LogisticRegression(C=10.0, max_iter=2000, solver="liblinear")),
        ])
    if name == "dates":
        return Pipeline([
            ("feat", FunctionTransformer(date_feature_dicts, kw_args={"cutoff_year": cutoff_year})),
            ("vec", DictVectorizer()),
            ("scale", MaxAbsScaler()),
            ("lr", LogisticRegression(C=1.0, max_iter=2000, solver="liblinear")),
        ])
    if name == "format":
        return Pipeline([
            ("feat", FunctionTransformer(format_features)),
            # Shallow, few trees: a handful of numeric features, often a few hundred rows.
            ("gb", HistGradientBoostingClassifier(max_iter=100, learning_rate=0.05, max_leaf_nodes=8,
                                                  min_samples_leaf=10, early_stopping=False, random_state=seed)),
        ])
    raise ValueError(f"unknown blind classifier {name!r}; choose from {CLASSIFIERS}")


# --------------------------------------------------------------------------------------------------------------
# Folds and cross-validation
# --------------------------------------------------------------------------------------------------------------
def prefix_groups(texts: Sequence[str], n_words: int = 32) -> np.ndarray:
    """Group ids: texts that share their first `n_words` (lowercased, whitespace-split) words share a group.
    WikiMIA's length files hold truncations of one text; without this they would straddle folds and leak."""
    keys: dict[str, int] = {}
    return np.array([keys.setdefault(" ".join(t.lower().split()[:n_words]), len(keys)) for t in texts])


def _folds(y: np.ndarray, groups: np.ndarray | None, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    if groups is None:
        per_class = min(int(y.sum()), int((1 - y).sum()))
    else:  # a group counts for a class if it holds any item of it
        per_class = min(len(set(groups[y == 1])), len(set(groups[y == 0])))
    k = min(n_folds, per_class)
    if k < 2:
        raise ValueError(f"need at least 2 members and 2 non-members (or groups of them) to cross-validate; "
                         f"got {int(y.sum())} members, {int((1 - y).sum())} non-members")
    X = np.zeros((y.size, 1))
    if groups is None:
        return list(StratifiedKFold(k, shuffle=True, random_state=seed).split(X, y))
    return list(StratifiedGroupKFold(k, shuffle=True, random_state=seed).split(X, y, groups))


def cross_val_scores(texts: Sequence[str], labels, groups=None, *, classifiers: Sequence[str] = CLASSIFIERS,
                     cutoff_year: int | None = None, n_folds: int = 5, seed: int = 0,
                     progress: bool = True) -> tuple[dict[str, np.ndarray], int]:
    """Out-of-fold P(member) per blind classifier, and the number of folds used. Each fold fits a fresh Pipeline
    on the training part only."""
    from threadpoolctl import threadpool_limits
    from tqdm.auto import tqdm

    texts = np.asarray(_as_list(texts), dtype=object)
    inputs, blocks = {}, ()
    if "bow" in classifiers:
        inputs["bow"], blocks = ngram_counts(list(texts))  # per-text counts, once for every fold (curation/shift/bow.py)
    y = np.asarray(labels, dtype=np.int64)
    g = None if groups is None else np.asarray(groups)
    folds = _folds(y, g, n_folds, seed)
    oof = {c: np.full(y.size, np.nan) for c in classifiers}
    bar = tqdm(total=len(classifiers) * len(folds), desc="blind CV", file=sys.stderr, disable=not progress,
               leave=False)
    # One thread for BLAS/OpenMP: the models are small, and on a shared or busy machine OpenMP thread contention
    # in HistGradientBoosting made single folds 5x slower than running serially.
    with threadpool_limits(limits=1):
        for name in classifiers:
            for tr, te in folds:
                model = make_pipeline(name, cutoff_year=cutoff_year, seed=seed, bow_blocks=blocks)
                X = inputs.get(name)
                model.fit(list(texts[tr]) if X is None else X[tr], y[tr])
                oof[name][te] = model.predict_proba(list(texts[te]) if X is None else X[te])[:, 1]
                bar.update(1)
    bar.close()
    return oof, len(folds)


# --------------------------------------------------------------------------------------------------------------
# Metrics (scoring.stats.metrics is the single implementation; this only adds "no bootstrap" for inner loops)
# --------------------------------------------------------------------------------------------------------------
def _metric_record(y: np.ndarray, s: np.ndarray, n_bootstrap: int, seed: int) -> dict[str, Any]:
    from scoring.stats import metrics

    if n_bootstrap > 0:
        return metrics.summarize(y, s, n_bootstrap=n_bootstrap, seed=seed)
    return {
        "n": int(y.size), "n_member": int(y.sum()), "auc": metrics.roc_auc(y, s), "auc_ci": [math.nan, math.nan],
        "tpr_at_1_fpr": metrics.tpr_at_fpr(y, s, 0.01), "tpr_at_5_fpr": metrics.tpr_at_fpr(y, s, 0.05),
    }


def _best(y: np.ndarray, oof: dict[str, np.ndarray], mask: np.ndarray) -> tuple[str, dict[str, float]]:
    from scoring.stats.metrics import roc_auc

    aucs = {c: roc_auc(y[mask], s[mask]) for c, s in oof.items()}
    finite = {c: a for c, a in aucs.items() if not math.isnan(a)}
    return (max(finite, key=finite.get) if finite else next(iter(aucs))), aucs


def _bucket_key(b) -> str:
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return OVERALL
    return str(int(b)) if isinstance(b, (int, np.integer)) or (isinstance(b, float) and b.is_integer()) else str(b)


def _sort_buckets(keys: Iterable[str]) -> list[str]:
    return sorted(keys, key=lambda k: (0, float(k), k) if re.fullmatch(r"-?\d+(\.\d+)?", k) else (1, 0.0, k))


def summarise_scores(labels, oof: dict[str, np.ndarray], buckets=None, *, n_bootstrap: int = 1000,
                     seed: int = 0, flag_auc: float = FLAG_AUC) -> dict[str, Any]:
    """The shift_audit.json dict (less top_features) from out-of-fold scores."""
    y = np.asarray(labels, dtype=np.int64)
    every = np.ones(y.size, dtype=bool)

    def record(mask: np.ndarray) -> dict[str, Any]:
        name, aucs = _best(y, oof, mask)
        rec = _metric_record(y[mask], oof[name][mask], n_bootstrap, seed)
        rec["classifier"] = name
        rec["classifiers"] = aucs
        return rec

    result: dict[str, Any] = {"overall": record(every), "buckets": {}}
    if buckets is not None:
        keys = np.array([_bucket_key(b) for b in buckets], dtype=object)
        for k in _sort_buckets(set(keys)):
            result["buckets"][k] = record(keys == k)
    auc = result["overall"]["auc"]
    result["flag_auc"] = flag_auc
    result["flagged"] = bool(auc > flag_auc) if not math.isnan(auc) else False
    result["max_bucket_auc"] = max([r["auc"] for r in result["buckets"].values() if not math.isnan(r["auc"])],
                                   default=auc)
    return result


# --------------------------------------------------------------------------------------------------------------
# Most separating features
# --------------------------------------------------------------------------------------------------------------
def top_features(texts: Sequence[str], labels, *, k: int = 15, k_years: int = 10, min_docs: int = 3
                 ) -> list[dict[str, Any]]:
    """The n-grams and years that separate the classes most, for the report. Interpretation only: the word model
    here is fitted on all rows, so its weights are not an estimate of anything; the AUCs come from CV."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    texts = _as_list(texts)
    y = np.asarray(labels, dtype=np.int64)
    out: list[dict[str, Any]] = []
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=min_docs, sublinear_tf=True, token_pattern=r"(?u)\b\w+\b")
    try:
        X = vec.fit_transform(texts)
    except ValueError:  # empty vocabulary (tiny inputs)
        X = None
    if X is not None and X.shape[1]:
        coef = LogisticRegression(C=10.0, max_iter=2000, solver="liblinear").fit(X, y).coef_[0]
        names = vec.get_feature_names_out()
        present = (X > 0).astype(np.int64)
        m_docs = np.asarray(present[y == 1].sum(axis=0)).ravel()
        n_docs = np.asarray(present[y == 0].sum(axis=0)).ravel()
        order = np.argsort(coef)
        for idx in list(order[::-1][:k]) + list(order[:k]):
            out.append({"feature": str(names[idx]), "kind": "ngram", "weight": float(coef[idx]),
                        "direction": "member" if coef[idx] > 0 else "non-member",
                        "member_docs": int(m_docs[idx]), "nonmember_docs": int(n_docs[idx])})
    # Years: smoothed log-odds of "mentions year Y" between classes; readable on its own, unlike a coefficient.
    n_m, n_n = max(int(y.sum()), 1), max(int((1 - y).sum()), 1)
    cm: Counter = Counter()
    cn: Counter = Counter()
    for t, lab in zip(texts, y):
        (cm if lab == 1 else cn).update(set(years_in(t)))
    rows = []
    for yr in set(cm) | set(cn):
        if cm[yr] + cn[yr] < min_docs:
            continue
        lo = math.log((cm[yr] + 0.5) / (n_m + 1)) - math.log((cn[yr] + 0.5) / (n_n + 1))
        rows.append({"feature": str(yr), "kind": "year", "weight": lo,
                     "direction": "member" if lo > 0 else "non-member",
                     "member_docs": int(cm[yr]), "nonmember_docs": int(cn[yr])})
    rows.sort(key=lambda r: -abs(r["weight"]))
    return out + rows[:k_years]


# --------------------------------------------------------------------------------------------------------------
# The audit
# --------------------------------------------------------------------------------------------------------------
def run_audit(texts: Sequence[str], labels, buckets=None, groups=None, *, cutoff_year: int | None = None,
              n_folds: int = 5, seed: int = 0, n_bootstrap: int = 1000, group_prefix_words: int | None = 32,
              with_features: bool = True, progress: bool = True, flag_auc: float = FLAG_AUC,
              classifiers: Sequence[str] = CLASSIFIERS) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """`audit_rows` plus the out-of-fold scores per classifier (debiasing and document mode need them)."""
    texts = _as_list(texts)
    y = np.asarray(labels, dtype=np.int64)
    if len(texts) != y.size:
        raise ValueError(f"{len(texts)} texts but {y.size} labels")
    if not set(np.unique(y)) <= {0, 1}:
        raise ValueError("labels must be 0 (non-member) or 1 (member)")
    if groups is None and group_prefix_words:
        groups = prefix_groups(texts, group_prefix_words)
        grouping = f"shared {group_prefix_words}-word prefix"
    else:
        grouping = "given groups" if groups is not None else "none"
    oof, k = cross_val_scores(texts, y, groups, classifiers=classifiers, cutoff_year=cutoff_year,
                              n_folds=n_folds, seed=seed, progress=progress)
    result = summarise_scores(y, oof, buckets, n_bootstrap=n_bootstrap, seed=seed, flag_auc=flag_auc)
    result["top_features"] = top_features(texts, y) if with_features else []
    result["config"] = {
        "classifiers": list(classifiers), "n_folds": k, "seed": seed, "n_bootstrap": n_bootstrap,
        "cutoff_year": cutoff_year, "grouping": grouping,
        "n_groups": int(len(set(np.asarray(groups).tolist()))) if groups is not None else len(texts),
        "cv": "StratifiedGroupKFold" if groups is not None else "StratifiedKFold",
        "headline": "max over classifiers of out-of-fold AUC (per bucket and overall)",
    }
    return result, oof


def audit_rows(texts: list[str], labels, buckets=None, groups=None, *, cutoff_year: int | None = None,
               n_folds: int = 5, seed: int = 0, n_bootstrap: int = 1000, group_prefix_words: int | None = 32,
               progress: bool = True, classifiers: Sequence[str] = CLASSIFIERS) -> dict:
    """Blind-baseline audit of a benchmark: the shift_audit.json dict.

    ``{"overall": {auc, auc_ci, tpr_at_1_fpr, tpr_at_5_fpr, n, n_member, classifier, classifiers},
    "buckets": {bucket: {...}}, "top_features": [...], "flagged", "config", ...}``.
    Without `groups`, items sharing a `group_prefix_words`-word prefix are grouped (0/None disables that)."""
    result, _ = run_audit(texts, labels, buckets, groups, cutoff_year=cutoff_year, n_folds=n_folds, seed=seed,
                          n_bootstrap=n_bootstrap, group_prefix_words=group_prefix_words, progress=progress,
                          classifiers=classifiers)
    return result


# --------------------------------------------------------------------------------------------------------------
# Document mode: long texts (books, papers) audited on random fixed-length windows, grouped by document
# --------------------------------------------------------------------------------------------------------------
def make_windows(texts: Sequence[str], *, window_words: int = 512, windows_per_doc: int = 20, seed: int = 0
                 ) -> tuple[list[str], np.ndarray]:
    """Random fixed-length word windows per document, and the index of the document each came from. Windows
    are drawn with distinct start offsets; a document shorter than one window yields itself once."""
    rng = np.random.default_rng(seed)
    out, doc = [], []
    for i, t in enumerate(texts):
        words = str(t).split()
        n_starts = len(words) - window_words + 1
        if n_starts <= 1:
            starts = [0]
        else:
            starts = sorted(rng.choice(n_starts, size=min(windows_per_doc, n_starts), replace=False).tolist())
        for s in starts:
            out.append(" ".join(words[s:s + window_words]))
            doc.append(i)
    return out, np.asarray(doc, dtype=np.int64)


def audit_documents(texts: Sequence[str], labels, buckets=None, *, window_words: int = 512,
                    windows_per_doc: int = 20, cutoff_year: int | None = None, n_folds: int = 5, seed: int = 0,
                    n_bootstrap: int = 1000, progress: bool = True) -> dict:
    """Document mode: the audit on windows (grouped so that one document's windows share a fold), plus a
    document-level AUC from the mean out-of-fold window score per document (valid because of the grouping)."""
    y = np.asarray(labels, dtype=np.int64)
    w_texts, doc = make_windows(texts, window_words=window_words, windows_per_doc=windows_per_doc, seed=seed)
    if buckets is not None:
        doc_buckets = list(buckets)  # once: indexing a fresh list per window would be quadratic
        w_buckets = [doc_buckets[i] for i in doc]
    else:
        w_buckets = None
    result, oof = run_audit(w_texts, y[doc], w_buckets, groups=doc, cutoff_year=cutoff_year, n_folds=n_folds,
                            seed=seed, n_bootstrap=n_bootstrap, progress=progress)
    doc_scores = {}
    for name, s in oof.items():
        sums = np.bincount(doc, weights=s, minlength=y.size)
        doc_scores[name] = sums / np.maximum(np.bincount(doc, minlength=y.size), 1)
    result["documents"] = summarise_scores(y, doc_scores, buckets, n_bootstrap=n_bootstrap, seed=seed)
    result["config"].update({"mode": "document", "window_words": window_words, "windows_per_doc": windows_per_doc,
                             "n_documents": int(y.size), "n_windows": len(w_texts), "grouping": "document"})
    return result
