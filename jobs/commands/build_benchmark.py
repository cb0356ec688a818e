"""`tidemark build-benchmark`: a membership benchmark release from a config.

    tidemark build-benchmark --config jobs/configs/stackmia.yaml \\
        --set source.path=/data/coffee --set cutoffs.member_before=2015-02-01 \\
        --set cutoffs.nonmember_after=2015-03-01 --out DIR

The stages live in curation/; the Ray runner (jobs/parts/release/build.py) parses, filters, deduplicates, samples and
writes on the workers, and the driver only plans and adds up; `--runner local` runs the same functions in this
process. Either writes into a staging directory, and this module publishes it (DIR/data, DIR/excluded,
DIR/manifest.json, DIR/_SUCCESS). Every file is sorted by a key of its rows, so the bytes do not depend on the
runner or on task order.

`--cutoff-from OUT/report.json` takes the two cutoff dates from a model's measured training cutoff (`tidemark
cutoff`; scoring/cutoff/estimate.py's member_window) as ordinary `--set cutoffs.*` overrides, and the manifest
records the measurement under `cutoff_from` (`cutoff_overrides` below; docs/build-benchmark.md).

`--drop-rephrased OUT` drops the non-members an `overlap --semantic` run over a build of this release found
rephrased in a model's corpus, after sampling (curation/release/rephrased.py; the OUT is read and checked first,
jobs/parts/release/rephrased_overlaps.py); the manifest records it under `drop_rephrased`.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import typer

from jobs.kit.log import log
from jobs.parts.release.parsed_shards import BUILD_DIR

# ---------------------------------------------------------------- the build

def build(cfg: Mapping[str, Any], out: Path | str, *, overrides: tuple[str, ...] = (), runner: str = "ray",
          overwrite: bool = False, skip_existing: bool = False, resume: bool = True, progress: bool = True,
          cutoff_from: Mapping[str, Any] | None = None, rephrased: Sequence = ()) -> dict:
    """Build and write a release; returns its manifest. Raises ReconcileError before writing if counts are off.

    `out` is a local directory or an s3:// prefix. The release is written to a staging directory first and then
    published (curation/io/publish.py): data files, then manifest.json, then `_SUCCESS`, so a crashed build never
    leaves a release that looks complete. With `skip_existing`, a complete release already at `out` makes this a
    no-op (a scheduled job that runs twice for one period), and a partial one is rebuilt. The Ray runner keeps its
    parsed shards under OUT/_build until the release is published, so that a cut-off build `resume`s from them
    (jobs/parts/release/parsed_shards.py). `cutoff_from` (the record `cutoff_overrides` returns) goes into the manifest as
    `cutoff_from`: the measured cutoff the dates came from. `rephrased` (jobs/parts/release/rephrased_overlaps.py's
    read of --drop-rephrased) drops the non-members those overlaps flagged, after sampling; the manifest records it
    as `drop_rephrased`. An overlap that joins no row of the release raises RephrasedDropError, nothing written."""
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
        out = _run(cfg, stage, runner, dest, resume=resume, progress=progress, rephrased=rephrased)
        for step in out["counts"]["steps"]:
            dropped = ", ".join(f"{k}={v}" for k, v in step["dropped"].items()) or "-"
            log(f"{step['step']:<13} {step['unit']:<9} in {step['in']:>7}  kept {step['kept']:>7}  "
                  f"dropped: {dropped}")
        snapshot = {**sources.snapshot(sources.source_config(cfg)), "documents_created_at": out["created_at"]}
        manifest = build_manifest(cfg=cfg, overrides=overrides, source_snapshot=snapshot, counts=out["counts"],
                                  files=out["files"], shift_audit=out["shift_audit"], runner=runner,
                                  cutoff_from=cutoff_from)
        if out["debias"] is not None:
            manifest["debias"] = out["debias"]
        if out.get("rephrased") is not None:
            from jobs.parts.release.rephrased_overlaps import log_record

            manifest["drop_rephrased"] = out["rephrased"]
            log_record(out["rephrased"], log)
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
    from jobs.parts.release.training_overlap import kept_nonmember_overlap

    source_cfg = sources.source_config(cfg)
    # The local runner computed the set inside the source; computing it again here is cheap at its scale.
    found, stats = (computed["found"], computed["stats"]) if computed else found_ngrams(source_cfg)
    max_overlap = float(source_cfg.get("max_overlap", 0.2))
    return {"ngram": found.n, "max_overlap": max_overlap, "rule": "a non-member's released passage shares at most "
            "max_overlap of its n-grams with the whole training corpus (MIMIR's ngram_13_0.2)", "scan": stats,
            "kept_nonmembers": kept_nonmember_overlap(stage, found, max_overlap)}


def _run(cfg: Mapping[str, Any], stage: Path, runner: str, dest, *, resume: bool, progress: bool,
         rephrased: Sequence = ()) -> dict:
    """Run the build into `stage` with the chosen runner; returns counts, files, audit and dates."""
    from curation.stages.pipeline import run_local

    if runner == "local":
        return run_local(cfg, stage, rephrased)
    if runner != "ray":
        raise ValueError(f"runner must be 'ray' or 'local', got {runner!r}")
    import ray

    from jobs.parts.release.build import run_ray

    owns_ray = not ray.is_initialized()
    if owns_ray:  # a local runtime, or the cluster that RAY_ADDRESS names (jobs/kit/runtime.py)
        from jobs.kit.runtime import ensure_ray

        ensure_ray(log_to_driver=False, logging_level="INFO")
    try:
        return run_ray(cfg, stage, dest, log, resume=resume, progress=progress, rephrased=rephrased)
    finally:
        if owns_ray:
            ray.shutdown()


# ---------------------------------------------------------------- dates from a measured cutoff

REPORT = "report.json"
DEFAULT_GAP_MONTHS = 2
MEASURED_KEYS = ("cutoffs.member_before", "cutoffs.nonmember_after")
WINDOW_RULE = ("member_before: the first day of the month after cutoff_ci[0], gap_months earlier; nonmember_after: "
               "the first day of the month after cutoff_ci[1], gap_months later (scoring/cutoff/estimate.py "
               "member_window)")


class CutoffFromError(ValueError):
    """--cutoff-from cannot set the dates; the message says why and what to do instead."""


def read_cutoff_report(path: str) -> tuple[dict, str]:
    """(report.json's answers, where they were read): `path` is a `tidemark cutoff` output directory or its
    report.json, local or s3://."""
    import json

    from curation.io.outputs import Location, is_s3

    text = str(path)
    if is_s3(text):
        base, name = text.rsplit("/", 1) if text.endswith(".json") else (text.rstrip("/"), REPORT)
        where = Location(base)
        if not where.exists(name):
            raise CutoffFromError(f"no {name} under {base}: --cutoff-from takes a `tidemark cutoff` output or its "
                                  f"{REPORT}")
        return where.read_json(name), f"{base}/{name}"
    file = Path(text) / REPORT if Path(text).is_dir() else Path(text)
    if not file.is_file():
        raise CutoffFromError(f"{file} not found: --cutoff-from takes a `tidemark cutoff` output directory or its "
                              f"{REPORT}")
    try:
        report = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise CutoffFromError(f"{file} is not a cutoff report (not JSON: {exc})") from None
    if not isinstance(report, dict):
        raise CutoffFromError(f"{file} is not a cutoff report (not a JSON object)")
    return report, str(file)


def source_matches(source: Any, kind: Any) -> bool:
    """Whether a report's source is the recipe's: `stackexchange` for kind stackexchange, or a name that starts
    with it (`wikipedia-versions` for wikipedia; wikipedia_dump reads Wikipedia as well)."""
    if not source or not kind:
        return False
    return str(source).lower().startswith(str(kind).lower().removesuffix("_dump"))


def choose_answer(report: Mapping[str, Any], source_kind: Any, source_name: str | None = None) -> tuple[dict, str]:
    """(the report's answer for this build, how it was chosen): the source named `source_name`; else the one
    source that matches the recipe's kind; else the report's only source."""
    answers = [a for a in (report.get("sources") or [report]) if isinstance(a, Mapping)]
    listing = ", ".join(repr(a.get("source")) for a in answers) or "none"
    if source_name is not None:
        named = [a for a in answers if a.get("source") == source_name]
        if not named:
            raise CutoffFromError(f"the cutoff report has no source {source_name!r}; its sources: {listing}")
        return dict(named[0]), "--cutoff-source"
    matching = [a for a in answers if source_matches(a.get("source"), source_kind)]
    if len(matching) == 1:
        return dict(matching[0]), "source.kind"
    if len(answers) == 1:
        return dict(answers[0]), "the report's only source"
    how = "none matches" if not matching else f"{len(matching)} match"
    raise CutoffFromError(f"the cutoff report answers for several sources ({listing}) and {how} source.kind "
                          f"{source_kind!r}; choose one with --cutoff-source NAME")


def cutoff_overrides(report: Mapping[str, Any], source_kind: Any, source_name: str | None = None,
                     gap_months: int = DEFAULT_GAP_MONTHS, *, report_path: str = REPORT,
                     nonmember_before: Any = None) -> tuple[list[str], dict]:
    """(the `--set` overrides of cutoffs.member_before and cutoffs.nonmember_after that a measured cutoff implies,
    the manifest's `cutoff_from` record). Raises CutoffFromError where the report cannot set them: no cutoff found,
    no source to pick, a corpus recipe (its dates are nominal), or a `nonmember_before` the new window passes."""
    from curation.document import utc
    from scoring.cutoff.estimate import member_window

    if source_kind == "corpus":
        raise CutoffFromError("a corpus recipe labels by construction (members from source.train, non-members from "
                              "source.heldout) and its dates are nominal: a measured cutoff does not apply to it")
    answer, chosen_by = choose_answer(report, source_kind, source_name)
    name = answer.get("source")
    if not answer.get("cutoff"):
        raise CutoffFromError(
            f"{report_path}: the measurement found no cutoff in its range for source {name!r} (p_no_cutoff="
            f"{answer.get('p_no_cutoff')}), so it cannot set the dates; choose them another way (--set "
            "cutoffs.member_before=... --set cutoffs.nonmember_after=...) or measure over another range of months")
    ci = answer.get("cutoff_ci")
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        raise CutoffFromError(f"{report_path}: source {name!r} has a cutoff ({answer['cutoff']}) but no cutoff_ci "
                              f"[first, last month] (got {ci!r}), so it cannot set the dates")
    try:
        window = member_window([str(m) for m in ci], int(gap_months))
    except ValueError as exc:
        raise CutoffFromError(f"{report_path}: source {name!r}: {exc}") from None
    after = window["nonmember_after"]
    end = _time_or_none(nonmember_before)
    if end is not None and end <= utc(after):
        raise CutoffFromError(
            f"the measured cutoff of {name!r} (CI {list(ci)}, gap {gap_months} months) puts cutoffs.nonmember_after at "
            f"{after}, not before the recipe's cutoffs.nonmember_before {nonmember_before}: no document could be a "
            "non-member; set a later end (--set cutoffs.nonmember_before=YYYY-MM-DD) or none "
            "(--set cutoffs.nonmember_before=null)")
    overrides = [f"{key}={window[key.split('.')[1]]}" for key in MEASURED_KEYS]
    record = {"report": report_path, "source": name, "chosen_by": chosen_by, "detector": answer.get("detector"),
              "differential": answer.get("differential"), "estimator": answer.get("estimator"),
              "cutoff": answer["cutoff"], "cutoff_ci": list(ci), "p_no_cutoff": answer.get("p_no_cutoff"),
              "gap_months": int(gap_months), "member_before": window["member_before"], "nonmember_after": after,
              "rule": WINDOW_RULE}
    return overrides, record


def _time_or_none(value: Any):
    from curation.document import utc

    if value in (None, ""):
        return None
    try:
        return utc(str(value))
    except ValueError:  # not a date: the config check reports it
        return None


def check_cutoff_conflicts(sets: list[str], nonmember_month: str | None) -> None:
    """--cutoff-from sets both cutoffs; a --set of either (or of the whole section) or --nonmember-month would
    set them too."""
    if nonmember_month:
        raise CutoffFromError(f"--cutoff-from and --nonmember-month {nonmember_month} (or TIDEMARK_NONMEMBER_MONTH) "
                              "both set cutoffs.nonmember_after; use one")
    clashing = [item for item in sets if item.partition("=")[0].strip() in ("cutoffs", *MEASURED_KEYS)]
    if clashing:
        raise CutoffFromError(f"--cutoff-from sets {' and '.join(MEASURED_KEYS)}; drop --set {', '.join(clashing)} "
                              "or --cutoff-from")


def recipe_value(config: Path | str, sets: list[str], dotted: str) -> Any:
    """A key's value in the recipe file, or in the last `--set` of it (before the config is checked: the
    measured dates are not in it yet)."""
    import yaml

    value: Any = yaml.safe_load(Path(config).read_text()) or {}
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    for item in sets:
        key, sep, raw = item.partition("=")
        if sep and key.strip() == dotted:
            value = yaml.safe_load(raw) if raw.strip() else None
    return value


def measured_cutoffs(config: Path, sets: list[str], cutoff_from: str, source_name: str | None,
                     gap_months: int | None, nonmember_month: str | None) -> tuple[list[str], dict]:
    """--cutoff-from's overrides and manifest record (cutoff_overrides, on the report and the recipe)."""
    check_cutoff_conflicts(sets, nonmember_month)
    report, where = read_cutoff_report(cutoff_from)
    kind = recipe_value(config, sets, "source.kind")
    overrides, record = cutoff_overrides(
        report, kind, source_name, DEFAULT_GAP_MONTHS if gap_months is None else gap_months, report_path=where,
        nonmember_before=recipe_value(config, sets, "cutoffs.nonmember_before"))
    if record["chosen_by"] == "the report's only source" and not source_matches(record["source"], kind):
        log(f"note: the cutoff report's only source is {record['source']!r}, not this recipe's {kind!r}; using it")
    log(f"dates from the measured cutoff of {record['source']!r} ({record['detector']}, {record['estimator']}): "
        f"{record['cutoff']}, CI {record['cutoff_ci']}, p_no_cutoff {record['p_no_cutoff']}; gap "
        f"{record['gap_months']} months -> member_before {record['member_before']}, nonmember_after "
        f"{record['nonmember_after']}")
    return overrides, record


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
    cutoff_from: Optional[str] = typer.Option(
        None, "--cutoff-from", help="Set cutoffs.member_before and cutoffs.nonmember_after from a model's measured "
        "training cutoff: a `tidemark cutoff` output directory or its report.json (local or s3://). Applied as "
        "--set overrides and recorded in the manifest under cutoff_from; not with --nonmember-month or a --set of "
        "those keys."),
    cutoff_source: Optional[str] = typer.Option(
        None, "--cutoff-source", help="With --cutoff-from: the report's source to take (default: the one that "
        "matches source.kind, or the report's only source)."),
    gap_months: Optional[int] = typer.Option(
        None, "--gap-months", min=0, help=f"With --cutoff-from: months left out on each side of the cutoff's "
        f"interval (default {DEFAULT_GAP_MONTHS}): documents near a cutoff are partly in training."),
    drop_rephrased: list[str] = typer.Option(
        [], "--drop-rephrased", help="Drop the non-members a model's corpus holds in other words: the OUT of "
        "`tidemark overlap --semantic` run with a build of this release as --benchmark (repeatable). Its rows join "
        "the release's by id, else by text; flagged members are kept. The dropped rows are in excluded/ (stage "
        "rephrased, reason rephrased_in_corpus) and the manifest records it under drop_rephrased."),
) -> None:
    """Build a versioned membership benchmark (members before a cutoff, non-members after) from a config."""
    from curation.config import ConfigError, load_config
    from jobs.kit import schedule

    set_ = list(set_)
    measured = None
    if cutoff_from is None and (cutoff_source is not None or gap_months is not None):
        raise typer.BadParameter("--cutoff-source and --gap-months go with --cutoff-from")
    if cutoff_from is not None:
        try:
            extra, measured = measured_cutoffs(config, set_, cutoff_from, cutoff_source, gap_months, nonmember_month)
        except CutoffFromError as exc:
            raise typer.BadParameter(str(exc), param_hint="--cutoff-from") from None
        set_ += extra
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
        if measured:
            exc = ConfigError(f"{exc} (with the dates from --cutoff-from: member_before {measured['member_before']}, "
                              f"nonmember_after {measured['nonmember_after']})")
        raise typer.BadParameter(str(exc)) from exc
    from curation.release.rephrased import RephrasedDropError
    from jobs.parts.release.rephrased_overlaps import read_overlaps

    try:  # an OUT that cannot serve is refused before the build; one that joins no row, once the rows are sampled
        overlaps = read_overlaps(drop_rephrased)
        build(cfg, out, overrides=tuple(set_), runner=runner, overwrite=overwrite, skip_existing=skip_existing,
              resume=resume, progress=progress, cutoff_from=measured, rephrased=overlaps)
    except RephrasedDropError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.command("build-benchmark")(build_benchmark)
