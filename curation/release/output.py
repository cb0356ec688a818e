"""From the passes' results to the files of a release: the sampling plan on the driver, then (as tasks, so that the
driver never holds rows) the row steps after sampling (the rows an overlap found rephrased in a model's corpus,
curation/release/rephrased.py; then the debiased mode), the data files per bucket, the excluded/ parts and the
shift audit.

`finish_release` is written against a tiny executor interface so that the local runner calls the functions
directly and the Ray runner (jobs/parts/release/build.py) submits them as tasks on the node that holds the staging
directory, passing object references: the rows travel through the object store, never through the driver.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curation.stages import sampling
from curation.stages.counts import LABEL_NAMES, Tally, by_label_bucket, count_steps, reconcile
from curation.document import ReconcileError
from curation.document import QUARANTINE_SCHEMA
from curation.release.layout import BENCHMARK_SCHEMA, PARQUET_OPTIONS, data_file_name, sha256_file
from curation.release.passes import EXCLUDED_SCHEMA, SAMPLED_SCHEMA, excluded_partition
from curation.release.rephrased import STAGE as REPHRASED_STAGE
from curation.release.rephrased import RephrasedDropError, RephrasedOverlap, drop_rephrased

# excluded/ is as long as the corpus (most documents are dropped somewhere): it is written in parts of about this
# many rows, by hash of id. The part count depends only on the input and the config, so the bytes are stable.
EXCLUDED_ROWS_PER_PART = 1_000_000


def excluded_part_count(documents_in: int, candidate_rows: int) -> int:
    return max(1, math.ceil((documents_in + candidate_rows) / EXCLUDED_ROWS_PER_PART))


def excluded_file_name(part: int, parts: int) -> str:
    """One part keeps the name releases have always had."""
    return "excluded/excluded.parquet" if parts == 1 else f"excluded/part-{part:05d}-of-{parts:05d}.parquet"


@dataclass
class SamplePlan:
    """The driver's share of sampling: group counts in, per-group plans, thresholds from the merged ranks."""

    plans: dict
    excluded_parts: int
    smallest: dict = field(default_factory=dict)

    @classmethod
    def from_counts(cls, counts: Mapping[sampling.Group, int], cfg: Mapping[str, Any],
                    documents_in: int | None = None) -> "SamplePlan":
        cut = cfg["cutoffs"]
        plans = sampling.plan_sample(counts, per_bucket=cfg["per_bucket"], balance=bool(cfg["balance"]),
                                     monthly_nonmembers=bool(cut["monthly_nonmembers"]), per_month=cut["per_month"])
        return cls(plans, excluded_part_count(documents_in or 0, sum(counts.values())))

    @property
    def needed(self) -> dict:
        return {g: p.needed for g, p in self.plans.items() if p.needed}

    def add_ranks(self, block_smallest: Mapping[sampling.Group, list[str]]) -> None:
        sampling.merge_smallest(self.smallest, block_smallest, self.needed)

    def limits(self) -> dict:
        return sampling.thresholds(self.plans, self.smallest)


# ---------------------------------------------------------------- the tasks (pure functions of their inputs)

def _concat(tables: Sequence[pa.Table], schema: pa.Schema) -> pa.Table:
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables).cast(schema) if tables else schema.empty_table()


def _release_rows(tables: Sequence[pa.Table]) -> list[dict]:
    """The release rows sorted by id: the order the audit's and debias's folds are drawn over."""
    table = _concat(tables, SAMPLED_SCHEMA)
    return table.take(pc.sort_indices(table, [("id", "ascending")])).to_pylist()


def _write(table: pa.Table, path: Path) -> dict:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.combine_chunks(), path, **PARQUET_OPTIONS)
    return {"rows": table.num_rows, "sha256": sha256_file(path)}


