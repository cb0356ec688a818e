"""`overlap --index --semantic`: the corpus's windows are not embedded again; each part of a corpus index built with
`index-corpus --embeddings` (jobs/parts/index/embeddings.py) is searched on a worker for every query's k nearest
windows, and written as `overlap --corpus --semantic` writes a part (semantic_parts.write_part): the driver's merge,
verification and decisions (semantic_run.py) are unchanged.

    driver: index.json's `embeddings` block (index_embeddings): refused when the index has none, or when it was
            built with another embedder (its files' digest), window plan or token limit than the run asks for
            (check_index); the window plan defaults to the index's
    worker (a Ray task per index part, through the one part loop: resume by part under OUT/semantic/, node-loss
            replanning, the stall bound): for each shard, its IVF index (or exact search below its size;
            scoring/semantic/ann.py) over its stored vectors, merged (search.merge_top_k); the chosen windows'
            rows read from the shards' windows.parquet (only the row groups that hold them); the part's
            candidates, windows and quarantine written to OUT/semantic/.

A search needs no model, so the parts run as plain tasks (as the verbatim scan's do) rather than on the embedder's
actor pool. An s3:// index's part is copied to the worker's local disk for its search, then removed. What the
index's writer (jobs/parts/index/embeddings.py) and this reader share is here: the index room reads the overlap
room, never the other way.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np

EMBEDDINGS = "embeddings"  # under IDX
TASK_CPUS = 1.0
NOT_ISOLATED = ("a part's search reads only the index's files; a failing part is a worker or node failure, or a "
                "damaged index, which a rerun resumes or `index-corpus` rebuilds")


def index_embeddings(idx: str, requester_pays: bool = False) -> dict:
    """The `embeddings` block of a complete corpus index's index.json; ValueError when it has none."""
    from curation.io.outputs import Location

    where = Location(idx, requester_pays=requester_pays)
    if not where.exists("_SUCCESS"):
        raise FileNotFoundError(f"{idx} is not a complete index (no _SUCCESS): run `tidemark index-corpus` to the end")
    block = where.read_json("index.json").get("embeddings")
    if not block:
        raise ValueError(f"--index {idx} has no window embeddings: build it with `tidemark index-corpus "
                         "--embeddings` (the n-gram index is kept; a rerun adds them) or give --corpus")
    return block


def files_digest(embedder: str) -> str:
    """One digest of all of an embedder's files but their directory (jobs/kit/identity.model_identity): what an
    index and a run must share, since a tokenizer or pooling change moves vectors as weights do."""
    from jobs.kit.identity import json_digest, model_identity

    return json_digest(model_identity(embedder).get("files", []))


def check_index(block: dict, idx: str, embedder: str, words: int | None, stride: int | None,
                max_tokens: int) -> tuple[int, int]:
    """The window plan (size, stride) a run on this index uses: the index's. ValueError when the run asks for
    another embedder (by its files' digest, not its path), another plan or another token limit: the stored
    vectors would not be comparable with the queries'."""
    built = block["embedder"]
    if files_digest(embedder) != built["files_digest"]:
        raise ValueError(f"--index {idx} was embedded with {built['name']} ({built['path']}, files digest "
                         f"{built['files_digest'][:12]}), not with --embedder {embedder}: give --embedder "
                         f"{built['name']} (the same model files) or rebuild the index's embeddings")
    size, step = block["window"]["size"], block["window"]["stride"]
    if (words is not None and words != size) or (stride is not None and stride != step):
        raise ValueError(f"--index {idx} holds windows of {size} words, stride {step}, not --window-words {words} "
                         f"--window-stride {stride}: leave them out to use the index's, or rebuild its embeddings "
                         "with `index-corpus --embeddings --window-words N --window-stride S`")
    if block["max_tokens"] != max_tokens:
        raise ValueError(f"--index {idx} embedded windows cut at {block['max_tokens']} tokens, this run cuts its "
                         f"items at {max_tokens}")
    return size, step


def _part_files(src, rel: str, tmp: Path) -> Path:
    """A local directory holding the index part's files: the index's own, or a copy of an s3:// part's."""
    if not src.s3:
        return src.root / rel
    for name in src.list(rel):
        src.download(name, tmp / Path(name).name)
    return tmp


