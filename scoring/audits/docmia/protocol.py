"""The k-fold protocol of Meeus et al. over the grid normalisation × features × context C.

For each fold the reference dictionary (TF/GP) and the HistFE bin edges are fitted on the training folds only
(scoring/audits/docmia/grid.py, part by part on the workers: jobs/parts/doc_mia/grid.py), a random forest (500 trees, max
depth 5, ≥3 samples per leaf) is trained on the training documents' features, and the held-out fold is scored.
Every configuration uses the same folds (one seed), so configurations compare paired. Each document is scored
once, in its test fold: those out-of-fold scores are the per-document scores.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from scoring.audits.docmia.normalization import ALL_NORMALIZATIONS, Normalization
from scoring.stats.metrics import roc_auc, tpr_at_fpr

BASELINE = "mean log-likelihood (no classifier)"


@dataclass
class GridConfig:
    normalizations: Sequence[Normalization] = field(default_factory=lambda: list(ALL_NORMALIZATIONS))
    features: Sequence[str] = ("AggFE", "HistFE")
    k: int = 5
    seed: int = 0
    n_trees: int = 500
    max_depth: int = 5
    min_samples_leaf: int = 3
    hist_bins: int = 1000
    n_jobs: int = 1


def column_name(norm: str, feat: str, context: int) -> str:
    return f"{norm}/{feat}/C={context}"


def make_folds(labels: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Fold index per document, stratified by label and seeded."""
    from sklearn.model_selection import StratifiedKFold

    labels = np.asarray(labels)
    smallest = min(int((labels == 1).sum()), int((labels == 0).sum()))
    if smallest < k:
        raise ValueError(f"{k}-fold CV needs at least {k} documents per class; the smaller class has {smallest}")
    folds = np.zeros(labels.size, dtype=np.int64)
    for f, (_, test) in enumerate(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(labels, labels)):
        folds[test] = f
    return folds


def _fold_metrics(y: np.ndarray, s: np.ndarray) -> dict:
    return {"n_test": int(y.size), "auc": roc_auc(y, s), "tpr_at_1_fpr": tpr_at_fpr(y, s, 0.01),
            "tpr_at_10_fpr": tpr_at_fpr(y, s, 0.10)}


def _summarise(folds: list[dict]) -> dict:
    out = {}
    for key in ("auc", "tpr_at_1_fpr", "tpr_at_10_fpr"):
        vals = np.asarray([f[key] for f in folds], dtype=np.float64)
        out[f"{key}_mean"] = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
        out[f"{key}_std"] = float(np.nanstd(vals)) if np.isfinite(vals).any() else float("nan")
    return out


def run_forests(labels: np.ndarray, folds: np.ndarray, baseline: Mapping[int, np.ndarray], cfg: GridConfig,
                matrix: Callable[[str, int, str, int], np.ndarray], progress: Callable | None = None
                ) -> tuple[list[dict], dict[str, np.ndarray]]:
    """The forests of the grid: (one record per configuration, out-of-fold score per configuration column).
    `baseline[C]` is each document's mean log-likelihood at context C; `matrix(feature, C, normalisation, fold)`
    returns the feature matrix of every document (rows in label order) for that fold's fitted features. Only one
    matrix is held at a time."""
    from sklearn.ensemble import RandomForestClassifier

    y = np.asarray(labels, dtype=np.int64)
    records, oof = [], {}
    tick = progress or (lambda: None)
    for context, base in baseline.items():
        base = np.asarray(base, dtype=np.float64)  # document-level LOSS, the paper's simple baseline
        records.append({"normalization": "-", "features": BASELINE, "context": context,
                        "folds": [dict(fold=f, **_fold_metrics(y[folds == f], base[folds == f])) for f in range(cfg.k)]})
        records[-1].update(_summarise(records[-1]["folds"]))
        oof[column_name("baseline", "mean_lp", context)] = base
        for norm in cfg.normalizations:
            per_feat = {feat: {"folds": [], "oof": np.full(y.size, np.nan)} for feat in cfg.features}
            for f in range(cfg.k):
                train, test = np.flatnonzero(folds != f), np.flatnonzero(folds == f)
                for feat in cfg.features:
                    x = matrix(feat, context, norm.name, f)
                    if x.shape[0] != y.size:
                        raise ValueError(f"{feat} C={context} {norm.name} fold {f}: {x.shape[0]} rows for {y.size} "
                                         "documents")
                    forest = RandomForestClassifier(n_estimators=cfg.n_trees, max_depth=cfg.max_depth,
                                                    min_samples_leaf=cfg.min_samples_leaf, random_state=cfg.seed,
                                                    n_jobs=cfg.n_jobs)
                    forest.fit(x[train], y[train])
                    s = forest.predict_proba(x[test])[:, list(forest.classes_).index(1)]
                    per_feat[feat]["oof"][test] = s
                    per_feat[feat]["folds"].append(dict(fold=f, **_fold_metrics(y[test], s)))
                    tick()
            for feat, res in per_feat.items():
                rec = {"normalization": norm.name, "features": feat, "context": context, "folds": res["folds"]}
                rec.update(_summarise(res["folds"]))
                records.append(rec)
                oof[column_name(norm.name, feat, context)] = res["oof"]
    return records, oof
