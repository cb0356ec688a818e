"""Exact cosine top-k: for each benchmark item (a query), the k corpus windows (keys) nearest to it.

Embeddings are L2-normalised (embed.py), so cosine is the dot product and a search is a matmul. Keys are taken in
chunks, each query block's scores against a chunk are cut to their top k by argpartition, and the running top k is
merged with the chunk's; a score block never exceeds BLOCK_ENTRIES floats (16 MB, and a few temporaries of its
size), whatever the sizes.

The order is total, so results do not depend on how keys are chunked or split into parts: higher score first, and
among equal scores the lower key id (duplicate windows give equal scores, and they are common in web text). A query
with fewer than k keys gets its rows padded with score -inf and id -1. So the top k of a corpus searched in parts
(each part's ids offset to global ids) and merged with merge_top_k is exactly that of one search over all its keys.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

BLOCK_ENTRIES = 1 << 22
PAD_ID = -1


def _empty(n_q: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((n_q, k), -np.inf, dtype=np.float32), np.full((n_q, k), PAD_ID, dtype=np.int64)


def _ordered(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row sorted by (score descending, id ascending, pads last) and cut to k; rows short of k padded."""
    # a pad's id is -1, which would sort before a real key of score -inf: pads rank as the largest id instead
    order = np.lexsort((np.where(ids == PAD_ID, np.iinfo(np.int64).max, ids), -scores), axis=-1)[:, :k]
    s, i = np.take_along_axis(scores, order, 1), np.take_along_axis(ids, order, 1)
    if s.shape[1] < k:
        ps, pi = _empty(s.shape[0], k - s.shape[1])
        s, i = np.concatenate([s, ps], 1), np.concatenate([i, pi], 1)
    return s, i


def _chunk_top(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top k columns of each row of a score block with the total order above: argpartition finds the k-th
    largest value v; everything above v is in, and of the entries equal to v the ones with the lowest column
    fill the rest (a running count of equal entries along the row picks them)."""
    n = scores.shape[1]
    if k >= n:
        cols = np.broadcast_to(np.arange(n, dtype=np.int64), scores.shape)
        return scores, np.ascontiguousarray(cols)
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    v = np.take_along_axis(scores, part, 1).min(1, keepdims=True)
    above = scores > v
    equal = scores == v
    need = k - above.sum(1, keepdims=True)
    keep = above | (equal & (np.cumsum(equal, axis=1) <= need))
    _, cols = np.nonzero(keep)  # row-major: exactly k per row, columns ascending
    cols = cols.reshape(-1, k).astype(np.int64)
    return np.take_along_axis(scores, cols, 1), cols


def top_k(queries: np.ndarray, keys: np.ndarray, k: int, chunk: int = 8192,
          offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(scores [n_q, k] float32, ids [n_q, k] int64): each query's k keys of highest dot product (cosine for
    L2-normalised rows), best first; ids are row numbers of `keys` plus `offset` (a corpus part's first global id),
    pads -inf / -1. NaN scores (a zero or broken vector) rank below every real score."""
    q = np.ascontiguousarray(queries, dtype=np.float32)
    kk = np.ascontiguousarray(keys, dtype=np.float32)
    if q.ndim != 2 or kk.ndim != 2 or (kk.size and q.shape[1] != kk.shape[1]):
        raise ValueError(f"queries {q.shape} and keys {kk.shape} must be matrices of one width")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    best_s, best_i = _empty(q.shape[0], k)
    if k == 0 or not kk.shape[0] or not q.shape[0]:
        return best_s, best_i
    chunk = max(1, chunk)
    rows = max(1, BLOCK_ENTRIES // min(chunk, kk.shape[0]))
    for lo in range(0, kk.shape[0], chunk):
        block = kk[lo:lo + chunk]
        for r in range(0, q.shape[0], rows):
            s = q[r:r + rows] @ block.T
            s[np.isnan(s)] = -np.inf
            cs, ci = _chunk_top(s, k)
            ms, mi = _ordered(np.concatenate([best_s[r:r + rows], cs], 1),
                              np.concatenate([best_i[r:r + rows], ci + (lo + offset)], 1), k)
            best_s[r:r + rows], best_i[r:r + rows] = ms, mi
    return best_s, best_i


def sort_top_k(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (score, id) pairs from another search (ann.py: faiss orders equal scores its own way) put in top_k's
    total order and cut or padded to k, so that merge_top_k merges them as it merges top_k's."""
    return _ordered(np.asarray(scores, dtype=np.float32), np.asarray(ids, dtype=np.int64), k)


def top_k_rows(queries: np.ndarray, keys: np.ndarray, k: int, offset: int = 0,
               rows: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """top_k over keys taken `rows` at a time, each made float32 only while it is searched: for a memory-mapped
    float16 shard (jobs/parts/index/embeddings.py) that would be twice its size as one float32 copy."""
    best = top_k(queries, np.zeros((0, np.shape(queries)[1]), np.float32), k)
    for lo in range(0, len(keys), rows):
        part = np.asarray(keys[lo:lo + rows], dtype=np.float32)
        best = merge_top_k([best, top_k(queries, part, k, offset=offset + lo)], k)
    return best


def merge_top_k(results: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The global top k of several searches of one set of queries (corpus parts, ids already global): the same
    total order as top_k, so the merge equals one search over all the parts' keys. Pads (-1) sort last."""
    if not results:
        raise ValueError("merge_top_k needs at least one result")
    scores = np.concatenate([np.asarray(s, dtype=np.float32) for s, _ in results], 1)
    ids = np.concatenate([np.asarray(i, dtype=np.int64) for _, i in results], 1)
    return _ordered(scores, ids, k)


def recall_at_k(approx_ids: np.ndarray, exact_ids: np.ndarray) -> float:
    """The share of the exact top-k ids (pads left out) that an approximate search found, over all queries: the
    usual measure of an approximate index against exact search. NaN when the exact side has no id."""
    a, e = np.asarray(approx_ids, dtype=np.int64), np.asarray(exact_ids, dtype=np.int64)
    if a.shape[0] != e.shape[0]:
        raise ValueError(f"approx has {a.shape[0]} queries, exact {e.shape[0]}")
    real = e != PAD_ID
    hit = (e[:, :, None] == a[:, None, :]).any(2) & real
    return float(hit.sum() / real.sum()) if real.any() else float("nan")
