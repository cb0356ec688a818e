"""The global steps as passes over blocks of annotated documents, so that no process needs the corpus.

An annotated block (curation/stages/pipeline.py ANNOTATED_SCHEMA) holds every document a part of the input gave, kept or
dropped by the row-level stages, with its text. After the row-level stages, a build makes three passes over the
blocks, each a pure function of one block and a few small, broadcast tables:

    dedup      the survivors' keys (`survivor_keys`) go through the decisions of curation/stages/dedup.py, one hash
               partition at a time; the result is a table of the dropped rows (`DROPS_SCHEMA`), duplicates only
    counts     `count_groups`: candidate rows per sampling group (curation/stages/sampling.py)
    ranks      `smallest_ranks_of_block`: per group, the smallest ranks the sampling thresholds need
    release    `release_block`: every document decides alone (row-level drop, dedup drop, too short, sampled or
               not) and the block returns its exclusions (partitioned for the writers), its sampled benchmark rows
               (with their text, truncated to the bucket) and its tally

The local runner calls the same functions on one block; the Ray runner (jobs/parts/release/build.py) maps them over the
blocks in the object store.
"""
from __future__ import annotations

import json

import zlib
from collections import Counter
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from curation.stages import sampling
from curation.stages.counts import LABEL_NAMES, Tally
from curation.document import utc
from curation.stages.filters import bucket_rows
from curation.text import truncate_words

KEY_SCHEMA = pa.schema([("row_no", pa.int64()), ("id", pa.string()), ("created_at", pa.string()),
                        ("exact_key", pa.string()), ("minhash", pa.binary())])
KEY_COLUMNS = KEY_SCHEMA.names
DROPS_SCHEMA = pa.schema([("row_no", pa.int64()), ("id", pa.string()), ("reason", pa.string()),
                          ("detail", pa.string())])
EXCLUDED_SCHEMA = pa.schema([("id", pa.string()), ("stage", pa.string()), ("reason", pa.string()),
                             ("detail", pa.string()), ("part", pa.int32())])
SAMPLED_SCHEMA = pa.schema([
    ("id", pa.string()), ("input", pa.string()), ("label", pa.int64()), ("bucket", pa.int64()),
    ("source", pa.string()), ("created_at", pa.timestamp("us", tz="UTC")), ("url", pa.string()),
])
_DOC_COLUMNS = ["row_no", "id", "source", "created_at", "url", "label", "month", "word_count", "stage", "reason",
                "detail"]


def survivor_keys(block: pa.Table) -> pa.Table:
    """The dedup keys of the documents the row-level stages kept."""
    return block.filter(pc.equal(block.column("reason"), "")).select(KEY_COLUMNS).cast(KEY_SCHEMA)


