"""`audit --reference-corpus`: which of the audited documents' n-grams occur in a reference corpus, found with the
overlap engine on the workers (the same as `tidemark overlap`), never with a corpus n-gram set in the driver.

    1. workers: each staging task's documents → their distinct n-gram hashes (object refs) → the driver keeps the
       distinct ones of all documents (the audited side: bounded by what is audited, not by the corpus)
    2. workers: the reference corpus in parts (jobs/parts/corpus_overlap.py, on the one part loop) against them,
       matches under OUT/_staging/reference/
    3. driver: the audited n-grams found (scoring/overlap/matching.FoundNgrams), shipped to the staging tasks,
       which measure each document's share and examples as they cut its snippets (jobs/parts/audit_snippets.py)
"""
from __future__ import annotations

from typing import Sequence

REFERENCE_DIR = "_staging/reference"
TEXT_FIELDS = ("text", "input")  # the reference corpora audits read: jsonl `text`, else `input`; txt files


def task_ngrams(shared: dict, task: dict):
    """The distinct n-gram hashes of one staging task's readable documents (a Ray task)."""
    from pathlib import Path

    from jobs.parts.doc_inputs import iter_documents
    from scoring.overlap.ngrams import text_ngrams, unique_sorted

    root = Path(task["root"]) if task["root"] else None
    docs = iter_documents([Path(f) for f in task["files"]], root, min_words=task["min_words"],
                          id_prefix=task["id_prefix"])
    return unique_sorted(text_ngrams(doc["text"], shared["n"])[1] for doc, _ in docs if doc is not None)


def found_ngrams(tasks: Sequence[dict], reference: str, n: int, dest, progress: bool = True):
    """(FoundNgrams of the audited documents in the reference corpus, the corpus read's counts)."""
    import hashlib

    import ray

    from curation.io.ledger import Ledger
    from curation.io.outputs import Location, new_run_id
    from jobs.kit.identity import json_digest, tool_version
    from jobs.parts.corpus_overlap import (NOT_ISOLATED, PART_DIRS, merged_matches, part_digest, plan_corpus_parts,
                                           run_pool)
    from jobs.plane.part_loop import run_parts
    from jobs.plane.part_store import PartStore
    from jobs.plane.task_map import ray_task_map
    from scoring.overlap.matching import MAX_SOURCES, FoundNgrams
    from scoring.overlap.ngrams import unique_sorted

    audited = unique_sorted(ray_task_map(task_ngrams, [{"task": t} for t in tasks], {"n": n},
                                         desc="audited n-grams", progress=progress, num_cpus=0.5))
    parts = plan_corpus_parts(reference, {})
    settings = {"n": n, "text_field": TEXT_FIELDS, "id_field": "id", "max_sources": MAX_SOURCES, "opts": {}}
    where = Location(dest.child(REFERENCE_DIR))
    store = PartStore(where, json_digest({"job": "audit-reference", "n": n, "tool": tool_version(),
                                          "audited": hashlib.sha256(audited.tobytes()).hexdigest()}), PART_DIRS)
    distinct = ray.put(audited)
    summaries = run_parts(parts, index=lambda p: p.index, digests={p.index: part_digest(p, {}) for p in parts},
                          store=store, pool=lambda pending: run_pool(pending, distinct, settings, where.uri, progress),
                          stats={}, run_id=new_run_id(), not_isolated=NOT_ISOLATED)
    corpus = Ledger.of_parts(summaries, rows_in="records", rows_out="documents", what="reference corpus part")
    found = FoundNgrams.of(merged_matches(where, summaries, MAX_SOURCES), n)
    return found, {"files": len(parts), "documents": corpus.rows_out, "quarantined": corpus.quarantined,
                   "reasons": dict(sorted(corpus.reasons.items())), "audited_ngrams": int(audited.size),
                   "found_ngrams": int(found.hashes.size)}
