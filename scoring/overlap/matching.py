"""The two sides of an overlap scan, and the answer per benchmark row.

    benchmark rows ──BenchmarkGrams──▶ one sorted array of their distinct n-gram hashes (small: broadcast)
    corpus documents, in batches ──Matches.scan──▶ for each benchmark n-gram found: how often, and the first
        `max_sources` distinct documents it was found in (per corpus part; parts merge in part order)
    BenchmarkGrams + the merged Matches ──row_results──▶ per row: n-grams, matched positions, share, the longest run
        of matched positions (in words), the documents, a snippet

Nothing here reads or writes a file; jobs/parts/corpus_overlap.py runs the scan on the workers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from scoring.overlap.ngrams import NgramSet, batch_ngrams, contains, longest_run, text_ngrams, unique_sorted

MAX_SOURCES = 10  # corpus document ids kept per n-gram and per row
SNIPPET_WORDS = 40  # the longest matched span is shown up to this many words

MATCHES_SCHEMA = pa.schema([("hash", pa.uint64()), ("count", pa.int64()), ("sources", pa.list_(pa.string()))])


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
    """The benchmark n-grams a scan found: count of corpus positions and the first distinct documents, per hash."""

    def __init__(self, max_sources: int = MAX_SOURCES):
        self.max_sources = max_sources
        self._count: dict[int, int] = {}
        self._hits: list[np.ndarray] = []  # matched hashes not yet counted: counted in bulk when asked
        self.sources: dict[int, list[str]] = {}
        self._full = np.zeros(0, dtype=np.uint64)  # hashes that already have max_sources documents

    @classmethod
    def of(cls, counts: Mapping[int, int], sources: Mapping[int, list[str]], max_sources: int = MAX_SOURCES
           ) -> "Matches":
        """Matches known already (a corpus index's answers): counts and first documents per n-gram hash."""
        m = cls(max_sources)
        m._count = {int(h): int(c) for h, c in counts.items() if c}
        m.sources = {int(h): list(sources.get(h, [])) for h in m._count}
        return m

    @property
    def count(self) -> dict[int, int]:
        if self._hits:
            uniq, counts = np.unique(np.concatenate(self._hits), return_counts=True)
            self._hits = []
            for h, c in zip(uniq.tolist(), counts.tolist()):
                self._count[h] = self._count.get(h, 0) + c
        return self._count

    def scan(self, distinct: NgramSet, texts: Sequence[str], doc_ids: Sequence[str], n: int) -> int:
        """Add one batch of documents (in corpus order) against the benchmark's n-grams; returns how many n-gram
        positions the batch held."""
        grams, owner = batch_ngrams(texts, n)
        hit = distinct.contains(grams)
        if hit.any():
            hashes, docs = grams[hit], owner[hit]
            self._hits.append(hashes)
            self._add_sources(hashes, docs, doc_ids)
        return int(grams.size)

    def _add_sources(self, hashes: np.ndarray, docs: np.ndarray, doc_ids: Sequence[str]) -> None:
        """The batch's distinct (n-gram, document) pairs, documents in corpus order, up to max_sources per n-gram;
        n-grams that have them all are skipped before any Python loop."""
        if self._full.size:
            keep = ~contains(self._full, hashes)
            hashes, docs = hashes[keep], docs[keep]
        if not hashes.size:
            return
        order = np.lexsort((docs, hashes))  # by n-gram, then document (ascending = corpus order)
        h, d = hashes[order], docs[order]
        new = np.ones(h.size, dtype=bool)
        new[1:] = (h[1:] != h[:-1]) | (d[1:] != d[:-1])
        h, d = h[new], d[new]
        starts = np.ones(h.size, dtype=bool)
        starts[1:] = h[1:] != h[:-1]
        rank = np.arange(h.size) - np.flatnonzero(starts)[np.cumsum(starts) - 1]
        take = rank < self.max_sources
        full = []
        for hh, dd in zip(h[take].tolist(), d[take].tolist()):
            kept = self.sources.setdefault(hh, [])
            doc = doc_ids[dd]
            if len(kept) < self.max_sources and doc not in kept:
                kept.append(doc)
                if len(kept) == self.max_sources:
                    full.append(hh)
        if full:
            self._full = np.union1d(self._full, np.asarray(full, dtype=np.uint64))

    def merge(self, other: "Matches") -> None:
        """Add a later part's matches (parts merge in part order, so 'first documents' stays corpus order)."""
        count = self.count
        for h, c in other.count.items():
            count[h] = count.get(h, 0) + c
        for h, docs in other.sources.items():
            kept = self.sources.setdefault(h, [])
            for d in docs:
                if len(kept) >= self.max_sources:
                    break
                if d not in kept:
                    kept.append(d)

    def to_table(self) -> pa.Table:
        count = self.count
        keys = sorted(count)
        return pa.table({"hash": pa.array(keys, pa.uint64()), "count": [count[h] for h in keys],
                         "sources": [self.sources.get(h, []) for h in keys]}, schema=MATCHES_SCHEMA)

    @classmethod
    def from_table(cls, table: pa.Table, max_sources: int = MAX_SOURCES) -> "Matches":
        m = cls(max_sources)
        d = table.to_pydict()
        m._count = dict(zip(d["hash"], d["count"]))
        m.sources = {h: list(s) for h, s in zip(d["hash"], d["sources"])}
        return m


def row_results(bench: BenchmarkGrams, matches: Matches, threshold: float = 0.0,
                max_sources: int = MAX_SOURCES) -> list[dict]:
    """One result per benchmark row. `share` is None for a row shorter than n words (no n-gram to check);
    `contaminated` is share > threshold (threshold 0: any matched n-gram). `longest_match_words` is the longest run
    of consecutive matched n-gram positions, in words (run + n - 1): a span every n-gram of which occurs in the
    corpus, though not necessarily as one contiguous passage."""
    found = np.fromiter(sorted(matches.count), dtype=np.uint64, count=len(matches.count))
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
        return cls(n, np.fromiter(sorted(matches.count), dtype=np.uint64, count=len(matches.count)))

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
