"""`tidemark trace` on the driver: the two rounds on the index's parts (jobs/parts/trace/index_rounds.py) merged into
spans.parquet (one row per kept span) and documents.parquet (one row per text, document and span occurrence), the
documents of each text ranked by BM25 against the whole text (scoring/trace/ranking.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

SPANS_SCHEMA = pa.schema([
    ("id", pa.string()),  # the traced text
    ("start", pa.int64()), ("end", pa.int64()),  # [start, end) in the text's \w+ words
    ("words", pa.int64()),
    ("span", pa.string()),  # the span as it reads in the text
    ("count", pa.int64()),  # its occurrences in the corpus (exact)
    ("rarity", pa.float64()),  # -log10 of its unigram probability (scoring/trace/spans.py)
    ("rank", pa.int64()),  # 1 = the text's rarest span
    ("doc_ids", pa.list_(pa.string())),  # the corpus's ids of its first documents (corpus order)
    ("doc_offsets", pa.list_(pa.int64())),  # where it starts in each, in the document's words
    ("doc_files", pa.list_(pa.string())),  # the corpus file of each
])
DOCUMENTS_SCHEMA = pa.schema([
    ("id", pa.string()), ("doc_id", pa.string()), ("file", pa.string()),
    ("word_offset", pa.int64()),  # where the span starts in the document, in its words
    ("doc_words", pa.int64()),
    ("span_start", pa.int64()), ("span_end", pa.int64()),  # the span, in the traced text's words
    ("bm25", pa.float64()),  # the document's relevance to the whole text (its shown passages as the document)
    ("doc_rank", pa.int64()),  # 1 = the text's most relevant document
    ("snippet", pa.string()),  # the passage around the span in the document (null: an index without text)
    ("match_start", pa.int64()), ("match_end", pa.int64()),  # the span's characters in the snippet
])


@dataclass(frozen=True)
class TraceSettings:
    min_words: int = 8
    docs_per_span: int = 10
    context_words: int = 40
    batch_texts: int = 500
    batch_spans: int = 2000
    chunk_texts: int = 2000  # texts traced, merged and written at a time: the driver holds one chunk's snippets
    requester_pays: bool = False  # an s3:// index is read with RequestPayer=requester (by the workers too)


def trace(rows: list[dict], idx: str, local, meta: dict, s: TraceSettings, *, runner, progress: bool = True
          ) -> tuple[pa.Table, pa.Table, dict]:
    """(spans, documents, statistics) for the texts `rows` ({"id", "text"}), all in memory (one text, tests)."""
    chunks = [c[1:] for c in trace_chunks(_chunked(rows, s.chunk_texts), idx, local, meta, s, runner=runner,
                                           progress=progress)]
    spans = pa.concat_tables([c[0] for c in chunks]) if chunks else SPANS_SCHEMA.empty_table()
    docs = pa.concat_tables([c[1] for c in chunks]) if chunks else DOCUMENTS_SCHEMA.empty_table()
    stats = {"texts": len(rows), "words": sum(c[2]["words"] for c in chunks), "spans": spans.num_rows,
             "longest": [x for c in chunks for x in c[2]["longest"]], "parts": chunks[0][2]["parts"] if chunks else 0}
    return spans, docs, stats


def _chunked(rows: list[dict], size: int) -> Iterator[list[dict]]:
    for c in range(0, len(rows), size):
        yield rows[c:c + size]


def trace_chunks(chunks: Iterable[list[dict]], idx: str, local, meta: dict, s: TraceSettings, *, runner,
                 progress: bool = True) -> Iterator[tuple[list[dict], pa.Table, pa.Table, dict]]:
    """Per chunk of texts, in input order: (its rows, spans, documents, statistics); a progress bar over the
    texts. The rounds run as tasks on `runner` (jobs/plane/runners.py)."""
    from tqdm import tqdm

    from jobs.parts.index.reader import part_dirs

    parts = [f"shards/{p.rsplit('/', 1)[-1]}" for p in part_dirs(local)]
    if not parts:
        raise ValueError(f"{idx} holds no indexed document")
    total = max(1, int(meta["counts"]["tokens"]) - int(meta["counts"]["documents"]))  # less a separator a document
    with tqdm(desc="trace", unit="text", disable=not progress) as bar:
        for chunk in chunks:
            yield (chunk, *_trace_chunk(chunk, idx, parts, total, s, runner))
            bar.update(len(chunk))


def _trace_chunk(rows: list[dict], idx: str, parts: list[str], total: int, s: TraceSettings, runner
                 ) -> tuple[pa.Table, pa.Table, dict]:
    from jobs.parts.trace.index_rounds import batched, hits_in_part, longest_in_part, run_rounds, text_word_ids
    from scoring.trace.spans import kept_spans

    ids = [text_word_ids(r["text"]) for r in rows]
    batches = batched(ids, s.batch_texts)
    longest = [np.zeros(a.size, dtype=np.int64) for a in ids]
    unigrams = [np.zeros(a.size, dtype=np.int64) for a in ids]
    for res in run_rounds(longest_in_part, idx, parts, len(batches), {"batches": batches}, runner=runner,
                          desc="trace: spans", progress=False, requester_pays=s.requester_pays):
        base = res["batch"] * s.batch_texts
        for k, (lg, ug) in enumerate(zip(res["longest"], res["unigrams"])):
            np.maximum(longest[base + k], lg, out=longest[base + k])
            unigrams[base + k] += ug
    kept = [kept_spans(lg, ug, total, s.min_words) for lg, ug in zip(longest, unigrams)]
    flat = [(t, sp) for t, spans in enumerate(kept) for sp in spans]
    span_batches = batched([ids[t][sp.start:sp.end] for t, sp in flat], s.batch_spans)
    counts = np.zeros(len(flat), dtype=np.int64)
    hits: list[dict[str, list]] = [{} for _ in flat]
    for res in run_rounds(hits_in_part, idx, parts, len(span_batches) if flat else 0,
                          {"span_batches": span_batches, "docs_per_span": s.docs_per_span,
                           "context_words": s.context_words}, runner=runner, desc="trace: documents",
                          progress=False, requester_pays=s.requester_pays):
        base = res["batch"] * s.batch_spans
        for k, (cnt, occ) in enumerate(res["spans"]):
            counts[base + k] += cnt
            hits[base + k][res["part"]] = occ
    firsts = [[o for p in parts for o in h.get(p, [])][:s.docs_per_span] for h in hits]
    stats = {"words": int(sum(a.size for a in ids)), "spans": len(flat),
             "longest": [max((sp.words for sp in spans), default=0) for spans in kept], "parts": len(parts)}
    return _spans_table(rows, kept, flat, counts, firsts), _documents_table(rows, flat, firsts), stats


def _text_cut(text: str, start: int, end: int) -> str:
    from jobs.parts.index.reader import snippet

    cut = snippet(text, start, end, 0)
    return cut["snippet"][cut["match_start"]:cut["match_end"]]


def _spans_table(rows, kept, flat, counts, firsts) -> pa.Table:
    rank_of = {(t, sp.start): r + 1 for t, spans in enumerate(kept) for r, sp in enumerate(spans)}
    recs = [{"id": rows[t]["id"], "start": sp.start, "end": sp.end, "words": sp.words,
             "span": _text_cut(rows[t]["text"], sp.start, sp.end), "count": int(c), "rarity": round(sp.rarity, 6),
             "rank": rank_of[(t, sp.start)], "doc_ids": [o["doc_id"] for o in f],
             "doc_offsets": [o["word_offset"] for o in f], "doc_files": [o["file"] for o in f]}
            for (t, sp), c, f in zip(flat, counts, firsts)]
    return pa.Table.from_pylist(recs, schema=SPANS_SCHEMA)


def _documents_table(rows, flat, firsts) -> pa.Table:
    """One row per (text, document occurrence of one of its spans); each text's documents ranked by BM25 of their
    shown passages against the whole text."""
    from scoring.trace.ranking import bm25_scores

    by_text: dict[int, list[tuple]] = {}
    for (t, sp), f in zip(flat, firsts):
        for o in f:
            by_text.setdefault(t, []).append((sp, o))
    recs = []
    for t, occ in by_text.items():
        docs: dict[tuple, list[str]] = {}
        for _, o in occ:
            docs.setdefault((o["part"], o["shard"], o["n"]), []).append(o["snippet"] or "")
        keys = list(docs)
        scores = bm25_scores(rows[t]["text"], [" ".join(dict.fromkeys(v)) for v in docs.values()])
        order = sorted(range(len(keys)), key=lambda k: (-scores[k], k))
        rank = {keys[k]: r + 1 for r, k in enumerate(order)}
        score = {keys[k]: float(scores[k]) for k in range(len(keys))}
        for sp, o in occ:
            key = (o["part"], o["shard"], o["n"])
            recs.append({"id": rows[t]["id"], "doc_id": o["doc_id"], "file": o["file"],
                         "word_offset": o["word_offset"], "doc_words": o["doc_words"], "span_start": sp.start,
                         "span_end": sp.end, "bm25": round(score[key], 6), "doc_rank": rank[key],
                         "snippet": o["snippet"], "match_start": o["match_start"], "match_end": o["match_end"]})
    recs.sort(key=lambda r: (r["id"], r["doc_rank"], r["span_start"]))
    return pa.Table.from_pylist(recs, schema=DOCUMENTS_SCHEMA)
