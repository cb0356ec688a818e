"""The three ways `debias` (curation/shift/debias.py) removes a shift, each a pure function over texts or indices:
dates stripped or masked (the same patterns the date classifier looks at: curation/shift/features.py), rows dropped
to match length distributions per bucket, and members paired with non-members by topic (TF-IDF nearest neighbours)."""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from curation.shift.features import DATE_EXPR_RE, DATE_ONLY_RE

_SENTINEL = "\x00"


# --------------------------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------------------------
def strip_dates(text: str, mode: str = "remove") -> tuple[str, int]:
    """`text` without explicit dates/years, and how many expressions went. mode: "remove" or "mask" ([DATE])."""
    if mode == "mask":
        return DATE_ONLY_RE.subn("[DATE]", text)
    if mode != "remove":
        raise ValueError(f"mask_dates mode must be 'remove' or 'mask', got {mode!r}")
    out, n = DATE_EXPR_RE.subn(_SENTINEL, text)
    if not n:
        return text, 0
    # A sentence that began with the removed phrase ("In 2024, the ...") starts again with a capital.
    out = re.sub(rf"(^|[.!?]\s+){_SENTINEL}[\s,;:{_SENTINEL}]*([a-z])", lambda m: m.group(1) + m.group(2).upper(), out)
    out = out.replace(_SENTINEL, "")
    out = re.sub(r"\(\s*[,;:]?\s*\)", "", out)  # "(2019)" -> ""
    out = re.sub(r"(^|[.!?]\s+)[,;:]\s*", r"\1", out)  # ", the" at a sentence start
    out = re.sub(r"[,;:]\s*(?=[,;:.!?])", "", out)  # ", ," / ", ."
    out = re.sub(r"[ \t]+([,.;:!?)])", r"\1", out)  # space before punctuation
    out = re.sub(r"[ \t]{2,}", " ", out).strip()
    return out, n


# --------------------------------------------------------------------------------------------------------------
# Length matching
# --------------------------------------------------------------------------------------------------------------
def length_match(idx: np.ndarray, y: np.ndarray, lengths: np.ndarray, rng: np.random.Generator,
                  n_bins: int = 20) -> list[tuple[int, str]]:
    """Rows (indices into the full table) to drop so that, within each length bin, members:non-members is the
    bucket's overall ratio; i.e. length carries no information about the label. Random choice within a bin."""
    yb = y[idx]
    n_m, n_n = int(yb.sum()), int((1 - yb).sum())
    if n_m == 0 or n_n == 0:
        return []
    ratio = n_m / n_n
    edges = np.unique(np.quantile(lengths[idx], np.linspace(0, 1, n_bins + 1)))
    bins = np.clip(np.searchsorted(edges, lengths[idx], side="right") - 1, 0, max(len(edges) - 2, 0))
    drops: list[tuple[int, str]] = []
    for b in np.unique(bins):
        in_bin = idx[bins == b]
        mem = in_bin[y[in_bin] == 1]
        non = in_bin[y[in_bin] == 0]
        keep_m = min(len(mem), int(round(ratio * len(non))))
        keep_n = min(len(non), int(round(len(mem) / ratio)))
        lo, hi = edges[b], edges[min(b + 1, len(edges) - 1)]
        detail = f"length bin [{lo:.0f}, {hi:.0f}] chars: {len(mem)} members vs {len(non)} non-members"
        for pool, keep in ((mem, keep_m), (non, keep_n)):
            if keep < len(pool):
                drops += [(int(i), detail) for i in rng.choice(pool, size=len(pool) - keep, replace=False)]
    return drops


# --------------------------------------------------------------------------------------------------------------
# Topic matching
# --------------------------------------------------------------------------------------------------------------
def pair_by_topic(texts: Sequence[str], small: np.ndarray, large: np.ndarray, k: int = 20,
                   chunk: int = 1024) -> dict[int, tuple[int, float]]:
    """Greedy one-to-one nearest-neighbour pairing on TF-IDF cosine: small-class index -> (large index, sim).
    Top-k candidates per item keep memory at O(n·k); items whose candidates were all taken are re-queried against
    what is still free until everyone is paired or the larger class runs out."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(stop_words="english", sublinear_tf=True, ngram_range=(1, 2), min_df=1)
    X = vec.fit_transform([texts[i] for i in np.concatenate([small, large])])
    A, B = X[: len(small)], X[len(small):]
    pairs: dict[int, tuple[int, float]] = {}
    free_small = np.arange(len(small))
    free_large = np.ones(len(large), dtype=bool)
    while len(free_small) and free_large.any():
        cand_cols = np.flatnonzero(free_large)
        edges = []
        for s in range(0, len(free_small), chunk):
            rows = free_small[s:s + chunk]
            sims = (A[rows] @ B[cand_cols].T).toarray()
            kk = min(k, sims.shape[1])
            top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
            for pos, (r, cols) in enumerate(zip(rows, top)):
                edges += [(float(sims[pos, c]), int(r), int(cand_cols[c])) for c in cols]
        edges.sort(key=lambda e: -e[0])  # ties: deterministic order from construction
        used_s = set()
        for sim, i, j in edges:
            if i in used_s or not free_large[j]:
                continue
            used_s.add(i)
            free_large[j] = False
            pairs[int(small[i])] = (int(large[j]), sim)
        free_small = np.array([i for i in free_small if i not in used_s], dtype=np.int64)
    return pairs
