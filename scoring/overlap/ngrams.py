"""Word n-grams as 64-bit hashes, vectorised: the engine behind `tidemark overlap` and the audit's corpus evidence.

The definition is GPT-3's and lm-evaluation-harness's decontamination check: a text's words are the `\\w+` runs of
its lowercased form (punctuation and whitespace differences do not hide a copy); its n-grams are the windows of n
consecutive words (n = 13); a benchmark row's `share` is the fraction of its n-gram positions whose n-gram occurs
anywhere in the corpus (a position counts even when its n-gram repeats one at another position).

Hashing, so the corpus side never builds a Python object per word or n-gram:
- a batch of texts is lowercased by `str.lower` and read as one array of Unicode code points; a code point is a
  word character when `re`'s `\\w` says so (alphanumeric or `_`: a 128-entry table for ASCII, `str.isalnum` once
  per other code point met, cached), so the words are exactly those of `words()`;
- a word's hash is a polynomial over its code points, Σ c_j·Q^(len-1-j) mod 2^64, through splitmix64's finaliser,
  computed for every word of the batch at once from one prefix sum (numpy; uint64 arithmetic wraps mod 2^64);
- an n-gram's hash is the polynomial Σ h(w_i)·P^(n-1-i) mod 2^64 over its words' hashes, computed for every
  window of the batch with n numpy multiply-adds (windows that cross a document boundary are masked out). Two
  different n-grams collide with probability about n/2^64 per pair: at 10^12 corpus n-grams against 10^7 benchmark
  n-grams, about 10^-7 false matches in all.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import numpy as np

WORD = re.compile(r"\w+")
MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # P: odd, with well-mixed bits (the 64-bit golden ratio)
BYTE_BASE = 0x100000001B3  # Q, over a word's code points (FNV's 64-bit prime; odd: it has an inverse mod 2^64)
SEPARATOR = "\x00"  # between texts (and words) of a batch: never part of a word
CHUNK = 1 << 24  # code points hashed from one prefix sum

_ASCII_WORD = np.zeros(128, dtype=bool)
for _c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_":
    _ASCII_WORD[ord(_c)] = True
_other_word: dict[int, bool] = {}  # non-ASCII code point -> is a word character (as re's \w decides)


def words(text: str) -> list[str]:
    """The text's words: `\\w+` runs of its lowercased form."""
    return WORD.findall(text.lower())


