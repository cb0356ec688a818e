"""`overlap --semantic`'s corpus parts on the one scoring pool: each corpus file read, cut into windows and embedded
on the workers, and each query's nearest windows of the part written straight to the output.

    CorpusPart (one corpus file: corpus_scan.plan_corpus_parts) ──▶ PrepareWindows (the CPU pool; without GPUs it
        runs inside the embedder's actors, as the pool fuses the two stages): read the file's records
        (curation/io/corpus_files.read_records), quarantine the bad ones, cut each document into windows
        (scoring/semantic/windows.py): offsets only, a window's text is cut from its document when it is embedded
    ──▶ ScoreWindows (the embedder's actor pool, the model loaded once per actor): embed the windows a chunk at a
        time, keep each query's k nearest windows of the part (scoring/semantic/search.py: top_k per chunk, merged),
        write the part's files and return its summary (records, documents, quarantined, windows, seconds):

    OUT/semantic/candidates.parquet/part-NNNNN.parquet  per (query, rank): cosine, window id (the small columns)
    OUT/semantic/windows.parquet/part-NNNNN.parquet     each distinct candidate window once: id, doc id, offsets, text
    OUT/semantic/quarantine.parquet/part-NNNNN.parquet  the corpus records that could not be read (shared schema)

The windows are kept apart from the candidates because one window is near many queries: with --top-k 100 and 1,300
items a part has 130,000 candidates but far fewer distinct windows, and their texts are what weighs. `overlap --index
--semantic` writes the same three files from a corpus index's stored vectors (semantic_index.py, through write_part).

A query is a row of the query matrix the driver embedded (the benchmark's items, then the null's), passed to the
stage whole: it is benchmark-sized. A window's id is global and in corpus order, (part index << 32) + its index in
the part, so that merging the parts' top k (search.merge_top_k, on the driver) breaks ties as one search over the
whole corpus would, however the corpus was cut. The stage classes import no Ray (jobs/plane/scoring_pool.py runs
them); a unit test calls them directly.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict

import numpy as np
import pyarrow as pa

from curation.io.ledger import quarantine_record, quarantine_table, reason_counts
from jobs.parts.overlap.corpus_scan import CorpusPart
from jobs.plane.part_store import part_name
from jobs.plane.scoring_pool import ScoringSpec, from_ipc, to_ipc

SEMANTIC_DIR = "semantic"  # under OUT: the verbatim scan's parts and markers live at the top, these apart
PART_DIRS = ("candidates.parquet", "windows.parquet", "quarantine.parquet")
# Named in the parts' fingerprint (semantic_run.fingerprint): parts written while candidates.parquet held every
# window's text have no windows.parquet, and a resumed run must not reuse them.
PART_FORMAT = "candidates (query, rank, cosine, window) + windows.parquet (each candidate window once), v2"
EMBED_CHUNK = 2048  # windows embedded and searched at once: a part's vectors are never all held
PART_BITS = 32  # a window id's high bits are its part's index
# Why a failed part is not isolated record by record: bad records are quarantined by the reader, and a window the
# tokenizer cuts short is embedded as cut; a pipeline that fails is an actor or node failure, which a rerun resumes.
NOT_ISOLATED = ("a bad corpus record is quarantined by the reader and every window embeds; a failing part is a "
                "worker or node failure, which a rerun resumes")
DOCS_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])
WINDOWS_SCHEMA = pa.schema([("doc", pa.int64()), ("start_word", pa.int64()), ("n_words", pa.int64()),
                            ("char_start", pa.int64()), ("char_end", pa.int64())])
CANDIDATES_SCHEMA = pa.schema([("query", pa.int64()), ("rank", pa.int64()), ("cosine", pa.float32()),
                               ("window", pa.int64())])
CANDIDATE_WINDOWS_SCHEMA = pa.schema([("window", pa.int64()), ("doc_id", pa.string()), ("start_word", pa.int64()),
                                      ("n_words", pa.int64()), ("char_start", pa.int64()),
                                      ("char_end", pa.int64()), ("text", pa.string())])


def write_part(dest, index: int, scores: np.ndarray, ids: np.ndarray, rows_of, quarantined: list[dict]) -> dict:
    """A part's three files from each query's top k of the part ((cosines, global window ids), pads -1): the
    candidates' small columns, each distinct candidate window once (`rows_of(local indices)` gives their doc_id,
    offsets and text, in that order), the read quarantine. Returns the files' digests for the part's marker."""
    from scoring.semantic.search import PAD_ID

    q, rank = np.nonzero(ids != PAD_ID)
    candidates = pa.table({"query": q, "rank": rank, "cosine": scores[q, rank], "window": ids[q, rank]},
                          schema=CANDIDATES_SCHEMA)
    distinct = np.unique(ids[ids != PAD_ID])
    windows = pa.table({"window": distinct, **rows_of(distinct - (index << PART_BITS))},
                       schema=CANDIDATE_WINDOWS_SCHEMA)
    name = part_name(index)
    return {"candidates": dest.write_parquet(f"candidates.parquet/{name}.parquet", candidates),
            "windows": dest.write_parquet(f"windows.parquet/{name}.parquet", windows),
            "quarantine": dest.write_parquet(f"quarantine.parquet/{name}.parquet", quarantine_table(quarantined))}


def part_item(part: CorpusPart, read: dict) -> dict:
    """The pool's work item for one part: the part and how to read and cut it (`read`: text_field, id_field,
    opts, window_words, window_stride), as one JSON string."""
    return {"part": json.dumps({"part": asdict(part), **read}, sort_keys=True)}


def prepared_part(row: dict) -> tuple:
    """A PrepareWindows row, unpacked: (part index, documents, windows, quarantined records, texts, document ids);
    what every stage that embeds a part's windows starts from (here and jobs/parts/index/embeddings.py)."""
    docs, windows = from_ipc(row["docs"]), from_ipc(row["windows"])
    return (int(row["index"]), docs, windows, from_ipc(row["quarantine"]).to_pylist(),
            docs.column("text").to_pylist(), docs.column("id").to_pylist())


