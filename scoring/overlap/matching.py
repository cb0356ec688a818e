"""The two sides of an overlap scan, and the answer per benchmark row.

    benchmark rows ──BenchmarkGrams──▶ one sorted array of their distinct n-gram hashes (small: broadcast)
    corpus documents, in batches ──Matches.scan──▶ for each benchmark n-gram found: how often, and the first
        `max_sources` distinct documents it was found in (per corpus part; parts merge in part order)
    BenchmarkGrams + the merged Matches ──row_results──▶ per row: n-grams, matched positions, share, the longest run
        of matched positions (in words), the documents, a snippet

Nothing here reads or writes a file; jobs/parts/overlap/corpus_scan.py runs the scan on the workers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scoring.overlap.found import first_distinct, sum_by_hash
from scoring.overlap.ngrams import NgramSet, batch_hits, contains, longest_run, text_ngrams, unique_sorted

MAX_SOURCES = 10  # corpus document ids kept per n-gram and per row
SNIPPET_WORDS = 40  # the longest matched span is shown up to this many words

MATCHES_SCHEMA = pa.schema([("hash", pa.uint64()), ("count", pa.int64()), ("sources", pa.list_(pa.string()))])
# Hits and (n-gram, document) pairs are held, then counted and ranked together once they outnumber what is kept (and
# this many): each is sorted a bounded number of times, and memory stays about twice what the answer holds.
PENDING_MIN = 1 << 18
_EMPTY_HASHES = np.zeros(0, dtype=np.uint64)
_EMPTY_INTS = np.zeros(0, dtype=np.int64)


@dataclass
class BenchmarkGrams:
    """Every benchmark row's words and n-gram hashes, and the sorted distinct hashes of them all."""

    n: int
    ids: list[str]
    words: list[list[str]]
    grams: list[np.ndarray]
    distinct: np.ndarray

    @classmethod
    def of(cls, rows: Sequence[Mapping], n: int, text_key: str = "input") -> "BenchmarkGrams":
        ids, ws, gs = [], [], []
        for row in rows:
            w, g = text_ngrams(row[text_key], n)
            ids.append(row["id"])
            ws.append(w)
            gs.append(g)
        return cls(n, ids, ws, gs, unique_sorted(gs))


