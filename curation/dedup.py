"""Duplicate removal over every surviving document: same id, exact text, near-duplicate text.

Keys are computed per row (stages.DedupKeys, parallel under Ray); the decision needs all rows, so it runs once over
(id, created_at, keys). Documents are visited oldest first (then by id) and each is compared with the ones already
kept, so the earliest copy survives: a later repost of a member's text is leaked content, not a non-member.

Near duplicates: MinHash over word n-gram shingles with locality-sensitive banding. Rows that share a band are
candidates; a candidate is a duplicate when the estimated Jaccard similarity (the share of equal signature slots)
reaches the threshold. The hash functions come from a fixed seed, so signatures are the same on every machine.
"""
from __future__ import annotations

import hashlib
import zlib
from typing import Any, Sequence

import numpy as np

from curation.document import utc
from curation.text import shingle_tokens

_MERSENNE = np.uint64((1 << 61) - 1)
_MAX32 = np.uint64(0xFFFFFFFF)
_HASH_SEED = 1_234_567  # fixed: signatures must not depend on the benchmark's sampling seed


class MinHasher:
    def __init__(self, ngram: int = 5, permutations: int = 128):
        self.ngram, self.permutations = ngram, permutations
        rng = np.random.RandomState(_HASH_SEED)
        self._a = rng.randint(1, 1 << 31, size=permutations, dtype=np.int64).astype(np.uint64)
        self._b = rng.randint(0, 1 << 31, size=permutations, dtype=np.int64).astype(np.uint64)

    def shingles(self, text: str) -> set[str]:
        tokens = shingle_tokens(text)
        if len(tokens) < self.ngram:
            return {" ".join(tokens)} if tokens else set()
        return {" ".join(tokens[i: i + self.ngram]) for i in range(len(tokens) - self.ngram + 1)}

    def signature(self, text: str) -> bytes:
        """`permutations` uint32 minima, as bytes (an Arrow-friendly binary column)."""
        shingles = self.shingles(text)
        if not shingles:
            return np.full(self.permutations, 0xFFFFFFFF, dtype=np.uint32).tobytes()
        hashes = np.fromiter((zlib.crc32(s.encode("utf-8")) for s in shingles), dtype=np.uint64,
                             count=len(shingles))
        # (a*h + b) mod p, kept to 32 bits: the usual universal-hash permutation (wraps identically everywhere).
        values = (np.outer(hashes, self._a) + self._b) % _MERSENNE & _MAX32
        return values.min(axis=0).astype(np.uint32).tobytes()


def similarity(sig_a: bytes, sig_b: bytes) -> float:
    a, b = np.frombuffer(sig_a, dtype=np.uint32), np.frombuffer(sig_b, dtype=np.uint32)
    return float(np.mean(a == b))


def band_keys(signature: bytes, bands: int) -> list[bytes]:
    sig = np.frombuffer(signature, dtype=np.uint32)
    rows = len(sig) // bands
    return [i.to_bytes(2, "big") + hashlib.blake2b(sig[i * rows:(i + 1) * rows].tobytes(), digest_size=8).digest()
            for i in range(bands)]


def duplicate_decisions(rows: Sequence[dict[str, Any]], *, exact: bool = True, near: bool = False,
                        threshold: float = 0.8, bands: int = 16) -> list[tuple[str, str] | None]:
    """For each row (same order): None to keep it, or (reason, detail) to drop it. Reasons: duplicate_id (a
    source gave two documents one id), exact_duplicate, near_duplicate. Rows need id and created_at, plus
    exact_key / minhash for the checks asked for."""
    order = sorted(range(len(rows)), key=lambda i: (utc(rows[i]["created_at"]), rows[i]["id"]))
    seen_ids: set[str] = set()
    exact_keep: dict[str, str] = {}
    band_index: dict[bytes, list[str]] = {}
    signatures: dict[str, bytes] = {}
    decisions: list[tuple[str, str] | None] = [None] * len(rows)
    for i in order:
        r, rid = rows[i], rows[i]["id"]
        if rid in seen_ids:
            decisions[i] = ("duplicate_id", "another document has this id")
            continue
        seen_ids.add(rid)
        if exact:
            first = exact_keep.setdefault(r["exact_key"], rid)
            if first != rid:
                decisions[i] = ("exact_duplicate", f"same text as {first}")
                continue
        if near:
            keys = band_keys(r["minhash"], bands)
            match = _near_match(r["minhash"], keys, band_index, signatures, threshold)
            if match is not None:
                decisions[i] = ("near_duplicate", f"similar to {match[0]} (jaccard~{match[1]:.2f})")
                continue
            signatures[rid] = r["minhash"]
            for key in keys:
                band_index.setdefault(key, []).append(rid)
    return decisions


def _near_match(sig: bytes, keys: list[bytes], band_index: dict[bytes, list[str]], signatures: dict[str, bytes],
                threshold: float) -> tuple[str, float] | None:
    candidates = sorted({other for key in keys for other in band_index.get(key, ())})
    for other in candidates:
        sim = similarity(sig, signatures[other])
        if sim >= threshold:
            return other, sim
    return None

