"""Batched searches of one index shard's suffix array in numpy, for `tidemark trace`: many queries per call, where
infini-gram's engine answers one query per call at ~250 µs of fixed cost (measured on this machine, even on a
three-document index), which made a text of 64 words cost ~100 ms per index part.

A shard (jobs/parts/index/build.py) is `tokenized.KKK` (u32 little-endian word ids, a separator before each
document) and `table.KKK`, the token-aligned suffixes sorted by their *bytes* (libdivsufsort). Byte order of
little-endian u32s is the order of their byte-swapped values, so a suffix compares with a query token by token on
byte-swapped ids; past the end of the file a suffix is shorter, which sorts first (-1 here).

    lower_bound(queries, upper=False): per query, the first rank whose suffix is >= the query (compared on the
            query's own length; upper=True: > it). count = upper - lower.
    longest_prefix(queries): per query, the longest prefix that occurs: the longer common prefix of the query with
            the suffixes on either side of its lower bound (the closest suffixes in sorted order).

All searches run as one vectorised binary search over every query at once: log2(suffixes) rounds, each a gather of
one pointer and `width` tokens per query.
"""
from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import numpy as np

CHUNK = 8192  # queries per vectorised search (memory: CHUNK x width x 8 bytes per gathered array)
META_CACHE = 1 << 17  # documents' metadata kept per shard (a common n-gram's documents are asked for again and again)


def _swapped(ids: np.ndarray) -> np.ndarray:
    return np.asarray(ids, dtype="<u4").byteswap().astype(np.int64)


