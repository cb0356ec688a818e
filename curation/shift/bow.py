"""The shift audit's bag-of-words features, counted once for all cross-validation folds.

Counting n-grams is the expensive part of the blind bag-of-words classifier (char 3–5-grams of 10k texts: most of
a minute on one core), and it is per text: a text's counts do not depend on any other text. So `ngram_counts`
counts every text once, over every n-gram any text has, and `FoldTfidf` does, on the training rows of a fold only,
everything that does depend on other texts: `min_df`, `max_features` and the IDF. Columns that no training row has
are dropped like any rare column, so a test fold's unseen n-grams carry no weight, exactly as with a
`TfidfVectorizer` fitted on the training fold (tests/curation/shift/test_shift_audit.py compares the two).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin


@dataclass(frozen=True)
class Block:
    """One vectoriser's columns in the count matrix, and its per-fold settings."""

    start: int
    stop: int
    min_df: int
    max_features: int | None


# (name, CountVectorizer options, min_df, max_features): word 1–2-grams and char_wb 3–5-grams, as in Das et al.
VECTORISERS = (
    ("word", {"ngram_range": (1, 2), "token_pattern": r"(?u)\b\w+\b"}, 2, 200_000),
    ("char", {"analyzer": "char_wb", "ngram_range": (3, 5)}, 2, 300_000),
)


def ngram_counts(texts: Sequence[str]):
    """Raw n-gram counts of every text (CSR, one row per text) and the column block of each vectoriser."""
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import CountVectorizer

    parts, blocks, at = [], [], 0
    for _, options, min_df, max_features in VECTORISERS:
        try:
            X = CountVectorizer(dtype=np.float64, **options).fit_transform(texts)
        except ValueError:  # no n-gram at all (empty texts): an empty block
            X = sp.csr_matrix((len(texts), 0))
        parts.append(X)
        blocks.append(Block(at, at + X.shape[1], min_df, max_features))
        at += X.shape[1]
    return sp.hstack(parts, format="csr"), tuple(blocks)


class FoldTfidf(TransformerMixin, BaseEstimator):
    """TF-IDF (sublinear tf, smoothed idf, l2 rows, per block) over precomputed counts, fitted on the rows it is
    given: per block, keep the columns in at least `min_df` of those rows, the `max_features` most frequent of
    them (TfidfVectorizer's rule), and their IDF over those rows."""

    def __init__(self, blocks: Sequence[Block] = ()):
        self.blocks = blocks

    def fit(self, X, y=None):
        X = X.tocsc()
        n = X.shape[0]
        self.columns_, self.idf_ = [], []
        for b in self.blocks:
            part = X[:, b.start:b.stop]
            df = np.diff(part.indptr)  # CSC: rows with a non-zero count, per column
            keep = np.flatnonzero(df >= b.min_df)
            if b.max_features is not None and keep.size > b.max_features:
                tfs = np.asarray(part[:, keep].sum(axis=0)).ravel()
                keep = np.sort(keep[(-tfs).argsort()[: b.max_features]])
            self.columns_.append(b.start + keep)
            self.idf_.append(np.log((1 + n) / (1 + df[keep])) + 1.0)
        return self

    def transform(self, X):
        import scipy.sparse as sp
        from sklearn.preprocessing import normalize

        X = sp.csr_matrix(X)
        out = []
        for cols, idf in zip(self.columns_, self.idf_):
            part = X[:, cols].astype(np.float64)
            np.log(part.data, out=part.data)
            part.data += 1.0
            out.append(normalize(part.multiply(idf[None, :]).tocsr(), norm="l2"))
        return sp.hstack(out, format="csr")
