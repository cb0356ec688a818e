"""`tidemark build-benchmark`: a membership benchmark release from a config, as a Ray Data pipeline.

    tidemark build-benchmark --config jobs/configs/stackmia.yaml \\
        --set source.path=/data/coffee --set cutoffs.member_before=2015-02-01 \\
        --set cutoffs.nonmember_after=2015-03-01 --out DIR

Pipeline (stages live in curation/; this module only wires them):
    shards (one per site/file/tar) --flat_map--> documents --map_batches--> row-level stages (cutoff, filters,
    dedup keys) --> driver: dedup decisions, buckets, balanced sampling, counts --> DIR/data, DIR/excluded,
    DIR/manifest.json
Ray tasks ask for half a CPU, so that a 2-core machine runs parse and filter tasks side by side. Ray does not keep
row order; the driver sorts by id before writing, which makes the data files byte-identical run to run.
`--runner local` runs the same stages in this process without Ray.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

import typer

TASK_CPUS = 0.5


def _echo(message: str) -> None:
    typer.echo(f"[build-benchmark] {message}", err=True)


# ---------------------------------------------------------------- Ray stages (thin wrappers over curation/)

def _parse_shard(item: Mapping[str, Any]) -> Iterator[dict]:
    from curation import sources
    from curation.pipeline import to_record

    for doc in sources.iter_documents(json.loads(item["shard"])):
        yield to_record(doc)


def _annotate_batch(batch, cfg_json: str):
    from curation.pipeline import annotate_records

    return annotate_records(batch.to_pylist(), json.loads(cfg_json))


def run_ray(cfg: Mapping[str, Any]):
    import pyarrow as pa
    import ray

    from curation import sources
    from curation.pipeline import ANNOTATED_SCHEMA, BATCH_SIZE, created_range, finish, split_annotated

    shards = sources.shards(sources.source_config(cfg))
    _echo(f"{len(shards)} shard(s) to parse")
    items = [{"shard": json.dumps(s, default=str)} for s in shards]
    documents = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
    documents = documents.flat_map(_parse_shard, num_cpus=TASK_CPUS)
    annotated = documents.map_batches(
        _annotate_batch, fn_kwargs={"cfg_json": json.dumps(cfg, default=str)}, batch_format="pyarrow",
        batch_size=BATCH_SIZE, num_cpus=TASK_CPUS,
    ).materialize()
    tables = [t for t in ray.get(annotated.to_arrow_refs()) if t.num_rows]
    table = pa.concat_tables([t.select(ANNOTATED_SCHEMA.names).cast(ANNOTATED_SCHEMA) for t in tables]) \
        if tables else ANNOTATED_SCHEMA.empty_table()
    _echo(f"parsed and filtered {table.num_rows} documents")
    kept, exclusions = split_annotated(table.to_pylist())
    result = finish(cfg, table.num_rows, kept, exclusions)
    return result, {"created_at": created_range(table.column("created_at").to_pylist())}


# ---------------------------------------------------------------- the shift audit call site

def _shift_audit(rows: list[dict], cfg: Mapping[str, Any]) -> Optional[dict]:
    """SHIFT AUDIT CALL SITE, the only one: the value of the manifest's `shift_audit` for the rows being released.

    Returns None when curation.shift_audit cannot be imported. Until the audit's owner wires
    `curation.shift_audit.audit_rows` in here, it returns None as well (the key stays reserved)."""
    try:
        import curation.shift_audit  # noqa: F401
    except ImportError:
        return None
    return None


# ---------------------------------------------------------------- the build

def build(cfg: Mapping[str, Any], out: Path, *, overrides: tuple[str, ...] = (), runner: str = "ray",
          overwrite: bool = False) -> dict:
    """Build and write a release; returns its manifest. Raises ReconcileError before writing if counts are off."""
    from curation import sources
    from curation.pipeline import run_local
    from curation.release import build_manifest, prepare_out_dir, write_manifest, write_release_files

    out = Path(out)
    prepare_out_dir(out, overwrite)
    started = time.perf_counter()
    if runner == "ray":
        import ray

        owns_ray = not ray.is_initialized()
        if owns_ray:  # a local runtime, or the cluster that RAY_ADDRESS names
            ray.init(include_dashboard=False, log_to_driver=False)
        try:
            result, observed = run_ray(cfg)
        finally:
            if owns_ray:
                ray.shutdown()
    elif runner == "local":
        result, observed = run_local(cfg)
    else:
        raise ValueError(f"runner must be 'ray' or 'local', got {runner!r}")

    for step in result.counts["steps"]:
        dropped = ", ".join(f"{k}={v}" for k, v in step["dropped"].items()) or "-"
        _echo(f"{step['step']:<13} {step['unit']:<9} in {step['in']:>7}  kept {step['kept']:>7}  dropped: {dropped}")

    files = write_release_files(out, result.rows, result.excluded, cfg["buckets"])
    snapshot = {**sources.snapshot(sources.source_config(cfg)), "documents_created_at": observed["created_at"]}
    manifest = build_manifest(cfg=cfg, overrides=overrides, source_snapshot=snapshot, counts=result.counts,
                              files=files, shift_audit=_shift_audit(result.rows, cfg), runner=runner)
    write_manifest(out, manifest)
    _echo(f"wrote {result.counts['rows_out']} rows to {out} in {time.perf_counter() - started:.1f}s "
          f"({result.counts['by_label_bucket']})")
    return manifest


def build_benchmark(
    config: Path = typer.Option(..., "--config", "-c", exists=True, dir_okay=False, help="YAML config file."),
    out: Path = typer.Option(..., "--out", "-o", help="Release directory to write (data/, excluded/, manifest.json)."),
    set_: list[str] = typer.Option([], "--set", help="Override a config key: --set cutoffs.member_before=2017-01-01 "
                                                     "(repeatable; values are YAML)."),
    runner: str = typer.Option("ray", "--runner", help="'ray' (Ray Data; local Ray or RAY_ADDRESS) or 'local'."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a release already in --out."),
) -> None:
    """Build a versioned membership benchmark (members before a cutoff, non-members after) from a config."""
    from curation.config import ConfigError, load_config

    try:
        cfg = load_config(config, set_)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    build(cfg, out, overrides=tuple(set_), runner=runner, overwrite=overwrite)


def register(app: typer.Typer) -> None:
    app.command("build-benchmark")(build_benchmark)
