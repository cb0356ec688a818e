"""The build, independent of where it runs: documents become records and rows that go through the row-level stages
(annotate_documents: a parse task's work, and the local runner's), then the global steps run as passes over the
annotated blocks (curation/release/passes.py) and the release is written (curation/release/output.py).

Runners: `run_local(cfg, stage)` here (plain Python, one process) and the Ray runner in jobs/parts/release/build.py.
Both call the same functions, so their releases are byte-identical.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa

from curation import sources
from curation.document import Deferred, Document, ReconcileError, utc
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
    # what the source removed from a kept document's text that a reader of the page would not see, as JSON
    # ({reason: count}, e.g. the Wikipedia renderer's `markup_paragraph`), "" where nothing: the build's counts
    ("repairs", pa.string()),
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


def document_row(doc: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """from_record(to_record(doc)) and the record's created_at, without writing and reading meta's JSON where meta
    is JSON data already (_json_data): that round trip was ~a third of a question's cost before the stages."""
    meta = _json_data(doc.get("meta") or {})
    if meta is None:
        record = to_record(doc)
        return from_record(record), record["created_at"]
    created = doc.get("created_at")
    created_at = utc(created).isoformat() if created else ""
    return {
        "id": str(doc["id"]), "source": str(doc.get("source") or ""), "title": str(doc.get("title") or ""),
        "text": str(doc.get("text") or ""), "created_at": utc(created_at) if created_at else None,
        "url": str(doc.get("url") or ""), "meta": meta,
    }, created_at


_SCALARS = (str, int, bool, type(None))


def _json_data(value: Any) -> Any:
    """json.loads(json.dumps(value, sort_keys=True, default=str)) for a dict of str, int, bool, None, finite float,
    lists, tuples and dicts with str keys, where that round trip is a copy (tuples become lists, keys sorted):
    None for anything else (a date, a NaN, an int subclass, another key), which then takes the JSON way itself."""
    kind = type(value)
    if kind is dict:
        if not all(type(key) is str for key in value):
            return None
        out = {}
        for key in sorted(value):
            item = value[key]
            item = item if type(item) in _SCALARS else _json_data(item)
            if item is None and value[key] is not None:
                return None
            out[key] = item
        return out
    if kind is list or kind is tuple:
        out = []
        for item in value:
            copied = item if type(item) in _SCALARS else _json_data(item)
            if copied is None and item is not None:
                return None
            out.append(copied)
        return out
    if kind is float and value - value == 0.0:  # finite: repr round-trips it exactly
        return value
    return value if kind in _SCALARS else None


# ---------------------------------------------------------------- row-level stages over a batch

_STAGE_CACHE: dict[str, list[Stage]] = {}


def _stages_for(cfg: Mapping[str, Any]) -> list[Stage]:
    """Stages are built once per process (the language model loads once), keyed by the config."""
    key = json.dumps(cfg, sort_keys=True, default=str)
    if key not in _STAGE_CACHE:
        _STAGE_CACHE[key] = document_stages(cfg)
    return _STAGE_CACHE[key]


def annotate_records(records: list[Mapping[str, Any]], cfg: Mapping[str, Any]) -> pa.Table:
    """One annotated row per input record, kept or dropped. Records carry `row_no` (their place in the input)."""
    stages = _stages_for(cfg)
    out: dict[str, list] = {name: [] for name in ANNOTATED_SCHEMA.names}
    for record in records:
        row = from_record(record)
        _add_row(out, int(record["row_no"]), record["created_at"], row, run_row_stages(row, stages))
    return _table(out, len(records))


