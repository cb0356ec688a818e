"""Array steps behind `Matches` (scoring/overlap/matching.py): what a scan keeps per benchmark n-gram found, as
numpy arrays rather than a Python dict entry per n-gram and a list step per document."""
from __future__ import annotations

import numpy as np


def sum_by_hash(hashes: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct hashes, sorted; the sum of their counts)."""
    if not hashes.size:
        return hashes, counts
    order = np.argsort(hashes, kind="stable")
    hashes, counts = hashes[order], counts[order]
    start = np.flatnonzero(np.concatenate([[True], hashes[1:] != hashes[:-1]]))
    return hashes[start], np.add.reduceat(counts, start)


def first_distinct(hashes: np.ndarray, order: np.ndarray, keys: np.ndarray, cap: int, *, plain: bool = False
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per hash, its first `cap` distinct keys by `order` (a key's first occurrence counts): the (hash, order, key)
    triples kept, sorted by hash then order. The first documents an n-gram was found in, with a document id that
    occurs twice in a corpus counted once, in corpus order.

    `plain`: within a hash, the triples come in increasing `order` (a batch in corpus order; what is kept followed
    by what came after it), and a key never comes with two orders (documents with distinct ids; a part's table,
    whose lists hold distinct ids): then one stable sort by hash (timsort: linear on sorted runs) does what two
    lexsorts do in general."""
    if not hashes.size:
        return hashes, order, keys
    if plain:
        by_hash = np.argsort(hashes, kind="stable")
        h, o, k = hashes[by_hash], order[by_hash], keys[by_hash]
        first = np.ones(h.size, dtype=bool)
        first[1:] = (h[1:] != h[:-1]) | (o[1:] != o[:-1])
    else:
        by_key = np.lexsort((order, keys, hashes))
        h, o, k = hashes[by_key], order[by_key], keys[by_key]
        first = np.ones(h.size, dtype=bool)
        first[1:] = (h[1:] != h[:-1]) | (k[1:] != k[:-1])
        by_order = np.lexsort((o[first], h[first]))
        first = np.flatnonzero(first)[by_order]
    h, o, k = h[first], o[first], k[first]
    start = np.ones(h.size, dtype=bool)
    start[1:] = h[1:] != h[:-1]
    rank = np.arange(h.size) - np.flatnonzero(start)[np.cumsum(start) - 1]
    keep = rank < cap
    return h[keep], o[keep], k[keep]