class Matches:
    """The benchmark n-grams a scan found: per hash, how many corpus positions, and the first `max_sources` distinct
    document ids (corpus order). Kept as arrays, so a part's hits are counted and its documents ranked by a few numpy
    sorts (no Python step per hit, per n-gram or per part row); `count` and `sources` are dicts made when asked
    (benchmark-sized). Documents and part rows are added in corpus order: a new one gets the next ordinal."""

    def __init__(self, max_sources: int = MAX_SOURCES):
        self.max_sources = max_sources
        self._keys, self._counts = _EMPTY_HASHES, _EMPTY_INTS  # distinct hashes counted (sorted), positions each
        self._pending_counts: list[tuple[np.ndarray, np.ndarray | None]] = []  # (hashes, counts or one each)
        self._pending_size = 0
        self._sources = (_EMPTY_HASHES, _EMPTY_INTS, _EMPTY_INTS)  # (hash, ordinal, id key), by hash then ordinal
        self._pending_sources: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_pairs = 0
        self._full = _EMPTY_HASHES  # hashes that have max_sources ids: later documents cannot change them
        self._ids: dict[str, int] = {}  # document id -> key (keys in insertion order)
        self._id_again = False  # an id came back in a later document or part: ranking must compare ids, not ordinals
        self._next = 0  # the ordinal of the next document or part row
        self._dicts: tuple[dict, dict] | None = None

    @classmethod
    def of(cls, counts: Mapping[int, int], sources: Mapping[int, list[str]], max_sources: int = MAX_SOURCES
           ) -> "Matches":
        """Matches known already (a corpus index's answers): counts and first documents per n-gram hash."""
        keys = sorted(int(h) for h, c in counts.items() if c)
        m = cls(max_sources)
        m.add_table(pa.Table.from_arrays(
            [pa.array(keys, pa.uint64()), pa.array([int(counts[h]) for h in keys], pa.int64()),
             pa.array([list(sources.get(h, [])) for h in keys], pa.list_(pa.string()))], schema=MATCHES_SCHEMA))
        return m

    def scan(self, distinct: NgramSet, texts: Sequence[str], doc_ids: Sequence[str], n: int) -> int:
        """Add one batch of documents (in corpus order) against the benchmark's n-grams; returns how many n-gram
        positions the batch held."""
        hashes, docs, positions = batch_hits(texts, n, distinct)
        if hashes.size:
            self._add_counts(hashes, None)
            keep = ~contains(self._full, hashes)  # n-grams that have all their documents need no more
            hashes, docs = hashes[keep], docs[keep]
            if hashes.size:
                uniq, which = np.unique(docs, return_inverse=True)
                keys, fresh = self._id_keys([doc_ids[d] for d in uniq.tolist()])
                plain = fresh or np.unique(keys).size == keys.size
                self._add_sources(hashes, docs + self._next, keys[which], plain=plain)
        self._next += len(texts)
        return positions

    def add_table(self, table: pa.Table) -> None:
        """Add a part's matches (MATCHES_SCHEMA) after everything added so far; only the rows of n-grams that still
        lack documents are unpacked."""
        hashes = table.column("hash").to_numpy().astype(np.uint64, copy=False)
        self._add_counts(hashes, table.column("count").to_numpy().astype(np.int64, copy=False))
        open_rows = np.flatnonzero(~contains(self._full, hashes))
        if not open_rows.size:
            return
        lists = table.column("sources").combine_chunks()
        if open_rows.size < len(lists):
            lists = lists.take(pa.array(open_rows))
        ids = pc.dictionary_encode(lists.flatten())  # a part's few thousand distinct ids, not one per list entry
        keys, _ = self._id_keys(ids.dictionary.to_pylist())
        owner = open_rows[np.repeat(np.arange(len(lists)), np.diff(lists.offsets.to_numpy()))]
        order = self._next + np.arange(owner.size)
        # a part's lists hold distinct ids in corpus order: plain
        self._add_sources(hashes[owner], order, keys[ids.indices.to_numpy()], plain=True)
        self._next += owner.size

    def _id_keys(self, ids: Sequence[str]) -> tuple[np.ndarray, bool]:
        """A small integer per document id, so that ids are compared in numpy (the same id in two records counts
        once, as a document), and whether the ids were all new and distinct (notes when one was not)."""
        known = self._ids
        before = len(known)
        keys = np.fromiter((known.setdefault(i, len(known)) for i in ids), dtype=np.int64, count=len(ids))
        fresh = len(known) - before == len(ids)
        self._id_again |= not fresh
        return keys, fresh

    def _add_counts(self, hashes: np.ndarray, counts: np.ndarray | None) -> None:
        self._pending_counts.append((hashes, counts))
        self._pending_size += hashes.size
        self._dicts = None
        if self._pending_size > max(self._keys.size, PENDING_MIN):  # held at most about as much as is counted
            self._settle_counts()

    def _add_sources(self, hashes: np.ndarray, order: np.ndarray, keys: np.ndarray, plain: bool) -> None:
        # a batch's own first documents per n-gram first (an id beyond the first max_sources of the batch cannot be
        # among the first max_sources of the corpus), then all of them together once they outgrow what is kept
        pairs = first_distinct(hashes, order, keys, self.max_sources, plain=plain)
        self._pending_sources.append(pairs)
        self._pending_pairs += pairs[0].size
        self._dicts = None
        if self._pending_pairs > max(self._sources[0].size, PENDING_MIN):
            self._settle_sources()

    def _settle_counts(self) -> None:
        if not self._pending_counts:
            return
        hashes = [self._keys] + [h for h, _ in self._pending_counts]
        counts = [self._counts] + [np.ones(h.size, np.int64) if c is None else c for h, c in self._pending_counts]
        self._keys, self._counts = sum_by_hash(np.concatenate(hashes), np.concatenate(counts))
        self._pending_counts, self._pending_size = [], 0

    def _settle_sources(self) -> None:
        if not self._pending_sources:
            return
        parts = [self._sources] + self._pending_sources
        # what is kept, then what came later: within a hash, in corpus order; plain unless an id came back
        self._sources = first_distinct(*(np.concatenate([p[i] for p in parts]) for i in range(3)), self.max_sources,
                                       plain=not self._id_again)
        h = self._sources[0]
        last = np.ones(h.size, dtype=bool)  # the last of each hash's run holds its count of ids
        last[:-1] = h[1:] != h[:-1]
        runs = np.diff(np.concatenate([[-1], np.flatnonzero(last)]))
        self._full = h[last][runs >= self.max_sources]
        self._pending_sources, self._pending_pairs = [], 0

    def found(self) -> np.ndarray:
        """The distinct n-gram hashes found, sorted."""
        self._settle_counts()
        return self._keys

    def _as_dicts(self) -> tuple[dict, dict]:
        if self._dicts is None:
            self._settle_counts()
            self._settle_sources()
            h, _, k = self._sources
            # one list per hash, holding the id strings already kept (no Python int per kept pair: at 500k pairs
            # those lists cost the driver more than the answer)
            start = np.flatnonzero(np.concatenate([[True], h[1:] != h[:-1]])) if h.size else _EMPTY_INTS
            names = np.array(list(self._ids), dtype=object)[k]
            sources = dict(zip(h[start].tolist(), (ids.tolist() for ids in np.split(names, start[1:]))))
            self._dicts = dict(zip(self._keys.tolist(), self._counts.tolist())), sources
        return self._dicts

    @property
    def count(self) -> dict[int, int]:
        return self._as_dicts()[0]

    @property
    def sources(self) -> dict[int, list[str]]:
        return self._as_dicts()[1]

    def merge(self, other: "Matches") -> None:
        """Add a later part's matches (parts merge in part order, so 'first documents' stays corpus order)."""
        self.add_table(other.to_table())

    def to_table(self) -> pa.Table:
        keys = self.found()
        self._settle_sources()
        h, _, k = self._sources
        offsets = np.searchsorted(h, keys).astype(np.int32)  # every hash with documents is a counted one
        ids = pa.array(list(self._ids), pa.string()).take(pa.array(k)) if k.size else pa.array([], pa.string())
        return pa.Table.from_arrays(
            [pa.array(keys, pa.uint64()), pa.array(self._counts, pa.int64()),
             pa.ListArray.from_arrays(pa.array(np.append(offsets, np.int32(h.size))), ids)], schema=MATCHES_SCHEMA)

    @classmethod
    def from_table(cls, table: pa.Table, max_sources: int = MAX_SOURCES) -> "Matches":
        m = cls(max_sources)
        m.add_table(table)
        return m


