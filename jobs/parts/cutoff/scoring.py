"""`tidemark cutoff`'s scoring and its one table: the staged dated rows scored on the shared plane, then joined with
their dates into rows.parquet.

    OUT/_staging/rows   (jobs/parts/cutoff/dated_rows.py) ──▶ the part loop and scoring pool `evaluate` uses (resume, node
    loss, --runner, GPUs, served models) into OUT/scoring/, and with --ref-model a second pass into OUT/scoring_ref/;
    or, with --api-logprobs none, the text-only generation parts into OUT/scoring/
    ──▶ the driver reads the score columns (id and one float per detector: what evaluate reads too) and the dates
    (id, date, period, source, group), joins them by id: rows.parquet; and every quarantined row: quarantine.parquet.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from curation.io.ledger import ReconcileError, first_occurrences
from curation.io.outputs import Location
from jobs.parts.cutoff.dated_rows import META, QUARANTINE, ROWS
from scoring.cutoff.estimate import REF_PREFIX

SCORING, SCORING_REF = "scoring", "scoring_ref"


def log_prob_views(methods) -> tuple[str, ...]:
    from scoring.lm.views import ORIGINAL

    needs = sorted({v for m in methods for v in m.needs})
    return (ORIGINAL, *[v for v in needs if v not in ("ref", "token_freq")])


def score_log_prob(cfg, methods, dest: Location, *, model: str, served, sub: str, runner):
    """Score the staged rows with one model (local weights, or the probed served model) into OUT/<sub>; returns the
    part loop's PartRun. Resumes from committed parts whose fingerprint matches."""
    from jobs.kit.identity import json_digest, model_identity, sha256_bytes, tool_version
    from jobs.plane.part_loop import score_benchmark
    from jobs.plane.scoring_pool import ModelBranch
    import numpy as np

    views = log_prob_views(methods)
    branch = served.branch(views) if served else ModelBranch(model, views)
    tokenizer = served.tokenizer if served else model
    needs_freq = any("token_freq" in m.needs for m in methods)
    identity = {"model": served.identity() if served else model_identity(model), "views": list(views),
                "methods": [m.column for m in methods], "context": cfg.context, "stride": cfg.stride,
                "batch_size": cfg.batch_size, "device": "cuda" if cfg.gpus_per_actor > 0 else "cpu",
                "tool": tool_version(), "job": "cutoff"}

    def fingerprint(text, ids, freq) -> str:
        digest = None if freq is None else sha256_bytes(np.ascontiguousarray(freq).tobytes())
        return json_digest({**identity, "token_freq": digest})

    return score_benchmark(
        benchmark=dest.child(ROWS), requester_pays=False, rows_per_part=cfg.shard_size, dest=Location(dest.child(sub)),
        spec=cfg.pool_spec([branch]), runner=runner, methods=methods, seed=cfg.seed,
        count_tokens_of=tokenizer if needs_freq else None, fingerprint_for=fingerprint, resume=cfg.resume,
        progress=cfg.progress)


def score_text_only(opts, methods, dest: Location, phases, runner) -> dict:
    """The staged rows through a text-only server (evaluate's generation parts) into OUT/scoring; returns what
    `generate_benchmark` returns (or {"dry_run": plan})."""
    from jobs.plane.benchmark_parts import input_identity
    from jobs.parts.text_only.evaluation import TextOnlySetup, generate_benchmark

    setup = TextOnlySetup.probe(opts, methods)
    staged = dest.child(ROWS)
    fp = setup.fingerprint(methods, input_identity(staged, False))
    gen = generate_benchmark(opts, setup, methods, staged, Location(dest.child(SCORING)), fp, phases, runner=runner)
    return {**gen, "setup": setup}


