"""Word n-grams as 64-bit hashes, vectorised: the engine behind `tidemark overlap` and the audit's corpus evidence.

The definition is GPT-3's and lm-evaluation-harness's decontamination check: a text's words are the `\\w+` runs of
its lowercased form (punctuation and whitespace differences do not hide a copy); its n-grams are the windows of n
consecutive words (n = 13); a benchmark row's `share` is the fraction of its n-gram positions whose n-gram occurs
anywhere in the corpus (a position counts even when its n-gram repeats one at another position).

Hashing, so the corpus side never builds a Python object per word or n-gram:
- a batch of texts is lowercased by `str.lower` and read as one array of Unicode code points (one byte
  each when the batch is ASCII, as most English web text is; two when it stays in the BMP; four otherwise); a code
  point is a word character when `re`'s `\\w` says so (alphanumeric or `_`: one `bytes.translate` for an ASCII
  batch, else one lookup in a table over all code points, each 256-code-point block filled from `str.isalnum` the
  first time a text uses it), so the words are exactly those of `words()`;
- a word's hash is a polynomial over its code points, Σ c_j·Q^(len-1-j) mod 2^64, through splitmix64's finaliser,
  computed for every word of the batch at once from one prefix sum (numpy; uint64 arithmetic wraps mod 2^64);
- an n-gram's hash is the polynomial Σ h(w_i)·P^(n-1-i) mod 2^64 over its words' hashes, computed for every
  window of the batch with n numpy multiply-adds (windows that cross a document boundary are dropped). Two
  different n-grams collide with probability about n/2^64 per pair: at 10^12 corpus n-grams against 10^7 benchmark
  n-grams, about 10^-7 false matches in all.
Every pass over the code points counts (a 10 MB part is 10M of them): a batch is read in five (encode, table, edge,
multiply, running sum), each into a buffer of its own, and per-text work is done on the texts' boundaries, never by
broadcasting a text index to every word or window (bench numbers in docs/overlap.md).
"""
from __future__ import annotations

import hashlib
import re
from typing import Iterable, Sequence

import numpy as np

WORD = re.compile(r"\w+")
MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # P: odd, with well-mixed bits (the 64-bit golden ratio)
BYTE_BASE = 0x100000001B3  # Q, over a word's code points (FNV's 64-bit prime; odd: it has an inverse mod 2^64)
SEPARATOR = "\x00"  # between texts (and words) of a batch: never part of a word
CHUNK = 1 << 24  # code points hashed from one prefix sum

_BLOCK_BITS = 8  # the word table is filled 256 code points at a time, the first time a batch uses a block
_WORD_TABLE = np.zeros(0x110000, dtype=bool)  # code point -> re's \w (alphanumeric or "_"), where filled
_FILLED = np.zeros(0x110000 >> _BLOCK_BITS, dtype=bool)


def _fill(blocks: Iterable[int]) -> None:
    for b in blocks:
        lo = b << _BLOCK_BITS
        # str.isalnum is what re's \w tests (with "_"): the table agrees with re on every code point
        _WORD_TABLE[lo:lo + (1 << _BLOCK_BITS)] = [c == 0x5F or chr(c).isalnum()
                                                   for c in range(lo, lo + (1 << _BLOCK_BITS))]
        _FILLED[b] = True


_fill([0])  # ASCII and Latin-1: an ASCII batch never needs another block


def words(text: str) -> list[str]:
    """The text's words: `\\w+` runs of its lowercased form."""
    return WORD.findall(text.lower())


def text_key(text) -> int | None:
    """A text's 64-bit join key: its `words` joined by one space, hashed (blake2b). Two texts that differ only in
    case, spacing or punctuation share it: how `impact` finds its evidence's items and `build-benchmark
    --drop-rephrased` an overlap's rows when the ids differ. None for a text with no word (or not a string)."""
    if not isinstance(text, str):
        return None
    w = words(text)
    return int.from_bytes(hashlib.blake2b(" ".join(w).encode(), digest_size=8).digest(), "little") if w else None