def _window_rows(where: Path, shards: list[dict], local: np.ndarray) -> dict:
    """The windows.parquet rows of the part's windows `local` (ascending indices in the part), reading only the
    row groups that hold them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for sh in shards:
        mine = local[(local >= sh["start"]) & (local < sh["start"] + sh["windows"])] - sh["start"]
        if not mine.size:
            continue
        f = pq.ParquetFile(where / f"windows.{sh['k']:03d}.parquet")
        sizes = np.array([f.metadata.row_group(g).num_rows for g in range(f.metadata.num_row_groups)])
        starts = np.concatenate([[0], np.cumsum(sizes)])  # each row group's first row in the shard
        group = np.searchsorted(starts, mine, side="right") - 1
        wanted = np.unique(group)
        at = np.concatenate([[0], np.cumsum(sizes[wanted])])  # each wanted group's first row once read
        t = f.read_row_groups(wanted.tolist())
        tables.append(t.take(pa.array(at[np.searchsorted(wanted, group)] + mine - starts[group], pa.int64())))
    t = pa.concat_tables(tables) if tables else None
    names = ("doc_id", "start_word", "n_words", "char_start", "char_end", "text")
    return {c: t.column(c) if t is not None else [] for c in names}


def search_part(part: dict, queries, k: int, idx_uri: str, out_uri: str, requester_pays: bool = False) -> dict:
    """One index part's k nearest windows for every query (a Ray task); writes the part's three files under
    OUT/semantic/ and returns its summary (the counts the index recorded for it, and the search's time).
    `requester_pays` reads an s3:// index's files with RequestPayer=requester (OUT is the user's own)."""
    import pyarrow.parquet as pq

    from curation.io.outputs import Location
    from jobs.parts.overlap.semantic_parts import PART_BITS, write_part
    from jobs.plane.part_store import part_name
    from scoring.semantic import ann
    from scoring.semantic.search import merge_top_k, top_k

    t0 = time.perf_counter()
    ann.set_threads(int(TASK_CPUS))
    q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
    index, src = int(part["index"]), Location(idx_uri, requester_pays=requester_pays)
    base = index << PART_BITS
    with tempfile.TemporaryDirectory(prefix="tidemark-semantic-index-") as tmp:
        where = _part_files(src, f"{EMBEDDINGS}/{part_name(index)}", Path(tmp))
        shards = json.loads((where / "shards.json").read_text())
        best = top_k(q, np.zeros((0, q.shape[1]), np.float32), k)
        for sh in shards:
            vectors = np.load(where / f"vectors.{sh['k']:03d}.npy", mmap_mode="r")
            shard = ann.read(where / f"ann.{sh['k']:03d}.faiss", sh["ann"])
            best = merge_top_k([best, ann.search(shard, vectors, q, k, offset=base + sh["start"])], k)
        scores, ids = best
        quarantined = pq.read_table(where / "quarantine.parquet").to_pylist()
        files = write_part(Location(out_uri), index, scores, ids, lambda local: _window_rows(where, shards, local),
                           quarantined)
    return {"index": index, **{c: part[c] for c in ("records", "documents", "quarantined", "reasons", "windows")},
            "shards": len(shards), "search_s": round(time.perf_counter() - t0, 3), "files": files}


def run_index_parts(req, queries: np.ndarray, fp: str, where) -> tuple[list, dict, dict]:
    """Every part of the index through the part loop: (the corpus files the index covers, {index: summary}, the
    loop's stats), as semantic_run.run_corpus_parts returns for a corpus."""
    from curation.io.outputs import Location, new_run_id
    from jobs.kit.runtime import start_driver
    from jobs.parts.overlap.semantic_parts import PART_DIRS
    from jobs.plane.part_loop import run_parts
    from jobs.plane.part_store import PartStore
    from jobs.plane.runners import RAY
    from jobs.plane.task_map import watched_tasks

    payer = bool(req.opts.get("requester_pays"))
    src = Location(req.index, requester_pays=payer)
    block = index_embeddings(req.index, payer)
    parts = block["parts"]
    shared: dict = {}

    def pool(pending):
        import ray

        if "queries" not in shared:
            shared["queries"] = ray.put(queries)
        return watched_tasks(search_part, [(p, shared["queries"], req.top_k, src.uri, where.uri, payer)
                                           for p in pending], desc="index parts", num_cpus=TASK_CPUS,
                             progress=req.progress)

    stats: dict = {}
    # a part's input: its stored files (their digests, as the index's build recorded them)
    summaries = run_parts(parts, index=lambda p: p["index"], digests={p["index"]: p["digest"] for p in parts},
                          store=PartStore(where, fp, PART_DIRS), pool=pool, runner=RAY, stats=stats,
                          run_id=new_run_id(), resume=req.resume, not_isolated=NOT_ISOLATED, start=start_driver)
    files = src.read_json("index.json")["counts"]["files"]
    return list(range(files)), summaries, stats
