"""Questions to a corpus index (jobs/parts/corpus_index.py) through infini-gram's engine: the same answers as the
streaming scan of `tidemark overlap` (jobs/parts/corpus_overlap.py), from the index instead of the corpus.

For a benchmark, each distinct n-gram of its rows is counted in the index; for the ones found, the documents that
hold them are read from the suffix array (at most `max_fetch` occurrences an n-gram, sorted by document index,
which is corpus order) and their first `max_sources` distinct ids kept: a `Matches` keyed by the same 64-bit n-gram
hashes as the scan, so scoring/overlap/matching.row_results answers per row unchanged.
"""
from __future__ import annotations

import json


MAX_FETCH = 1000  # occurrences read per n-gram to find its first documents (counts are exact regardless)


def _documents(engine, found: dict, max_sources: int, max_fetch: int) -> list[str]:
    """The first `max_sources` distinct document ids (in corpus order) among the occurrences `find` returned.
    Shards are in corpus order, so the shards after the one that completes the list are not read."""
    out: list[str] = []
    for s, (lo, hi) in enumerate(found["segment_by_shard"]):
        if hi <= lo:
            continue
        hits = sorted((d["doc_ix"], json.loads(d["metadata"])["id"]) for d in
                      (engine.get_doc_by_rank(s=s, rank=r, max_disp_len=1) for r in range(lo, min(hi, lo + max_fetch))))
        for _, doc in hits:
            if doc not in out:
                out.append(doc)
        if len(out) >= max_sources:
            return out[:max_sources]
    return out


def index_matches(engine, bench, max_sources: int, max_fetch: int = MAX_FETCH, threads: int | None = None):
    """What the streaming scan would have found for these benchmark rows, from the index. Every distinct n-gram is
    counted (queries in threads: the engine releases the GIL); documents are read only for the n-grams whose
    documents a row's answer takes (row_results walks a row's matched n-grams in order until it has max_sources),
    in that same order, so the answers are the scan's with far fewer reads."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from scoring.overlap.matching import Matches
    from scoring.overlap.ngrams import word_hashes, word_ids

    n = bench.n
    queries: dict[int, list[int]] = {}
    for w, g in zip(bench.words, bench.grams):
        if g.size:
            ids = word_ids(word_hashes(w)).tolist()
            for i, key in enumerate(g.tolist()):
                queries.setdefault(key, ids[i:i + n])
    with ThreadPoolExecutor(max_workers=threads or min(8, 2 * (os.cpu_count() or 1))) as pool:
        found = {key: f for key, f in zip(queries, pool.map(engine.find, queries.values(), chunksize=64))
                 if int(f["cnt"])}
    sources: dict[int, list[str]] = {}
    keys = np.fromiter(found, dtype=np.uint64, count=len(found))
    keys.sort()
    for g in bench.grams:
        docs: list[str] = []
        hit = g[np.isin(g, keys)] if keys.size else g[:0]
        for key in dict.fromkeys(hit.tolist()):
            if len(docs) >= max_sources:
                break
            if key not in sources:
                sources[key] = _documents(engine, found[key], max_sources, max_fetch)
            docs += [d for d in sources[key] if d not in docs]
    return Matches.of({k: int(f["cnt"]) for k, f in found.items()}, sources, max_sources)


def span_report(engine, text: str, max_sources: int = 10) -> dict:
    """How often a span of text occurs in the indexed corpus, and where (`overlap --index IDX --query TEXT`)."""
    from scoring.overlap.ngrams import word_hashes, word_ids, words

    w = words(text)
    if not w:
        return {"words": 0, "count": 0, "documents": []}
    ids = word_ids(word_hashes(w)).tolist()
    count = int(engine.count(ids)["count"])
    found = engine.find(ids) if count else {"segment_by_shard": []}
    docs = []
    for s, (lo, hi) in enumerate(found["segment_by_shard"]):
        for rank in range(lo, min(hi, lo + MAX_FETCH)):
            d = engine.get_doc_by_rank(s=s, rank=rank, max_disp_len=1)
            docs.append((d["doc_ix"], s, rank, json.loads(d["metadata"])["id"]))
    docs.sort()
    out = []
    for _, s, rank, doc in docs[:max_sources]:  # the whole document is displayed, so the offset is the document's
        d = engine.get_doc_by_rank(s=s, rank=rank, max_disp_len=1 << 30)
        out.append({"id": doc, "word_offset": int(d["needle_offset"])})
    return {"words": len(w), "count": count, "documents": out}