def word_spans(text: str, limit: int | None = None) -> list[tuple[int, int]] | None:
    """The character spans in `text` of its first `limit` words as `words` counts them (all without a limit), or
    None where lowercasing changes the words (some non-ASCII text), so that no span of the original text is theirs:
    what a snippet or a highlight of the original text needs."""
    from itertools import islice

    if not text.isascii() and len(WORD.findall(text)) != len(words(text)):
        return None
    return [m.span() for m in islice(WORD.finditer(text), limit)]


class _Powers:
    """B^k and B^-k mod 2^64 for k < size, grown on demand (a batch of 10 MB needs 10M of each)."""

    def __init__(self, base: int):
        self.base = base
        self.pow = np.ones(1, dtype=np.uint64)
        self.inv = np.ones(1, dtype=np.uint64)

    def upto(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        if self.pow.size < size:
            size = max(size, 2 * self.pow.size)
            b_inv = pow(self.base, -1, 1 << 64)
            self.pow = np.cumprod(np.full(size, self.base, dtype=np.uint64), dtype=np.uint64)
            self.pow = np.concatenate([[np.uint64(1)], self.pow[:-1]])
            self.inv = np.cumprod(np.full(size, b_inv, dtype=np.uint64), dtype=np.uint64)
            self.inv = np.concatenate([[np.uint64(1)], self.inv[:-1]])
        return self.pow, self.inv


_byte_powers = _Powers(BYTE_BASE)
_word_powers = _Powers(int(MULTIPLIER))


def _scaled_prefix(values: np.ndarray, powers: _Powers) -> tuple[np.ndarray, np.ndarray]:
    """(S, B^k): S[i] = Σ_{j<i} v_j·B^-(j+1) mod 2^64, so that the polynomial of any span, Σ_{j=s}^{e-1}
    v_j·B^(e-1-j), is (S[e] - S[s])·B^e: every span of an array from two passes over it (a multiply, cast on the
    fly so the values are never copied to uint64, and a running sum), both in one buffer."""
    pw, inv = powers.upto(values.size + 2)
    prefix = np.empty(values.size + 1, dtype=np.uint64)
    prefix[0] = 0
    np.multiply(values, inv[1:values.size + 1], out=prefix[1:], dtype=np.uint64)
    np.cumsum(prefix[1:], out=prefix[1:])
    return prefix, pw


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place: every bit of a word's polynomial moves every bit of its hash."""
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


def _hash_spans(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The hash of each span [start, end) of `data` (code points), all at once; a long text in pieces of about
    CHUNK code points, cut between words, so that the power tables stay small (16 bytes per code point)."""
    if not starts.size:
        return np.zeros(0, dtype=np.uint64)
    if data.size <= CHUNK:
        return _hash_chunk(data, starts, ends)
    out = np.empty(starts.size, dtype=np.uint64)
    i = 0
    while i < starts.size:
        base = starts[i]
        j = max(i + 1, int(np.searchsorted(ends, base + CHUNK, side="right")))
        out[i:j] = _hash_chunk(data[base:ends[j - 1]], starts[i:j] - base, ends[i:j] - base)
        i = j
    return out


def _hash_chunk(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    prefix, pw = _scaled_prefix(data, _byte_powers)
    h = prefix[ends]
    h -= prefix[starts]
    h *= pw[ends]
    return _mix(h)


def _spans(is_word: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the runs of True; the first and the last entry must be False (a separator)."""
    edges = np.flatnonzero(is_word[1:] != is_word[:-1])
    edges += 1
    return edges[0::2], edges[1::2]


def _code_points(text: str) -> np.ndarray:
    if text.isascii():  # O(1) in CPython; one byte a code point is a quarter of the memory traffic
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    # most non-ASCII text (accents, dashes, curly quotes, CJK) stays in the BMP: two bytes a code point, as UTF-16
    # where no code point needed a surrogate pair (surrogatepass: a lone surrogate is its own 2-byte unit)
    wide = text.encode("utf-16-le", "surrogatepass")
    if len(wide) == 2 * len(text):
        return np.frombuffer(wide, dtype=np.uint16)
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _is_word(cp: np.ndarray) -> np.ndarray:
    if cp.dtype != np.uint8 and cp.size:
        top = int(cp.max())
        if top > 0xFF and not _FILLED[0xFF]:  # the first text past Latin-1 fills the whole BMP (once, ~10 ms)
            _fill(range(1, 0x100))
        if top > 0xFFFF:  # other planes (emoji, CJK extensions, historic scripts): the blocks this batch uses
            used = np.unique(cp[cp > 0xFFFF] >> _BLOCK_BITS)
            _fill(used[~_FILLED[used]].tolist())
    return np.take(_WORD_TABLE, cp)  # take, not [], is numpy's faster gather


_ASCII_WORD = _WORD_TABLE[:0x80].astype(np.uint8).tobytes() + bytes(0x80)  # bytes.translate's table: 1 = \w


def _joined(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The texts lowercased, as one array of code points, each text between separators; whether each code point
    is a word character; and where each text ends in it."""
    lowered = [t.lower() for t in texts]  # per text: lowering can change a length ('İ' -> 'i̇'), and str.lower
    # takes its ASCII fast path on each ASCII text, where one call on a batch with a dash in it would not
    low = SEPARATOR.join(["", *lowered, ""])
    lengths = np.fromiter(map(len, lowered), dtype=np.int64, count=len(lowered))
    ends = np.cumsum(lengths + 1)
    if low.isascii():  # the word table as one bytes.translate: no index array, ~1 GB/s
        raw = low.encode("ascii")
        return np.frombuffer(raw, dtype=np.uint8), np.frombuffer(raw.translate(_ASCII_WORD), dtype=bool), ends
    cp = _code_points(low)
    return cp, _is_word(cp), ends


def batch_words(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(hash of every word of the batch, in order; number of words per text)."""
    cp, is_word, text_ends = _joined(texts)
    starts, ends = _spans(is_word)
    counts = np.diff(np.searchsorted(starts, text_ends), prepend=0)  # words never cross a separator
    return _hash_spans(cp, starts, ends), counts


def word_hashes(tokens: Sequence[str]) -> np.ndarray:
    """The hashes of already-split, lowercased words (what batch_words gives for them in a text)."""
    if not tokens:
        return np.zeros(0, dtype=np.uint64)
    cp = _code_points(SEPARATOR.join(["", *tokens, ""]))
    starts, ends = _spans(cp != 0)
    return _hash_spans(cp, starts, ends)


def window_hashes(hashes: np.ndarray, n: int) -> np.ndarray:
    """The hash of every window of n consecutive entries (len - n + 1 of them; none when shorter than n): the
    polynomial Σ h_i·P^(n-1-i), as a span of a scaled prefix sum (four passes over the words whatever n is; Horner
    takes 2(n-1)), in pieces of CHUNK windows so that the power tables stay small."""
    m = len(hashes) - n + 1
    if m <= 0:
        return np.zeros(0, dtype=np.uint64)
    out = hashes[:m].copy()
    if n <= 3:
        for i in range(1, n):  # Horner: ((h0·P + h1)·P + h2)… — uint64 arithmetic wraps mod 2^64
            out *= MULTIPLIER
            out += hashes[i:i + m]
        return out
    for lo in range(0, m, CHUNK):
        piece = hashes[lo:lo + CHUNK + n - 1]
        k = piece.size - n + 1
        prefix, pw = _scaled_prefix(piece, _word_powers)
        np.subtract(prefix[n:n + k], prefix[:k], out=out[lo:lo + k])
        out[lo:lo + k] *= pw[n:n + k]
    return out


def text_ngrams(text: str, n: int) -> tuple[list[str], np.ndarray]:
    """A text's words and the hash of each of its n-gram positions."""
    w = words(text)
    return w, window_hashes(word_hashes(w), n)


def window_owners(counts: np.ndarray, n: int, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For windows of a batch's words (by the position of their first word): the text each starts in, and whether
    it ends in that text (a window that runs into the next text is no n-gram of either)."""
    ends = np.cumsum(counts)
    owner = np.searchsorted(ends, positions, side="right")
    return owner, positions + n <= ends[owner]


def batch_ngrams(texts: Sequence[str], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every n-gram of a batch of texts: (hashes, index of the text each came from), texts in order, positions in
    order within each. One pass of numpy over the whole batch; windows that cross from one text into the next are
    dropped."""
    flat, counts = batch_words(texts)
    grams = window_hashes(flat, n)
    owner, inside = window_owners(counts, n, np.arange(grams.size))
    return grams[inside], owner[inside]


def batch_hits(texts: Sequence[str], n: int, members: "NgramSet") -> tuple[np.ndarray, np.ndarray, int]:
    """The n-grams of a batch that are `members` (hashes, text index, in order) and how many n-gram positions the
    batch has: batch_ngrams filtered, with the per-text bookkeeping done for the members found only."""
    flat, counts = batch_words(texts)
    grams = window_hashes(flat, n)
    at = np.flatnonzero(members.contains(grams))
    owner, inside = window_owners(counts, n, at)
    return grams[at[inside]], owner[inside], int(np.maximum(counts - (n - 1), 0).sum())


class NgramSet:
    """A set of n-gram hashes for bulk membership: a sorted array, and in front of it a bytemap indexed by a
    hash's low bits (at least 16 slots per member, 4-256 MB, so that ~94% or more of the corpus n-grams that are
    not members are rejected by one lookup; only candidates pay the binary search)."""

    def __init__(self, hashes: np.ndarray):
        self.hashes = np.asarray(hashes, dtype=np.uint64)
        if not (self.hashes[1:] > self.hashes[:-1]).all():  # a benchmark's distinct hashes come sorted already
            self.hashes = np.unique(self.hashes)
        bits = int(np.clip(np.ceil(np.log2(max(1, 16 * self.hashes.size))), 22, 28))
        self.mask = np.uint64((1 << bits) - 1)
        self.table = np.zeros(1 << bits, dtype=bool)
        self.table[(self.hashes & self.mask).astype(np.intp)] = True

    def contains(self, queries: np.ndarray) -> np.ndarray:
        slots = queries & self.mask
        out = self.table[slots.view(np.int64)]  # a view, not a cast: the slots are < 2^28
        idx = np.flatnonzero(out)
        if idx.size:
            out[idx] = contains(self.hashes, queries[idx])
        return out


def contains(sorted_hashes: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Which of `queries` are in `sorted_hashes` (a sorted uint64 array)."""
    if not sorted_hashes.size or not queries.size:
        return np.zeros(queries.size, dtype=bool)
    if queries.size < 1024:
        pos = np.minimum(np.searchsorted(sorted_hashes, queries), sorted_hashes.size - 1)
        return sorted_hashes[pos] == queries
    # many queries: sorted first, each binary search starts where the last one ended and stays in cache (~4x faster
    # than searching them in text order, the sort included)
    order = np.argsort(queries)
    q = queries[order]
    pos = np.minimum(np.searchsorted(sorted_hashes, q), sorted_hashes.size - 1)
    out = np.empty(queries.size, dtype=bool)
    out[order] = sorted_hashes[pos] == q
    return out


def longest_run(mask: np.ndarray) -> tuple[int, int]:
    """(start, length) of the longest run of True (the first such run; (0, 0) when none)."""
    if not mask.any():
        return 0, 0
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    starts, ends = edges[0::2], edges[1::2]
    k = int(np.argmax(ends - starts))
    return int(starts[k]), int(ends[k] - starts[k])


def unique_sorted(arrays: Iterable[np.ndarray]) -> np.ndarray:
    """The distinct hashes of several arrays, sorted (the benchmark side of a scan)."""
    arrays = [a for a in arrays if a.size]
    return np.unique(np.concatenate(arrays)) if arrays else np.zeros(0, dtype=np.uint64)


SEPARATOR_ID = np.uint32(0xFFFFFFFF)  # a suffix-array index's document separator (infini-gram's): no word gets it


def word_ids(hashes: np.ndarray) -> np.ndarray:
    """32-bit word ids for a suffix-array index: the top 32 bits of each word's 64-bit hash, 0xFFFFFFFF (the
    document separator) moved to 0xFFFFFFFE. Two distinct words share an id with probability 2^-32 per pair (about
    a hundred pairs among a corpus's million distinct words), so an index query can, rarely, count an n-gram that
    differs from the query in one such word."""
    ids = (hashes >> np.uint64(32)).astype(np.uint32)
    ids[ids == SEPARATOR_ID] = SEPARATOR_ID - np.uint32(1)
    return ids
