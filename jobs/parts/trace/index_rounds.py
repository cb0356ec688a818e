"""`tidemark trace` on the index's parts: two rounds of tasks, each a batch of texts against one index part
(a directory of shards, as `index-corpus` wrote it), as tasks on the job's runner (jobs/plane/runners.py: Ray
tasks, or this process).

    round 1 (longest): per text and word, the longest run of words from there that occurs in this part (every
            start of every text in the batch searched at once: jobs/parts/index/search.py), and each word's count
            in this part. The driver takes the maximum over parts (a run occurs in the corpus when it
            occurs in one part: documents do not cross parts) and sums the counts, which gives the maximal spans
            and their rarity (scoring/trace/spans.py).
    round 2 (hits): per kept span, its count in this part and its first `docs_per_span` occurrences there:
            the document's id, file and word offset, and the snippet around it from the index's text store. The
            driver sums the counts and keeps the first occurrences in corpus order.

A worker opens the index itself (an s3:// index is copied to its node's cache once); the driver holds word ids,
spans, document ids and snippets, never whole documents.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

TASK_CPUS = 1.0
WIDTH = 64  # words searched from each start at first (a run that fills it is searched again, twice as wide)


def text_word_ids(text: str) -> np.ndarray:
    """A text's words as the index holds them (scoring/overlap/ngrams.word_ids of lowercased `\\w+` words)."""
    from scoring.overlap.ngrams import word_hashes, word_ids, words

    w = words(text)
    return word_ids(word_hashes(w)).astype(np.uint32) if w else np.zeros(0, dtype=np.uint32)


def _reader(shared: dict, part: str):
    from jobs.parts.index.reader import PartReader, local_index

    local, _ = local_index(shared["index"], shared["requester_pays"])
    return PartReader(str(local / part))


def longest_in_part(shared: dict, part: str, batch: int) -> dict:
    """Round 1 for one (part, batch of texts): every start's suffix of every text searched at once."""
    reader = _reader(shared, part)
    texts = [np.asarray(t, dtype=np.uint32) for t in shared["batches"][batch]]
    longest = _longest(reader, texts)
    distinct = np.unique(np.concatenate(texts)) if texts and any(t.size for t in texts) else np.zeros(0, np.uint32)
    counts = dict(zip(distinct.tolist(), reader.counts([distinct[k:k + 1] for k in range(distinct.size)]).tolist()))
    unigrams = [np.array([counts[w] for w in t.tolist()], dtype=np.int64) for t in texts]
    return {"part": part, "batch": batch, "longest": longest, "unigrams": unigrams}


def _longest(reader, texts: list[np.ndarray]) -> list[np.ndarray]:
    """Per text, the longest occurring run of words from each word: each start's next WIDTH words searched, then
    those whose whole window occurs searched again with a doubled window, until every run has ended."""
    out = [np.zeros(t.size, dtype=np.int64) for t in texts]
    todo = [(k, i) for k, t in enumerate(texts) for i in range(t.size)]
    width = WIDTH
    while todo:
        found = reader.longest_prefix([texts[k][i:i + width] for k, i in todo])
        again = []
        for (k, i), n in zip(todo, found.tolist()):
            out[k][i] = n
            if n == width and i + width < texts[k].size:
                again.append((k, i))
        todo, width = again, width * 2
    return out


def hits_in_part(shared: dict, part: str, batch: int) -> dict:
    """Round 2 for one (part, batch of spans): [count, occurrences] per span."""
    from jobs.parts.index.reader import snippet

    reader = _reader(shared, part)
    spans = [np.asarray(x, dtype=np.uint32) for x in shared["span_batches"][batch]]
    out = []
    for ids, (count, occ) in zip(spans, reader.span_hits(spans, shared["docs_per_span"])):
        hits = []
        for o in occ:
            text = reader.text(o.shard, o.n)
            cut = snippet(text, o.word_offset, o.word_offset + ids.size, shared["context_words"]) if text \
                else {"snippet": None, "match_start": None, "match_end": None}
            hits.append({"doc_id": o.doc_id, "file": o.file, "part": part, "shard": o.shard, "n": o.n,
                         "word_offset": o.word_offset, "doc_words": o.doc_words, **cut})
        out.append([count, hits])
    return {"part": part, "batch": batch, "spans": out}


def run_rounds(fn, idx: str, parts: Sequence[str], n_batches: int, payload: dict, *, runner, desc: str,
               progress: bool, requester_pays: bool = False) -> Iterator[dict]:
    """fn(shared, part, batch) for every (part, batch) as a task on `runner`; results as they finish."""
    calls = [{"part": p, "batch": b} for b in range(n_batches) for p in parts]
    yield from runner.map(fn, calls, {"index": idx, "requester_pays": requester_pays, **payload}, desc=desc,
                          progress=progress, num_cpus=TASK_CPUS)


def batched(items: list, size: int) -> list[list]:
    return [items[k:k + size] for k in range(0, len(items), size)] or [[]]