def write_bucket_file(stage: Path, bucket: int, *sampled: pa.Table) -> tuple[str, dict, int]:
    """data/length<bucket>.parquet, rows sorted by id: (name, {rows, sha256}, repeated ids)."""
    table = _concat(sampled, SAMPLED_SCHEMA)
    table = table.filter(pc.equal(table.column("bucket"), bucket))
    table = table.take(pc.sort_indices(table, [("id", "ascending")])).select(BENCHMARK_SCHEMA.names)
    repeated = table.num_rows - pc.count_distinct(table.column("id")).as_py()
    name = f"data/{data_file_name(bucket)}"
    return name, _write(table.cast(BENCHMARK_SCHEMA), Path(stage) / name), repeated


def write_excluded_part(stage: Path, part: int, parts: int, *excluded: pa.Table) -> tuple[str, dict]:
    """One excluded/ part: its exclusions sorted by (id, stage, reason, detail)."""
    table = _concat(excluded, EXCLUDED_SCHEMA)
    table = table.filter(pc.equal(table.column("part"), part))
    order = [(c, "ascending") for c in ("id", "stage", "reason", "detail")]
    table = table.take(pc.sort_indices(table, order)).select(QUARANTINE_SCHEMA.names)
    name = excluded_file_name(part, parts)
    return name, _write(table.cast(QUARANTINE_SCHEMA), Path(stage) / name)


def _row_step(stage: str, rows: list[dict], kept: list[dict], dropped: list[dict], parts: int) -> tuple:
    """A row step's (kept rows, the dropped rows as exclusions of `stage`, {step, by_label_bucket}): what every
    step after sampling hands on, so that the counts add up the same way for each."""
    if len(kept) + len(dropped) != len(rows):
        raise ReconcileError(f"{stage}: {len(rows)} rows in, {len(kept)} kept + {len(dropped)} dropped")
    kept_table = pa.Table.from_pylist([{k: r[k] for k in SAMPLED_SCHEMA.names} for r in kept], schema=SAMPLED_SCHEMA)
    excluded = pa.Table.from_pylist([{"id": str(d["id"]), "stage": stage, "reason": d["reason"],
                                      "detail": str(d["detail"]), "part": excluded_partition(str(d["id"]), parts)}
                                     for d in dropped], schema=EXCLUDED_SCHEMA)
    step = {"step": stage, "unit": "rows", "in": len(rows), "kept": len(kept),
            "dropped": dict(sorted(Counter(d["reason"] for d in dropped).items()))}
    sampled_cells = Counter((LABEL_NAMES[r["label"]], int(r["bucket"])) for r in kept)
    return kept_table, excluded, {"step": step, "by_label_bucket": by_label_bucket(sampled_cells)}


def debias_task(cfg: Mapping[str, Any], parts: int, *sampled: pa.Table) -> tuple[pa.Table, pa.Table, dict]:
    """The debiased mode over the sampled rows: (kept rows, the dropped rows as exclusions, {report, step})."""
    from curation.shift.debias import debias_release

    rows = _release_rows(sampled)
    kept, dropped, report = debias_release(rows, dict(cfg))
    kept_table, excluded, meta = _row_step("debias", rows, kept, dropped, parts)
    return kept_table, excluded, {**meta, "report": report}


def rephrased_task(overlaps: Sequence[RephrasedOverlap], parts: int, *sampled: pa.Table) -> tuple:
    """--drop-rephrased over the sampled rows: (kept rows, the dropped as exclusions, {record, step}); an overlap
    that joins no row comes back as {"error": why}, raised on the driver (not inside a Ray task's traceback)."""
    rows = _release_rows(sampled)
    try:
        kept, dropped, record = drop_rephrased(rows, overlaps)
    except RephrasedDropError as exc:
        return SAMPLED_SCHEMA.empty_table(), EXCLUDED_SCHEMA.empty_table(), {"error": str(exc)}
    kept_table, excluded, meta = _row_step(REPHRASED_STAGE, rows, kept, dropped, parts)
    return kept_table, excluded, {**meta, "record": record}


def shift_audit_task(cfg: Mapping[str, Any], *sampled: pa.Table) -> dict | None:
    from curation.shift.release import audit_for_release

    return audit_for_release(_release_rows(sampled), dict(cfg))


