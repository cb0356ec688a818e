"""Ground-truth membership from a model's own training corpus (MIMIR's recipe, Duan et al. 2024): `kind: corpus`.

Members are documents of `source.train` (the model's training corpus, or a sample of it); non-members are documents
of `source.heldout` (text of the same distribution the model did not train on, e.g. the Pile's test split). Labels
are ground truth, not a time split. Because held-out text can still repeat training text (boilerplate, quotes,
duplicated pages), a non-member is kept only when the passage that would be released shares at most
`source.max_overlap` (0.2) of its `source.ngram`-grams (13) with the *whole* training corpus; the others are
excluded (stage `overlap`, reason `overlaps_training_corpus`), as MIMIR's `ngram_13_0.2` split does.

Which training n-grams the held-out passages contain is one set (`found`), computed before parsing:
- on Ray by the job (jobs/parts/release/training_overlap.py: held-out passages' n-grams on the workers, the training corpus
  scanned in parts with the engine of `tidemark overlap`), handed to the held-out shards as their aggregation;
- without Ray (`--runner local`, tests) by `found_ngrams` here, in this process.

Dates: a corpus has none that matter, so the source dates members one day before `cutoffs.member_before` and
non-members at `cutoffs.nonmember_after`, and pins each to its side's label (`meta.label_allowed`); the cutoff step
then labels by side. The released rows' `created_at` is that nominal date.

source keys: `train`, `heldout` (a file, directory, glob or s3:// prefix of jsonl, .gz, .zst, Parquet or txt; read
by curation/io/corpus_files.py, bad records quarantined with their reason), `text_field` ("text"), `id_field`
("id"), `name` (id prefix, default "corpus"), `max_overlap` (0.2), `ngram` (13), `requester_pays`, `endpoint_url`,
`region`. The job adds `buckets` and `bucket_mode` (the passage that would be released is what is checked).
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any, Iterator, Mapping

from curation.document import Document, utc
from curation.io import storage
from curation.io.corpus_files import corpus_files, read_records

STAGE = "source.corpus"
OVERLAP_KEY = "corpus:training-overlap"  # the held-out shards' aggregation: the training n-grams they contain
SIDES = {"train": 1, "heldout": 0}


def shards(source_cfg: Mapping[str, Any]) -> list[dict]:
    """One shard per file: the training files (members), then the held-out files (non-members), which need the
    training-overlap set."""
    opts = storage.s3_options(source_cfg)
    out = []
    for side in SIDES:
        files, root = corpus_files(str(source_cfg[side]), **opts)
        for f in files:
            shard = {**source_cfg, "side": side, "file": f, "root": root}
            if side == "heldout":
                shard["site_key"] = OVERLAP_KEY
            out.append(shard)
    return out


def passage(text: str, buckets, mode: str) -> list[str]:
    """The passages the release would take from a document: its text truncated to each bucket it is long enough
    for (mode "every"), or to the largest one (mode "largest"); none when shorter than the smallest bucket."""
    from curation.text import truncate_words, word_count

    n = word_count(text)
    fits = [b for b in sorted(int(b) for b in buckets) if n >= b]
    if mode == "largest":
        fits = fits[-1:]
    return [truncate_words(text, b) for b in fits]


def heldout_passages(source_cfg: Mapping[str, Any], file: str, root: str) -> Iterator[str]:
    """The passages of one held-out file (what the overlap is measured on)."""
    for _, text, problem in read_records(file, root, text_field=source_cfg.get("text_field") or "text",
                                         id_field=source_cfg.get("id_field") or "id",
                                         opts=storage.s3_options(source_cfg)):
        if problem is None:
            yield from passage(text, source_cfg.get("buckets") or [32, 64, 128, 256],
                               source_cfg.get("bucket_mode") or "every")


def found_ngrams(source_cfg: Mapping[str, Any]):
    """(The training n-grams that occur in the held-out passages, the scan's counts), computed in this process (the
    local runner; on Ray the job computes the same on the workers: jobs/parts/release/training_overlap.py)."""
    from scoring.overlap.matching import BenchmarkGrams, FoundNgrams, scan_texts

    n = int(source_cfg.get("ngram") or 13)
    opts = storage.s3_options(source_cfg)
    fields = {"text_field": source_cfg.get("text_field") or "text", "id_field": source_cfg.get("id_field") or "id"}
    held = []
    held_files, root = corpus_files(str(source_cfg["heldout"]), **opts)
    for f in held_files:
        held += [{"id": str(len(held)), "input": p} for p in heldout_passages(source_cfg, f, root)]
    bench = BenchmarkGrams.of(held, n)
    texts, ids, bad = [], [], 0
    train_files, root = corpus_files(str(source_cfg["train"]), **opts)
    for f in train_files:
        for rid, text, problem in read_records(f, root, opts=opts, **fields):
            bad += problem is not None
            if problem is None:
                texts.append(text)
                ids.append(rid)
    found = FoundNgrams.of(scan_texts(bench, texts, ids), n)
    return found, {"train_files": len(train_files), "train_documents": len(texts), "train_quarantined": bad,
                   "heldout_files": len(held_files), "heldout_ngrams": int(bench.distinct.size),
                   "found_ngrams": int(found.hashes.size)}


def _side_date(source_cfg: Mapping[str, Any], side: str):
    cut = source_cfg.get("cutoffs") or {}
    if side == "train":
        return utc(cut.get("member_before") or "2000-01-01") - timedelta(days=1)
    return utc(cut.get("nonmember_after") or "2000-01-01")


def iter_documents(source_cfg: Mapping[str, Any], aggregated: Any = None) -> Iterator[Document]:
    """A shard's documents; the whole source (the local runner) when given the config itself."""
    if "side" not in source_cfg:
        found, _ = found_ngrams(source_cfg)
        for shard in shards(source_cfg):
            yield from _documents(shard, found if shard["side"] == "heldout" else None)
        return
    found = None
    if source_cfg["side"] == "heldout":
        import numpy as np

        from scoring.overlap.matching import FoundNgrams

        parts = [np.asarray(a, dtype=np.uint64) for a in (aggregated or [])]
        if not parts:
            raise ValueError("a held-out shard needs the training-overlap set (run through the job, or the local "
                             "runner)")
        found = FoundNgrams(int(source_cfg.get("ngram") or 13), np.unique(np.concatenate(parts)))
    yield from _documents(source_cfg, found)