class _Powers:
    """Q^k and Q^-k mod 2^64 for k < size, grown on demand (a batch of 10 MB needs 10M of each)."""

    def __init__(self):
        self.pow = np.ones(1, dtype=np.uint64)
        self.inv = np.ones(1, dtype=np.uint64)

    def upto(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        if self.pow.size < size:
            size = max(size, 2 * self.pow.size)
            q_inv = pow(BYTE_BASE, -1, 1 << 64)
            self.pow = np.cumprod(np.full(size, BYTE_BASE, dtype=np.uint64), dtype=np.uint64)
            self.pow = np.concatenate([[np.uint64(1)], self.pow[:-1]])
            self.inv = np.cumprod(np.full(size, q_inv, dtype=np.uint64), dtype=np.uint64)
            self.inv = np.concatenate([[np.uint64(1)], self.inv[:-1]])
        return self.pow, self.inv


_powers = _Powers()


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every bit of a word's polynomial moves every bit of its hash."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


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
    pw, inv = _powers.upto(data.size + 1)
    with np.errstate(over="ignore"):
        prefix = np.concatenate([[np.uint64(0)], np.cumsum(data.astype(np.uint64) * inv[:data.size],
                                                             dtype=np.uint64)])
        # Σ_{j=s}^{e-1} b_j Q^-j, times Q^(e-1): Σ b_j Q^(e-1-j)
        return _mix((prefix[ends] - prefix[starts]) * pw[ends - 1])


def _spans(is_word: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    edges = np.flatnonzero(np.diff(np.concatenate([[False], is_word, [False]]).astype(np.int8)))
    return edges[0::2], edges[1::2]


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _is_word(cp: np.ndarray) -> np.ndarray:
    out = np.zeros(cp.size, dtype=bool)
    ascii_ = cp < 128
    out[ascii_] = _ASCII_WORD[cp[ascii_]]
    other = np.flatnonzero(~ascii_)
    if other.size:
        uniq, inverse = np.unique(cp[other], return_inverse=True)
        for c in uniq.tolist():
            if c not in _other_word:
                _other_word[c] = chr(c).isalnum()
        out[other] = np.fromiter((_other_word[c] for c in uniq.tolist()), dtype=bool, count=uniq.size)[inverse]
    return out


def batch_words(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(hash of every word of the batch, in order; number of words per text)."""
    lowered = [t.lower() for t in texts]  # per text: lowercasing can change a text's length ('İ' -> 'i̇')
    cp = _code_points(SEPARATOR.join(lowered))
    starts, ends = _spans(_is_word(cp))
    bounds = np.cumsum([len(t) + 1 for t in lowered])  # each text's end, its separator included
    counts = np.bincount(np.searchsorted(bounds, starts, side="right"), minlength=len(texts))[:len(texts)]
    return _hash_spans(cp, starts, ends), counts


def word_hashes(tokens: Sequence[str]) -> np.ndarray:
    """The hashes of already-split, lowercased words (what batch_words gives for them in a text)."""
    if not tokens:
        return np.zeros(0, dtype=np.uint64)
    cp = _code_points(SEPARATOR.join(tokens))
    starts, ends = _spans(cp != 0)
    return _hash_spans(cp, starts, ends)


def window_hashes(hashes: np.ndarray, n: int) -> np.ndarray:
    """The hash of every window of n consecutive entries (len - n + 1 of them; none when shorter than n)."""
    m = len(hashes) - n + 1
    if m <= 0:
        return np.zeros(0, dtype=np.uint64)
    out = hashes[:m].copy()
    for i in range(1, n):  # Horner: ((h0·P + h1)·P + h2)… — uint64 arithmetic wraps mod 2^64
        out *= MULTIPLIER
        out += hashes[i:i + m]
    return out


def text_ngrams(text: str, n: int) -> tuple[list[str], np.ndarray]:
    """A text's words and the hash of each of its n-gram positions."""
    w = words(text)
    return w, window_hashes(word_hashes(w), n)


def batch_ngrams(texts: Sequence[str], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every n-gram of a batch of texts: (hashes, index of the text each came from), texts in order, positions in
    order within each. One pass of numpy over the whole batch; windows that cross from one text into the next are
    dropped."""
    flat, lengths = batch_words(texts)
    grams = window_hashes(flat, n)
    if not grams.size:
        return grams, np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)[:grams.size]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    inside = np.arange(grams.size, dtype=np.int64) - starts[owner] <= lengths[owner] - n
    return grams[inside], owner[inside]


class NgramSet:
    """A set of n-gram hashes for bulk membership: a sorted array, and in front of it a bytemap indexed by a
    hash's low bits (at least 16 slots per member, 4-256 MB, so that ~94% or more of the corpus n-grams that are
    not members are rejected by one lookup; only candidates pay the binary search)."""

    def __init__(self, hashes: np.ndarray):
        self.hashes = np.unique(np.asarray(hashes, dtype=np.uint64))
        bits = int(np.clip(np.ceil(np.log2(max(1, 16 * self.hashes.size))), 22, 28))
        self.mask = np.uint64((1 << bits) - 1)
        self.table = np.zeros(1 << bits, dtype=bool)
        self.table[(self.hashes & self.mask).astype(np.intp)] = True

    def contains(self, queries: np.ndarray) -> np.ndarray:
        out = self.table[(queries & self.mask).astype(np.intp)]
        idx = np.flatnonzero(out)
        if idx.size:
            out[idx] = contains(self.hashes, queries[idx])
        return out


def contains(sorted_hashes: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Which of `queries` are in `sorted_hashes` (a sorted uint64 array)."""
    if not sorted_hashes.size or not queries.size:
        return np.zeros(queries.size, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_hashes, queries), sorted_hashes.size - 1)
    return sorted_hashes[pos] == queries


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
