"""`tidemark index-corpus --embeddings`: every corpus window embedded once and kept beside the n-gram index, so
that `tidemark overlap --index --semantic` searches stored vectors instead of embedding the corpus again (the cost
of a semantic run: ~11 windows/s on a busy 2-core machine, ENVIRONMENT.md).

    driver: after the n-gram pass (build.py), the same parts (runs of consecutive corpus files) through the one
            scoring pool and the one part loop, with markers of their own under IDX/embeddings/_parts/ (so the
            n-gram pass and this one resume apart, and an index built without embeddings gains them by a rerun)
    PrepareIndexWindows (the CPU stage; without GPUs inside the embedder's actors): read the part's files, cut each
            readable document into windows of the index's plan (scoring/semantic/windows.py), offsets only
    EmbedIndexWindows (the embedder's actors, the model loaded once per actor): embed the windows EMBED_CHUNK at a
            time and write the part, in shards of at most `max_shard_windows` windows, under
            IDX/embeddings/part-NNNNN/:
                vectors.KKK.npy      the windows' unit vectors (float16 by default: half the bytes, and the exact
                                     top 100 over them is 99.99% that of float32: bench/results/semantic_ann.md)
                windows.KKK.parquet  each window's doc_id, start_word, n_words, char_start, char_end and text, in
                                     row groups of WINDOW_ROW_GROUP (a search reads the groups of its candidates)
                ann.KKK.faiss        the shard's IVF index (scoring/semantic/ann.py), when it holds at least
                                     `ann_min_windows` windows; a smaller shard is searched exactly
                shards.json          per shard: its number, its first window in the part, its windows, the index's
                                     calibrated settings
                quarantine.parquet   the part's records that could not be read (the shared schema)
    driver: IDX/index.json's `embeddings` block (embeddings_block): the embedder's identity, the window plan, the
            storage, the index settings, counts and each part's file digest (what `overlap --index` checks).

A window's id is (part << 32) + its index in the part, as in `overlap --corpus --semantic`, so merged results break
ties in corpus order. The stage classes import no Ray.
"""
from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from jobs.parts.overlap.semantic_index import EMBEDDINGS
from jobs.parts.overlap.semantic_parts import PrepareWindows, cut_part

FORMAT = "tidemark window embeddings v1: vectors.KKK.npy, windows.KKK.parquet, ann.KKK.faiss, shards.json"
DTYPES = ("float16", "float32")
WINDOW_WORDS = 64  # the default plan: an index has no benchmark to size windows from (overlap sizes them to 2 x the
# items' median length; GSM8K-style items of 20-45 words fit whole in a 64-word window with stride 32)
MAX_SHARD_WINDOWS = 1 << 20  # 1.5 GB of float32 vectors while a shard's index is built; 0.75 GB stored as float16
WINDOW_ROW_GROUP = 1 << 14
NOT_ISOLATED = ("a bad corpus record is quarantined by the reader and every window embeds; a failing part is a "
                "worker or node failure, which a rerun resumes")
META_SCHEMA = pa.schema([("doc_id", pa.string()), ("start_word", pa.int64()), ("n_words", pa.int64()),
                         ("char_start", pa.int64()), ("char_end", pa.int64()), ("text", pa.string())])


@dataclass(frozen=True)
class EmbeddingPlan:
    """What `index-corpus --embeddings` resolved: the embedder, the windows, how vectors and indexes are kept."""

    embedder: str  # an absolute sentence-transformers directory
    embedder_name: str  # as given (`minilm` or a path)
    window_words: int
    window_stride: int
    dtype: str = "float16"
    max_shard_windows: int = MAX_SHARD_WINDOWS
    ann_min_windows: int | None = None  # None: ann.EXACT_BELOW
    max_tokens: int = 256
    batch_tokens: int = 16384

    def ann_settings(self):
        from scoring.semantic.ann import AnnSettings

        return AnnSettings() if self.ann_min_windows is None else AnnSettings(min_vectors=self.ann_min_windows)


def embedder_facts(path: str) -> dict:
    """The embedder's identity (semantic_run.embedder_identity) and the digest of all its files that a run on the
    index must match (semantic_index.files_digest)."""
    from jobs.parts.overlap.semantic_index import files_digest
    from jobs.parts.overlap.semantic_run import embedder_identity

    return {**embedder_identity(path), "files_digest": files_digest(path)}


def embeddings_fingerprint(plan: EmbeddingPlan, facts: dict, settings: dict) -> str:
    """Everything that changes a part's embedding files: the format, the embedder's files, the plan (windows,
    storage, shards, index settings, the embedding's limits), how records are read, the tool."""
    from jobs.kit.identity import json_digest, tool_version

    return json_digest({"job": "index-corpus-embeddings", "format": FORMAT, "embedder": facts["files_digest"],
                        **{k: v for k, v in asdict(plan).items() if k not in ("embedder", "embedder_name")},
                        "ann": plan.ann_settings().as_dict(), "text_field": settings["text_field"],
                        "id_field": settings["id_field"], "tool": tool_version()})


