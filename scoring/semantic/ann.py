"""Approximate top-k over one shard of L2-normalised vectors: an inverted-file index (faiss IVF, inner product),
and exact search (search.top_k) below a size where the index would not pay.

Where it is used: a corpus index's window vectors (`tidemark index-corpus --embeddings`, one index per shard of at
most a million windows, built once) are searched by every `overlap --index --semantic` run. `overlap --corpus
--semantic` embeds its windows as it goes and keeps their exact top k: embedding, not search, is its cost.

The index. nlist = round(sqrt(n)) lists found by spherical k-means (centroids kept unit length, as the vectors
are, so that a vector's list is the one of highest inner product) on a seeded sample of TRAIN_PER_LIST points a
list; each vector is put in the list of its nearest centroid, and a query scans the vectors of its nprobe nearest
lists exactly. Float16 vectors are stored as float16 (a scalar quantizer whose decoding is exact, not applied to
residuals), float32 ones as they are (IVF-Flat): the scores of the windows found are their exact inner products.

nprobe is measured, not guessed: build() takes CALIBRATION_QUERIES of the shard's own vectors as queries (each
one's own vector left out of its lists), finds their exact top k, and keeps the smallest nprobe whose search finds
TARGET_RECALL of them at k = 10 and at CALIBRATION_K (doubling, then bisection). Measured in
bench/results/semantic_ann.md: on the study's MiniLM windows (19.6k) the shard's own vectors set nprobe 88 of 140
lists, at which the benchmark items found 1.0 of their exact top 10 and 0.9998 of their top 100; on a million
synthetic vectors fitted to those windows, nprobe 65 of 1,000, recall 0.998 / 0.994 on other draws of the same
law, 8.7x faster than exact search at k = 100. The target is held on the shard's own vectors, so a benchmark whose
items lie far from every window could see less: the bench is where to look.

Why IVF and not HNSW (the same bench): both reach 0.999 at k = 100 on the study's windows, but HNSW (M = 32) took
6.2 s to build its graph there, vector by vector, where IVF trained and filled its lists in under a second from a
sample; the graph also adds 2 x M ids a vector, the lists one.

Results follow search.top_k's convention (scores [n_q, k] float32 best first, global ids = row + offset, pads
-inf / -1, equal scores by lower id), so search.merge_top_k merges shards and parts unchanged. Deterministic: the
sample and k-means are seeded, and faiss's k-means and search give the same answer at any thread count.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

# Shards with fewer vectors are searched exactly: up to 250k synthetic vectors the index, at the nprobe that held
# recall, searched at most 1.6x faster than exact search, after a build and calibration (bench/results/semantic_ann.md).
EXACT_BELOW = 250_000
TARGET_RECALL = 0.995
CALIBRATION_K = 100  # `overlap --top-k`'s default (k = 10 is held to the target too)
CALIBRATION_QUERIES = 256
TRAIN_PER_LIST = 64  # k-means sample per list: faiss asks for at least 39
KMEANS_ITERATIONS = 16
ADD_ROWS = 1 << 16  # vectors made float32 and added at a time: a float16 shard is never copied whole


@dataclass(frozen=True)
class AnnSettings:
    """How a shard's index is built (recorded in the corpus index's manifest)."""

    min_vectors: int = EXACT_BELOW
    target_recall: float = TARGET_RECALL
    calibration_k: int = CALIBRATION_K
    calibration_queries: int = CALIBRATION_QUERIES
    train_per_list: int = TRAIN_PER_LIST
    iterations: int = KMEANS_ITERATIONS
    seed: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ShardIndex:
    """A built index and what the build measured; `index` None means exact search."""

    index: object | None
    info: dict


def n_lists(n: int) -> int:
    return max(1, int(round(np.sqrt(n))))


def _float32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def _new_index(d: int, nlist: int, dtype, settings: AnnSettings):
    import faiss

    quantizer = faiss.IndexFlatIP(d)
    if np.dtype(dtype) == np.float16:
        index = faiss.IndexIVFScalarQuantizer(quantizer, d, nlist, faiss.ScalarQuantizer.QT_fp16,
                                              faiss.METRIC_INNER_PRODUCT)
        index.by_residual = False  # the vector itself in fp16, decoded exactly: not its residual to a centroid
    else:
        index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.spherical = True
    index.cp.niter = settings.iterations
    index.cp.seed = settings.seed
    index.cp.min_points_per_centroid = 1  # tiny shards (forced through the index in tests) train quietly
    return index


def build(vectors, settings: AnnSettings = AnnSettings()) -> ShardIndex:
    """An IVF index over `vectors` (float16 or float32 rows, e.g. a memory-mapped .npy) with its nprobe
    calibrated, or ShardIndex(None, ...) (exact search) when there are fewer than settings.min_vectors."""
    n, d = int(np.shape(vectors)[0]), int(np.shape(vectors)[1])
    if n < max(1, settings.min_vectors):
        return ShardIndex(None, {"kind": "exact", "vectors": n})
    import time

    t0 = time.perf_counter()
    rng = np.random.default_rng(settings.seed)
    nlist = n_lists(n)
    index = _new_index(d, nlist, np.asarray(vectors[:1]).dtype, settings)
    train = np.sort(rng.choice(n, size=min(n, settings.train_per_list * nlist), replace=False))
    index.train(_float32(vectors[train]))
    for lo in range(0, n, ADD_ROWS):
        index.add(_float32(vectors[lo:lo + ADD_ROWS]))
    built = time.perf_counter() - t0
    nprobe, recall = calibrate(index, vectors, settings, rng)
    return ShardIndex(index, {"kind": "ivf", "vectors": n, "nlist": nlist, "nprobe": nprobe,
                              "calibration_recall": round(recall, 5), "calibration_k": min(settings.calibration_k, n),
                              "train_points": int(train.size), "storage": str(np.asarray(vectors[:1]).dtype),
                              "build_s": round(built, 3), "calibrate_s": round(time.perf_counter() - t0 - built, 3)})


def _without(ids: np.ndarray, own: np.ndarray, k: int) -> np.ndarray:
    """Each row's ids but the row's own (a calibration query is a vector of the shard), the first k kept."""
    order = np.argsort(ids == own[:, None], axis=1, kind="stable")
    return np.take_along_axis(ids, order, 1)[:, :k]


def calibrate(index, vectors, settings: AnnSettings, rng) -> tuple[int, float]:
    """The smallest nprobe at which a sample of the shard's own vectors finds settings.target_recall of their exact
    top k, at k = 10 and at settings.calibration_k (a prefix of a top k is the top of that prefix's size, so one
    search answers both), and that recall (the lower of the two). A query's own vector is left out of both lists:
    its own list is always scanned, so it would be a free hit. Recall does not fall as nprobe grows (more lists
    scanned, exact scores), so doubling finds a bound and bisection the least nprobe under it."""
    from scoring.semantic.search import recall_at_k, top_k_rows

    n, nlist = len(vectors), index.nlist
    k = min(settings.calibration_k, n - 1)
    if k < 1:
        return nlist, 1.0
    own = np.sort(rng.choice(n, size=min(n, settings.calibration_queries), replace=False))
    queries = _float32(vectors[own])
    exact = _without(top_k_rows(queries, vectors, k + 1)[1], own, k)
    ks = sorted({min(10, k), k})
    seen: dict[int, float] = {}

    def recall(p: int) -> float:
        if p not in seen:
            got = _without(_search(index, queries, k + 1, 0, p)[1], own, k)
            seen[p] = min(recall_at_k(got[:, :j], exact[:, :j]) for j in ks)
        return seen[p]

    hi = 1
    while recall(hi) < settings.target_recall and hi < nlist:
        hi = min(nlist, 2 * hi)
    lo = hi // 2 + 1 if hi > 1 else 1
    while lo < hi:
        mid = (lo + hi) // 2
        if recall(mid) >= settings.target_recall:
            hi = mid
        else:
            lo = mid + 1
    return hi, recall(hi)


def _search(index, queries: np.ndarray, k: int, offset: int, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
    from scoring.semantic.search import PAD_ID, sort_top_k

    index.nprobe = int(nprobe)
    scores, ids = index.search(_float32(queries), k)
    found = ids >= 0
    return sort_top_k(np.where(found, scores, -np.inf), np.where(found, ids + offset, PAD_ID), k)


def search(shard: ShardIndex, vectors, queries: np.ndarray, k: int, offset: int = 0,
           nprobe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each query's k nearest rows of the shard (search.top_k's convention): through the index at its calibrated
    nprobe (or `nprobe`), or exactly over `vectors` when the shard has no index."""
    from scoring.semantic.search import top_k, top_k_rows

    q = _float32(queries)
    if shard.index is None:
        return top_k_rows(q, vectors, k, offset=offset)
    if k == 0 or not q.shape[0]:
        return top_k(q, np.zeros((0, q.shape[1]), np.float32), k)
    return _search(shard.index, q, k, offset, nprobe or shard.info["nprobe"])


def write(shard: ShardIndex, path: str | Path) -> None:
    """The index's file (faiss's format); nothing for an exact shard."""
    if shard.index is not None:
        import faiss

        faiss.write_index(shard.index, str(path))


def read(path: str | Path, info: dict) -> ShardIndex:
    """A shard written by write(), with the info build() returned (the manifest keeps it); exact when
    info["kind"] is "exact" (no file)."""
    if info.get("kind") == "exact":
        return ShardIndex(None, info)
    import faiss

    return ShardIndex(faiss.read_index(str(path)), info)


def set_threads(n: int | None) -> None:
    """faiss's OpenMP threads (a worker's CPUs: two tasks on two cores must not each take both)."""
    import faiss

    if n:
        faiss.omp_set_num_threads(max(1, int(n)))
