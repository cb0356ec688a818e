"""The corpus recipe's overlap check on Ray (`source.kind: corpus`, curation/sources/corpus.py): which training
n-grams occur in the held-out passages, found with the engine of `tidemark overlap`, before the parse pass.

    1. workers: each held-out file's passages (as the release would cut them) → their distinct n-gram hashes; the
       driver keeps the distinct ones of all files (the held-out side: bounded by the held-out sample)
    2. workers: the whole training corpus in parts against them (jobs/parts/overlap/corpus_scan.py, on the one part loop:
       resumable, under OUT/_build/overlap), the driver merges the parts' matches
    3. the found set goes to the held-out shards as their aggregation; each held-out document's passage share is
       measured as it is parsed, and the cutoff step drops the ones over `source.max_overlap`

After the release is written, `kept_nonmember_overlap` measures the released non-member rows against the same set:
the distribution the manifest records.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

OVERLAP_DIR = "_build/overlap"


def heldout_ngrams(shared: dict, file: str, root: str):
    """The distinct n-gram hashes of one held-out file's passages (a Ray task)."""
    from curation.sources.corpus import heldout_passages
    from scoring.overlap.ngrams import text_ngrams, unique_sorted

    return unique_sorted(text_ngrams(p, shared["n"])[1] for p in heldout_passages(shared["cfg"], file, root))


def training_overlap(source_cfg: Mapping[str, Any], dest, log: Callable[[str], None], progress: bool = True):
    """(FoundNgrams: the training n-grams in the held-out passages, the scan's counts)."""
    import hashlib

    from curation.io import storage
    from curation.io.corpus_files import corpus_files
    from curation.io.outputs import Location
    from jobs.kit.identity import json_digest, tool_version
    from jobs.parts.overlap.corpus_scan import scan_corpus
    from jobs.plane.task_map import ray_task_map
    from scoring.overlap.matching import MAX_SOURCES, FoundNgrams
    from scoring.overlap.ngrams import unique_sorted

    n = int(source_cfg.get("ngram") or 13)
    opts = storage.s3_options(source_cfg)
    files, root = corpus_files(str(source_cfg["heldout"]), **opts)
    held = unique_sorted(ray_task_map(heldout_ngrams, [{"file": f, "root": root} for f in files],
                                      {"cfg": dict(source_cfg), "n": n}, desc="held-out n-grams", progress=progress,
                                      num_cpus=0.5))
    settings = {"n": n, "text_field": source_cfg.get("text_field") or "text",
                "id_field": source_cfg.get("id_field") or "id", "max_sources": MAX_SOURCES, "opts": opts}
    scan = scan_corpus(str(source_cfg["train"]), held, settings=settings, where=Location(dest.child(OVERLAP_DIR)),
                       fingerprint=json_digest({"job": "corpus-overlap", "tool": tool_version(), "n": n,
                                                "fields": [settings["text_field"], settings["id_field"]],
                                                "heldout": hashlib.sha256(held.tobytes()).hexdigest()}),
                       what="training corpus part", progress=progress)
    found = FoundNgrams.of(scan.matches, n)
    log(f"training overlap: {found.hashes.size:,} of the held-out passages' {held.size:,} distinct {n}-grams occur "
        f"in the training corpus ({len(scan.parts)} file(s), {scan.ledger.rows_out:,} documents)")
    return found, {"train_files": len(scan.parts), "train_documents": scan.ledger.rows_out,
                   "train_quarantined": scan.ledger.quarantined, "heldout_files": len(files),
                   "heldout_ngrams": int(held.size), "found_ngrams": int(found.hashes.size)}


def kept_nonmember_overlap(stage: Path, found, max_overlap: float) -> dict:
    """The released non-member rows' n-gram share against the training corpus: what the manifest records."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    shares = []
    for f in sorted((Path(stage) / "data").glob("*.parquet")):
        t = pq.read_table(f, columns=["input", "label"])
        for text in t.filter(pc.equal(t.column("label"), 0)).column("input").to_pylist():
            share = found.overlap(text, max_examples=0)["share"]
            if share == share:
                shares.append(share)
    a = np.asarray(shares, dtype=np.float64)
    edges = [0.0, 1e-12, 0.05, 0.1, 0.15, 0.2, 1.0 + 1e-12]
    counts = np.histogram(a, bins=edges)[0].tolist() if a.size else [0] * (len(edges) - 1)
    return {"rows": int(a.size), "max_overlap": max_overlap,
            "mean": float(a.mean()) if a.size else None, "max": float(a.max()) if a.size else None,
            "quantiles": {q: float(np.quantile(a, float(q))) for q in ("0.5", "0.9", "0.99")} if a.size else {},
            "histogram": dict(zip(["0", "(0, 0.05)", "[0.05, 0.1)", "[0.1, 0.15)", "[0.15, 0.2)", "[0.2, 1]"],
                                  counts)),
            "over_max": int((a > max_overlap).sum())}