def part_item(part, settings: dict, plan: EmbeddingPlan) -> dict:
    """The pool's work item for an index part (build.IndexPart): its files and how to read and cut them."""
    return {"part": json.dumps({"part": asdict(part), "text_field": settings["text_field"],
                                "id_field": settings["id_field"], "opts": settings["opts"],
                                "window_words": plan.window_words, "window_stride": plan.window_stride},
                               sort_keys=True)}


class PrepareIndexWindows(PrepareWindows):
    """An index part's work item -> what semantic_parts.PrepareWindows gives (semantic_parts.cut_part), read from
    all of the part's files in order; every window is kept (an index serves any later benchmark)."""

    def __init__(self, **_):
        super().__init__()

    def prepare(self, item_json: str) -> dict:
        item = json.loads(item_json)
        part = item["part"]
        return cut_part(part["index"], [(path, part["root"]) for path in part["paths"]], item)


class EmbedIndexWindows:
    """Embed one part's windows on one loaded embedder and write its shards (built in a local temporary directory,
    then copied to IDX/embeddings/part-NNNNN/, local or s3://)."""

    def __init__(self, spec, branch: int, threads: int | None, finish: dict | None = None, plan: dict | None = None):
        import torch

        from scoring.semantic import ann
        from scoring.semantic.embed import Embedder

        if threads:
            torch.set_num_threads(threads)  # as the pool's scorer actors: two actors on 2 cores, a thread each
            ann.set_threads(threads)
        self.plan = EmbeddingPlan(**plan)
        self.embedder = Embedder(spec.branches[branch].model, device=spec.device, max_tokens=self.plan.max_tokens,
                                 batch_tokens=self.plan.batch_tokens)
        self.dest = (finish or {})["dest"]

    def _shard(self, where: Path, k: int, vectors: np.ndarray, meta: pa.Table) -> dict:
        import pyarrow.parquet as pq

        from scoring.semantic import ann

        np.save(where / f"vectors.{k:03d}.npy", vectors)
        pq.write_table(meta, where / f"windows.{k:03d}.parquet", row_group_size=WINDOW_ROW_GROUP)
        built = ann.build(vectors, self.plan.ann_settings())
        ann.write(built, where / f"ann.{k:03d}.faiss")
        return built.info

    def score(self, row: dict) -> dict:
        from curation.io.ledger import quarantine_table, reason_counts
        from curation.io.outputs import Location
        from jobs.parts.overlap.semantic_parts import EMBED_CHUNK, prepared_part
        from jobs.plane.part_store import part_name

        t0 = time.perf_counter()
        index, docs, windows, quarantined, texts, doc_ids = prepared_part(row)
        doc, start_word, n_words, lo, hi = (windows.column(c).to_numpy() for c in
                                            ("doc", "start_word", "n_words", "char_start", "char_end"))
        dtype, n, shards, embed_s = np.dtype(self.plan.dtype), len(doc), [], 0.0
        dest, rel = Location(self.dest), part_name(index)
        with tempfile.TemporaryDirectory(prefix="tidemark-embeddings-") as tmp:
            where = Path(tmp)
            for s0 in range(0, n, self.plan.max_shard_windows):
                s1 = min(n, s0 + self.plan.max_shard_windows)
                t1 = time.perf_counter()
                vectors = np.concatenate([self.embedder.embed([texts[doc[j]][lo[j]:hi[j]] for j in range(a, min(
                    s1, a + EMBED_CHUNK))]).astype(dtype) for a in range(s0, s1, EMBED_CHUNK)])
                embed_s += time.perf_counter() - t1
                meta = pa.table({"doc_id": [doc_ids[d] for d in doc[s0:s1]], "start_word": start_word[s0:s1],
                                 "n_words": n_words[s0:s1], "char_start": lo[s0:s1], "char_end": hi[s0:s1],
                                 "text": [texts[d][a:b] for d, a, b in zip(doc[s0:s1], lo[s0:s1], hi[s0:s1])]},
                                schema=META_SCHEMA)
                info = self._shard(where, len(shards), vectors, meta)
                shards.append({"k": len(shards), "start": s0, "windows": s1 - s0, "ann": info})
            (where / "shards.json").write_text(json.dumps(shards, indent=1, sort_keys=True))
            Location(tmp).write_parquet("quarantine.parquet", quarantine_table(quarantined))
            dest.delete_tree(rel)
            files = {f.name: dest.upload_file(f, f"{rel}/{f.name}") for f in sorted(where.iterdir())}
        return {"index": index, "records": docs.num_rows + len(quarantined), "documents": docs.num_rows,
                "quarantined": len(quarantined), "reasons": reason_counts(quarantined), "windows": n,
                "shards": len(shards), "ann_shards": sum(s["ann"]["kind"] != "exact" for s in shards),
                "bytes": sum(f["bytes"] for f in files.values()), "read_s": row.get("read_s", 0.0),
                "embed_s": round(embed_s, 3), "embed_write_s": round(time.perf_counter() - t0, 3), "files": files}

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.Table.from_pylist([{"index": r["index"], "summary": json.dumps(self.score(r))}
                                     for r in batch.to_pylist()])


