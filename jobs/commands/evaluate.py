"""`tidemark evaluate`: read a benchmark → tokenise views (CPU actors) → score (model actor pool, GPU when asked)
→ detectors → metrics, plots and report. The pipeline is Ray Data; everything it runs is Ray-free code in
scoring/, so a small input runs the same stages in this process instead (`--runner`, jobs/plane/local_plane.py).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from typing import Optional

import numpy as np
import typer

from jobs.kit.log import PhaseClock, log
from jobs.kit.options import command, option, progress_option, runner_option
from jobs.kit.served_model import ServedFields
from jobs.kit.text_only import GenerationFields
from jobs.kit.report_out import command_line, run_and_print_report


@dataclass
class EvaluateConfig(GenerationFields, ServedFields):
    benchmark: str = option(help="jsonl or Parquet with `input`, `label` (1 = member), optional `bucket`/`id`; or a "
                            "release dir")
    model: str = option(help="HF causal LM: local dir, hub id, FILE.gguf, DIR::FILE.gguf, or `smollm2`; with "
                        "--api-base, the served model's name")
    out: str = option(help="output directory or s3:// prefix (complete when _SUCCESS is there)")
    ref_model: Optional[str] = option(None, "reference model for the `ref` detector")
    neighbour_model: Optional[str] = option(
        None, "a local masked LM (BERT, RoBERTa, DistilBERT directory) for the `neighbour` detector (Mattern et "
        "al.): score = mean loss of n one-word-swapped neighbours - the passage's loss (loss = mean token NLL, as "
        "`loss` computes it; larger = member). Defaults n=25, dropout 0.7 on the swapped word's embedding; costs "
        "1 + n target passes per passage; neighbours go to OUT/neighbours.parquet. Without it, `all` leaves "
        "`neighbour` out")
    methods: str = option("all", "comma-separated detectors, params with @: `loss,min_k@k=0.1,pac@n=3`, "
                          "`neighbour@n=10`")
    recall_shots: int = option(3, "non-member texts in the ReCaLL prefix (excluded from evaluation)")
    ref_corpus: Optional[str] = option(None, "text/jsonl file or dir: DC-PDD token frequencies")
    calibrate: str = option("accuracy", "threshold objective on a 30% calibration split: accuracy|f1")
    seed: int = option(0, "seed for bootstrap, PAC copies, ReCaLL prefix and calibration split")
    n_bootstrap: int = 1000
    progress: bool = progress_option()
    # rows per part: the unit of work, writing and resume (jobs/plane/part_loop.py)
    shard_size: int = option(1000, "about this many rows per part (jsonl is cut by bytes): each part is read, "
                             "scored and written on the workers and committed with a marker under OUT/_parts/, so "
                             "a restarted job resumes", min=1)
    resume: bool = option(True, "skip committed parts (and a finished job); --no-resume rescores everything")
    requester_pays: bool = option(False, "read an s3:// --benchmark from a requester-pays bucket")
    blind_sample: int = option(20_000, "the blind baseline (text-only classifiers, no model) is fitted on at most "
                               "this many rows: a seeded sample above it, recorded in run.json (its cross-validated "
                               "TF-IDF fits cost ~4.5 s per 1k rows on one core)", min=10)
    set_test: Optional[str] = option(
        None, "a set-level answer for suspect (label 1) vs reference (label 0) sets, e.g. a benchmark's test items vs "
        "items written after the model's cutoff: the one-sided Mann-Whitney U of this detector's scores (name it "
        "before looking: one statistic, one test), whose p-value is a false-positive rate where the two sets are "
        "alike apart from training; the report puts it first, beside the blind baseline")
    compare_to: Optional[str] = option(
        None, "show each AUC beside the same detector's AUC on ORIGINAL: an earlier evaluation's OUT (read from its "
        "metrics.json) or a benchmark (then evaluated first into OUT/original/ with the same model and settings). "
        "For a paraphrased benchmark (`tidemark paraphrase`): report.md gets a table with the change, and "
        "compare_auc.png")
    runner: str = runner_option()
    extra: dict = field(default_factory=dict)


def resolve_methods(spec: str, ref_model: str | None, served=None, neighbour_model: str | None = None):
    """The detectors `--methods` names, less what the job's models cannot serve (ref without --ref-model,
    neighbour without --neighbour-model, the full-distribution ones over an API): left out of `all` (saying so
    where a user may expect it), refused when named."""
    from jobs.kit.served_model import drop_full_distribution
    from scoring.detectors import REGISTRY, parse_methods
    from scoring.detectors.base import InputError

    try:
        methods = parse_methods(spec)
    except InputError as exc:
        raise typer.BadParameter(str(exc)) from None
    named = spec not in ("all", None)
    if not named:
        opt_in = sorted(n for n, d in REGISTRY.items() if d.opt_in and d.input == "token_stats" and n != "codec")
        typer.echo(f"[methods] run only when named: {', '.join(opt_in)} (con_recall consumes labelled rows as its "
                   "prefixes; gradnorm costs a backward pass per text)", err=True)
    if any(m.name == "codec" for m in methods):
        raise typer.BadParameter("codec is a set-level test with its own context pool: run `tidemark "
                                 "dataset-inference --method codec --suspect SET`")
    for name, model, flag in (("ref", ref_model, "--ref-model"), ("neighbour", neighbour_model, "--neighbour-model")):
        if model or not any(m.name == name for m in methods):
            continue
        if named:
            raise typer.BadParameter(f"detector {name!r} needs {flag}")
        if name == "neighbour":
            typer.echo("[methods] neighbour left out of --methods all: it needs --neighbour-model PATH, a local "
                       "masked LM (BERT, RoBERTa, DistilBERT) to make each passage's neighbours", err=True)
        methods = [m for m in methods if m.name != name]
    return drop_full_distribution(methods, spec, served)


def token_freq_from_corpus(model: str, ref_corpus: str) -> np.ndarray:
    """DC-PDD's reference frequencies from a corpus (--ref-corpus), streamed: only the counts are kept. Without
    one, the frequencies come from the benchmark's own token ids, counted by the survey on the workers
    (label-free, so it leaks no membership; a large general corpus is better and is what the paper used)."""
    from curation.io.corpus_files import iter_texts
    from scoring.detectors.dc_pdd import count_tokens
    from scoring.lm.model import load_tokenizer

    tok = load_tokenizer(model)
    return count_tokens((tok(t)["input_ids"] for t in iter_texts(ref_corpus)), len(tok))


def evaluate_spec(cfg: EvaluateConfig, views: tuple[str, ...], served=None):
    """What evaluate asks of the scoring pool (the plane adds the prefixes its survey chooses)."""
    from jobs.plane.scoring_pool import ModelBranch

    branches = [served.branch(views) if served else ModelBranch(cfg.model, tuple(views))]
    if cfg.ref_model:
        branches.append(ModelBranch(cfg.ref_model, ("original",), rename_original="ref"))
    return cfg.pool_spec(branches, neighbour_model=cfg.neighbour_model)


def run_evaluate(cfg: EvaluateConfig) -> dict:
    """Plan on the driver, score and detect on the workers (jobs/plane/part_loop.py), then metrics over the score
    columns only: the driver's memory does not grow with token stats. The config is read here and resolved into
    what the layers below take (the pool's spec, the parts' fingerprint, the runner, the blind baseline's source):
    nothing below reads it or calls back up for it."""
    import pyarrow.compute as pc

    from jobs.kit import identity as sharding
    from jobs.kit.blind_baseline import BlindBaselineJob
    from jobs.kit.text_only_report import write_blind
    from jobs.plane.benchmark_parts import input_identity
    from jobs.plane.part_loop import plan_benchmark, score_planned
    from jobs.plane.part_store import read_parts
    from jobs.kit.runtime import start_runner
    from jobs.plane.local_plane import local_input_bytes
    from jobs.kit.redact import redact
    from jobs.kit.served_model import run_record
    from jobs.kit.evaluation_files import save_token_freq, write_outputs
    from scoring.stats.evaluation import compute_metrics
    from scoring.stats.set_test import resolve_column, suspect_vs_reference
    from scoring.lm.views import ORIGINAL, PREFIXED

    if cfg.api_logprobs == "none":  # a server that answers only in text: the generation detectors
        from jobs.commands.evaluate_text_only import run_text_only

        return run_text_only(cfg)
    if cfg.trace_index:
        raise ValueError("--trace-index traces generated text: it needs --api-logprobs none (a log-probability run "
                         "generates nothing; trace a text file with `tidemark trace --texts`)")
    t0 = time.perf_counter()
    # a local directory or an s3:// prefix, and where the driver makes its files (OUT itself, or a staging dir for
    # S3); `_SUCCESS` is kept until the job knows whether OUT already holds this very job's finished output
    dest, out = sharding.open_output(cfg.out, clear=False)
    phases = PhaseClock()  # wall time per stage, in run.json: where a slow job spends its time
    served = cfg.served()  # a served model is probed once, before anything else (a few requests)
    methods = resolve_methods(cfg.methods, cfg.ref_model, served, cfg.neighbour_model)
    needs = sorted({v for m in methods for v in m.needs})
    views = (ORIGINAL, *[v for v in needs if v not in ("ref", "token_freq")])
    if cfg.set_test:
        try:
            resolve_column(cfg.set_test, methods)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    text_only = {f.name for f in fields(GenerationFields)} | {"api_chat"}  # no meaning here; nor in the identity
    job_fp = sharding.json_digest({"settings": {k: v for k, v in asdict(cfg).items()
                                            if k not in sharding.JOB_FIELDS_IGNORED and k not in text_only
                                            and not (k == "set_test" and v is None)},
                               "model": served.identity() if served else sharding.model_identity(cfg.model),
                               "ref_model": sharding.model_identity(cfg.ref_model),
                               "ref_corpus": sharding.model_identity(cfg.ref_corpus) if cfg.ref_corpus else None,
                               "input": input_identity(cfg.benchmark, cfg.requester_pays),
                               "tool": sharding.tool_version(), "plane": 2})
    done = sharding.completed_result(dest, job_fp, out) if cfg.resume else None
    if done is not None:  # the same job already finished here: nothing to do
        log(f"{dest.uri} already holds this job's complete output (_SUCCESS); nothing to do")
        return done
    dest.clear_complete()  # from here on, this location is not complete until the new marker is written
    phases.lap("plan")
    ref_freq = None
    if "token_freq" in needs and cfg.ref_corpus:
        ref_freq = token_freq_from_corpus(cfg.tokenizer_path, cfg.ref_corpus)
    runner, why = start_runner(cfg.runner, None if cfg.requester_pays else local_input_bytes(cfg.benchmark),
                               actors=cfg.actors, gpus_per_actor=cfg.gpus_per_actor)
    if runner.name == "ray":
        phases.lap("Ray start-up (or connect)")
    blind: dict = {}
    try:
        plan = plan_benchmark(
            benchmark=str(cfg.benchmark), requester_pays=cfg.requester_pays, rows_per_part=cfg.shard_size,
            methods=methods, seed=cfg.seed, runner=runner, prefix_shots=cfg.recall_shots if PREFIXED in views else 0,
            count_tokens_of=cfg.tokenizer_path if "token_freq" in needs else None, token_freq=ref_freq,
            progress=cfg.progress)
        # the blind baseline needs no model: a low-priority process reads a sample while the pool scores
        blind["job"] = BlindBaselineJob.from_source(
            {"benchmark": str(cfg.benchmark), "requester_pays": cfg.requester_pays, "rows_per_part": cfg.shard_size,
             "prefix_ids": list(plan.prefix_ids), "cap": cfg.blind_sample}, cfg.seed, cfg.benchmark)
        freq = None if plan.token_freq is None else sharding.sha256_bytes(
            np.ascontiguousarray(plan.token_freq).tobytes())
        parts_fp = sharding.json_digest({"scoring": sharding.scoring_fingerprint(cfg, views, plan.prefix_text),
                                         "served": served.identity() if served else None,
                                         "methods": [m.column for m in methods], "prefix_ids": list(plan.prefix_ids),
                                         "token_freq": freq, "plane": 2})
        run = score_planned(plan, dest=dest, spec=evaluate_spec(cfg, views, served), methods=methods,
                            fingerprint=parts_fp, runner=runner, resume=cfg.resume, progress=cfg.progress)
    except BaseException:
        if "job" in blind:
            blind["job"].close()  # stop the helper now rather than wait for it at exit
        raise
    phases.lap("survey, score, detect and write (workers)" if runner.name == "ray" else
               "survey, score, detect and write (local runner)")
    ledger = run.ledger
    counts = {"in": ledger.rows_in, "scored": ledger.rows_out, "quarantined": ledger.quarantined,
              "recall_prefix": len(run.prefix_ids)}
    ledger.check("evaluate")
    columns = ["id", "label", "bucket", "in_eval", *[m.column for m in methods]]
    scores = read_parts(dest, "scores.parquet", columns)  # ~100 bytes a row: all that crosses over
    if scores is None or not scores.num_rows:
        raise RuntimeError(f"no row could be scored; see {dest.child('quarantine.parquet')}")
    counts["recall_prefix"] = int(pc.sum(pc.invert(scores.column("in_eval"))).as_py() or 0)
    if run.token_freq is not None and "token_freq" in needs:
        save_token_freq(run.token_freq, out / "token_freq.parquet")
    phases.lap("read score columns")
    metrics = compute_metrics(scores, methods, seed=cfg.seed, n_bootstrap=cfg.n_bootstrap, calibrate=cfg.calibrate,
                              counts=counts)
    compare = None
    if cfg.compare_to:
        metrics, compare = compare_with_original(cfg, metrics, dest)
    phases.lap("metrics")
    failed = set()
    if ledger.reasons and run.stats["scored"]:
        q = read_parts(dest, "quarantine.parquet", ["id", "stage"])
        failed = {i for i, st in zip(q.column("id").to_pylist(), q.column("stage").to_pylist()) if st == "score"}
    blind_res = blind["job"].result_excluding(failed) if "job" in blind else None
    phases.lap("blind baseline (waiting for it)")
    write_blind(out, blind_res)
    set_test = suspect_vs_reference(scores, resolve_column(cfg.set_test, methods)) if cfg.set_test else None
    run_info = redact({"benchmark": str(cfg.benchmark), "model": cfg.model, "ref_model": cfg.ref_model,
                       "config": asdict(cfg), "counts": counts, "ledger": ledger.to_dict(), "views": list(views),
                       "recall_prefix_ids": sorted(run.recall_prefix_ids),
                       "seconds": round(time.perf_counter() - t0, 2),
                       "con_recall_prefix_ids": run.labelled_prefix_ids or None,
                       "parts": run.stats, "survey": run.survey, "runner": {"used": runner.name, "why": why},
                       "fingerprint": job_fp,
                       "blind_baseline": blind_res["source"] if blind_res else None,
                       "blind_baseline_sample": (blind_res or {}).get("sample"), "phases_s": phases.laps,
                       "served_model": run_record(served, run.stats.get("api")),
                       "neighbours": neighbour_record(cfg.neighbour_model, methods), "compare_to": compare,
                       "set_test": set_test,
                       "command": command_line()})
    report = write_outputs(out, scores, metrics, methods, run_info, blind_res["auc"] if blind_res else None,
                           write_scores=False)
    phases.lap("report and plots")
    sharding.publish(dest, out, {"job": "evaluate", "fingerprint": job_fp, "counts": counts, "run_id": run.run_id})
    return {"report": str(report), "metrics": metrics, "counts": counts, "seconds": run_info["seconds"],
            "blind": blind_res["auc"] if blind_res else None, "phases_s": phases.laps}


def compare_with_original(cfg: EvaluateConfig, metrics: list[dict], dest) -> tuple[list[dict], dict]:
    """metrics with the original's AUC beside each (scoring/stats/comparison.py). --compare-to names an earlier
    evaluation's output (it has metrics.json) or a benchmark, which is then evaluated first, with this run's
    model and settings, into OUT/original/ (resumable like any evaluation)."""
    from dataclasses import replace

    from curation.io.outputs import Location
    from scoring.stats.comparison import attach_original, original_metrics

    source = Location(cfg.compare_to)
    if not source.exists("metrics.json"):
        sub = dest.child("original")
        log(f"--compare-to {cfg.compare_to}: no metrics.json there, so it is read as a benchmark and "
                      f"evaluated into {sub} with the same model and settings")
        run_evaluate(replace(cfg, benchmark=cfg.compare_to, out=sub, compare_to=None))
        source = Location(sub)
    records = attach_original(metrics, original_metrics(source, cfg.compare_to))
    return records, {"original": cfg.compare_to, "metrics": source.child("metrics.json"), "plot": True}


def neighbour_record(mlm: str | None, methods) -> dict | None:
    """run.json's `neighbours`: the MLM and the settings the neighbour columns were made with."""
    from scoring.lm.neighbours import CANDIDATES_PER_SLOT

    used = [m for m in methods if m.name == "neighbour"]
    if not used:
        return None
    return {"mlm": mlm, "candidates_per_slot": CANDIDATES_PER_SLOT, "file": "neighbours.parquet",
            "columns": {m.column: dict(m.params) for m in used},
            "cost": "1 + n target passes per passage, plus one MLM pass per one-token word"}


def register(app: typer.Typer) -> None:
    app.command("evaluate")(command(
        EvaluateConfig, lambda cfg: run_and_print_report(run_evaluate, cfg),
        doc="Score a membership benchmark with every detector from one forward pass per view, on a Ray actor pool."))