def cut_part(index: int, files: list[tuple[str, str]], item: dict, kept=lambda text, offsets: offsets) -> dict:
    """A part's (path, root) files read in order, bad records quarantined, each document cut into windows (offsets
    only; `kept(text, offsets)` picks the ones worth embedding): the prepared part both window-embedding stages
    start from (PrepareWindows here, jobs/parts/index/embeddings.PrepareIndexWindows), as IPC bytes."""
    from curation.io.corpus_files import STAGE, read_records
    from scoring.semantic.windows import WindowPlan, window_offsets

    t0 = time.perf_counter()
    plan = WindowPlan(item["window_words"], item["window_stride"])
    ids, texts, bad, windows, cut = [], [], [], [], 0
    for path, root in files:
        for rid, text, problem in read_records(path, root, text_field=item["text_field"],
                                               id_field=item["id_field"], opts=item["opts"]):
            if problem:
                bad.append(quarantine_record(rid, STAGE, *problem))
                continue
            offsets = window_offsets(text, plan)
            cut += len(offsets)
            windows += [(len(ids), *w) for w in kept(text, offsets)]
            ids.append(rid)
            texts.append(text)
    cols = list(zip(*windows)) if windows else [[] for _ in WINDOWS_SCHEMA.names]
    return {"index": index, "docs": to_ipc(pa.table({"id": ids, "text": texts}, schema=DOCS_SCHEMA)),
            "windows": to_ipc(pa.table(dict(zip(WINDOWS_SCHEMA.names, cols)), schema=WINDOWS_SCHEMA)),
            "quarantine": to_ipc(quarantine_table(bad)), "windows_cut": cut,
            "read_s": round(time.perf_counter() - t0, 3)}


