"""`tidemark cutoff`: up to when did this model read each source? An effective training cutoff, measured.

    dated texts (--texts: jsonl/Parquet with text and date, or a release; or --config RECIPE --months: built from
    the sources, jobs/commands/cutoff_inputs.py) ──▶ staging on the workers (jobs/parts/cutoff/dated_rows.py: dates to
    months, bad rows quarantined) ──▶ the scoring plane `evaluate` uses (local weights, --api-base, or a text-only
    server with --api-logprobs none; --ref-model: a second pass) ──▶ rows.parquet (id, date, period, source, group,
    one score per detector) ──▶ the estimators, pure functions of that table (scoring/cutoff/) ──▶ report.json,
    curve.png, report.md, report.html, run.json.

The driver plans, joins the score columns with the dates (about 100 bytes a row, what evaluate reads too) and
estimates; it never holds texts or token stats. `--from-rows` recomputes the answers from a saved rows.parquet
without the model (another estimator, alpha, or resampling settings).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Optional

import typer

from jobs.kit.options import command, option, progress_option, runner_option
from jobs.kit.report_out import run_and_print_report
from jobs.kit.served_model import ServedFields
from jobs.kit.text_only import GenerationFields

DEFAULT_METHODS = {"log_prob": "loss,min_k_pp", "text_only": "ngram_coverage"}
MEANING = ("p_no_cutoff is the chance of a drop in member-likeness at least this large at some month of the range "
           "if the model had no cutoff inside it (new documents: a linear trend allowed on both sides; versions: no "
           "month's versions more familiar than the others). It is not the probability that the date is right. "
           "cutoff_ci is a bootstrap interval over the documents (or, for versions, the groups) that were scored.")


@dataclass
class CutoffConfig(GenerationFields, ServedFields):
    out: str = option(help="output directory or s3:// prefix (report.json, rows.parquet, curve.png, report.html; "
                      "complete when _SUCCESS is there)")
    texts: Optional[str] = option(
        None, "dated texts: jsonl or Parquet (local or s3://; a file or a directory of them) with `text` and `date` "
        "(ISO date, date-time or YYYY-MM) and optional `id`, `source` (one answer per source) and `group` (the same "
        "resource at several dates: the versions estimator); or a build-benchmark release (its `input` and "
        "`created_at`)")
    model: Optional[str] = option(None, "HF causal LM (local dir, hub id, .gguf, smollm2); with --api-base, the "
                                  "served model's name")
    config: Optional[str] = option(
        None, "build the dated set from a build-benchmark recipe's source instead of --texts (needs --months): Stack "
        "Exchange and arXiv posts by creation month, Wikipedia articles by creation month (their text as of the end "
        "of that month), or with --versions the same Wikipedia articles as of each month's end")
    months: Optional[str] = option(
        None, "FIRST..LAST, e.g. 2016-01..2024-06: the months to build (--config), or to keep (--texts: rows "
        "outside are quarantined as outside_months)")
    overrides: Optional[list[str]] = option(None, "with --config: override a recipe key, as build-benchmark --set "
                                            "(repeatable)", flags=("--set",))
    per_month: int = option(200, "with --config: documents per month and length bucket (seeded), at most", min=1)
    versions: bool = option(False, "with --config of a Wikipedia recipe: the same articles' revisions as of each "
                            "month's end (Dated Data's WikiSpan): the versions estimator")
    articles: int = option(200, "with --versions: articles, created before the range, chosen in a seeded order",
                           min=2)
    words: int = option(256, "with --versions: the first N words of each version (the same span in every month)",
                        min=8)
    from_rows: Optional[str] = option(
        None, "recompute the answers from an earlier run's rows.parquet (or its OUT), without the model")
    ref_model: Optional[str] = option(
        None, "a reference model (one known to predate the range, or any other): the estimate reads target minus "
        "reference for every detector, which removes what is merely harder or newer text for every model")
    methods: Optional[str] = option(
        None, "detectors, comma-separated (default: loss,min_k_pp; with --api-logprobs none, ngram_coverage); the "
        "first one's answer is report.json's top level")
    estimator: str = option("auto", "auto (versions where every row of a source has a group, else new_documents), "
                            "versions, or new_documents")
    normalisation: str = option("center", "versions: each group's scores minus their mean (center), or also over "
                                "their standard deviation (zscore)")
    alpha: float = option(0.01, "a cutoff is reported where p_no_cutoff < alpha (a wrong date costs more than a "
                          "missed one: 0.01 by default)", min=1e-9, max=0.5)
    min_side: int = option(3, "new documents: months with documents on each side of a break", min=2)
    permutations: int = option(9999, "resamples for p_no_cutoff (p >= 1/(permutations+1))", min=99)
    bootstrap: int = option(1000, "resamples for the CIs", min=50)
    seed: int = option(0, "seed for the resampling (and the dated set's sampling with --config)")
    shard_size: int = option(1000, "about this many rows per part: the unit of work, writing and resume", min=1)
    resume: bool = option(True, "skip committed parts; --no-resume rescores everything")
    requester_pays: bool = option(False, "read an s3:// --texts from a requester-pays bucket")
    runner: str = runner_option()
    progress: bool = progress_option()

    def settings(self):
        from scoring.cutoff.breakpoint import CutoffSettings

        return CutoffSettings(min_side=self.min_side, permutations=self.permutations, bootstrap=self.bootstrap,
                              alpha=self.alpha, seed=self.seed)

    @property
    def text_only(self) -> bool:
        return self.api_logprobs == "none"


def cutoff_methods(cfg: CutoffConfig, served=None) -> list:
    """The detectors to run: refused by name where they need labels (a cutoff job has none) or what the mode
    cannot give."""
    from jobs.commands.evaluate import resolve_methods
    from scoring.detectors.base import InputError, parse_methods

    spec = cfg.methods or DEFAULT_METHODS["text_only" if cfg.text_only else "log_prob"]
    try:
        methods = parse_methods(spec, input="generations") if cfg.text_only else resolve_methods(spec, None, served)
    except InputError as exc:
        raise typer.BadParameter(str(exc), param_hint="--methods") from None
    labelled = [m.column for m in methods if any(v.startswith(("prefixed", "codec:")) for v in m.needs)]
    if labelled:
        raise typer.BadParameter(f"{', '.join(labelled)} need texts known to be non-members (their prefix or "
                                 "context), which a cutoff job does not have", param_hint="--methods")
    return methods


def check(cfg: CutoffConfig) -> None:
    if cfg.from_rows:
        return
    if not cfg.model:
        raise typer.BadParameter("give --model (or --from-rows to recompute from saved scores)")
    if bool(cfg.texts) == bool(cfg.config):
        raise typer.BadParameter("give exactly one of --texts (dated texts) and --config (a recipe to build them)")
    if cfg.config and not cfg.months:
        raise typer.BadParameter("--config needs --months FIRST..LAST")
    if cfg.versions and not cfg.config:
        raise typer.BadParameter("--versions builds Wikipedia versions from a recipe: give --config")
    if cfg.overrides and not cfg.config:
        raise typer.BadParameter("--set overrides a recipe's keys: it needs --config (with --texts there is none)")
    if cfg.ref_model and cfg.text_only:
        raise typer.BadParameter("--ref-model needs log-probabilities; a text-only run (--api-logprobs none) has none")


def run_cutoff(cfg: CutoffConfig) -> dict:
    from jobs.kit.identity import open_output

    check(cfg)
    if cfg.from_rows:
        return _estimate_and_write(cfg, *open_output(cfg.out), rows=_read_rows(cfg.from_rows), counts=None,
                                   run={"from_rows": cfg.from_rows}, t0=time.perf_counter())
    return _measure(cfg)


def _measure(cfg: CutoffConfig) -> dict:
    from curation.io.atomic import atomic_write_parquet
    from jobs.commands.cutoff_inputs import dated_input
    from jobs.kit.identity import open_output
    from jobs.kit.log import PhaseClock
    from jobs.kit.runtime import start_runner
    from jobs.kit.served_model import run_record
    from jobs.kit.text_only import TextOnlyRun
    from jobs.parts.cutoff.scoring import SCORING, SCORING_REF, assemble, score_log_prob, score_text_only
    from jobs.parts.cutoff.dated_rows import run_staging, staging_summary
    from jobs.plane.local_plane import local_input_bytes
    from scoring.cutoff.periods import DateError, parse_month_range

    t0, phases = time.perf_counter(), PhaseClock()
    try:
        months = parse_month_range(cfg.months) if cfg.months else None
    except DateError as exc:
        raise typer.BadParameter(str(exc), param_hint="--months") from None
    served = None if cfg.text_only else cfg.served()  # probed once, before any work
    methods = cutoff_methods(cfg, served)
    columns = [m.column for m in methods]
    dest, out = open_output(cfg.out)
    dated, built = dated_input(cfg, dest, months)
    phases.lap("plan" if built is None else "dated set (built from the recipe)")
    runner, why = start_runner(cfg.runner, None if cfg.requester_pays else local_input_bytes(dated),
                               actors=cfg.actors, gpus_per_actor=cfg.gpus_per_actor)
    if runner.name == "ray":
        phases.lap("Ray start-up (or connect)")
    staged = run_staging(dated, dest.uri, rows_per_part=cfg.shard_size, requester_pays=cfg.requester_pays,
                         months=months if cfg.texts else None, runner=runner, progress=cfg.progress)
    staging = staging_summary(staged)
    phases.lap("staging (workers)")
    scoring, served_info = {}, {}
    if cfg.text_only:
        from jobs.parts.text_only.evaluation import generation_record

        gen = score_text_only(TextOnlyRun.of(cfg), methods, dest, phases, runner)
        if "dry_run" in gen:  # the plan alone (plan.md), as evaluate's text-only dry run writes it
            from jobs.parts.text_only.evaluation import dry_run_report

            return dry_run_report(out, gen["dry_run"], gen["setup"].model, methods, phases)
        scoring["target"] = gen["run"]["stats"]
        # what evaluate's text-only run.json records: the server, what it honours, the plan and what was spent
        served_info = {"served_model": gen["setup"].served_record(),
                       "generation": generation_record(gen["setup"], gen)}
    else:
        scoring["target"] = score_log_prob(cfg, methods, dest, model=cfg.model, served=served, sub=SCORING,
                                           runner=runner).stats
        served_info = {"served_model": run_record(served, scoring["target"].get("api"))}
        if cfg.ref_model:
            scoring["reference"] = score_log_prob(cfg, methods, dest, model=cfg.ref_model, served=None,
                                                  sub=SCORING_REF, runner=runner).stats
    phases.lap("score (workers)" if runner.name == "ray" else "score (local runner)")
    rows, quarantine, counts = assemble(dest, columns, staging, reference=bool(cfg.ref_model))
    rows_path, q_path = out / "rows.parquet", out / "quarantine.parquet"
    atomic_write_parquet(rows, rows_path)
    atomic_write_parquet(quarantine, q_path)
    phases.lap("rows.parquet")
    run = {"texts": cfg.texts, "dated_set": built, "staging": staging, "scoring": scoring, **served_info,
           "runner": {"used": runner.name, "why": why}}
    return _estimate_and_write(cfg, dest, out, rows=rows, counts=counts, run=run, t0=t0, dated=dated, phases=phases)


def _estimate_and_write(cfg: CutoffConfig, dest, out, *, rows, counts, run: dict, t0: float, dated=None,
                        phases=None) -> dict:
    from jobs.kit.identity import publish
    from jobs.kit.redact import redact
    from jobs.kit.report_out import command_line, write_html
    from jobs.parts.cutoff.dated_rows import describe_input
    from scoring.cutoff.estimate import estimate_table, score_columns
    from scoring.reports.cutoff_page import plot_curve, report_markdown, report_page

    columns = score_columns(rows)
    if cfg.methods and cfg.from_rows:  # recomputing: the columns asked for, in the order asked
        columns = [c.strip() for c in cfg.methods.split(",") if c.strip()]
        missing = [c for c in columns if c not in rows.column_names]
        if missing:
            raise typer.BadParameter(f"{missing} are not score columns of {cfg.from_rows} (it has "
                                     f"{score_columns(rows)})", param_hint="--methods")
    try:
        answers = estimate_table(rows, columns=columns, estimator=cfg.estimator, settings=cfg.settings(),
                                 normalisation=cfg.normalisation)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if phases is not None:
        phases.lap("estimates")
    report = {**answers, "model": cfg.model, "ref_model": cfg.ref_model, "meaning": MEANING,
              "inputs": {**(describe_input(dated) if dated else {"rows": cfg.from_rows}), "months": cfg.months},
              "counts": counts, "seconds": round(time.perf_counter() - t0, 2)}
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    (out / "curve.png").write_bytes(plot_curve(report))
    (out / "report.md").write_text(report_markdown(report))
    write_html(out, report_page(report, out))
    if phases is not None:
        phases.lap("report and plots")
    run_info = redact({"job": "cutoff", "config": asdict(cfg), "counts": counts, **run,
                       **({"phases_s": phases.laps} if phases is not None else {}),
                       "seconds": report["seconds"], "command": command_line()})
    (out / "run.json").write_text(json.dumps(run_info, indent=2, default=str))
    publish(dest, out, {"job": "cutoff", "cutoff": report["cutoff"], "counts": counts})
    return {"report": str(out / "report.md"), "json": str(out / "report.json"), "cutoff": report["cutoff"],
            "cutoff_ci": report["cutoff_ci"], "p_no_cutoff": report["p_no_cutoff"], "seconds": report["seconds"]}


def _read_rows(spec: str):
    """rows.parquet of an earlier run: the file, or the OUT that holds it (local or s3://)."""
    import io

    import pyarrow.parquet as pq

    from curation.io.outputs import Location

    name = spec if spec.endswith(".parquet") else spec.rstrip("/") + "/rows.parquet"
    parent, _, leaf = name.rpartition("/")
    loc = Location(parent or ".")
    if not loc.exists(leaf):
        raise FileNotFoundError(f"--from-rows: {name} does not exist")
    return pq.read_table(io.BytesIO(loc.read_bytes(leaf)))


def register(app: typer.Typer) -> None:
    app.command("cutoff")(command(
        CutoffConfig, lambda cfg: run_and_print_report(run_cutoff, cfg),
        doc="Measure when a model stopped reading each source: its effective training cutoff from dated texts "
            "(member-likeness by month: a step down where training stopped, or the most familiar month of the "
            "same documents' versions), with a bootstrap CI and a permutation p-value; report.json feeds "
            "build-benchmark --cutoff-from."))
