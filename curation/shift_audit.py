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

Pure CPU + sklearn; no Ray, no LM.
"""
from __future__ import annotations

import functools
import json
import math
import re
import string
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from curation.bow import FoldTfidf, ngram_counts

CLASSIFIERS = ("bow", "dates", "format")
FLAG_AUC = 0.60  # same default as the debias target: above it, a blind classifier finds a usable shift
OVERALL = "all"

# --------------------------------------------------------------------------------------------------------------
# Dates: shared with curation.debias (masking must remove exactly what the date classifier looks at).
# --------------------------------------------------------------------------------------------------------------
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
# A year is 1500–2099 standing alone: not part of a longer number, a decimal, a price, "1,999" or "555-1999"
# ("s" allowed: 1990s; "mid-2024" and "pre-2017" count).
_YEAR = r"(?<![\d$£€.,:/])(?<!\d-)(?:1[5-9]\d\d|20\d\d)(?:s|'s)?(?![\d,.]\d|\d|:\d)"
YEAR_RE = re.compile(_YEAR)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_FULL_DATE = (
    rf"(?:(?:{_MONTHS})\.?\s+{_DAY},?\s+{_YEAR}"  # February 18, 2023
    rf"|{_DAY}\s+(?:{_MONTHS})\.?,?\s+{_YEAR}"  # 18 February 2023
    rf"|(?:{_MONTHS})\.?,?\s+{_YEAR}"  # February 2023
    r"|(?<!\d)(?:1[5-9]|20)\d\d-\d{1,2}-\d{1,2}(?!\d)"  # 2023-02-18
    r"|(?<!\d)\d{1,2}/\d{1,2}/(?:1[5-9]|20)\d\d(?!\d))"  # 02/18/2023
)
FULL_DATE_RE = re.compile(_FULL_DATE, re.IGNORECASE)
MONTH_RE = re.compile(rf"\b(?:{_MONTHS})\b")
# Removing "2024" from "in 2024," would leave "in ,"; the preposition goes with the date.
_PREP = r"(?:\b(?:in|on|of|since|by|during|until|till|from|to|before|after|as of|circa|around|early|late|mid)\s+)?"
DATE_ONLY_RE = re.compile(rf"(?:{_FULL_DATE}|{_YEAR})", re.IGNORECASE)  # for "[DATE]" masking: keeps prepositions
DATE_EXPR_RE = re.compile(  # + "mid-"/"pre-" prefixes and "2019–20" ranges, which would otherwise leave debris
    rf"{_PREP}(?:\b(?:mid|pre|post)-)?(?:{_FULL_DATE}|{_YEAR})(?:\s*[-–]\s*(?:\d{{2,4}}))?", re.IGNORECASE)


def years_in(text: str) -> list[int]:
    """Every year mentioned in `text` (as ints, decades as their first year: "1990s" -> 1990)."""
    return [int(m.group(0)[:4]) for m in YEAR_RE.finditer(text)]


def date_feature_dicts(texts: Iterable[str], cutoff_year: int | None = None) -> list[dict[str, float]]:
    """Date features per text, as dicts for a DictVectorizer (so the year vocabulary comes from the training fold).

    Year one-hots let the model learn *which* years are member-like; max/min year and "any year >= cutoff" carry
    the rule Das et al. used (a non-member mentions a date after the cutoff) without fixing a threshold."""
    return [dict(_date_features(text, cutoff_year)) for text in texts]


@functools.lru_cache(maxsize=1 << 17)
def _date_features(text: str, cutoff_year: int | None) -> dict[str, float]:
    # Cached: features are per text, and cross-validation transforms every text once per fold and classifier.
    ys = years_in(text)
    d: dict[str, float] = {
        "n_years": float(len(ys)),
        "has_year": float(bool(ys)),
        "n_full_dates": float(len(FULL_DATE_RE.findall(text))),
        "n_month_names": float(len(MONTH_RE.findall(text))),
    }
    for y in set(ys):
        d[f"year={y}"] = 1.0
        d[f"decade={y // 10 * 10}s"] = 1.0
    if ys:
        d["max_year"] = (max(ys) - 1900) / 100.0
        d["min_year"] = (min(ys) - 1900) / 100.0
    if cutoff_year is not None:
        n_after = sum(y >= cutoff_year for y in ys)
        d["n_years_ge_cutoff"] = float(n_after)
        d["any_year_ge_cutoff"] = float(n_after > 0)
    return d


# --------------------------------------------------------------------------------------------------------------
# Length and formatting
# --------------------------------------------------------------------------------------------------------------
FORMAT_FEATURES = (
    "n_chars", "n_words", "mean_word_len", "std_word_len", "frac_upper", "frac_digit", "frac_punct",
    "frac_space", "frac_non_ascii", "n_sentences", "words_per_sentence", "n_newlines", "frac_capitalised_words",
    "frac_numeric_words", "commas_per_word", "n_parens", "n_quotes", "ends_with_terminal", "starts_upper",
    "double_spaces", "edge_whitespace",
)
_PUNCT = set(string.punctuation)
_SENT_END_RE = re.compile(r"[.!?]+(?:\s|$)")


def format_features(texts: Iterable[str]) -> np.ndarray:
    """Length and formatting statistics, one row per text (columns: FORMAT_FEATURES)."""
    rows = [_format_row(t) for t in texts]
    return np.asarray(rows, dtype=np.float64).reshape(-1, len(FORMAT_FEATURES))


@functools.lru_cache(maxsize=1 << 17)
def _format_row(t: str) -> tuple[float, ...]:
    # Cached for the same reason as _date_features; map() over str methods is ~3x a generator per character.
    n = max(len(t), 1)
    words = t.split()
    nw = max(len(words), 1)
    wl = np.array([len(w) for w in words], dtype=np.float64) if words else np.zeros(1)
    n_sent = max(len(_SENT_END_RE.findall(t)), 1)
    return (
        len(t), len(words), wl.mean(), wl.std(),
        sum(map(str.isupper, t)) / n, sum(map(str.isdigit, t)) / n, sum(map(_PUNCT.__contains__, t)) / n,
        sum(map(str.isspace, t)) / n, sum(c > "\x7f" for c in t) / n,
        n_sent, len(words) / n_sent, t.count("\n"),
        sum(w[:1].isupper() for w in words) / nw, sum(not w.isalpha() and any(map(str.isdigit, w)) for w in words) / nw,
        t.count(",") / nw, t.count("("), t.count('"') + t.count("“") + t.count("”"),
        float(t.rstrip()[-1:] in ".!?\"'”)") if t.strip() else 0.0, float(t.lstrip()[:1].isupper()),
        t.count("  "), float(t != t.strip()),
    )


# --------------------------------------------------------------------------------------------------------------
# Pipelines (module-level functions so they pickle)
# --------------------------------------------------------------------------------------------------------------
def _as_list(x) -> list[str]:
    return [str(t) for t in x]


def make_pipeline(name: str, *, cutoff_year: int | None = None, seed: int = 0, bow_blocks: Sequence = ()):
    """A fresh, unfitted sklearn Pipeline for one blind classifier. Everything data-dependent sits inside it.
    `bow` takes the n-gram count rows of `curation.bow.ngram_counts` (its column `bow_blocks`); the others, texts."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer, MaxAbsScaler

    if name == "bow":
        return Pipeline([
            # TF-IDF of word 1–2-grams and char_wb 3–5-grams (curation/bow.py VECTORISERS), fitted per fold.
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
        inputs["bow"], blocks = ngram_counts(list(texts))  # per-text counts, once for every fold (curation/bow.py)
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
# Metrics (scoring.metrics is the single implementation; this only adds "no bootstrap" for inner loops)
# --------------------------------------------------------------------------------------------------------------
def _metric_record(y: np.ndarray, s: np.ndarray, n_bootstrap: int, seed: int) -> dict[str, Any]:
    from scoring import metrics

    if n_bootstrap > 0:
        return metrics.summarize(y, s, n_bootstrap=n_bootstrap, seed=seed)
    return {
        "n": int(y.size), "n_member": int(y.sum()), "auc": metrics.roc_auc(y, s), "auc_ci": [math.nan, math.nan],
        "tpr_at_1_fpr": metrics.tpr_at_fpr(y, s, 0.01), "tpr_at_5_fpr": metrics.tpr_at_fpr(y, s, 0.05),
    }


def _best(y: np.ndarray, oof: dict[str, np.ndarray], mask: np.ndarray) -> tuple[str, dict[str, float]]:
    from scoring.metrics import roc_auc

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


# --------------------------------------------------------------------------------------------------------------
# Loading benchmarks
# --------------------------------------------------------------------------------------------------------------
_BUCKET_FROM_NAME = re.compile(r"length[_-]?(\d+)", re.IGNORECASE)


def _read_table(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_benchmark(paths: str | Path | Sequence[str | Path]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows (`input`, `label`, optional `bucket`/`id`/…) and the release manifest ({} when there is none).

    Accepts jsonl / Parquet files, a release directory (DIR/data/*.parquet + manifest.json), or a directory of
    jsonl/Parquet files. When several files are read and rows carry no `bucket`, the bucket comes from the file
    name (`…length64…` -> 64, else the file stem), so WikiMIA's four files load as one bucketed benchmark."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    manifest: dict[str, Any] = {}
    for p in map(Path, paths):
        if p.is_dir():
            if (p / "manifest.json").is_file():
                manifest = json.loads((p / "manifest.json").read_text())
            data = p / "data" if (p / "data").is_dir() else p
            found = sorted(list(data.glob("*.parquet")) + list(data.glob("*.jsonl")))
            if not found:
                raise FileNotFoundError(f"no *.parquet or *.jsonl under {data}")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(p)
    rows: list[dict[str, Any]] = []
    for f in files:
        part = _read_table(f)
        m = _BUCKET_FROM_NAME.search(f.stem)
        fallback = int(m.group(1)) if m else (f.stem if len(files) > 1 else None)
        for r in part:
            if "input" not in r and "text" in r:
                r["input"] = r["text"]
            if "input" not in r or "label" not in r:
                raise ValueError(f"{f}: rows need `input` and `label` (got keys {sorted(r)})")
            if r.get("bucket") is None and fallback is not None:
                r["bucket"] = fallback
            r["_file"] = f.name
        rows += part
    return rows, manifest


def cutoff_year_from_manifest(manifest: dict[str, Any]) -> int | None:
    """The year non-members start (a release's `cutoffs.nonmember_after`, or a build config's), else None.
    A flat `cutoff`/`cutoff_year` key is accepted for hand-made benchmarks."""
    places = [manifest.get("cutoffs") or {}, (manifest.get("config") or {}).get("cutoffs") or {}, manifest]
    for where in places:
        for key in ("nonmember_after", "cutoff_year", "cutoff", "cutoff_date"):
            v = where.get(key)
            m = re.search(r"(1[5-9]\d\d|20\d\d)", str(v)) if v is not None else None
            if m:
                return int(m.group(1))
    return None


AUDIT_DEFAULTS: dict[str, Any] = {"enabled": True, "n_folds": 5, "n_bootstrap": 1000, "group_prefix_words": 32,
                                  "max_rows": 20_000}


def audit_for_release(rows: Sequence[dict], cfg: dict[str, Any]) -> dict | None:
    """What build-benchmark stores under manifest["shift_audit"]: `audit_rows` over the release rows, with the
    cutoff year from cfg["cutoffs"]["nonmember_after"], the seed from cfg["seed"] and options from the optional
    cfg["shift_audit"] section (AUDIT_DEFAULTS). JSON-safe (NaN -> null). None when disabled; a dict with
    `error` when the rows cannot be cross-validated (e.g. one class only), so a build never fails on it."""
    opts = {**AUDIT_DEFAULTS, **(cfg.get("shift_audit") or {})}
    unknown = set(opts) - set(AUDIT_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown shift_audit option(s) {sorted(unknown)}; known: {sorted(AUDIT_DEFAULTS)}")
    if not opts["enabled"]:
        return None
    seed, n = int(cfg.get("seed", 0) or 0), len(rows)
    if n > int(opts["max_rows"]):  # the classifiers fit on a capped, seeded sample: the same cost on any corpus
        from curation.sampling import sample_rank

        rows = sorted(rows, key=lambda r: sample_rank(seed, str(r["id"])))[: int(opts["max_rows"])]
    try:
        result = audit_rows([r["input"] for r in rows], [int(r["label"]) for r in rows],
                            [r.get("bucket") for r in rows], cutoff_year=cutoff_year_from_manifest(cfg),
                            n_folds=opts["n_folds"], seed=int(cfg.get("seed", 0) or 0),
                            n_bootstrap=opts["n_bootstrap"], group_prefix_words=opts["group_prefix_words"])
    except ValueError as e:
        return {"error": str(e), "n": len(rows)}
    if len(rows) < n:
        result["sample"] = {"rows": len(rows), "of": n, "max_rows": int(opts["max_rows"]),
                            "order": "sha256(seed, row id)"}
    return jsonable(result)


def stored_audit(path: str | Path) -> dict | None:
    """The `shift_audit` that build-benchmark stored in a local release's manifest.json, if there is one. For
    `evaluate`, which shows each detector's AUC next to `blind_aucs(result)` without auditing the release again."""
    manifest = Path(path) / "manifest.json"
    if not manifest.is_file():
        return None
    audit = json.loads(manifest.read_text()).get("shift_audit")
    return audit if isinstance(audit, dict) and "overall" in audit else None


def blind_aucs(result: dict) -> dict[str, float]:
    """{"all": overall blind AUC, "<bucket>": bucket blind AUC}: the column `evaluate` puts next to detectors."""
    out = {OVERALL: result["overall"]["auc"]}
    out.update({str(k): v["auc"] for k, v in result.get("buckets", {}).items()})
    return {k: float("nan") if v is None else float(v) for k, v in out.items()}  # a stored audit has null for NaN


# --------------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------------
def jsonable(x):
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)  # NaN is not JSON
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x


def _f(x, nd: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _row(name: str, r: dict) -> str:
    lo, hi = (r.get("auc_ci") or [None, None])[:2]
    cls = r.get("classifiers", {})
    return (f"| {name} | {r['n']} | {r.get('n_member', '–')} | **{_f(r['auc'])}** | [{_f(lo)}, {_f(hi)}] | "
            f"{_f(r['tpr_at_1_fpr'])} | {_f(r['tpr_at_5_fpr'])} | {r.get('classifier', '–')} | "
            + " | ".join(_f(cls.get(c)) for c in CLASSIFIERS if c in cls) + " |")


def markdown_table(result: dict) -> str:
    """Per-bucket and overall blind AUCs as a markdown table (also pasted into docs)."""
    names = [c for c in CLASSIFIERS if c in result["overall"].get("classifiers", {})]
    head = ("| bucket | n | members | blind AUC | 95% CI | TPR@1%FPR | TPR@5%FPR | best | "
            + " | ".join(f"{c} AUC" for c in names) + " |")
    lines = [head, "|" + "---|" * (8 + len(names))]
    for k, r in result.get("buckets", {}).items():
        lines.append(_row(k, r))
    lines.append(_row("overall", result["overall"]))
    return "\n".join(lines)


def render_markdown(result: dict) -> str:
    o = result["overall"]
    verdict = (f"**Flagged**: a classifier that never sees the model separates members from non-members with "
               f"AUC {_f(o['auc'])} (> {result.get('flag_auc', FLAG_AUC):.2f}). A detector's AUC on this "
               f"benchmark measures distribution shift as much as membership; compare it with the blind AUC."
               if result.get("flagged") else
               f"No strong blind separability: best blind AUC {_f(o['auc'])} "
               f"(≤ {result.get('flag_auc', FLAG_AUC):.2f}).")
    cfg = result.get("config", {})
    parts = ["# Blind-baseline shift audit", "", verdict, "", markdown_table(result), "",
             f"Blind AUC = the best of {', '.join(cfg.get('classifiers', CLASSIFIERS))} (out-of-fold, "
             f"{cfg.get('n_folds', '?')}-fold "
             f"{cfg.get('cv', '')}, grouping: {cfg.get('grouping', '?')}); CI = percentile bootstrap "
             f"({cfg.get('n_bootstrap', '?')} resamples). Cutoff year: {cfg.get('cutoff_year')}."]
    if "documents" in result:
        parts += ["", "## Document level (mean window score per document)", "",
                  markdown_table(result["documents"])]
    feats = result.get("top_features") or []
    if feats:
        parts += ["", "## Most separating features", "",
                  "| feature | kind | points to | weight | member docs | non-member docs |",
                  "|---|---|---|---|---|---|"]
        for f in feats:
            parts.append(f"| `{f['feature']}` | {f['kind']} | {f['direction']} | {f['weight']:.2f} | "
                         f"{f['member_docs']} | {f['nonmember_docs']} |")
    return "\n".join(parts) + "\n"


def plot(result: dict, path: str | Path) -> None:
    """Bar plot of the blind AUC per bucket (and overall) with CI whiskers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = list(result.get("buckets", {}).items()) + [("overall", result["overall"])]
    names = [k for k, _ in items]
    aucs = np.array([np.nan if r["auc"] is None else r["auc"] for _, r in items], dtype=float)
    ci = np.array([[np.nan if v is None else v for v in (r.get("auc_ci") or [np.nan, np.nan])] for _, r in items],
                  dtype=float)
    err = np.vstack([aucs - ci[:, 0], ci[:, 1] - aucs])
    err = np.where(np.isfinite(err), np.clip(err, 0, None), 0)
    fig, ax = plt.subplots(figsize=(1.2 * len(names) + 2, 3.2))
    ax.bar(names, aucs, yerr=err, capsize=4, color="#4c72b0")
    ax.axhline(0.5, color="grey", ls=":", lw=1, label="chance")
    ax.axhline(result.get("flag_auc", FLAG_AUC), color="#c44e52", ls="--", lw=1, label="flag")
    ax.set_ylim(0, 1)
    ax.set_ylabel("blind AUC")
    ax.set_xlabel("bucket")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(result: dict, out_dir: str | Path) -> None:
    """Write DIR/shift_audit.json, DIR/shift_audit.md and DIR/shift_audit.png."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    clean = jsonable(result)
    (out / "shift_audit.json").write_text(json.dumps(clean, indent=2, ensure_ascii=False) + "\n")
    (out / "shift_audit.md").write_text(render_markdown(result))
    plot(clean, out / "shift_audit.png")


__all__ = [
    "CLASSIFIERS", "audit_rows", "audit_documents", "run_audit", "cross_val_scores", "summarise_scores",
    "top_features", "make_windows", "prefix_groups", "load_benchmark", "stored_audit", "blind_aucs",
    "write_report", "render_markdown", "markdown_table", "years_in", "date_feature_dicts", "format_features",
    "DATE_EXPR_RE", "cutoff_year_from_manifest", "audit_for_release", "AUDIT_DEFAULTS",
]
