"""Document features from per-token values F (Meeus et al.): a fixed-length vector per document, whatever its
length, for the meta-classifier.

AggFE   min, max, mean, std and the percentiles {1, 5, 10, 25, 50, 75, 90, 95, 99} of F (13 features).
HistFE  the fraction of the document's tokens in each of `bins` equal-width bins; the bin edges span the pooled
        F values of the *training folds* and are fixed before any test document is seen. A test value outside
        that span counts in the nearest end bin, so fractions always sum to 1.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)
AGG_NAMES = ("min", "max", "mean", "std", *[f"p{q}" for q in PERCENTILES])


class AggFE:
    name = "AggFE"

    def fit(self, train_values: Sequence[np.ndarray]) -> "AggFE":
        return self  # nothing to fit

    def transform(self, values: Sequence[np.ndarray]) -> np.ndarray:
        rows = []
        for v in values:
            v = np.asarray(v, dtype=np.float64)
            rows.append([v.min(), v.max(), v.mean(), v.std(), *np.percentile(v, PERCENTILES)])
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(AGG_NAMES))


class HistFE:
    name = "HistFE"

    def __init__(self, bins: int = 1000):
        self.bins = int(bins)
        self.edges: np.ndarray | None = None

    def fit(self, train_values: Sequence[np.ndarray]) -> "HistFE":
        pooled = np.concatenate([np.asarray(v, dtype=np.float64) for v in train_values])
        self.edges = hist_edges(float(pooled.min()), float(pooled.max()), self.bins)
        return self

    def transform(self, values: Sequence[np.ndarray]) -> np.ndarray:
        if self.edges is None:
            raise RuntimeError("HistFE.transform before fit")
        return histogram_features(values, self.edges)


def hist_edges(lo: float, hi: float, bins: int) -> np.ndarray:
    """`bins` equal-width bins over [lo, hi] (the pooled training values' span)."""
    if hi <= lo:  # one distinct value: give the bins a width
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, int(bins) + 1)


def histogram_features(values: Sequence[np.ndarray], edges: np.ndarray) -> np.ndarray:
    """Per document, the fraction of its values in each bin; values outside the edges count in the end bins."""
    lo, hi = edges[0], edges[-1]
    out = np.zeros((len(values), edges.size - 1), dtype=np.float64)
    for i, v in enumerate(values):
        v = np.clip(np.asarray(v, dtype=np.float64), lo, hi)
        counts, _ = np.histogram(v, bins=edges)
        out[i] = counts / max(v.size, 1)
    return out


def make_extractor(name: str, bins: int = 1000):
    if name == "AggFE":
        return AggFE()
    if name == "HistFE":
        return HistFE(bins)
    raise ValueError(f"unknown feature extractor {name!r}: use AggFE or HistFE")