# ---------------------------------------------------------------- the finish, on either runner

class LocalExecutor:
    """Runs each task in this process (the local runner)."""

    def submit(self, fn: Callable, *args: Any, num_returns: int = 1) -> Any:
        return fn(*args)

    def get(self, value: Any) -> Any:
        return value


def finish_release(cfg: Mapping[str, Any], stage: Path, tally: Tally, sampled: list, excluded: list, parts: int,
                   *, executor, log: Callable[[str], None] = lambda _: None,
                   rephrased: Sequence[RephrasedOverlap] = ()) -> dict:
    """The row steps after sampling (--drop-rephrased's `rephrased`, then debias when asked), write data/ and
    excluded/ into `stage`, audit; count and reconcile. `sampled` and `excluded` are the passes' tables (or object
    references to them). Returns {counts, files, created_at, shift_audit, debias, rephrased}."""
    counts = count_steps(tally, monthly=bool(cfg["cutoffs"]["monthly_nonmembers"]))
    row_steps = []  # each drops rows after sampling: the files lack them, the counts gain a step
    record = None
    if rephrased:
        kept, dropped, meta = executor.submit(rephrased_task, list(rephrased), parts, *sampled, num_returns=3)
        meta = executor.get(meta)
        if "error" in meta:
            raise RephrasedDropError(meta["error"])
        record = meta["record"]
        sampled, excluded = [kept], [*excluded, dropped]
        row_steps.append(meta)
    debias = None
    if (cfg.get("debias") or {}).get("enabled"):
        kept, dropped, meta = executor.submit(debias_task, dict(cfg), parts, *sampled, num_returns=3)
        debias = executor.get(meta)
        log(f"debias: {debias['report'].get('message', '')}")
        sampled, excluded = [kept], [*excluded, dropped]
        row_steps.append(debias)
    audit = executor.submit(shift_audit_task, dict(cfg), *sampled)
    writes = [executor.submit(write_bucket_file, stage, b, *sampled) for b in sorted(cfg["buckets"])]
    writes += [executor.submit(write_excluded_part, stage, p, parts, *excluded) for p in range(parts)]
    written = [executor.get(w) for w in writes]
    files = {w[0]: w[1] for w in written}
    rows_written = sum(info["rows"] for name, info in files.items() if name.startswith("data/"))
    excluded_written = sum(info["rows"] for name, info in files.items() if name.startswith("excluded/"))
    after = sum(sum(m["step"]["dropped"].values()) for m in row_steps)
    reconcile(counts, tally, rows_written=rows_written + after, excluded_written=excluded_written - after,
              duplicate_row_ids=sum(w[2] for w in written if len(w) == 3))
    for meta in row_steps:
        counts = _with_step(counts, meta)
    if counts["rows_out"] != rows_written or counts["excluded"] != excluded_written:
        raise ReconcileError("the steps after sampling: the counts and the files written disagree")
    log(f"shift audit: blind classifiers on {counts['rows_out']} rows ...")
    return {"counts": counts, "files": files, "shift_audit": executor.get(audit),
            "debias": debias["report"] if debias else None, "rephrased": record,
            "created_at": {"min": tally.created_min and _iso(tally.created_min),
                           "max": tally.created_max and _iso(tally.created_max)}}


def _iso(value: str) -> str:
    from curation.document import utc

    return utc(value).isoformat()


def _with_step(counts: dict, meta: Mapping[str, Any]) -> dict:
    """The counts with one more row step after sampling: its drops, and the rows and cells it kept."""
    step = meta["step"]
    counts = dict(counts)
    counts["steps"] = [*counts["steps"], step]
    reasons = Counter(counts["dropped_by_reason"]) + Counter(step["dropped"])
    counts["dropped_by_reason"] = dict(sorted(reasons.items()))
    counts["excluded"] += sum(step["dropped"].values())
    counts["rows_out"] = step["kept"]
    counts["by_label_bucket"] = meta["by_label_bucket"]
    return counts
