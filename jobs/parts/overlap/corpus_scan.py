"""`tidemark overlap`'s corpus parts: each corpus file scanned on a worker against the benchmark's n-grams.

    driver: the benchmark's distinct n-gram hashes (scoring/overlap/matching.BenchmarkGrams), put once in the object
            store; one part per corpus file (curation/io/corpus_files.py)
    worker (a Ray task per part): stream the file's records in batches, quarantine the bad ones, hash every n-gram
            of a batch at once and keep the benchmark n-grams found (Matches.scan); write
            OUT/matches.parquet/part-NNNNN.parquet   per benchmark n-gram found: count, first documents
            OUT/quarantine.parquet/part-NNNNN.parquet the shared quarantine schema (corpus records)
            and return the part's counts
    driver: commit the part's marker (OUT/_parts/, the one part loop: resume, node-loss replanning, stall bound)

The corpus never passes through the driver: what comes back is counts, and the matches are bounded by the
benchmark (at most MAX_SOURCES documents per benchmark n-gram per part).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Mapping
from jobs.plane.runners import RAY

PART_DIRS = ("matches.parquet", "quarantine.parquet")
TASK_CPUS = 1.0
BATCH_DOCS = 256  # documents hashed together: numpy's per-call cost amortised, a batch's arrays a few MB
# Why a failed scan is not isolated record by record: a bad record is quarantined by the reader (with its reason)
# and a damaged file ends as one `corrupt_file` record, so a task that fails is a worker or node failure.
NOT_ISOLATED = ("a bad corpus record is quarantined by the reader and a damaged file ends as one corrupt_file "
                "record; a failing part is a worker or node failure, which a rerun resumes")


@dataclass(frozen=True)
class CorpusPart:
    index: int
    path: str
    root: str
    bytes: int


def plan_corpus_parts(corpus: str, opts: Mapping[str, Any]) -> list[CorpusPart]:
    """One part per corpus file, in sorted order."""
    from curation.io import storage
    from curation.io.corpus_files import corpus_files

    files, root = corpus_files(corpus, **opts)
    return [CorpusPart(i, f, root, storage.file_size(f, **opts)) for i, f in enumerate(files)]


def part_digest(part: CorpusPart, opts: Mapping[str, Any]) -> str:
    """What identifies a part's input: its path and size, and a local file's sampled digest or an object's ETag."""
    from pathlib import Path

    from curation.io import storage
    from jobs.kit.identity import file_digest, json_digest

    if storage.is_s3(part.path):
        tag = storage.describe(part.path, **opts).get("etag")
    else:
        tag = file_digest(Path(part.path))
    return json_digest([asdict(part), tag])


def scan_part(part: dict, distinct, settings: Mapping[str, Any], dest_uri: str) -> dict:
    """One corpus file against the benchmark's n-grams (a Ray task); writes the part's two files, returns counts."""
    import numpy as np

    from curation.io.corpus_files import STAGE, read_records
    from curation.io.ledger import quarantine_record, quarantine_table, reason_counts
    from curation.io.outputs import Location
    from jobs.plane.part_store import part_name
    from scoring.overlap.matching import Matches
    from scoring.overlap.ngrams import NgramSet

    t0 = time.perf_counter()
    p = CorpusPart(**part)
    distinct = NgramSet(np.asarray(distinct, dtype=np.uint64))
    n = int(settings["n"])
    matches = Matches(int(settings["max_sources"]))
    bad, texts, ids = [], [], []
    documents = ngrams = 0
    for rid, text, problem in read_records(p.path, p.root, text_field=settings["text_field"],
                                           id_field=settings["id_field"], opts=settings["opts"]):
        if problem:
            bad.append(quarantine_record(rid, STAGE, *problem))
            continue
        documents += 1
        texts.append(text)
        ids.append(rid)
        if len(texts) >= BATCH_DOCS:
            ngrams += matches.scan(distinct, texts, ids, n)
            texts, ids = [], []
    if texts:
        ngrams += matches.scan(distinct, texts, ids, n)
    dest = Location(dest_uri)
    name = part_name(p.index)
    dest.write_parquet(f"matches.parquet/{name}.parquet", matches.to_table())
    dest.write_parquet(f"quarantine.parquet/{name}.parquet", quarantine_table(bad))
    return {"index": p.index, "records": documents + len(bad), "documents": documents, "quarantined": len(bad),
            "reasons": reason_counts(bad), "bytes": p.bytes, "ngrams": ngrams, "matched_ngrams": int(matches.found().size),
            "scan_s": round(time.perf_counter() - t0, 3)}


def run_pool(parts: list[CorpusPart], distinct_ref, settings: Mapping[str, Any], dest_uri: str,
             progress: bool) -> Iterator[dict]:
    """A Ray task per part, results as they finish, under the stall bound (jobs/plane/task_map.watched_tasks)."""
    from jobs.plane.task_map import watched_tasks

    yield from watched_tasks(scan_part, [(asdict(p), distinct_ref, dict(settings), dest_uri) for p in parts],
                             desc="corpus parts", num_cpus=TASK_CPUS, progress=progress)


@dataclass
class CorpusScan:
    """What a scan of a corpus left for the driver: its parts, their summaries and ledger, the part loop's stats
    and the merged matches (benchmark-sized)."""

    parts: list
    summaries: dict
    ledger: Any
    stats: dict
    matches: Any


def scan_corpus(corpus: str, distinct, *, settings: Mapping[str, Any], where, fingerprint: str, what: str,
                resume: bool = True, progress: bool = True, start=None) -> CorpusScan:
    """The one corpus scan (`tidemark overlap`, `audit --reference-corpus`, the corpus recipe): every file of
    `corpus` against the `distinct` n-gram hashes, through the one part loop with its parts under `where`;
    `distinct` goes to the object store once, when the first part is left to scan (after `start`)."""
    from curation.io.ledger import Ledger
    from curation.io.outputs import new_run_id
    from jobs.plane.part_loop import run_parts
    from jobs.plane.part_store import PartStore

    opts = settings["opts"]
    parts = plan_corpus_parts(corpus, opts)
    shared: dict = {}

    def pool(pending):
        import ray

        if "distinct" not in shared:
            shared["distinct"] = ray.put(distinct)
        return run_pool(pending, shared["distinct"], settings, where.uri, progress)

    stats: dict = {}
    summaries = run_parts(parts, index=lambda p: p.index, digests={p.index: part_digest(p, opts) for p in parts},
                          store=PartStore(where, fingerprint, PART_DIRS), pool=pool, runner=RAY, stats=stats,
                          run_id=new_run_id(), resume=resume, not_isolated=NOT_ISOLATED, start=start)
    ledger = Ledger.of_parts(summaries, rows_in="records", rows_out="documents", what=what)
    return CorpusScan(parts, summaries, ledger, stats, merged_matches(where, summaries, settings["max_sources"]))


def merged_matches(dest, indices, max_sources: int):
    """Every part's matches merged in part order (first documents stay in corpus order); benchmark-sized."""
    from jobs.plane.part_store import part_name
    from scoring.overlap.matching import Matches

    total = Matches(max_sources)
    for i in sorted(indices):
        total.add_table(dest.read_parquet(f"matches.parquet/{part_name(i)}.parquet"))
    return total