def first_meta(dest: Location) -> pa.Table:
    """The staged rows' dates, one row per id: an id given twice was scored once, as its first row (the survey
    quarantines the later ones as duplicate_id), so its first date is the one that was scored."""
    from jobs.plane.part_store import read_parts

    meta = read_parts(dest, META)
    return meta.filter(pa.array(first_occurrences(meta.column("id")))) if meta is not None else None


def read_scores(dest: Location, sub: str, columns: list[str]) -> pa.Table | None:
    from jobs.plane.part_store import read_parts

    return read_parts(Location(dest.child(sub)), "scores.parquet", ["id", *columns])


def quarantined(dest: Location, sub: str) -> pa.Table | None:
    from jobs.plane.part_store import read_parts

    return read_parts(Location(dest.child(sub)), "quarantine.parquet")


def assemble(dest: Location, columns: list[str], staging: dict, *, reference: bool) -> tuple[pa.Table, pa.Table, dict]:
    """(rows: the scored rows with their dates and score columns, sorted by id; quarantine: every row that left
    unscored, with its reason; counts). Raises ReconcileError where rows in != scored + quarantined."""
    from curation.document import QUARANTINE_SCHEMA
    from jobs.plane.part_store import read_parts

    meta = first_meta(dest)
    scores = read_scores(dest, SCORING, columns)
    parts = [read_parts(dest, QUARANTINE), quarantined(dest, SCORING)]
    if scores is not None and reference:
        ref = read_scores(dest, SCORING_REF, columns)
        ref = ref.rename_columns(["id", *[REF_PREFIX + c for c in columns]]) if ref is not None else None
        kept = scores.join(ref, "id", join_type="inner") if ref is not None else scores.slice(0, 0)
        lost = pc.invert(pc.is_in(scores.column("id"), kept.column("id")))
        parts.append(_ref_failures(quarantined(dest, SCORING_REF), scores.filter(lost).column("id")))
        scores = kept
    q = pa.concat_tables([t.select(list(QUARANTINE_SCHEMA.names)).cast(QUARANTINE_SCHEMA)
                          for t in parts if t is not None and t.num_rows]) if any(
        t is not None and t.num_rows for t in parts) else QUARANTINE_SCHEMA.empty_table()
    if scores is None or not scores.num_rows:
        raise RuntimeError(f"no row could be scored ({q.num_rows} quarantined; see "
                           f"{dest.child('quarantine.parquet')})")
    rows = meta.join(scores, "id", join_type="inner")
    if rows.num_rows != scores.num_rows:
        raise ReconcileError(f"{scores.num_rows} scored rows, {rows.num_rows} of them with a staged date")
    rows = rows.take(pc.sort_indices(rows, [("id", "ascending")])).select(
        ["id", "date", "period", "source", "group", *columns, *([REF_PREFIX + c for c in columns] if reference else [])])
    counts = {"in": staging["rows_in"], "scored": rows.num_rows, "quarantined": q.num_rows,
              "reasons": dict(zip(*[pc.value_counts(q.column("reason")).field(f).to_pylist()
                                    for f in ("values", "counts")])) if q.num_rows else {}}
    if counts["in"] != counts["scored"] + counts["quarantined"]:
        raise ReconcileError(f"cutoff: {counts['in']} rows in, {counts['scored']} scored and "
                             f"{counts['quarantined']} quarantined")
    return rows, q, counts


def _ref_failures(ref_q: pa.Table | None, ids: pa.Array) -> pa.Table | None:
    """The rows the target scored and the reference model did not: quarantined with the reference's reason."""
    if not len(ids):
        return None
    if ref_q is None:
        raise ReconcileError(f"{len(ids)} row(s) have no reference score and no quarantine record")
    hit = ref_q.filter(pc.is_in(ref_q.column("id"), ids))
    hit = hit.filter(pa.array(first_occurrences(hit.column("id"))))
    detail = pc.binary_join_element_wise(pa.scalar("reference model: "), hit.column("detail"), "")
    return hit.set_column(hit.schema.get_field_index("detail"), "detail", detail)