def _documents(shard: Mapping[str, Any], found) -> Iterator[Document]:
    side, name = shard["side"], shard.get("name") or "corpus"
    created = _side_date(shard, side)
    rel = storage.relative(shard["file"], shard["root"]) if shard["file"] != shard["root"] else \
        storage.basename(shard["file"])
    for rid, text, problem in read_records(shard["file"], shard["root"],
                                           text_field=shard.get("text_field") or "text",
                                           id_field=shard.get("id_field") or "id", opts=storage.s3_options(shard)):
        doc_id = f"corpus:{name}:{side}:{rid}"
        meta: dict[str, Any] = {"file": rel, "side": side, "label_allowed": SIDES[side]}
        if problem is not None:
            meta["quarantine"] = {"stage": STAGE, "reason": problem[0], "detail": problem[1][:300]}
            yield Document(id=doc_id, source="corpus", title="", text="", created_at=created, url="", meta=meta)
            continue
        if found is not None:
            shares = [found.overlap(p, max_examples=0)["share"] for p in
                      passage(text, shard.get("buckets") or [32, 64, 128, 256], shard.get("bucket_mode") or "every")]
            shares = [x for x in shares if x == x]  # a passage shorter than n has no n-gram (NaN)
            meta["train_overlap"] = max(shares) if shares else None
        yield Document(id=doc_id, source="corpus", title="", text=text, created_at=created, url="", meta=meta)


def snapshot(source_cfg: Mapping[str, Any]) -> dict:
    """What the manifest records about the input: each side's files and sizes, and the overlap rule."""
    opts = storage.s3_options(source_cfg)
    out = {"kind": "corpus", "max_overlap": float(source_cfg.get("max_overlap", 0.2)),
           "ngram": int(source_cfg.get("ngram") or 13)}
    for side in SIDES:  # sizes (and ETags on S3), not checksums: a training corpus is too large to read for them
        files, _ = corpus_files(str(source_cfg[side]), **opts)
        out[side] = {"path": str(source_cfg[side]),
                     "files": [storage.describe(f, **opts) if storage.is_s3(f) else
                               {"path": f, "bytes": storage.file_size(f)} for f in files]}
    return out
