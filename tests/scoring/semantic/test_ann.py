"""scoring/semantic/ann.py: the IVF index finds >= 0.99 of the exact top k on clustered vectors at its calibrated
nprobe (float32 and float16 storage), builds and answers the same twice, keeps search.top_k's convention (offsets,
pads, equal scores by lower id) so merge_top_k merges shards, reads back what it wrote, and leaves small shards to
exact search."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("faiss")

from scoring.semantic import ann  # noqa: E402
from scoring.semantic.search import merge_top_k, recall_at_k, top_k  # noqa: E402

FORCED = ann.AnnSettings(min_vectors=1)  # these shards are small: the index is forced to be measured


def unit(x):
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def clustered(n: int, d: int = 48, clusters: int = 64, seed: int = 0, law: int = 7) -> np.ndarray:
    """Unit vectors around `clusters` centres with a spread that hides the clusters' borders (neighbours lie in
    several lists, as real sentence embeddings' do); `law` fixes the centres, `seed` the points."""
    centres = np.random.default_rng(law).standard_normal((clusters, d))
    rng = np.random.default_rng(seed)
    return unit(centres[rng.integers(0, clusters, n)] + 0.9 * rng.standard_normal((n, d)))


@pytest.fixture(scope="module")
def data():
    return clustered(6000), clustered(300, seed=1)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_the_index_finds_99_percent_of_the_exact_top_k(data, dtype):
    keys, queries = data[0].astype(dtype), data[1]
    shard = ann.build(keys, FORCED)
    info = shard.info
    assert info["kind"] == "ivf" and info["nlist"] == round(np.sqrt(len(keys))) and info["storage"] == np.dtype(
        dtype).name
    assert 1 <= info["nprobe"] < info["nlist"] and info["calibration_recall"] >= FORCED.target_recall
    for k in (10, 100):
        s, ids = ann.search(shard, keys, queries, k)
        es, eids = top_k(queries, keys.astype(np.float32), k)
        assert recall_at_k(ids, eids) >= 0.99, k
        found = ids == eids  # the windows found get their exact scores
        np.testing.assert_allclose(s[found], es[found], atol=1e-5)
    slow = ann.search(shard, keys, queries, 100, nprobe=1)[1]  # the calibration is what holds the recall up
    assert recall_at_k(slow, top_k(queries, keys.astype(np.float32), 100)[1]) < 0.95


def test_a_build_is_deterministic(data):
    keys, queries = data
    a, b = ann.build(keys, FORCED), ann.build(keys, FORCED)
    same = {k: v for k, v in a.info.items() if not k.endswith("_s")}
    assert same == {k: v for k, v in b.info.items() if not k.endswith("_s")}
    for x, y in zip(ann.search(a, keys, queries, 50), ann.search(b, keys, queries, 50)):
        np.testing.assert_array_equal(x, y)


def test_small_shards_are_searched_exactly(data):
    keys, queries = data
    shard = ann.build(keys[:500], ann.AnnSettings(min_vectors=1000))
    assert shard.index is None and shard.info == {"kind": "exact", "vectors": 500}
    s, ids = ann.search(shard, keys[:500], queries, 20, offset=7 << 32)
    es, eids = top_k(queries, keys[:500], 20, offset=7 << 32)
    np.testing.assert_array_equal(ids, eids)
    np.testing.assert_allclose(s, es, atol=1e-6)
    assert ann.EXACT_BELOW > 10_000 and ann.build(keys).index is None  # the default: exact below EXACT_BELOW


def test_results_keep_top_ks_convention_so_shards_merge(data):
    keys, queries = data
    dup = np.concatenate([keys[:50], keys[:50], keys[100:400]])  # every one of the first 50 twice: equal scores
    shard = ann.build(dup, FORCED)
    s, ids = ann.search(shard, dup, queries[:20], 30, offset=1000)
    assert s.dtype == np.float32 and ids.dtype == np.int64 and (ids >= 1000).all()
    for row_s, row_i in zip(s, ids):
        order = sorted(range(30), key=lambda j: (-row_s[j], row_i[j]))
        assert order == list(range(30))  # best first, equal scores by the lower id
    s, ids = ann.search(shard, dup, queries[:3], len(dup) + 5)  # more than the shard holds: padded
    assert (ids[:, -5:] == -1).all() and np.isneginf(s[:, -5:]).all()
    # two shards of one corpus, searched apart and merged, against one exact search over both
    a, b = ann.build(keys[:3000], FORCED), ann.build(keys[3000:], FORCED)
    merged = merge_top_k([ann.search(a, keys[:3000], queries, 10), ann.search(b, keys[3000:], queries, 10,
                                                                             offset=3000)], 10)
    assert recall_at_k(merged[1], top_k(queries, keys, 10)[1]) >= 0.99


def test_an_index_reads_back_as_written(data, tmp_path):
    keys, queries = data
    shard = ann.build(keys.astype(np.float16), FORCED)
    ann.write(shard, tmp_path / "ann.000.faiss")
    back = ann.read(tmp_path / "ann.000.faiss", shard.info)
    for x, y in zip(ann.search(shard, keys, queries, 10), ann.search(back, keys, queries, 10)):
        np.testing.assert_array_equal(x, y)
    exact = ann.build(keys[:10], ann.AnnSettings(min_vectors=100))
    ann.write(exact, tmp_path / "none.faiss")  # an exact shard has no file
    assert not (tmp_path / "none.faiss").exists() and ann.read(tmp_path / "none.faiss", exact.info).index is None
