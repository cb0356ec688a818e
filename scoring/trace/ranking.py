"""The documents behind a text's spans, ranked by relevance to the whole text: BM25 (the `bm25s` package) with the
retrieved documents as the collection and the text as the query, as OLMoTrace ranks its documents. A document is
represented by the passages shown of it (its snippets around the spans), which is what the driver holds: the ranking
says which of the shown passages read most like the text, not which whole document does."""
from __future__ import annotations

import numpy as np


def bm25_scores(query: str, documents: list[str], *, k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """BM25 (Lucene's variant) of each document for the query; words as `tidemark overlap` reads them. Documents
    with no word, or a query with none, score 0."""
    import bm25s

    from scoring.overlap.ngrams import words

    if not documents:
        return np.zeros(0)
    docs = [words(d) for d in documents]
    q = words(query)
    out = np.zeros(len(documents))
    have = [k for k, d in enumerate(docs) if d]  # an empty document is not part of the collection
    vocab = set().union(*(docs[k] for k in have)) if have else set()
    known = [w for w in q if w in vocab]
    if not known:
        return out
    model = bm25s.BM25(k1=k1, b=b, method="lucene")
    model.index([docs[k] for k in have], show_progress=False)
    out[have] = np.asarray(model.get_scores(known), dtype=np.float64)
    return out
