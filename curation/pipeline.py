"""The build, independent of where it runs: row-level stages over record batches (what Ray's map_batches calls),
then the global steps (dedup decisions, buckets, sampling), counting and reconciliation.

Runners: `run_local(cfg)` here (plain Python, one process) and the Ray Data pipeline in jobs/build_benchmark.py.
Both feed the same `annotate_records` and `finish`, so their releases are byte-identical.

Counting: every document that enters leaves as kept or as one exclusion; after bucketing the unit becomes the
benchmark row (one document can give several rows). `counts["steps"]` records in / kept / dropped-per-reason for
every step, and `reconcile` fails the build unless each step adds up and the totals match the rows written.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

import pyarrow as pa

from curation import sources
from curation.dedup import duplicate_decisions
from curation.document import BENCHMARK_COLUMNS, Document, QuarantineRow, utc
from curation.stages import MEMBER, Stage, balanced_sample, bucket_rows, document_stages, run_row_stages
from curation.text import truncate_words

DOCUMENT_STEPS = ("source", "cutoff", "title", "words", "code_formula", "language", "dedup", "bucket")
ROW_STEPS = ("sample",)
LABEL_NAMES = {1: "member", 0: "nonmember"}
BATCH_SIZE = 256

# A document as it travels between Ray tasks: flat strings, so that Arrow infers one schema for every block.
RECORD_FIELDS = ("id", "source", "title", "text", "created_at", "url", "meta")

# What the row-level stages leave per document: the fields later steps need, plus the drop (empty when kept).
ANNOTATED_SCHEMA = pa.schema([
    ("id", pa.string()), ("source", pa.string()), ("text", pa.string()), ("created_at", pa.string()),
    ("url", pa.string()), ("label", pa.int8()), ("month", pa.string()), ("word_count", pa.int64()),
    ("exact_key", pa.string()), ("minhash", pa.binary()),
    ("stage", pa.string()), ("reason", pa.string()), ("detail", pa.string()),
])


class ReconcileError(RuntimeError):
    """Rows in != rows kept + rows dropped somewhere: the release is not written."""


@dataclass
class BuildResult:
    rows: list[dict]  # benchmark rows, sorted by id
    excluded: list[QuarantineRow]  # sorted by (id, stage)
    counts: dict


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
    """One annotated row per input record, kept or dropped: the map step of the Ray pipeline."""
    stages = _stages_for(cfg)
    out: dict[str, list] = {name: [] for name in ANNOTATED_SCHEMA.names}
    for record in records:
        row = from_record(record)
        drop = run_row_stages(row, stages)
        label = row.get("label")
        values = {
            "id": row["id"], "source": row["source"], "created_at": record["created_at"], "url": row["url"],
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


def split_annotated(rows: Iterable[Mapping[str, Any]]) -> tuple[list[dict], list[dict]]:
    """(kept document rows, exclusions). Exclusions keep the label they had, for per-label counts."""
    kept, exclusions = [], []
    for r in rows:
        label = None if r["label"] < 0 else int(r["label"])
        if r["reason"]:
            exclusions.append({"id": r["id"], "stage": r["stage"], "reason": r["reason"], "detail": r["detail"],
                               "label": label})
        else:
            kept.append({**r, "label": label})
    return kept, exclusions


# ---------------------------------------------------------------- global steps

def finish(cfg: Mapping[str, Any], documents_in: int, kept: list[dict], exclusions: list[dict],
           fetch_texts: Callable[[set[str]], Mapping[str, str]] | None = None) -> BuildResult:
    """Dedup, bucket, sample; count every step; reconcile. `kept`/`exclusions` come from split_annotated. Every
    decision needs keys only (dates, labels, word counts, dedup keys), so the kept documents may come without
    their text: then `fetch_texts(document ids)` returns the texts of the sampled documents alone."""
    if len(kept) + len(exclusions) != documents_in:
        raise ReconcileError(f"{documents_in} documents in, but {len(kept)} kept + {len(exclusions)} excluded")
    exclusions = list(exclusions)

    dd = cfg["dedup"]  # duplicate ids are always dropped; exact and near duplicates when asked for
    decisions = duplicate_decisions(kept, exact=bool(dd["exact"]), near=bool(dd["near"]),
                                    threshold=float(dd["threshold"]), bands=int(dd["bands"]))
    exclusions += [_exclusion(r, "dedup", *d) for r, d in zip(kept, decisions) if d is not None]
    kept = [r for r, d in zip(kept, decisions) if d is None]

    candidates: list[dict] = []
    bucketed_documents = 0
    for doc in kept:
        rows = bucket_rows(doc, cfg["buckets"], cfg["bucket_mode"])
        if rows:
            candidates += rows
            bucketed_documents += 1
        else:
            exclusions.append(_exclusion(doc, "bucket", "shorter_than_smallest_bucket",
                                         f"{doc['word_count']} words < {min(cfg['buckets'])}"))

    cut = cfg["cutoffs"]
    sampled, not_sampled = balanced_sample(
        candidates, per_bucket=cfg["per_bucket"], seed=cfg["seed"], balance=bool(cfg["balance"]),
        monthly_nonmembers=bool(cut["monthly_nonmembers"]), per_month=cut["per_month"])
    exclusions += [_exclusion(r, "sample", reason, detail) for r, reason, detail in not_sampled]
    missing = {r["document_id"] for r in sampled if r["input"] is None}
    if missing:
        if fetch_texts is None:
            raise ValueError("documents came without their text and no fetch_texts was given")
        texts = fetch_texts(missing)
        lost = missing - set(texts)
        if lost:
            raise ReconcileError(f"{len(lost)} sampled documents have no text to write, e.g. {sorted(lost)[:3]}")
        for r in sampled:
            if r["input"] is None:
                r["input"] = truncate_words(texts[r["document_id"]], r["bucket"])

    rows = sorted((_benchmark_row(r) for r in sampled), key=lambda r: r["id"])
    counts = count_steps(documents_in, exclusions, candidates, sampled, monthly=bool(cut["monthly_nonmembers"]))
    reconcile(counts, documents_in=documents_in, bucketed_documents=bucketed_documents, rows=rows,
              exclusions=exclusions)
    excluded = sorted((QuarantineRow(id=e["id"], stage=e["stage"], reason=e["reason"], detail=e["detail"])
                       for e in exclusions), key=lambda e: (e["id"], e["stage"], e["reason"]))
    return BuildResult(rows=rows, excluded=excluded, counts=counts)


def _exclusion(row: Mapping[str, Any], stage: str, reason: str, detail: str) -> dict:
    return {"id": row["id"], "stage": stage, "reason": reason, "detail": detail, "label": row.get("label")}


def _benchmark_row(r: Mapping[str, Any]) -> dict:
    return {k: r[k] for k in BENCHMARK_COLUMNS}


# ---------------------------------------------------------------- counts

def step_of(stage: str) -> str:
    """Sources name their own stages ("source.arxiv"); they count under the "source" step."""
    return stage.split(".", 1)[0]


def count_steps(documents_in: int, exclusions: list[dict], candidates: list[dict], sampled: list[dict],
                monthly: bool = False) -> dict:
    by_step: dict[str, Counter] = {s: Counter() for s in DOCUMENT_STEPS + ROW_STEPS}
    labels_dropped: dict[str, Counter] = {s: Counter() for s in DOCUMENT_STEPS}
    for e in exclusions:
        step = step_of(e["stage"])
        if step not in by_step:
            raise ReconcileError(f"exclusion {e['id']} has unknown stage {e['stage']!r}")
        by_step[step][e["reason"]] += 1
        if step in labels_dropped and e.get("label") is not None:
            labels_dropped[step][LABEL_NAMES[e["label"]]] += 1

    # Labels of the documents that survive each step, from the last step backwards (labels exist after cutoff).
    survivors = Counter(LABEL_NAMES[label] for label in {r["document_id"]: r["label"] for r in candidates}.values())
    survivors_after: dict[str, dict] = {}
    for step in reversed(DOCUMENT_STEPS):
        survivors_after[step] = dict(sorted(survivors.items()))
        survivors += labels_dropped[step]

    steps, n = [], documents_in
    for step in DOCUMENT_STEPS:
        dropped = sum(by_step[step].values())
        entry = {"step": step, "unit": "documents", "in": n, "kept": n - dropped,
                 "dropped": dict(sorted(by_step[step].items()))}
        if DOCUMENT_STEPS.index(step) >= DOCUMENT_STEPS.index("cutoff"):
            entry["kept_by_label"] = survivors_after[step]
        steps.append(entry)
        n -= dropped
    steps[-1]["rows_out"] = len(candidates)
    dropped = sum(by_step["sample"].values())
    steps.append({"step": "sample", "unit": "rows", "in": len(candidates), "kept": len(candidates) - dropped,
                  "dropped": dict(sorted(by_step["sample"].items()))})

    reasons: Counter = Counter()
    for counter in by_step.values():
        reasons.update(counter)
    by_label_bucket: dict[str, dict[str, int]] = {name: {} for name in ("member", "nonmember")}
    for r in sorted(sampled, key=lambda r: r["bucket"]):
        cell = by_label_bucket[LABEL_NAMES[r["label"]]]
        cell[str(r["bucket"])] = cell.get(str(r["bucket"]), 0) + 1
    counts = {
        "documents_in": documents_in,
        "steps": steps,
        "dropped_by_reason": dict(sorted(reasons.items())),
        "excluded": len(exclusions),
        "documents_kept": steps[-2]["kept"],
        "rows_out": len(sampled),
        "by_label_bucket": by_label_bucket,
    }
    if monthly:
        months: dict[str, dict[str, int]] = {}
        for r in sampled:
            if r["label"] != MEMBER:
                cell = months.setdefault(r["month"], {})
                cell[str(r["bucket"])] = cell.get(str(r["bucket"]), 0) + 1
        counts["nonmembers_by_month_bucket"] = {m: dict(sorted(c.items(), key=lambda kv: int(kv[0])))
                                                for m, c in sorted(months.items())}
    return counts


def reconcile(counts: Mapping[str, Any], *, documents_in: int, bucketed_documents: int, rows: list,
              exclusions: list) -> None:
    """Fail loudly unless every step adds up and the totals match what is about to be written."""
    problems = []
    steps = counts["steps"]
    for step in steps:
        if step["in"] != step["kept"] + sum(step["dropped"].values()):
            problems.append(f"step {step['step']}: in {step['in']} != kept {step['kept']} + dropped")
    if steps[0]["in"] != documents_in:
        problems.append(f"first step saw {steps[0]['in']} documents, {documents_in} came in")
    for before, after in zip(steps[:-2], steps[1:-1]):
        if before["kept"] != after["in"]:
            problems.append(f"{before['step']} kept {before['kept']} but {after['step']} got {after['in']}")
    if steps[-2]["kept"] != bucketed_documents:
        problems.append(f"bucket kept {steps[-2]['kept']} documents, {bucketed_documents} were bucketed")
    if steps[-2]["rows_out"] != steps[-1]["in"]:
        problems.append("bucket rows out != sample rows in")
    if steps[-1]["kept"] != len(rows):
        problems.append(f"sample kept {steps[-1]['kept']} rows, {len(rows)} to be written")
    if sum(counts["dropped_by_reason"].values()) != len(exclusions):
        problems.append(f"{sum(counts['dropped_by_reason'].values())} drops counted, {len(exclusions)} excluded")
    if len({r["id"] for r in rows}) != len(rows):
        problems.append("benchmark row ids are not unique")
    if problems:
        raise ReconcileError("counts do not reconcile: " + "; ".join(problems))


def created_range(created: Iterable[str]) -> dict[str, str | None]:
    times = sorted(utc(c) for c in created if c)
    return {"min": times[0].isoformat() if times else None, "max": times[-1].isoformat() if times else None}


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


def run_local(cfg: Mapping[str, Any]) -> tuple[BuildResult, dict]:
    """The whole build in this process. Returns (result, {"created_at": range of every document's date})."""
    documents: Iterator[Document] = sources.iter_documents(sources.source_config(cfg))
    tables = [annotate_records(batch, cfg) for batch in _batches((to_record(d) for d in documents), BATCH_SIZE)]
    table = pa.concat_tables(tables) if tables else ANNOTATED_SCHEMA.empty_table()
    kept, exclusions = split_annotated(table.to_pylist())
    result = finish(cfg, table.num_rows, kept, exclusions)
    return result, {"created_at": created_range(table.column("created_at").to_pylist())}

