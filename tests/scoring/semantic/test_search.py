from __future__ import annotations

import numpy as np
import pytest

from scoring.semantic.search import merge_top_k, recall_at_k, top_k


def brute(queries, keys, k):
    """Every score, each row sorted by (score desc, id asc): the reference order."""
    s = queries.astype(np.float64) @ keys.astype(np.float64).T
    out_s, out_i = np.full((len(queries), k), -np.inf), np.full((len(queries), k), -1)
    for r in range(len(queries)):
        order = sorted(range(len(keys)), key=lambda j: (-s[r, j], j))[:k]
        out_s[r, :len(order)], out_i[r, :len(order)] = s[r, order], order
    return out_s, out_i


def grid_vectors(rng, n, d=6):
    """Entries in {-2..2} / 4: every dot product is exact in float32, and equal scores are common (ties)."""
    return (rng.integers(-2, 3, size=(n, d)) / 4).astype(np.float32)


def test_a_hand_made_search():
    keys = np.array([[1, 0], [0, 1], [0.6, 0.8], [1, 0], [-1, 0]], dtype=np.float32)
    queries = np.array([[1, 0], [0, 1]], dtype=np.float32)
    s, i = top_k(queries, keys, 3)
    assert s.dtype == np.float32 and i.dtype == np.int64
    np.testing.assert_array_equal(i, [[0, 3, 2], [1, 2, 0]])  # keys 0 and 3 tie: the lower id first
    np.testing.assert_allclose(s, [[1, 1, 0.6], [1, 0.8, 0]], atol=1e-7)
    s, i = top_k(queries, keys, 7)  # k past the number of keys: padded
    np.testing.assert_array_equal(i[0], [0, 3, 2, 1, 4, -1, -1])
    assert np.isneginf(s[0, 5:]).all()
    s, i = top_k(queries, keys, 2, offset=100)
    np.testing.assert_array_equal(i, [[100, 103], [101, 102]])
    s, i = top_k(queries, keys[:0], 2)
    np.testing.assert_array_equal(i, [[-1, -1], [-1, -1]])
    assert top_k(queries, keys, 0)[0].shape == (2, 0)


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 10_000])
@pytest.mark.parametrize("k", [1, 5, 40, 70])
def test_top_k_is_the_brute_force_order_however_keys_are_chunked(chunk, k):
    rng = np.random.default_rng(chunk * 1000 + k)
    queries, keys = grid_vectors(rng, 9), grid_vectors(rng, 60)
    s, i = top_k(queries, keys, k, chunk=chunk)
    rs, ri = brute(queries, keys, k)
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(s, rs.astype(np.float32))


def test_many_equal_scores_keep_the_lowest_ids():
    keys = np.ones((50, 3), dtype=np.float32)
    keys[[7, 30]] = 2  # two better keys, then 48 tied ones
    s, i = top_k(np.ones((2, 3), dtype=np.float32), keys, 5, chunk=16)
    np.testing.assert_array_equal(i, [[7, 30, 0, 1, 2]] * 2)


def test_a_nan_key_ranks_below_every_real_one():
    keys = np.array([[np.nan, 0], [-1, 0], [1, 0]], dtype=np.float32)
    s, i = top_k(np.array([[1, 0]], dtype=np.float32), keys, 4)
    np.testing.assert_array_equal(i, [[2, 1, 0, -1]])


def test_merging_parts_gives_the_search_over_all_keys():
    rng = np.random.default_rng(7)
    queries, keys = grid_vectors(rng, 12), grid_vectors(rng, 200)
    k = 15
    whole = top_k(queries, keys, k, chunk=32)
    cuts = np.sort(rng.choice(np.arange(1, 200), size=5, replace=False))
    bounds = [0, *cuts.tolist(), 200]
    parts = [top_k(queries, keys[a:b], k, chunk=8, offset=a) for a, b in zip(bounds, bounds[1:])]
    rng.shuffle(parts)  # parts merge in any order
    merged = merge_top_k(parts, k)
    np.testing.assert_array_equal(merged[1], whole[1])
    np.testing.assert_array_equal(merged[0], whole[0])


def test_merging_small_parts_keeps_pads_last():
    a = (np.array([[0.5, -np.inf]], dtype=np.float32), np.array([[3, -1]]))
    b = (np.array([[-np.inf, -np.inf]], dtype=np.float32), np.array([[9, -1]]))  # key 9 scored -inf: still a key
    s, i = merge_top_k([a, b], 3)
    np.testing.assert_array_equal(i, [[3, 9, -1]])


def test_recall_at_k():
    exact = np.array([[1, 2, 3], [4, 5, -1]])
    approx = np.array([[3, 1, 9], [7, 8, 9]])
    assert recall_at_k(approx, exact) == pytest.approx(2 / 5)
    assert recall_at_k(exact, exact) == 1.0