def run_embeddings(parts: list, dest, plan: EmbeddingPlan, settings: dict, digests: dict, progress: bool,
                   resume: bool, actors: int = 0, gpus_per_actor: float = 0.0) -> dict:
    """Every index part's windows through the pool and the part loop; returns index.json's `embeddings` block."""
    from curation.io.ledger import Ledger
    from curation.io.outputs import Location, new_run_id
    from jobs.kit.runtime import start_driver
    from jobs.plane.part_loop import run_parts
    from jobs.plane.part_store import PartStore
    from jobs.plane.runners import RAY
    from jobs.plane.scoring_pool import ModelBranch, PoolStages, ScoringSpec

    t0 = time.perf_counter()
    facts = embedder_facts(plan.embedder)
    where = Location(dest.child(EMBEDDINGS))
    spec = ScoringSpec((ModelBranch(plan.embedder, ("original",)),), actors=actors, gpus_per_actor=gpus_per_actor)
    stages = PoolStages(PrepareIndexWindows, {}, EmbedIndexWindows, {"dest": where.uri}, {"plan": asdict(plan)})
    stats: dict = {}
    summaries = run_parts(parts, index=lambda p: p.index, digests=digests,
                          store=PartStore(where, embeddings_fingerprint(plan, facts, settings), dirs=()),
                          pool=lambda pending: RAY.pipeline(spec, [part_item(p, settings, plan) for p in pending],
                                                            stages, progress),
                          runner=RAY, stats=stats, run_id=new_run_id(), resume=resume, not_isolated=NOT_ISOLATED,
                          start=start_driver)
    ledger = Ledger.of_parts(summaries, rows_in="records", rows_out="documents", what="embedded corpus part")
    return embeddings_block(plan, facts, summaries, ledger, stats, round(time.perf_counter() - t0, 2))


def embeddings_block(plan: EmbeddingPlan, facts: dict, summaries: dict, ledger, stats: dict, seconds: float) -> dict:
    """What index.json says of the embeddings: what `overlap --index --semantic` must match (the embedder's files
    digest, the window plan, the embedding's limits), how they are kept, counts, and each part's digest."""
    from jobs.kit.identity import json_digest
    from scoring.semantic.ann import EXACT_BELOW

    return {"format": FORMAT, "dir": EMBEDDINGS,
            "embedder": {"name": plan.embedder_name, "path": plan.embedder, "files_digest": facts["files_digest"],
                         "weights_digest": facts["weights_digest"], "identity": facts["identity"]},
            "window": {"size": plan.window_words, "stride": plan.window_stride,
                       "contained_span": plan.window_words - plan.window_stride + 1},
            "dtype": plan.dtype, "max_tokens": plan.max_tokens, "batch_tokens": plan.batch_tokens,
            "max_shard_windows": plan.max_shard_windows,
            "ann": {**plan.ann_settings().as_dict(), "index": "faiss IVF (flat, or fp16 for float16 vectors), "
                    "nlist round(sqrt(n)), nprobe calibrated per shard", "exact_below_default": EXACT_BELOW},
            "counts": {"records": ledger.rows_in, "documents": ledger.rows_out, "quarantined": ledger.quarantined,
                       "windows": sum(s["windows"] for s in summaries.values()),
                       "shards": sum(s["shards"] for s in summaries.values()),
                       "ann_shards": sum(s["ann_shards"] for s in summaries.values())},
            "bytes": sum(s["bytes"] for s in summaries.values()),
            "parts": [{"index": i, "records": s["records"], "documents": s["documents"],
                       "quarantined": s["quarantined"], "reasons": s["reasons"], "windows": s["windows"],
                       "digest": json_digest(s["files"])} for i, s in sorted(summaries.items())],
            "part_loop": {k: stats.get(k, 0) for k in ("parts", "reused", "scored", "replans", "nodes_lost")},
            "embed_s_in_tasks": round(sum(s["embed_s"] for s in summaries.values()), 2), "seconds": seconds}