class ShardSearch:
    """One shard of a part directory: its tokens, suffix array, documents' offsets and metadata."""

    def __init__(self, where: Path, k: int):
        self.where, self.k = Path(where), k
        self.tokens = np.memmap(self.where / f"tokenized.{k:03d}", dtype="<u4", mode="r")
        size = self.tokens.size * 4
        self.ratio = max(1, int(np.ceil(np.log2(max(2, size)) / 8)))  # as index/build.build_table writes it
        table = np.memmap(self.where / f"table.{k:03d}", dtype=np.uint8, mode="r")
        self.table = table.reshape(-1, self.ratio)
        self.n = self.table.shape[0]
        self._shifts = (np.arange(self.ratio, dtype=np.uint64) * np.uint64(8))
        self._meta: dict[int, dict] = {}
        self._meta_file = None

    @cached_property
    def offsets(self) -> np.ndarray:
        """The documents' byte offsets in tokenized.KKK (read once: 8 bytes a document)."""
        return np.fromfile(self.where / f"offset.{self.k:03d}", dtype="<u8").astype(np.int64)

    @cached_property
    def meta_offsets(self) -> np.ndarray:
        return np.memmap(self.where / f"metaoff.{self.k:03d}", dtype="<u8", mode="r")

    def pointers(self, ranks: np.ndarray) -> np.ndarray:
        """Token positions of the suffixes at `ranks`."""
        raw = self.table[np.asarray(ranks, dtype=np.int64)].astype(np.uint64)
        return ((raw << self._shifts).sum(axis=1) // np.uint64(4)).astype(np.int64)

    def _suffix_tokens(self, ranks: np.ndarray, width: int) -> np.ndarray:
        """(len(ranks), width) byte-swapped tokens of the suffixes at `ranks`; -1 past the end of the file."""
        pos = self.pointers(ranks)[:, None] + np.arange(width, dtype=np.int64)[None, :]
        inside = pos < self.tokens.size
        out = _swapped(self.tokens[np.where(inside, pos, 0)])
        out[~inside] = -1
        return out

    def _compare(self, ranks: np.ndarray, q: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(suffix < query on the query's length, the common prefix's length) per row."""
        width = q.shape[1]
        s = self._suffix_tokens(ranks, width)
        care = np.arange(width)[None, :] < lengths[:, None]
        diff = (s != q) & care
        has = diff.any(axis=1)
        first = np.where(has, diff.argmax(axis=1), lengths)
        rows = np.arange(len(ranks))
        at = np.minimum(first, width - 1)
        less = has & (s[rows, at] < q[rows, at])
        return less, first

    def _bounds(self, q: np.ndarray, lengths: np.ndarray, upper: bool) -> np.ndarray:
        lo = np.zeros(len(q), dtype=np.int64)
        hi = np.full(len(q), self.n, dtype=np.int64)
        while True:
            active = lo < hi
            if not active.any():
                return lo
            a = np.flatnonzero(active)
            mid = (lo[a] + hi[a]) // 2
            less, common = self._compare(mid, q[a], lengths[a])
            if upper:  # equal on the query's length counts as "before the bound"
                less = less | (common >= lengths[a])
            lo[a] = np.where(less, mid + 1, lo[a])
            hi[a] = np.where(less, hi[a], mid)

    @staticmethod
    def _padded(queries: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        lengths = np.array([len(x) for x in queries], dtype=np.int64)
        q = np.full((len(queries), max(1, int(lengths.max(initial=1)))), -2, dtype=np.int64)
        for r, x in enumerate(queries):
            q[r, :len(x)] = _swapped(x)
        return q, lengths

    def bounds(self, queries: list[np.ndarray], upper: bool = False) -> np.ndarray:
        out = np.zeros(len(queries), dtype=np.int64)
        for c in range(0, len(queries), CHUNK):
            q, lengths = self._padded(queries[c:c + CHUNK])
            out[c:c + CHUNK] = self._bounds(q, lengths, upper)
        return out

    def counts(self, queries: list[np.ndarray]) -> np.ndarray:
        return self.bounds(queries, upper=True) - self.bounds(queries)

    def longest_prefix(self, queries: list[np.ndarray]) -> np.ndarray:
        """Per query, the length of its longest prefix that occurs in this shard."""
        out = np.zeros(len(queries), dtype=np.int64)
        for c in range(0, len(queries), CHUNK):
            q, lengths = self._padded(queries[c:c + CHUNK])
            pos = self._bounds(q, lengths, upper=False)
            best = np.zeros(len(q), dtype=np.int64)
            for side in (pos - 1, pos):
                ok = (side >= 0) & (side < self.n)
                if ok.any():
                    r = np.flatnonzero(ok)
                    _, common = self._compare(side[r], q[r], lengths[r])
                    best[r] = np.maximum(best[r], common)
            out[c:c + CHUNK] = best
        return out

    def documents(self, pointers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per token position: (its document's ordinal in the shard, the word it is in that document, the document's
        words)."""
        byte = np.asarray(pointers, dtype=np.int64) * 4
        offsets = self.offsets
        n = np.searchsorted(offsets, byte, side="right") - 1
        ends = np.append(offsets[1:], self.tokens.size * 4)
        return n, (byte - offsets[n]) // 4 - 1, (ends[n] - offsets[n]) // 4 - 1

    def occurrences(self, lo: int, hi: int) -> list[tuple[int, int, int]]:
        """The occurrences at ranks [lo, hi) in corpus order: (document ordinal, word offset in it, its words)."""
        return sorted(zip(*(a.tolist() for a in self.documents(self.pointers(np.arange(lo, hi))))))

    def metadata(self, n: int) -> dict:
        """The n-th document's metadata line (cached; the file is kept open)."""
        got = self._meta.get(n)
        if got is None:
            if self._meta_file is None:
                self._meta_file = open(self.where / f"metadata.{self.k:03d}", "rb")
            if len(self._meta) >= META_CACHE:
                self._meta.clear()
            self._meta_file.seek(int(self.meta_offsets[n]))
            got = self._meta[n] = json.loads(self._meta_file.readline())
        return got


def shard_numbers(part_dir: Path) -> list[int]:
    """The shard numbers of a part directory, in corpus order."""
    return sorted(int(p.suffix[1:]) for p in Path(part_dir).glob("tokenized.*"))