def annotate_documents(documents: Iterable[Document | Deferred], cfg: Mapping[str, Any], first_row_no: int = 0,
                       batch_size: int = BATCH_SIZE) -> Iterator[pa.Table]:
    """The annotated rows of `documents` in order (row_no = first_row_no + place), in tables of `batch_size`: what a
    parse task and the local runner make of a source. Each document becomes a record and a row as in
    annotate_records. A Deferred one (curation/document.py) runs the leading stages that read neither text nor
    title (the source's quarantine, the time cutoff) on its head and gets its text only when it gets past them: a
    document they drop is annotated exactly as with its text (the stages that read text never run on it, and a
    dropped document leaves its text behind), and a completed row equals the full document's row (_complete)."""
    stages = _stages_for(cfg)
    lead = len(list(itertools.takewhile(lambda stage: not {"text", "title"} & set(stage.requires), stages)))
    out: dict[str, list] = {name: [] for name in ANNOTATED_SCHEMA.names}
    n = 0
    for place, item in enumerate(documents):
        doc, rest = (item.head, item.rest) if isinstance(item, Deferred) else (item, None)
        row, created_at = document_row(doc)
        drop = run_row_stages(row, stages[:lead])
        if drop is None:
            if rest is not None:
                _complete(row, *rest())
            drop = run_row_stages(row, stages[lead:])
        _add_row(out, first_row_no + place, created_at, row, drop)
        n += 1
        if n == batch_size:
            yield _table(out, n)
            out, n = {name: [] for name in ANNOTATED_SCHEMA.names}, 0
    if n:
        yield _table(out, n)


def _complete(row: dict, title: str, text: str, derived_meta: Mapping[str, Any]) -> None:
    """A deferred document's row made whole, as from_record(to_record(full document)) makes it: the same
    conversions of title and text, and the derived meta keys through the same JSON (per key, so adding them to the
    head's converted meta gives the full meta's conversion; nothing reads meta's key order)."""
    row["title"], row["text"] = str(title or ""), str(text or "")
    derived = _json_data(dict(derived_meta))
    row["meta"].update(json.loads(json.dumps(dict(derived_meta), sort_keys=True, default=str))
                       if derived is None else derived)


def _add_row(out: dict[str, list], row_no: int, created_at: str, row: Mapping[str, Any], drop) -> None:
    label = row.get("label")
    values = {
        "row_no": row_no, "id": row["id"], "source": row["source"], "created_at": created_at, "url": row["url"],
        "label": -1 if label is None else int(label), "month": row.get("month") or "",
        "word_count": int(row.get("word_count") or 0), "exact_key": row.get("exact_key") or "",
        "minhash": row.get("minhash") or b"",
        # dropped documents leave their text behind: only ids and reasons travel on
        "text": "" if drop else row["text"],
        "stage": drop["stage"] if drop else "", "reason": drop["reason"] if drop else "",
        "detail": drop["detail"] if drop else "",
        "repairs": json.dumps(repairs, sort_keys=True) if (repairs := (row.get("meta") or {}).get("markup_dropped"))
        else "",
    }
    for name, value in values.items():
        out[name].append(value)


def _table(out: dict[str, list], documents: int) -> pa.Table:
    table = pa.table(out, schema=ANNOTATED_SCHEMA)
    if table.num_rows != documents:  # the invariant the whole count rests on
        raise ReconcileError(f"row stages returned {table.num_rows} rows for {documents} documents")
    return table


# ---------------------------------------------------------------- the local runner

def numbered_records(documents: Iterable[Document], first_row_no: int = 0) -> Iterator[dict]:
    """Records with their `row_no`, for annotate_records."""
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


def run_local(cfg: Mapping[str, Any], stage: Path, rephrased: Sequence = ()) -> dict:
    """The whole build in this process, written to `stage`; returns what the manifest needs
    (curation.release.output.finish_release; `rephrased`: --drop-rephrased's overlaps)."""
    from curation.release import output as release_output

    documents = sources.iter_documents(sources.source_config(cfg), deferred=True)
    tables = list(annotate_documents(documents, cfg))
    block = pa.concat_tables(tables) if tables else ANNOTATED_SCHEMA.empty_table()
    excluded, sampled, tally, parts = decide_release(block, cfg)
    return release_output.finish_release(cfg, stage, tally, [sampled], [excluded], parts,
                                         executor=release_output.LocalExecutor(), rephrased=rephrased)
