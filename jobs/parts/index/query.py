"""Questions to a corpus index (jobs/parts/index/build.py) answered by the batched suffix-array search that
`tidemark trace` uses (jobs/parts/index/search.py): one path from an n-gram or a span to its count and documents,
the same answers as the streaming scan of `tidemark overlap` (jobs/parts/overlap/corpus_scan.py), from the index.

For a benchmark, every distinct n-gram of its rows is counted in the index at once (a vectorised binary search per
shard); for the ones found, the documents that hold them are read from the suffix array (at most `max_fetch`
occurrences an n-gram per shard, in document order, which is corpus order) and their first `max_sources` distinct
ids kept: a `Matches` keyed by the same 64-bit n-gram hashes as the scan, so scoring/overlap/matching.row_results
answers per row unchanged.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

MAX_FETCH = 1000  # occurrences read per n-gram and shard to find its first documents (counts are exact regardless)


def index_shards(local: Path) -> list:
    """Every shard of a local index (jobs/parts/index/reader.local_index), in corpus order: parts, then shards."""
    from jobs.parts.index.reader import PartReader, part_dirs

    shards = [sh for d in part_dirs(local) for sh in PartReader(d).shards]
    if not shards:
        raise ValueError(f"{local} holds no indexed document")
    return shards


def first_documents(shards: list, segments: list[tuple[int, int]], limit: int, max_fetch: int = MAX_FETCH
                    ) -> list[str]:
    """The first `limit` distinct document ids, in corpus order, among the occurrences at ranks [lo, hi) of each
    shard (at most `max_fetch` of them a shard). Shards are in corpus order, so those after the one that completes
    the list are not read."""
    out: list[str] = []
    for sh, (lo, hi) in zip(shards, segments):
        if hi <= lo:
            continue
        for n in dict.fromkeys(n for n, _, _ in sh.occurrences(lo, min(hi, lo + max_fetch))):
            doc = str(sh.metadata(n)["id"])
            if doc not in out:
                out.append(doc)
                if len(out) >= limit:
                    return out
    return out


def index_matches(shards: list, bench, max_sources: int, max_fetch: int = MAX_FETCH):
    """What the streaming scan would have found for these benchmark rows, from the index. Every distinct n-gram is
    counted in one batched search per shard; documents are read only for the n-grams whose documents a row's answer
    takes (row_results walks a row's matched n-grams in order until it has max_sources), in that same order, so the
    answers are the scan's with far fewer reads."""
    from scoring.overlap.matching import Matches
    from scoring.overlap.ngrams import contains, word_hashes, word_ids

    n = bench.n
    queries: dict[int, np.ndarray] = {}
    for w, g in zip(bench.words, bench.grams):
        if g.size:
            ids = word_ids(word_hashes(w))
            for i, key in enumerate(g.tolist()):
                queries.setdefault(key, ids[i:i + n])
    keys = list(queries)
    arrays = [queries[k] for k in keys]
    lows = [sh.bounds(arrays) for sh in shards]
    highs = [sh.bounds(arrays, upper=True) for sh in shards]
    counts = sum(hi - lo for lo, hi in zip(lows, highs)) if keys else np.zeros(0, dtype=np.int64)
    row_of = {k: r for r, k in enumerate(keys)}
    found = {k: int(c) for k, c in zip(keys, np.asarray(counts).tolist()) if c}
    sources: dict[int, list[str]] = {}
    hit_keys = np.fromiter(found, dtype=np.uint64, count=len(found))
    hit_keys.sort()
    for g in bench.grams:
        docs: list[str] = []
        hit = g[contains(hit_keys, g)] if hit_keys.size else g[:0]
        for key in dict.fromkeys(hit.tolist()):
            if len(docs) >= max_sources:
                break
            if key not in sources:
                r = row_of[key]
                sources[key] = first_documents(shards, [(int(lo[r]), int(hi[r])) for lo, hi in zip(lows, highs)],
                                               max_sources, max_fetch)
            docs += [d for d in sources[key] if d not in docs]
    return Matches.of(found, sources, max_sources)


def span_report(shards: list, text: str, max_sources: int = 10) -> dict:
    """How often a span of text occurs in the indexed corpus, and where (`overlap --index IDX --query TEXT`): its
    first `max_sources` occurrences in corpus order (document, then position), each with the word it starts at in
    its document."""
    from scoring.overlap.ngrams import word_hashes, word_ids, words

    w = words(text)
    if not w:
        return {"words": 0, "count": 0, "documents": []}
    ids = word_ids(word_hashes(w))
    count, out = 0, []
    for sh in shards:
        lo, hi = int(sh.bounds([ids])[0]), int(sh.bounds([ids], upper=True)[0])
        count += hi - lo
        if hi > lo and len(out) < max_sources:
            for d, o, _ in sh.occurrences(lo, min(hi, lo + MAX_FETCH))[:max_sources - len(out)]:
                out.append({"id": str(sh.metadata(d)["id"]), "word_offset": o})
    return {"words": len(w), "count": count, "documents": out}
