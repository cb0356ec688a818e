"""MinHash signatures (curation/stages/dedup.py) equal the definition: the set of word 5-gram shingles, crc32 of
each, (a*h + b) mod (2**61 - 1) kept to 32 bits, the minimum per permutation."""
from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from curation.stages.dedup import MinHasher


def reference_signature(hasher: MinHasher, text: str) -> bytes:
    shingles = hasher.shingles(text)
    if not shingles:
        return np.full(hasher.permutations, 0xFFFFFFFF, dtype=np.uint32).tobytes()
    hashes = np.fromiter((zlib.crc32(s.encode("utf-8")) for s in shingles), dtype=np.uint64, count=len(shingles))
    values = (np.outer(hashes, hasher._a) + hasher._b) % np.uint64((1 << 61) - 1) & np.uint64(0xFFFFFFFF)
    return values.min(axis=0).astype(np.uint32).tobytes()


def _texts() -> list[str]:
    rng = random.Random(1)
    words = ["coffee", "Café", "ÉCLAIR", "naïve", "über", "日本語", "кофе", "x", "a_b", "2015", "😀", "--", "it's"]
    texts = ["", "   ", "!!!", "one", "one two three four", "one two three four five",
             "one two three four five six", "Repeat repeat repeat repeat repeat repeat repeat repeat"]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 200))) for _ in range(200)]
    return texts


@pytest.mark.parametrize("ngram,permutations", [(5, 128), (3, 16), (1, 64)])
def test_signature_equals_the_definition(ngram, permutations):
    hasher = MinHasher(ngram=ngram, permutations=permutations)
    for text in _texts():
        assert hasher.signature(text) == reference_signature(hasher, text), text[:80]


def test_signature_equals_the_definition_on_real_bodies(shared_data):
    from curation.sources.stackexchange.posts import body_text
    from curation.sources.stackexchange.rows import row_attributes

    hasher = MinHasher()
    with open(shared_data / "stackexchange" / "coffee.stackexchange.com" / "Posts.xml", "rb") as fh:
        bodies = [body_text(row.get("Body", ""))[0] for row in map(row_attributes, fh) if row]
    assert len(bodies) == 592
    for text in bodies:
        assert hasher.signature(text) == reference_signature(hasher, text)


def test_shingle_hashes_cover_every_shingle_occurrence():
    hasher = MinHasher(ngram=2)
    hashes = hasher.shingle_hashes("A b a B a b")
    assert sorted(hashes.tolist()) == sorted(zlib.crc32(s.encode()) for s in ["a b", "b a", "a b", "b a", "a b"])
