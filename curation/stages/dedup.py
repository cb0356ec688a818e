"""Duplicate removal over every surviving document: same id, exact text, near-duplicate text.

Keys are computed per row (stages.DedupKeys, parallel under Ray); the decisions compare rows that share a key, so
they run per hash partition of that key (below). The oldest copy survives: a later repost of a member's text is
leaked content, not a non-member.

Near duplicates: MinHash over word n-gram shingles with locality-sensitive banding. Rows that share a band are
candidates; a candidate is a duplicate when the estimated Jaccard similarity (the share of equal signature slots)
reaches the threshold. The hash functions come from a fixed seed, so signatures are the same on every machine.
"""
from __future__ import annotations

import hashlib
import zlib
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from curation.document import utc
from curation.text import shingle_tokens

_MERSENNE = np.uint64((1 << 61) - 1)
_MAX32 = np.uint64(0xFFFFFFFF)
_SHIFT61, _ONE = np.uint64(61), np.uint64(1)
_HASH_SEED = 1_234_567  # fixed: signatures must not depend on the benchmark's sampling seed
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


class MinHasher:
    def __init__(self, ngram: int = 5, permutations: int = 128):
        self.ngram, self.permutations = ngram, permutations
        rng = np.random.RandomState(_HASH_SEED)
        self._a = rng.randint(1, 1 << 31, size=permutations, dtype=np.int64).astype(np.uint64)
        self._b = rng.randint(0, 1 << 31, size=permutations, dtype=np.int64).astype(np.uint64)

    def shingles(self, text: str) -> set[str]:
        """The word n-grams a signature hashes (the definition; `signature` hashes them without building them)."""
        tokens = shingle_tokens(text)
        if len(tokens) < self.ngram:
            return {" ".join(tokens)} if tokens else set()
        return {" ".join(tokens[i: i + self.ngram]) for i in range(len(tokens) - self.ngram + 1)}

    def shingle_hashes(self, text: str) -> np.ndarray:
        """crc32 of the UTF-8 bytes of every shingle occurrence, repeats included: a signature is a minimum over
        them, which repeats do not change, so this equals hashing the set `shingles` (and skips building it)."""
        tokens = shingle_tokens(text)
        if len(tokens) <= self.ngram:
            return np.array([zlib.crc32(" ".join(tokens).encode("utf-8"))] if tokens else [], dtype=np.uint64)
        # A shingle's bytes are a slice of the joined text's: \w tokens hold no space, and UTF-8 never puts byte
        # 0x20 inside a multi-byte character, so the joined bytes' spaces are exactly the token boundaries.
        joined = " ".join(tokens).encode("utf-8")
        spaces = np.flatnonzero(np.frombuffer(joined, dtype=np.uint8) == 32)
        starts, ends, k = [0, *(spaces + 1).tolist()], [*spaces.tolist(), len(joined)], self.ngram - 1
        crc32 = zlib.crc32
        return np.fromiter((crc32(joined[s:e]) for s, e in zip(starts, ends[k:])), dtype=np.uint64,
                           count=len(tokens) - k)

    def signature(self, text: str) -> bytes:
        """`permutations` uint32 minima, as bytes (an Arrow-friendly binary column)."""
        hashes = self.shingle_hashes(text)
        if not len(hashes):
            return np.full(self.permutations, 0xFFFFFFFF, dtype=np.uint32).tobytes()
        # (a*h + b) mod p, kept to 32 bits: the usual universal-hash permutation (wraps identically everywhere).
        # a*h + b < 2**63 + 2**31 never wraps. The reduction mod the Mersenne prime p = 2**61 - 1 is done with
        # shifts and masks, because numpy's uint64 remainder (a division per slot) was most of this function:
        # x = (x >> 61)*2**61 + (x & p) ≡ (x >> 61) + (x & p) < 2**61 + 8, and then adding ((x + 1) >> 61) adds
        # 1 exactly when x >= p, which leaves x - p in the low 61 bits; only the low 32 are kept.
        x = np.multiply.outer(hashes, self._a)
        x += self._b
        high = x >> _SHIFT61
        x &= _MERSENNE
        x += high
        high = x + _ONE
        high >>= _SHIFT61
        x += high
        x &= _MAX32
        return x.min(axis=0).astype(np.uint32).tobytes()


def similarity(sig_a: bytes, sig_b: bytes) -> float:
    a, b = np.frombuffer(sig_a, dtype=np.uint32), np.frombuffer(sig_b, dtype=np.uint32)
    return float(np.mean(a == b))


def band_keys(signature: bytes, bands: int) -> list[bytes]:
    sig = np.frombuffer(signature, dtype=np.uint32)
    rows = len(sig) // bands
    return [i.to_bytes(2, "big") + hashlib.blake2b(sig[i * rows:(i + 1) * rows].tobytes(), digest_size=8).digest()
            for i in range(bands)]


# ---------------------------------------------------------------- decisions, one partition at a time
#
# Every decision is "the oldest wins": rows are ordered by (created_at, id, row_no) -- row_no is the row's place in
# the input, which breaks ties between copies that share id and date -- and a row is dropped when an earlier row
# wins over it. Each check only ever compares rows that share a key (id, exact key, LSH band), so it runs over hash
# partitions of that key, on workers, and the union of the partitions' decisions is the decision over the corpus.
# The near-duplicate rule needs one more step: "dropped when similar to an earlier *kept* row" is a greedy pass,
# so the partitions return the similar pairs (edges) and `resolve_near` walks them in order. Edges exist only
# between near duplicates, so that walk sees a small fraction of the corpus. The result equals a single
# oldest-first pass over all rows (tests/curation/release/test_release_passes.py checks it against that reference).