def drops_table(drops: list[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([{k: d[k] for k in DROPS_SCHEMA.names} for d in drops], schema=DROPS_SCHEMA)


def hash_partition(key: str | bytes, parts: int) -> int:
    """A stable partition for a key (crc32): the dedup groupbys' partitions and the excluded/ part files."""
    return zlib.crc32(key if isinstance(key, bytes) else key.encode("utf-8")) % parts if parts > 1 else 0


def excluded_partition(document_id: str, parts: int) -> int:
    """Which excluded/ part file an exclusion goes to: a stable hash of its id."""
    return hash_partition(document_id, parts)


def _kept(block: pa.Table, drops: pa.Table) -> pa.Array:
    """Which documents both the row-level stages and dedup kept: the only ones with bucket rows. Selected with
    Arrow, so that only they become Python rows (most of a corpus is dropped before this)."""
    return pc.and_(pc.equal(block.column("reason"), ""),
                   pc.invert(pc.is_in(block.column("row_no"), value_set=drops.column("row_no"))))


def _candidates(block: pa.Table, drops: pa.Table) -> list[dict]:
    return block.filter(_kept(block, drops)).select(_DOC_COLUMNS).to_pylist()


def _label(doc: Mapping[str, Any]) -> int | None:
    return None if doc["label"] < 0 else int(doc["label"])


def _group(row: Mapping[str, Any], monthly: bool) -> sampling.Group:
    return sampling.group_of(row["bucket"], row["label"], row["month"], monthly)


def count_groups(block: pa.Table, drops: pa.Table, cfg: Mapping[str, Any]) -> Counter:
    """Pass 1: candidate rows per sampling group."""
    monthly = bool(cfg["cutoffs"]["monthly_nonmembers"])
    counts: Counter = Counter()
    for doc in _candidates(block, drops):
        counts.update(_group(r, monthly) for r in bucket_rows(doc, cfg["buckets"], cfg["bucket_mode"]))
    return counts


def smallest_ranks_of_block(block: pa.Table, drops: pa.Table, cfg: Mapping[str, Any],
                            needed: Mapping[sampling.Group, int]) -> dict[sampling.Group, list[str]]:
    """Pass 2: per group, this block's `needed[group]` smallest ranks."""
    monthly, seed = bool(cfg["cutoffs"]["monthly_nonmembers"]), int(cfg["seed"])
    ranks: dict[sampling.Group, list[str]] = {}
    for doc in _candidates(block, drops):
        for r in bucket_rows(doc, cfg["buckets"], cfg["bucket_mode"]):
            g = _group(r, monthly)
            if needed.get(g):
                ranks.setdefault(g, []).append(sampling.sample_rank(seed, r["document_id"]))
    return sampling.smallest_ranks(ranks, needed)


def release_block(block: pa.Table, drops: pa.Table, cfg: Mapping[str, Any],
                  plans: Mapping[sampling.Group, sampling.GroupPlan],
                  limits: Mapping[sampling.Group, sampling.Thresholds], excluded_parts: int
                  ) -> tuple[pa.Table, pa.Table, Tally]:
    """Pass 3: (exclusions with their part number, sampled benchmark rows, tally) for one block. The documents that
    a row-level stage or dedup dropped are counted and listed column-wise (the release files are sorted, so the
    exclusions' order is free); only the kept ones are decided one by one."""
    monthly, seed = bool(cfg["cutoffs"]["monthly_nonmembers"]), int(cfg["seed"])
    smallest = min(cfg["buckets"])
    tally = Tally(documents_in=block.num_rows)
    created = pc.min_max(pc.drop_null(pc.if_else(pc.equal(block.column("created_at"), ""), None,
                                                 block.column("created_at"))))
    tally.created_min, tally.created_max = created["min"].as_py(), created["max"].as_py()
    if "repairs" in block.column_names:
        for repairs in pc.drop_null(pc.if_else(pc.equal(block.column("repairs"), ""), None,
                                               block.column("repairs"))).to_pylist():
            tally.repairs.update(json.loads(repairs))
    excluded = [_dropped_by_stages(block, tally, excluded_parts), _dropped_by_dedup(block, drops, tally,
                                                                                      excluded_parts)]
    rows: dict[str, list] = {name: [] for name in EXCLUDED_SCHEMA.names}
    sampled: dict[str, list] = {name: [] for name in SAMPLED_SCHEMA.names}

    def exclude(row_id: str, stage: str, reason: str, detail: str, label: int | None) -> None:
        tally.exclude(stage, reason, label)
        for name, value in zip(EXCLUDED_SCHEMA.names, (row_id, stage, reason, detail,
                                                        excluded_partition(row_id, excluded_parts))):
            rows[name].append(value)

    kept = block.filter(_kept(block, drops))
    texts = kept.column("text")
    for i, doc in enumerate(kept.select(_DOC_COLUMNS).to_pylist()):
        fate = bucket_rows(doc, cfg["buckets"], cfg["bucket_mode"])
        if not fate:
            exclude(doc["id"], "bucket", "shorter_than_smallest_bucket", f"{doc['word_count']} words < {smallest}",
                    _label(doc))
            continue
        tally.candidates += len(fate)
        tally.bucketed_documents += 1
        tally.survivors[LABEL_NAMES[doc["label"]]] += 1
        for r in fate:
            g = _group(r, monthly)
            verdict = sampling.decide(sampling.sample_rank(seed, r["document_id"]), plans[g], limits[g])
            if verdict is not None:
                exclude(r["id"], "sample", *verdict, r["label"])
                continue
            tally.sample(r["label"], r["bucket"], r["month"])
            values = {**r, "input": truncate_words(texts[i].as_py(), r["bucket"]), "created_at": utc(r["created_at"])}
            for name in SAMPLED_SCHEMA.names:
                sampled[name].append(values[name])
    excluded.append(pa.table(rows, schema=EXCLUDED_SCHEMA))
    return pa.concat_tables(excluded), pa.table(sampled, schema=SAMPLED_SCHEMA), tally


def _exclusions(ids: pa.ChunkedArray, stages, reasons, details, labels, tally: Tally, parts: int) -> pa.Table:
    """Exclusion rows for whole columns, counted into `tally` per (stage, reason, label) as Tally.exclude would
    count them one by one."""
    table = pa.table({"stage": stages, "reason": reasons, "label": labels})
    for g in table.group_by(["stage", "reason", "label"]).aggregate([([], "count_all")]).to_pylist():
        tally.exclude(g["stage"], g["reason"], None if g["label"] < 0 else g["label"], g["count_all"])
    part = pa.array([excluded_partition(i, parts) for i in ids.to_pylist()], pa.int32())
    return pa.table([ids, stages, reasons, details, part], schema=EXCLUDED_SCHEMA)


def _dropped_by_stages(block: pa.Table, tally: Tally, parts: int) -> pa.Table:
    d = block.filter(pc.not_equal(block.column("reason"), ""))
    return _exclusions(d.column("id"), d.column("stage"), d.column("reason"), d.column("detail"),
                       d.column("label"), tally, parts)


def _dropped_by_dedup(block: pa.Table, drops: pa.Table, tally: Tally, parts: int) -> pa.Table:
    hit = pc.index_in(block.column("row_no"), value_set=drops.column("row_no"))
    dropped = pc.and_(pc.equal(block.column("reason"), ""), pc.is_valid(hit))
    d, at = block.filter(dropped), hit.filter(dropped)
    stages = pa.array(["dedup"] * d.num_rows, pa.string())
    return _exclusions(d.column("id"), stages, drops.column("reason").take(at), drops.column("detail").take(at),
                       d.column("label"), tally, parts)
