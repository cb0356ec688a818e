"""`tidemark trace` on the index's parts: two rounds of tasks, each a batch of texts against one index part
(a directory of shards, as `index-corpus` wrote it), through jobs/plane/task_map (Ray tasks, or this process on
the local plane).

    round 1 (longest): per text and word, the longest run of words from there that occurs in this part, and each
            word's count in this part. The driver takes the maximum over parts (a run occurs in the corpus when it
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


def text_word_ids(text: str) -> np.ndarray:
    """A text's words as the index holds them (scoring/overlap/ngrams.word_ids of lowercased `\\w+` words)."""
    from scoring.overlap.ngrams import word_hashes, word_ids, words

    w = words(text)
    return word_ids(word_hashes(w)).astype(np.uint32) if w else np.zeros(0, dtype=np.uint32)


def _reader(shared: dict, part: str):
    from jobs.parts.index_reader import PartReader, local_index

    local, _ = local_index(shared["index"])
    return PartReader(str(local / part))


def longest_in_part(shared: dict, part: str, batch: int) -> dict:
    """Round 1 for one (part, batch of texts)."""
    from scoring.trace.spans import longest_matches

    engine = _reader(shared, part).engine
    counts: dict[int, int] = {}
    longest, unigrams = [], []
    for ids in shared["batches"][batch]:
        ids = [int(x) for x in ids]
        for w in set(ids) - counts.keys():
            counts[w] = int(engine.count([w])["count"])

        def occurs(i: int, j: int) -> bool:
            return counts[ids[i]] > 0 if j == i + 1 else int(engine.count(ids[i:j])["count"]) > 0

        longest.append(longest_matches(occurs, len(ids)))
        unigrams.append(np.array([counts[w] for w in ids], dtype=np.int64))
    return {"part": part, "batch": batch, "longest": longest, "unigrams": unigrams}


def hits_in_part(shared: dict, part: str, batch: int) -> dict:
    """Round 2 for one (part, batch of spans): [count, occurrences] per span."""
    from jobs.parts.index_reader import snippet

    reader = _reader(shared, part)
    out = []
    for ids in shared["span_batches"][batch]:
        found = reader.engine.find([int(x) for x in ids])
        occ = reader.occurrences(found, shared["docs_per_span"]) if int(found["cnt"]) else []
        hits = []
        for o in occ:
            text = reader.text(o.shard, o.n)
            cut = snippet(text, o.word_offset, o.word_offset + len(ids), shared["context_words"]) if text \
                else {"snippet": None, "match_start": None, "match_end": None}
            hits.append({"doc_id": o.doc_id, "file": o.file, "part": part, "shard": o.shard, "n": o.n,
                         "word_offset": o.word_offset, "doc_words": o.doc_words, **cut})
        out.append([int(found["cnt"]), hits])
    return {"part": part, "batch": batch, "spans": out}


def run_rounds(fn, idx: str, parts: Sequence[str], n_batches: int, payload: dict, *, desc: str,
               progress: bool) -> Iterator[dict]:
    """fn(shared, part, batch) for every (part, batch) as a task; results as they finish."""
    from jobs.plane.task_map import task_map

    calls = [{"part": p, "batch": b} for b in range(n_batches) for p in parts]
    yield from task_map(fn, calls, {"index": idx, **payload}, desc=desc, progress=progress, num_cpus=TASK_CPUS)


def batched(items: list, size: int) -> list[list]:
    return [items[k:k + size] for k in range(0, len(items), size)] or [[]]
