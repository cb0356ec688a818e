"""`tidemark build-benchmark`: a membership benchmark release from a config, as a Ray Data pipeline.

    tidemark build-benchmark --config jobs/configs/stackmia.yaml \\
        --set source.path=/data/coffee --set cutoffs.member_before=2015-02-01 \\
        --set cutoffs.nonmember_after=2015-03-01 --out DIR

Pipeline (stages live in curation/; this module only wires them):
    shards (one per site/file/tar/byte range) --flat_map--> documents --map_batches--> row-level stages (cutoff,
    filters, dedup keys) --> driver: the keys only (texts stay in the workers' blocks): dedup decisions, buckets,
    balanced sampling, counts --> the sampled documents' texts, selected on the workers --> DIR/data,
    DIR/excluded, DIR/manifest.json
Ray tasks ask for half a CPU, so that a 2-core machine runs parse and filter tasks side by side. Ray does not keep
row order; the driver sorts by id before writing, which makes the data files byte-identical run to run.
`--runner local` runs the same stages in this process without Ray.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

import typer

TASK_CPUS = 0.5


def _echo(message: str) -> None:
    from jobs.redact import redact_text

    typer.echo(redact_text(f"[build-benchmark] {message}"), err=True)


# ---------------------------------------------------------------- Ray stages (thin wrappers over curation/)

def _parse_shard(item: Mapping[str, Any], aggregated: Mapping[str, list] | None = None) -> Iterator[dict]:
    """One shard's documents; a shard that needs an aggregation (`site_key`) gets its partition arrays, read
    zero-copy from the object store."""
    import ray

    from curation import sources
    from curation.pipeline import to_record

    shard = json.loads(item["shard"])
    refs = (aggregated or {}).get(shard.get("site_key"))
    for doc in sources.iter_documents(shard, ray.get(list(refs)) if refs else None):
        yield to_record(doc)


def run_aggregations(source_cfg: Mapping[str, Any], shards: list[dict]) -> dict[str, list]:
    """Each aggregation the source declares (Stack Exchange's answers pass), on the workers: a scan task per item
    returning one piece per partition (module.aggregation_scan), a merge task per partition
    (module.aggregation_merge). Returns {key: [partition object refs]}; the driver never fetches them."""
    import ray

    from curation import sources

    module = sources.source_module(source_cfg["kind"])
    out = {}
    for agg in sources.aggregations(source_cfg, shards):
        p = agg["partitions"]
        scan = ray.remote(num_cpus=TASK_CPUS, max_retries=2)(module.aggregation_scan).options(num_returns=p)
        merge = ray.remote(num_cpus=TASK_CPUS, max_retries=2)(module.aggregation_merge)
        pieces = [scan.remote(item, p) for item in agg["items"]]
        pieces = [x if p > 1 else [x] for x in pieces]
        out[agg["key"]] = [merge.remote(*[piece[k] for piece in pieces]) for k in range(p)]
        _echo(f"answers pass: {len(agg['items'])} range(s) of {agg['key']}, {p} partition(s)")
    return out


def _annotate_batch(batch, cfg_json: str):
    from curation.pipeline import annotate_records

    return annotate_records(batch.to_pylist(), json.loads(cfg_json))


def run_ray(cfg: Mapping[str, Any]):
    import shutil

    import ray

    from curation import sources

    source_cfg = sources.source_config(cfg)
    own_staging = None
    if not source_cfg.get("staging"):
        if len([n for n in ray.nodes() if n.get("Alive")]) == 1:  # every worker sees this machine's disk
            # This run's own area, removed when the run ends: a staged dump can be as large as the XML inside it.
            # Set source.staging to keep (and reuse) staged copies across runs.
            own_staging = source_cfg["staging"] = tempfile.mkdtemp(prefix="tidemark-staging-")
        else:
            _echo("several nodes and no source.staging: a .7z dump is parsed by one task; set source.staging to an "
                  "s3:// prefix (or a shared directory) to decompress it once and parse it in parallel")
    try:
        return _run_ray(cfg, source_cfg)
    finally:
        if own_staging:
            shutil.rmtree(own_staging, ignore_errors=True)


def _run_ray(cfg: Mapping[str, Any], source_cfg: dict):
    import pyarrow as pa
    import ray

    from curation import sources
    from curation.pipeline import ANNOTATED_SCHEMA, BATCH_SIZE, created_range, finish, split_annotated

    # Planning runs as a task: staging a .7z decompresses the whole dump, which is a worker's job, not the driver's.
    shards = ray.get(ray.remote(num_cpus=TASK_CPUS, max_retries=1)(sources.shards).remote(source_cfg))
    _echo(f"{len(shards)} shard(s) to parse")
    aggregated = run_aggregations(source_cfg, shards)
    items = [{"shard": json.dumps(s, default=str)} for s in shards]
    documents = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
    documents = documents.flat_map(_parse_shard, fn_kwargs={"aggregated": aggregated}, num_cpus=TASK_CPUS)
    annotated = documents.map_batches(
        _annotate_batch, fn_kwargs={"cfg_json": json.dumps(cfg, default=str)}, batch_format="pyarrow",
        batch_size=BATCH_SIZE, num_cpus=TASK_CPUS,
    ).materialize()  # the annotated blocks stay in the object store (spilled to disk when large)
    keys_schema = ANNOTATED_SCHEMA.remove(ANNOTATED_SCHEMA.get_field_index("text"))
    keys = annotated.drop_columns(["text"])  # every decision needs keys only: texts stay on the workers
    tables = [t for t in ray.get(keys.to_arrow_refs()) if t.num_rows]
    table = pa.concat_tables([t.select(keys_schema.names).cast(keys_schema) for t in tables]) \
        if tables else keys_schema.empty_table()
    _echo(f"parsed and filtered {table.num_rows} documents")
    created = created_range(table.column("created_at").to_pylist())
    kept, exclusions = split_annotated(table.to_pylist())
    n_in = table.num_rows
    del table, tables
    result = finish(cfg, n_in, kept, exclusions, fetch_texts=lambda ids: _texts_of(annotated, ids))
    return result, {"created_at": created}


def _texts_of(annotated, ids: set[str]) -> dict[str, str]:
    """The texts of the sampled documents only (the release's), selected on the workers."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import ray

    wanted = pa.array(sorted(ids), pa.string())

    def select(batch: pa.Table) -> pa.Table:
        return batch.filter(pc.is_in(batch.column("id"), value_set=wanted)).select(["id", "text"])

    found = annotated.map_batches(select, batch_format="pyarrow", num_cpus=TASK_CPUS)
    out: dict[str, str] = {}
    for t in ray.get(found.to_arrow_refs()):
        out.update(zip(t.column("id").to_pylist(), t.column("text").to_pylist()))
    return out


# ---------------------------------------------------------------- the shift audit call site

def _shift_audit(rows: list[dict], cfg: Mapping[str, Any]) -> Optional[dict]:
    """The manifest's `shift_audit`: how well a blind, model-free classifier separates the released members
    from the non-members (issue 4). None when the config disables it (`shift_audit.enabled: false`)."""
    from curation.shift_audit import audit_for_release

    _echo(f"shift audit: blind classifiers on {len(rows)} rows ...")
    return audit_for_release(rows, dict(cfg))


def _debias(result, cfg: Mapping[str, Any]):
    """The debiased release mode (config `debias.enabled`): returns (result, report or None)."""
    from curation.debias import debias_build

    result, report = debias_build(result, dict(cfg))
    if report is not None:
        _echo(f"debias: {report.get('message', report)}")
    return result, report


# ---------------------------------------------------------------- the build

def build(cfg: Mapping[str, Any], out: Path | str, *, overrides: tuple[str, ...] = (), runner: str = "ray",
          overwrite: bool = False, skip_existing: bool = False) -> dict:
    """Build and write a release; returns its manifest. Raises ReconcileError before writing if counts are off.

    `out` is a local directory or an s3:// prefix. The release is written to a staging directory first and then
    published (jobs/release_io.py): data files, then manifest.json, then `_SUCCESS`, so a crashed build never
    leaves a release that looks complete. With `skip_existing`, a complete release already at `out` makes this a
    no-op (a scheduled job that runs twice for one period), and a partial one is rebuilt."""
    from curation import sources
    from curation.pipeline import run_local
    from curation.release import build_manifest, write_manifest, write_release_files
    from jobs import release_io
    from jobs.redact import credential_keys, redact, secret_values

    dest = release_io.destination(out)
    state = release_io.release_state(dest)
    if state == "complete" and skip_existing:
        _echo(f"{dest.uri} already holds a complete release; nothing to do (--skip-existing)")
        return release_io.read_manifest(dest)
    if state != "absent" and not (overwrite or (skip_existing and state == "partial")):
        raise FileExistsError(f"{out} already holds a release; pass --overwrite or choose another --out")
    ignored = credential_keys(cfg)
    if ignored:  # credentials come from the environment or the instance profile only; the names, never values
        _echo(f"ignoring credential-like config keys {ignored}: credentials come from the environment or the "
              "instance profile, and are redacted from the manifest")
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

    result, debias_report = _debias(result, cfg)
    with release_io.staging(dest) as stage:
        files = write_release_files(stage, result.rows, result.excluded, cfg["buckets"])
        snapshot = {**sources.snapshot(sources.source_config(cfg)), "documents_created_at": observed["created_at"]}
        manifest = build_manifest(cfg=cfg, overrides=overrides, source_snapshot=snapshot, counts=result.counts,
                                  files=files, shift_audit=_shift_audit(result.rows, cfg), runner=runner)
        if debias_report is not None:
            manifest["debias"] = debias_report
        manifest = redact(manifest, secret_values(cfg))
        write_manifest(stage, manifest)
        release_io.publish(stage, dest, job="build-benchmark", rows=result.counts["rows_out"])
    _echo(f"wrote {result.counts['rows_out']} rows to {dest.uri} in {time.perf_counter() - started:.1f}s "
          f"({result.counts['by_label_bucket']})")
    return manifest


def build_benchmark(
    config: Path = typer.Option(..., "--config", "-c", exists=True, dir_okay=False, help="YAML config file."),
    out: str = typer.Option(..., "--out", "-o", help="Release directory or s3:// prefix to write (data/, "
                                                     "excluded/, manifest.json, _SUCCESS). May hold placeholders "
                                                     "such as {nonmember_month} (see --nonmember-month)."),
    set_: list[str] = typer.Option([], "--set", help="Override a config key: --set cutoffs.member_before=2017-01-01 "
                                                     "(repeatable; values are YAML)."),
    runner: str = typer.Option("ray", "--runner", help="'ray' (Ray Data; local Ray or RAY_ADDRESS) or 'local'."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a release already in --out."),
    skip_existing: bool = typer.Option(False, "--skip-existing", help="Do nothing if --out already holds a "
                                       "complete release (rebuild a partial one): for scheduled re-runs."),
    nonmember_month: Optional[str] = typer.Option(
        None, "--nonmember-month", envvar="TIDEMARK_NONMEMBER_MONTH",
        help="Take non-members from one month: 'auto' (the month --nonmember-lag months before the run date; the "
             "run date is today UTC or TIDEMARK_RUN_DATE) or YYYY-MM. Sets cutoffs.nonmember_after/_before and "
             "fills {nonmember_month}, {nonmember_yymm}, {run_date} in --out and --set values."),
    nonmember_lag: int = typer.Option(1, "--nonmember-lag", help="Months between the run date and the 'auto' "
                                      "non-member month (1 = the last complete month)."),
) -> None:
    """Build a versioned membership benchmark (members before a cutoff, non-members after) from a config."""
    from curation.config import ConfigError, load_config
    from jobs import schedule

    set_ = list(set_)
    if nonmember_month:
        try:
            month = schedule.resolve_month(nonmember_month, lag_months=nonmember_lag)
            values = schedule.placeholders(month)
            out = schedule.fill(out, values)
            set_ = [schedule.fill(item, values) for item in set_] + schedule.month_overrides(month)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        _echo(f"non-member month {month} (run date {values['run_date']}): out={out}")
    try:
        cfg = load_config(config, set_)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    build(cfg, out, overrides=tuple(set_), runner=runner, overwrite=overwrite, skip_existing=skip_existing)


def register(app: typer.Typer) -> None:
    app.command("build-benchmark")(build_benchmark)
