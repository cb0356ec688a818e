"""The batched suffix-array search against a brute-force scan of a shard's tokens: counts, bounds and the longest
occurring prefix, on ids whose byte order differs from their numeric order (the table sorts bytes)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pydivsufsort")

from jobs.parts.index.build import _ShardWriter  # noqa: E402
from jobs.parts.index.search import ShardSearch  # noqa: E402

ALPHABET = np.array([1, 2, 256, 257, 65536, 16777216, 0xFFFFFFFE], dtype=np.uint32)


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    rng = np.random.default_rng(5)
    where = tmp_path_factory.mktemp("shard")
    docs = [ALPHABET[rng.integers(0, 4 if k % 2 else len(ALPHABET), rng.integers(1, 40))] for k in range(25)]
    w = _ShardWriter(where, 0)
    for k, d in enumerate(docs):
        w.add(f"d{k}", d, text=" ".join(map(str, d)), file="f.jsonl")
    w.close()
    return ShardSearch(where, 0), docs


def brute_count(docs, q) -> int:
    return sum(1 for d in docs for i in range(len(d) - len(q) + 1) if list(d[i:i + len(q)]) == list(q))


def test_counts_and_longest_prefixes_equal_a_scan(shard):
    search, docs = shard
    rng = np.random.default_rng(6)
    queries = [ALPHABET[rng.integers(0, 4, rng.integers(1, 9))] for _ in range(300)]
    queries += [d[3:3 + 12] for d in docs if d.size > 5]  # long runs that occur
    got = search.counts(queries)
    assert got.tolist() == [brute_count(docs, q) for q in queries]
    longest = search.longest_prefix(queries)
    want = [max([n for n in range(len(q) + 1) if n == 0 or brute_count(docs, q[:n])]) for q in queries]
    assert longest.tolist() == want


def test_occurrences_point_at_their_documents_and_words(shard):
    search, docs = shard
    q = docs[4][2:5]
    lo, hi = search.bounds([q])[0], search.bounds([q], upper=True)[0]
    n, offset, words = search.documents(search.pointers(np.arange(lo, hi)))
    for d, o, w in zip(n.tolist(), offset.tolist(), words.tolist()):
        assert list(docs[d][o:o + 3]) == list(q) and w == docs[d].size
    assert search.metadata(4) == {"id": "d4", "file": "f.jsonl", "shard": 0, "n": 4}
