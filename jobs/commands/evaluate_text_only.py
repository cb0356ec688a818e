"""`tidemark evaluate --api-logprobs none`: evaluate's driver for a model that answers only in text.

    probe (what the server honours) → plan parts → survey (ids, and each part's request plan) → the plan printed
    and checked against --max-requests / --max-tokens → the pool asks each admitted part's requests
    (jobs/parts/text_only/generation.py: journal, generations, scores, quarantine per part) → metrics over the score
    columns, the blind baseline, the set test → report (→ `tidemark trace` of the samples with --trace-index).

The config is read here, once: the probe, the planner and the pool get a TextOnlyRun (jobs/kit/text_only.py) and
the runner; the parts below are jobs/parts/text_only/evaluation.py. The driver holds plans and score columns, never
generations; the report's examples are read back for a few ids. Parts the budget does not admit are not started:
the job commits what it did and stops (exit 2), and a rerun with a raised budget does only the rest.
"""
from __future__ import annotations

import time
from dataclasses import asdict

from jobs.kit.log import PhaseClock, log


def run_text_only(cfg) -> dict:
    from jobs.kit import identity as ids
    from jobs.kit.blind_baseline import BlindBaselineJob
    from jobs.kit.evaluation_files import write_outputs
    from jobs.kit.redact import redact
    from jobs.kit.report_out import command_line
    from jobs.kit.runtime import start_driver
    from jobs.kit.text_only import TextOnlyRun
    from jobs.kit.text_only_report import examples, set_test, write_blind
    from jobs.plane.benchmark_parts import input_identity
    from jobs.parts.text_only.evaluation import (TextOnlySetup, dry_run_report, generate_planned, generation_record,
                                                 plan_generation, text_only_methods)
    from jobs.plane.part_store import read_parts
    from jobs.plane.runners import RAY
    from jobs.plane.survey import survey_json
    from scoring.stats.evaluation import compute_metrics

    t0 = time.perf_counter()
    dest, out = ids.open_output(cfg.out, clear=False)
    phases = PhaseClock()
    opts = TextOnlyRun.of(cfg)  # what the layers below read; they never see cfg
    methods = text_only_methods(cfg.methods, cfg.set_test)
    setup = TextOnlySetup.probe(opts, methods)
    job_fp = setup.fingerprint(methods, input_identity(cfg.benchmark, cfg.requester_pays))
    done = ids.completed_result(dest, job_fp, out) if cfg.resume else None
    if done is not None:
        log(f"{dest.uri} already holds this job's complete output (_SUCCESS); nothing to generate")
        if cfg.trace_index:
            done["trace"] = trace_generations(cfg.trace_index, dest, cfg.progress)
        return done
    dest.clear_complete()
    start_driver()
    runner = RAY  # a served model's requests run on Ray's actor pool
    phases.lap("probe and Ray start-up")
    plan = plan_generation(opts, setup, str(cfg.benchmark), dest, job_fp, phases, runner=runner,
                           requester_pays=cfg.requester_pays)
    if cfg.dry_run:
        return dry_run_report(out, plan.left, setup.model, methods, phases)
    # once the budget admits every part: the blind baseline needs no model, and runs beside the generation
    blind = BlindBaselineJob.from_source(
        {"benchmark": str(cfg.benchmark), "requester_pays": cfg.requester_pays, "rows_per_part": cfg.shard_size,
         "prefix_ids": [], "cap": cfg.blind_sample}, cfg.seed, cfg.benchmark) if plan.all_admitted else None
    try:
        gen = generate_planned(opts, setup, methods, plan, dest, runner=runner)
    except BaseException:
        if blind is not None:
            blind.close()
        raise
    run, survey = gen["run"], gen["survey"]
    phases.lap("generate, score and write (workers)")
    ledger, stats = run["ledger"], run["stats"]
    counts = {"in": ledger.rows_in, "scored": ledger.rows_out, "quarantined": ledger.quarantined, "recall_prefix": 0}
    scores = read_parts(dest, "scores.parquet", ["id", "label", "bucket", "in_eval", *[m.column for m in methods]])
    if scores is None or not scores.num_rows:
        raise RuntimeError(f"no row could be scored; see {dest.child('quarantine.parquet')}")
    metrics = compute_metrics(scores, methods, seed=cfg.seed, n_bootstrap=cfg.n_bootstrap, calibrate=cfg.calibrate,
                              counts=counts)
    phases.lap("metrics")
    traced = trace_generations(cfg.trace_index, dest, cfg.progress) if cfg.trace_index else None
    if traced:
        phases.lap("trace (workers)")
    blind_res = blind.result_excluding(set(run["quarantined_ids"]))
    phases.lap("blind baseline (waiting for it)")
    write_blind(out, blind_res)
    run_info = redact({"benchmark": str(cfg.benchmark), "model": cfg.model, "config": asdict(cfg), "counts": counts,
                       "ledger": ledger.to_dict(), "mode": "text-only", "seconds": round(time.perf_counter() - t0, 2),
                       "parts": stats, "survey": survey_json(survey), "fingerprint": job_fp,
                       "blind_baseline": blind_res["source"] if blind_res else None,
                       "blind_baseline_sample": (blind_res or {}).get("sample"), "phases_s": phases.laps,
                       "served_model": setup.served_record(), "generation": generation_record(setup, gen),
                       "set_test": set_test(scores, cfg.set_test, methods),
                       "examples": examples(dest, scores, methods), "trace": traced, "command": command_line()})
    report = write_outputs(out, scores, metrics, methods, run_info, blind_res["auc"] if blind_res else None,
                           write_scores=False)
    phases.lap("report and plots")
    ids.publish(dest, out, {"job": "evaluate", "fingerprint": job_fp, "counts": counts, "run_id": run["run_id"]})
    return {"report": str(report), "metrics": metrics, "counts": counts, "seconds": run_info["seconds"],
            "blind": blind_res["auc"] if blind_res else None, "phases_s": phases.laps, "trace": traced}


def trace_generations(index: str, dest, progress: bool) -> dict:
    """`tidemark trace` of this run's generated samples against `index` (--trace-index), into OUT/trace/ (its own
    `_SUCCESS`); returns what run.json records of it."""
    from jobs.commands.trace import TraceConfig, run_trace

    res = run_trace(TraceConfig(index=index, generations=dest.uri, out=dest.child("trace"), runner="ray",
                                progress=progress))
    s = res["summary"]
    return {"index": index, "out": "trace/", "texts": s["counts"]["traced"],
            "texts_with_span": s["summary"]["texts_with_span"], "spans": s["summary"]["spans"],
            "min_words": s["settings"]["min_words"], "seconds": s["seconds"]}