def row_results(bench: BenchmarkGrams, matches: Matches, threshold: float = 0.0,
                max_sources: int = MAX_SOURCES) -> list[dict]:
    """One result per benchmark row. `share` is None for a row shorter than n words (no n-gram to check);
    `contaminated` is share > threshold (threshold 0: any matched n-gram). `longest_match_words` is the longest run
    of consecutive matched n-gram positions, in words (run + n - 1): a span every n-gram of which occurs in the
    corpus, though not necessarily as one contiguous passage."""
    found = matches.found()
    out = []
    for rid, w, g in zip(bench.ids, bench.words, bench.grams):
        hit = contains(found, g)
        n_matched = int(hit.sum())
        start, run = longest_run(hit)
        longest = run + bench.n - 1 if run else 0
        docs: list[str] = []
        occurrences = 0
        for h in dict.fromkeys(g[hit].tolist()):  # distinct matched n-grams, in the row's order
            occurrences += matches.count[h]
            for d in matches.sources.get(h, []):
                if len(docs) < max_sources and d not in docs:
                    docs.append(d)
        snippet = w[start:start + min(longest, SNIPPET_WORDS)] if longest else []
        share = n_matched / g.size if g.size else None
        out.append({"id": rid, "n_words": len(w), "n_ngrams": int(g.size), "n_matched": n_matched, "share": share,
                    "longest_match_words": longest,
                    "contaminated": bool(share is not None and share > threshold),
                    "corpus_occurrences": occurrences, "sources": docs,
                    "snippet": " ".join(snippet) + (" …" if longest > SNIPPET_WORDS else "")})
    return out


def scan_texts(bench: BenchmarkGrams, texts: Iterable[str], doc_ids: Iterable[str], batch: int = 512) -> Matches:
    """A whole scan in this process (tests, small corpora): `Matches` of `texts` against the benchmark."""
    m, tb, ib, distinct = Matches(), [], [], NgramSet(bench.distinct)
    for t, i in zip(texts, doc_ids):
        tb.append(t)
        ib.append(i)
        if len(tb) >= batch:
            m.scan(distinct, tb, ib, bench.n)
            tb, ib = [], []
    if tb:
        m.scan(distinct, tb, ib, bench.n)
    return m


@dataclass(frozen=True)
class FoundNgrams:
    """The benchmark-side n-grams a corpus scan found (sorted hashes): what the audit ships to the tasks that stage
    its documents, to measure each document's overlap with a reference corpus (no corpus n-gram set anywhere)."""

    n: int
    hashes: np.ndarray

    @classmethod
    def of(cls, matches: Matches, n: int) -> "FoundNgrams":
        return cls(n, matches.found())

    def overlap(self, text: str, max_examples: int = 3) -> dict:
        """Share of the text's n-gram positions found in the corpus, with up to `max_examples` non-overlapping
        matched n-grams as examples (the first ones, in reading order); share is NaN for a text shorter than n."""
        w, g = text_ngrams(text, self.n)
        hits = np.flatnonzero(contains(self.hashes, g)).tolist()
        examples, last = [], -self.n
        for i in hits:
            if i >= last + self.n and len(examples) < max_examples:
                examples.append(" ".join(w[i:i + self.n]))
                last = i
        return {"n_ngrams": int(g.size), "n_matched": len(hits),
                "share": len(hits) / g.size if g.size else float("nan"), "examples": examples}
