"""`tidemark build-benchmark`: a membership benchmark release from a config.

    tidemark build-benchmark --config jobs/configs/stackmia.yaml \\
        --set source.path=/data/coffee --set cutoffs.member_before=2015-02-01 \\
        --set cutoffs.nonmember_after=2015-03-01 --out DIR

The stages live in curation/; the Ray runner (jobs/parts/release_build.py) parses, filters, deduplicates, samples and
writes on the workers, and the driver only plans and adds up; `--runner local` runs the same functions in this
process. Either writes into a staging directory, and this module publishes it (DIR/data, DIR/excluded,
DIR/manifest.json, DIR/_SUCCESS). Every file is sorted by a key of its rows, so the bytes do not depend on the
runner or on task order.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Optional

import typer

from jobs.kit.log import log
from jobs.parts.parsed_shards import BUILD_DIR

# ---------------------------------------------------------------- the build

def build(cfg: Mapping[str, Any], out: Path | str, *, overrides: tuple[str, ...] = (), runner: str = "ray",
          overwrite: bool = False, skip_existing: bool = False, resume: bool = True, progress: bool = True) -> dict:
    """Build and write a release; returns its manifest. Raises ReconcileError before writing if counts are off.

    `out` is a local directory or an s3:// prefix. The release is written to a staging directory first and then
    published (curation/io/publish.py): data files, then manifest.json, then `_SUCCESS`, so a crashed build never
    leaves a release that looks complete. With `skip_existing`, a complete release already at `out` makes this a
    no-op (a scheduled job that runs twice for one period), and a partial one is rebuilt. The Ray runner keeps its
    parsed shards under OUT/_build until the release is published, so that a cut-off build `resume`s from them
    (jobs/parts/parsed_shards.py)."""
    from curation import sources
    from curation.release.layout import build_manifest, write_manifest
    from curation.release.text_defects import release_defects
    from curation.io import publish as release_io
    from jobs.kit.redact import credential_keys, redact, secret_values

    dest = release_io.destination(out)
    state = release_io.release_state(dest)
    if state == "complete" and skip_existing:
        log(f"{dest.uri} already holds a complete release; nothing to do (--skip-existing)")
        return release_io.read_manifest(dest)
    if state != "absent" and not (overwrite or (skip_existing and state == "partial")):
        raise FileExistsError(f"{out} already holds a release; pass --overwrite or choose another --out")
    ignored = credential_keys(cfg)
    if ignored:  # credentials come from the environment or the instance profile only; the names, never values
        log(f"ignoring credential-like config keys {ignored}: credentials come from the environment or the "
              "instance profile, and are redacted from the manifest")
    started = time.perf_counter()
    with release_io.staging(dest) as stage:
        out = _run(cfg, stage, runner, dest, resume=resume, progress=progress)
        for step in out["counts"]["steps"]:
            dropped = ", ".join(f"{k}={v}" for k, v in step["dropped"].items()) or "-"
            log(f"{step['step']:<13} {step['unit']:<9} in {step['in']:>7}  kept {step['kept']:>7}  "
                  f"dropped: {dropped}")
        snapshot = {**sources.snapshot(sources.source_config(cfg)), "documents_created_at": out["created_at"]}
        manifest = build_manifest(cfg=cfg, overrides=overrides, source_snapshot=snapshot, counts=out["counts"],
                                  files=out["files"], shift_audit=out["shift_audit"], runner=runner)
        if out["debias"] is not None:
            manifest["debias"] = out["debias"]
        if cfg["source"].get("kind") == "corpus":
            manifest["corpus_overlap"] = _corpus_overlap(cfg, stage, out.get("training_overlap"))
        defects = manifest["text_defects"] = release_defects(stage, float(cfg["text_defects"]["max_share"]))
        if defects["passages"]:
            log(f"text defects: {defects['defective']} of {defects['passages']} released passages "
                f"({defects['share']:.1%}) have holes or leftover markup {defects['by_kind']}")
        if "warning" in defects:
            log(f"warning: {defects['warning']}")
        manifest = redact(manifest, secret_values(cfg))
        write_manifest(stage, manifest)
        release_io.publish(stage, dest, job="build-benchmark", rows=out["counts"]["rows_out"])
    dest.delete_tree(BUILD_DIR)  # the parsed shards (and a staged dump) served this build only
    log(f"wrote {out['counts']['rows_out']} rows to {dest.uri} in {time.perf_counter() - started:.1f}s "
          f"({out['counts']['by_label_bucket']})")
    return manifest


def _corpus_overlap(cfg: Mapping[str, Any], stage: Path, computed: dict | None) -> dict:
    """The corpus recipe's manifest record: the rule, the training scan's counts, how many held-out documents the
    rule excluded, and the n-gram share of the non-members released (measured on the rows as written)."""
    from curation import sources
    from curation.sources.corpus import found_ngrams
    from jobs.parts.training_overlap import kept_nonmember_overlap

    source_cfg = sources.source_config(cfg)
    # The local runner computed the set inside the source; computing it again here is cheap at its scale.
    found, stats = (computed["found"], computed["stats"]) if computed else found_ngrams(source_cfg)
    max_overlap = float(source_cfg.get("max_overlap", 0.2))
    return {"ngram": found.n, "max_overlap": max_overlap, "rule": "a non-member's released passage shares at most "
            "max_overlap of its n-grams with the whole training corpus (MIMIR's ngram_13_0.2)", "scan": stats,
            "kept_nonmembers": kept_nonmember_overlap(stage, found, max_overlap)}


def _run(cfg: Mapping[str, Any], stage: Path, runner: str, dest, *, resume: bool, progress: bool) -> dict:
    """Run the build into `stage` with the chosen runner; returns counts, files, audit and dates."""
    from curation.stages.pipeline import run_local

    if runner == "local":
        return run_local(cfg, stage)
    if runner != "ray":
        raise ValueError(f"runner must be 'ray' or 'local', got {runner!r}")
    import ray

    from jobs.parts.release_build import run_ray

    owns_ray = not ray.is_initialized()
    if owns_ray:  # a local runtime, or the cluster that RAY_ADDRESS names (jobs/kit/runtime.py)
        from jobs.kit.runtime import ensure_ray

        ensure_ray(log_to_driver=False, logging_level="INFO")
    try:
        return run_ray(cfg, stage, dest, log, resume=resume, progress=progress)
    finally:
        if owns_ray:
            ray.shutdown()


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
    resume: bool = typer.Option(True, "--resume/--no-resume", help="Reuse the shards a cut-off build parsed "
                                "(OUT/_build; their markers must match this config and input). --no-resume parses "
                                "every shard again."),
    progress: bool = typer.Option(True, "--progress/--quiet", help="progress bars (--quiet: none)"),
) -> None:
    """Build a versioned membership benchmark (members before a cutoff, non-members after) from a config."""
    from curation.config import ConfigError, load_config
    from jobs.kit import schedule

    set_ = list(set_)
    if nonmember_month:
        try:
            month = schedule.resolve_month(nonmember_month, lag_months=nonmember_lag)
            values = schedule.placeholders(month)
            out = schedule.fill(out, values)
            set_ = [schedule.fill(item, values) for item in set_] + schedule.month_overrides(month)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        log(f"non-member month {month} (run date {values['run_date']}): out={out}")
    try:
        cfg = load_config(config, set_)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    build(cfg, out, overrides=tuple(set_), runner=runner, overwrite=overwrite, skip_existing=skip_existing,
          resume=resume, progress=progress)


def register(app: typer.Typer) -> None:
    app.command("build-benchmark")(build_benchmark)