Drop = dict  # {"row_no", "id", "reason", "detail"}


def created_us(created_at: Any) -> int:
    """Microseconds since the epoch: an exact, sortable form of a document's date."""
    return (utc(created_at) - _EPOCH) // _MICROSECOND


def order_key(row: Mapping[str, Any]) -> tuple[int, str, int]:
    return created_us(row["created_at"]), row["id"], int(row.get("row_no") or 0)


def first_of_each(rows: Iterable[Mapping[str, Any]], field: str, reason: str,
                  detail: Callable[[Mapping[str, Any]], str]) -> tuple[list[dict], list[Drop]]:
    """(kept rows, drops): per value of `field`, the oldest row stays and every later one is dropped with
    `reason` and detail(the kept row). `rows` must hold every row of each value it holds (a hash partition)."""
    kept: list[dict] = []
    drops: list[Drop] = []
    first: dict[Any, Mapping[str, Any]] = {}
    for row in sorted(rows, key=order_key):
        winner = first.setdefault(row[field], row)
        if winner is row:
            kept.append(dict(row))
        else:
            drops.append({"row_no": int(row["row_no"]), "id": row["id"], "reason": reason, "detail": detail(winner)})
    return kept, drops


def duplicate_ids(rows: Iterable[Mapping[str, Any]]) -> tuple[list[dict], list[Drop]]:
    """A source that gave two documents one id: the oldest copy stays."""
    return first_of_each(rows, "id", "duplicate_id", lambda _: "another document has this id")


def exact_duplicates(rows: Iterable[Mapping[str, Any]]) -> tuple[list[dict], list[Drop]]:
    return first_of_each(rows, "exact_key", "exact_duplicate", lambda winner: f"same text as {winner['id']}")


def band_entries(rows: Iterable[Mapping[str, Any]], bands: int) -> Iterator[dict]:
    """One entry per (row, LSH band): what the near-duplicate check groups by `band`."""
    for row in rows:
        us, rid, row_no = order_key(row)
        for key in band_keys(row["minhash"], bands):
            yield {"band": key, "created_us": us, "id": rid, "row_no": row_no, "minhash": row["minhash"]}


def near_edges(entries: Iterable[Mapping[str, Any]], threshold: float) -> list[dict]:
    """Pairs of rows that share a band and whose signatures agree on at least `threshold` of their slots, from
    the earlier row (a_*) to the later (b_*). `entries` must hold every entry of each band it holds."""
    by_band: dict[bytes, list[Mapping[str, Any]]] = {}
    for e in entries:
        by_band.setdefault(e["band"], []).append(e)
    edges: dict[tuple[int, int], dict] = {}
    for group in by_band.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda e: (e["created_us"], e["id"], e["row_no"]))
        for j, b in enumerate(group):
            for a in group[:j]:
                if (a["row_no"], b["row_no"]) in edges:
                    continue
                sim = similarity(b["minhash"], a["minhash"])
                if sim >= threshold:
                    edges[(a["row_no"], b["row_no"])] = {
                        "a_us": a["created_us"], "a_id": a["id"], "a_row": a["row_no"],
                        "b_us": b["created_us"], "b_id": b["id"], "b_row": b["row_no"], "sim": sim}
    return list(edges.values())


def resolve_near(edges: Iterable[Mapping[str, Any]]) -> list[Drop]:
    """The greedy oldest-first pass over the similar pairs: a row is a near duplicate when an earlier row that
    was itself kept is similar to it; the detail names the smallest such id, as the single pass reports it."""
    earlier: dict[tuple, list[tuple]] = {}
    nodes: set[tuple] = set()
    for e in edges:
        a, b = (e["a_us"], e["a_id"], e["a_row"]), (e["b_us"], e["b_id"], e["b_row"])
        nodes.update((a, b))
        earlier.setdefault(b, []).append((e["a_id"], a, e["sim"]))
    dropped: set[tuple] = set()
    drops: list[Drop] = []
    for node in sorted(nodes):
        matches = sorted((aid, sim) for aid, a, sim in earlier.get(node, ()) if a not in dropped)
        if matches:
            dropped.add(node)
            drops.append({"row_no": node[2], "id": node[1], "reason": "near_duplicate",
                          "detail": f"similar to {matches[0][0]} (jaccard~{matches[0][1]:.2f})"})
    return drops


def dedup_drops(rows: Sequence[Mapping[str, Any]], *, exact: bool = True, near: bool = False,
                threshold: float = 0.8, bands: int = 16) -> list[Drop]:
    """Every drop over `rows` as one partition (the local runner; the Ray runner hash-partitions each step).
    Rows need row_no, id and created_at, plus exact_key / minhash for the checks asked for."""
    kept, drops = duplicate_ids(rows)
    if exact:
        kept, more = exact_duplicates(kept)
        drops += more
    if near:
        drops += resolve_near(near_edges(band_entries(kept, bands), threshold))
    return drops
