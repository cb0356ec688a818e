"""`audit --reference-corpus`: which of the audited documents' n-grams occur in a reference corpus, found with the
overlap engine on the workers (the same as `tidemark overlap`), never with a corpus n-gram set in the driver.

    1. workers: each staging task's documents → their distinct n-gram hashes (object refs) → the driver keeps the
       distinct ones of all documents (the audited side: bounded by what is audited, not by the corpus)
    2. workers: the reference corpus in parts (jobs/parts/overlap/corpus_scan.py, on the one part loop) against them,
       matches under OUT/_staging/reference/
    3. driver: the audited n-grams found (scoring/overlap/matching.FoundNgrams), shipped to the staging tasks,
       which measure each document's share and examples as they cut its snippets (jobs/parts/audit/snippets.py)
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

    from curation.io.outputs import Location
    from jobs.kit.identity import json_digest, tool_version
    from jobs.parts.overlap.corpus_scan import scan_corpus
    from jobs.plane.task_map import ray_task_map
    from scoring.overlap.matching import MAX_SOURCES, FoundNgrams
    from scoring.overlap.ngrams import unique_sorted

    audited = unique_sorted(ray_task_map(task_ngrams, [{"task": t} for t in tasks], {"n": n},
                                         desc="audited n-grams", progress=progress, num_cpus=0.5))
    settings = {"n": n, "text_field": TEXT_FIELDS, "id_field": "id", "max_sources": MAX_SOURCES, "opts": {}}
    scan = scan_corpus(reference, audited, settings=settings, where=Location(dest.child(REFERENCE_DIR)),
                       fingerprint=json_digest({"job": "audit-reference", "n": n, "tool": tool_version(),
                                                "audited": hashlib.sha256(audited.tobytes()).hexdigest()}),
                       what="reference corpus part", progress=progress)
    found = FoundNgrams.of(scan.matches, n)
    return found, {"files": len(scan.parts), "documents": scan.ledger.rows_out, "quarantined": scan.ledger.quarantined,
                   "reasons": dict(sorted(scan.ledger.reasons.items())), "audited_ngrams": int(audited.size),
                   "found_ngrams": int(found.hashes.size)}
