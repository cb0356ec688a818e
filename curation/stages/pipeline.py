"""The build, independent of where it runs: documents become records, record batches go through the row-level
stages (what Ray's map_batches calls), then the global steps run as passes over the annotated blocks
(curation/release/passes.py) and the release is written (curation/release/output.py).

Runners: `run_local(cfg, stage)` here (plain Python, one process) and the Ray runner in jobs/parts/release_build.py.
Both call the same functions, so their releases are byte-identical.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Mapping

import pyarrow as pa

from curation import sources
from curation.document import ReconcileError
from curation.document import Document, utc
from curation.stages.filters import Stage, document_stages, run_row_stages

BATCH_SIZE = 256

# A document as it travels between Ray tasks: flat strings, so that Arrow infers one schema for every block.
RECORD_FIELDS = ("id", "source", "title", "text", "created_at", "url", "meta")

# What the row-level stages leave per document: the fields later steps need, plus the drop (empty when kept).
ANNOTATED_SCHEMA = pa.schema([
    ("row_no", pa.int64()),  # the document's place in the input: the last tie-break of "the oldest copy wins"
    ("id", pa.string()), ("source", pa.string()), ("text", pa.string()), ("created_at", pa.string()),
    ("url", pa.string()), ("label", pa.int8()), ("month", pa.string()), ("word_count", pa.int64()),
    ("exact_key", pa.string()), ("minhash", pa.binary()),
    ("stage", pa.string()), ("reason", pa.string()), ("detail", pa.string()),
])


# ---------------------------------------------------------------- records <-> documents

def to_record(doc: Mapping[str, Any]) -> dict[str, str]:
    created = doc.get("created_at")
    return {
        "id": str(doc["id"]),
        "source": str(doc.get("source") or ""),
        "title": str(doc.get("title") or ""),
        "text": str(doc.get("text") or ""),
        "created_at": utc(created).isoformat() if created else "",
        "url": str(doc.get("url") or ""),
        "meta": json.dumps(doc.get("meta") or {}, sort_keys=True, default=str),
    }


def from_record(record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": record["id"], "source": record["source"], "title": record["title"], "text": record["text"],
        "created_at": utc(record["created_at"]) if record["created_at"] else None, "url": record["url"],
        "meta": json.loads(record["meta"]) if record["meta"] else {},
    }


# ---------------------------------------------------------------- row-level stages over a batch

_STAGE_CACHE: dict[str, list[Stage]] = {}


def _stages_for(cfg: Mapping[str, Any]) -> list[Stage]:
    """Stages are built once per process (the language model loads once), keyed by the config."""
    key = json.dumps(cfg, sort_keys=True, default=str)
    if key not in _STAGE_CACHE:
        _STAGE_CACHE[key] = document_stages(cfg)
    return _STAGE_CACHE[key]


def annotate_records(records: list[Mapping[str, Any]], cfg: Mapping[str, Any]) -> pa.Table:
    """One annotated row per input record, kept or dropped: the map step of the Ray pipeline. Records carry
    `row_no` (their place in the input)."""
    stages = _stages_for(cfg)
    out: dict[str, list] = {name: [] for name in ANNOTATED_SCHEMA.names}
    for record in records:
        row = from_record(record)
        drop = run_row_stages(row, stages)
        label = row.get("label")
        values = {
            "row_no": int(record["row_no"]), "id": row["id"], "source": row["source"], "created_at": record["created_at"], "url": row["url"],
            "label": -1 if label is None else int(label), "month": row.get("month") or "",
            "word_count": int(row.get("word_count") or 0), "exact_key": row.get("exact_key") or "",
            "minhash": row.get("minhash") or b"",
            # dropped documents leave their text behind: only ids and reasons travel on
            "text": "" if drop else row["text"],
            "stage": drop["stage"] if drop else "", "reason": drop["reason"] if drop else "",
            "detail": drop["detail"] if drop else "",
        }
        for name, value in values.items():
            out[name].append(value)
    table = pa.table(out, schema=ANNOTATED_SCHEMA)
    if table.num_rows != len(records):  # the invariant the whole count rests on
        raise ReconcileError(f"row stages returned {table.num_rows} rows for {len(records)} documents")
    return table


# ---------------------------------------------------------------- the local runner

def _batches(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def numbered_records(documents: Iterator[Document], first_row_no: int = 0) -> Iterator[dict]:
    for n, doc in enumerate(documents):
        yield {**to_record(doc), "row_no": first_row_no + n}


def decide_release(block: pa.Table, cfg: Mapping[str, Any]):
    """Every global step over one block of annotated documents (the whole input, on the local runner):
    (exclusions, sampled rows, tally, excluded part count), the same functions the Ray runner maps over blocks."""
    from curation.release import output as release_output
    from curation.release import passes
    from curation.stages.dedup import dedup_drops

    dd = cfg["dedup"]
    drops = passes.drops_table(dedup_drops(passes.survivor_keys(block).to_pylist(), exact=bool(dd["exact"]),
                                           near=bool(dd["near"]), threshold=float(dd["threshold"]),
                                           bands=int(dd["bands"])))
    plan = release_output.SamplePlan.from_counts(passes.count_groups(block, drops, cfg), cfg, block.num_rows)
    plan.add_ranks(passes.smallest_ranks_of_block(block, drops, cfg, plan.needed))
    excluded, sampled, tally = passes.release_block(block, drops, cfg, plan.plans, plan.limits(), plan.excluded_parts)
    return excluded, sampled, tally, plan.excluded_parts


def run_local(cfg: Mapping[str, Any], stage: Path) -> dict:
    """The whole build in this process, written to `stage`; returns what the manifest needs
    (curation.release.output.finish_release)."""
    from curation.release import output as release_output

    documents: Iterator[Document] = sources.iter_documents(sources.source_config(cfg))
    tables = [annotate_records(b, cfg) for b in _batches(numbered_records(documents), BATCH_SIZE)]
    block = pa.concat_tables(tables) if tables else ANNOTATED_SCHEMA.empty_table()
    excluded, sampled, tally, parts = decide_release(block, cfg)
    return release_output.finish_release(cfg, stage, tally, [sampled], [excluded], parts,
                                         executor=release_output.LocalExecutor())