class PrepareWindows:
    """A part's work item -> its readable documents, their windows' offsets and the read quarantine, as IPC bytes."""

    def __init__(self, prefilter: dict | None = None, **_):
        # the cheap first stage (scoring/semantic/prefilter.py): built once per actor from the queries' anchors,
        # which the driver computed ({"bar": float, "anchors": [Anchors, ...]}); None keeps every window
        self.prefilter = None
        if prefilter:
            from scoring.semantic.prefilter import Prefilter

            self.prefilter = Prefilter(prefilter["anchors"], prefilter["bar"])

    def kept(self, text: str, offsets: list) -> list:
        """The windows worth embedding: all of them without a prefilter."""
        if self.prefilter is None:
            return offsets
        from scoring.semantic.verify import WindowTerms

        return [w for w in offsets if self.prefilter.keep(WindowTerms.of(text[w[2]:w[3]]))]

    def prepare(self, item_json: str) -> dict:
        item = json.loads(item_json)
        part = CorpusPart(**item["part"])
        return cut_part(part.index, [(part.path, part.root)], item, self.kept)

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.Table.from_pylist([self.prepare(p) for p in batch.column("part").to_pylist()])


class ScoreWindows:
    """Embed one part's windows on one loaded embedder, keep each query's top k, write the part's three files."""

    def __init__(self, spec: ScoringSpec, branch: int, threads: int | None, finish: dict | None = None,
                 queries=None, top_k: int = 5, max_tokens: int = 256, batch_tokens: int = 16384):
        import torch

        from curation.io.outputs import Location
        from scoring.semantic.embed import Embedder

        if threads:
            torch.set_num_threads(threads)  # as the pool's scorer actors: two actors on 2 cores, a thread each
        self.embedder = Embedder(spec.branches[branch].model, device=spec.device, max_tokens=max_tokens,
                                 batch_tokens=batch_tokens)
        self.queries = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        self.k = int(top_k)
        self.dest = Location((finish or {})["dest"])

    def nearest(self, index: int, texts: list[str], windows: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """Each query's k nearest windows of the part: (cosines, global window ids), pads -inf and -1."""
        from scoring.semantic.search import merge_top_k, top_k

        doc, lo, hi = (windows.column(c).to_numpy() for c in ("doc", "char_start", "char_end"))
        base = index << PART_BITS
        best = top_k(self.queries, np.zeros((0, self.queries.shape[1]), np.float32), self.k)
        for a in range(0, len(doc), EMBED_CHUNK):
            b = min(len(doc), a + EMBED_CHUNK)
            vecs = self.embedder.embed([texts[doc[j]][lo[j]:hi[j]] for j in range(a, b)])
            best = merge_top_k([best, top_k(self.queries, vecs, self.k, offset=base + a)], self.k)
        return best

    def score(self, row: dict) -> dict:
        t0 = time.perf_counter()
        index, docs, windows, quarantined, texts, doc_ids = prepared_part(row)
        scores, ids = self.nearest(index, texts, windows)

        def rows_of(local: np.ndarray) -> dict:
            w = {c: windows.column(c).to_numpy()[local] for c in WINDOWS_SCHEMA.names}
            return {"doc_id": [doc_ids[d] for d in w["doc"]],
                    **{c: w[c] for c in ("start_word", "n_words", "char_start", "char_end")},
                    "text": [texts[d][a:b] for d, a, b in zip(w["doc"], w["char_start"], w["char_end"])]}

        files = write_part(self.dest, index, scores, ids, rows_of, quarantined)
        return {"index": index, "records": docs.num_rows + len(quarantined), "documents": docs.num_rows,
                "quarantined": len(quarantined), "reasons": reason_counts(quarantined), "windows": windows.num_rows,
                "windows_cut": int(row.get("windows_cut", windows.num_rows)),
                "read_s": row.get("read_s", 0.0), "embed_write_s": round(time.perf_counter() - t0, 3),
                "files": files}

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.Table.from_pylist([{"index": r["index"], "summary": json.dumps(self.score(r))}
                                     for r in batch.to_pylist()])

