"""`tidemark evaluate --api-logprobs none`: a benchmark scored by a model that answers only in text.

    probe (what the server honours) → plan parts → survey (ids, and each part's request plan) → the plan printed
    and checked against --max-requests / --max-tokens → the pool asks each admitted part's requests
    (jobs/parts/generation_parts.py: journal, generations, scores, quarantine per part) → metrics over the score
    columns, the blind baseline, the set test → report.

The driver holds plans and score columns, never generations; the report's examples are read back for a few ids.
Parts the budget does not admit are not started: the job commits what it did and stops (exit 2), and a rerun
with a raised budget does only the rest.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from jobs.kit.log import PhaseClock, log
from scoring.generation.runner import BudgetExceeded


def run_text_only(cfg) -> dict:
    from jobs.kit import identity as ids
    from jobs.kit.blind_baseline import BlindBaselineJob
    from jobs.kit.evaluation_files import write_outputs
    from jobs.kit.redact import redact
    from jobs.kit.report_out import command_line
    from jobs.kit.runtime import start_driver
    from jobs.plane.part_store import read_parts
    from jobs.plane.survey import survey_json
    from scoring.stats.evaluation import compute_metrics

    t0 = time.perf_counter()
    dest, out = ids.open_output(cfg.out, clear=False)
    phases = PhaseClock()
    methods = text_only_methods(cfg)
    setup = TextOnlySetup.probe(cfg, methods)
    job_fp = setup.fingerprint(cfg, methods, _input_identity(cfg))
    done = ids.completed_result(dest, job_fp, out) if cfg.resume else None
    if done is not None:
        log(f"{dest.uri} already holds this job's complete output (_SUCCESS); nothing to generate")
        if cfg.trace_index:
            done["trace"] = trace_generations(cfg, dest)
        return done
    dest.clear_complete()
    start_driver()
    phases.lap("probe and Ray start-up")
    blind = {}

    def start_blind() -> None:  # once the budget admits every part: the blind baseline needs no model
        blind["job"] = BlindBaselineJob.from_source(
            {"benchmark": str(cfg.benchmark), "requester_pays": cfg.requester_pays, "rows_per_part": cfg.shard_size,
             "prefix_ids": [], "cap": cfg.blind_sample}, cfg.seed, cfg.benchmark)

    try:
        gen = generate_benchmark(cfg, setup, methods, str(cfg.benchmark), dest, job_fp, phases,
                                 requester_pays=cfg.requester_pays, on_admitted=start_blind)
    except BaseException:
        if "job" in blind:
            blind["job"].close()
        raise
    if "dry_run" in gen:
        return dry_run_report(out, gen["dry_run"], setup.model, methods, phases)
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
    traced = trace_generations(cfg, dest) if cfg.trace_index else None
    if traced:
        phases.lap("trace (workers)")
    blind_res = blind["job"].result_excluding(set(run["quarantined_ids"]))
    phases.lap("blind baseline (waiting for it)")
    from jobs.kit.text_only_report import examples, set_test, write_blind

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


def trace_generations(cfg, dest) -> dict:
    """`tidemark trace` of this run's generated samples against --trace-index, into OUT/trace/ (its own
    `_SUCCESS`); returns what run.json records of it."""
    from jobs.commands.trace import TraceConfig, run_trace

    res = run_trace(TraceConfig(index=cfg.trace_index, generations=dest.uri, out=dest.child("trace"),
                                runner="ray", progress=cfg.progress))
    s = res["summary"]
    return {"index": cfg.trace_index, "out": "trace/", "texts": s["counts"]["traced"],
            "texts_with_span": s["summary"]["texts_with_span"], "spans": s["summary"]["spans"],
            "min_words": s["settings"]["min_words"], "seconds": s["seconds"]}


@dataclass(frozen=True)
class TextOnlySetup:
    """What the probe settled before anything is planned: the server's model, the prompts, the sampling settings,
    the request kinds the methods need, and whether DE-COP's paraphrases are made locally."""

    model: object  # jobs.kit.text_only.TextOnlyModel
    prompts: dict
    settings: object  # scoring.generation.kinds.Settings
    kinds: tuple
    local_paraphrases: bool
    paraphrases: str | None

    @classmethod
    def probe(cls, cfg, methods) -> "TextOnlySetup":
        from jobs.kit.text_only import check_methods, text_only_model
        from scoring.generation.prompts import load_prompts
        from scoring.generation.scores import kinds_of

        model = text_only_model(cfg)
        check_methods(methods, model)
        prompts = load_prompts(cfg.prompts)
        log(f"server: {model.api.base}/{model.endpoint} honours n={model.probe.get('n')}, seed="
            f"{model.probe.get('seed_accepted')} (reproducible: {model.probe.get('seed_reproducible')}), top_p="
            f"{model.probe.get('top_p')}, stop={model.probe.get('stop')}, generated-token logprobs="
            f"{model.probe.get('generated_logprobs')}")
        return cls(model, prompts, model.settings(cfg, prompts), tuple(kinds_of(methods)),
                   cfg.decop_paraphrases not in (None, "served"), cfg.decop_paraphrases)

    def fingerprint(self, cfg, methods, input_identity) -> str:
        """What a part's generations and scores depend on (the job's identity and the part store's)."""
        from jobs.kit import identity as ids

        return ids.json_digest({"settings": asdict(self.settings), "model": self.model.identity(),
                                "methods": [m.column for m in methods], "input": input_identity,
                                "paraphrases": self.paraphrases, "tool": ids.tool_version(), "plane": "generate-1"})

    def served_record(self) -> dict:
        m = self.model
        return {"api_base": m.api.base, "model": m.api.model, "mode": "none", "endpoint": m.endpoint,
                "concurrency_per_actor": m.api.concurrency}


def generate_benchmark(cfg, setup: TextOnlySetup, methods, benchmark: str, dest, job_fp: str, phases, *,
                       requester_pays: bool = False, on_admitted=None) -> dict:
    """Plan `benchmark`'s parts, survey them (ids and each part's request plan), print the plan, hold it against
    --max-requests / --max-tokens, and generate, score and write every part the budget admits (evaluate's text-only
    run and `tidemark cutoff --api-logprobs none` share it). Returns {"run", "survey", "plan"}, or {"dry_run": plan}
    with --dry-run; raises BudgetExceeded, after saving the parts that fit, when the budget does not cover them all.
    `on_admitted()` runs once every part is admitted, before the generation starts."""
    from jobs.parts.generation_parts import GEN_PART_DIRS, RequestPlanner
    from jobs.parts.benchmark_parts import plan_parts
    from jobs.plane.part_store import PartStore
    from jobs.plane.survey import run_survey
    from scoring.generation import plan as planning

    parts = plan_parts(benchmark, cfg.shard_size, requester_pays)
    planner = RequestPlanner(setup.kinds, setup.settings, cfg.tokenizer, setup.local_paraphrases)
    survey = run_survey(parts, count_tokens_of=None, prefix_shots=0, seed=cfg.seed, progress=cfg.progress,
                        planner=planner)
    store = PartStore(dest, job_fp, GEN_PART_DIRS)
    finished = {p.index for p in survey.parts if cfg.resume and store.marker(p.index, survey.digests[p.index])}
    pending = [(p.index, survey.plans[p.index]) for p in survey.parts if p.index not in finished]
    admitted, _, left = planning.admit(pending, cfg.max_requests, cfg.max_tokens)
    whole = planning.combine(survey.plans.values())
    log(f"plan: {planning.describe(left)}" + (f" for the {len(pending)} part(s) left ({len(finished)} already done)"
                                             if finished else ""))
    phases.lap("survey and plan")
    if cfg.dry_run:
        return {"dry_run": left}
    if len(admitted) < len(pending):  # generate what fits, save it, and stop before the limit
        if admitted:
            _generate(cfg, setup, methods, survey, store, finished | set(admitted), dest)
        raise BudgetExceeded(
            f"budget: the plan for the parts left is {planning.describe(left)}; {_limits(cfg)} covers "
            f"{len(admitted)} of {len(pending)} part(s), which were generated and saved; "
            f"{planning.describe(combine_left(pending, admitted))} remain: rerun with a limit that covers them "
            "(saved parts and answers are not paid again)")
    if on_admitted:
        on_admitted()
    run = _generate(cfg, setup, methods, survey, store, {p.index for p in survey.parts}, dest)
    ledger = run["ledger"]
    ledger.check("evaluate (text-only)")
    if ledger.rows_in != survey.n_good + survey.n_bad:
        from curation.io.ledger import ReconcileError

        raise ReconcileError(f"the parts account for {ledger.rows_in} rows; the survey read "
                             f"{survey.n_good + survey.n_bad}")
    return {"run": run, "survey": survey, "plan": whole}


def generation_record(setup: TextOnlySetup, gen: dict) -> dict:
    """run.json's `generation`: what the server honours, the settings and prompts, the plan and what was spent."""
    run = gen["run"]
    return {"probe": setup.model.probe, "endpoint": setup.model.endpoint,
            "settings": {k: v for k, v in asdict(setup.settings).items() if k != "prompts"},
            "prompts": setup.prompts, "kinds": list(setup.kinds), "plan": gen["plan"],
            "spent": run["stats"].get("api", {}), "spent_all_runs": run["spent_all_runs"],
            "not_scored": run["not_scored"], "decop_answers": run["answers"],
            "decop_paraphrases": setup.paraphrases, "journal": "_requests/"}


def text_only_methods(cfg) -> list:
    """--methods of a text-only run (`all`: every generation detector); a log-probability detector named here, or a
    --set-test column that is not among them, is refused by name before anything is sent."""
    import typer

    from scoring.detectors.base import InputError, parse_methods
    from scoring.stats.set_test import resolve_column

    try:
        methods = parse_methods(cfg.methods, input="generations")
        if cfg.set_test:
            resolve_column(cfg.set_test, methods)
    except (InputError, ValueError) as exc:
        raise typer.BadParameter(str(exc)) from None
    return methods


def _generate(cfg, setup: TextOnlySetup, methods, survey, store, work_ids: set, dest) -> dict:
    """The part loop over the parts that are done or admitted; returns the ledger, stats and what the report
    needs from the part summaries."""
    from dataclasses import asdict as as_dict

    from curation.io.ledger import Ledger
    from curation.io.outputs import new_run_id
    from jobs.parts.generation_parts import generation_stages
    from jobs.plane.part_loop import add_api_stats, run_parts
    from jobs.plane.part_store import read_parts
    from jobs.plane.scoring_pool import ModelBranch, ScoringSpec, part_items, run_pipeline
    from jobs.plane.tasks import hooks_from_env

    model = setup.model
    spec = ScoringSpec((ModelBranch(cfg.model, (), api=model.api.to_dict()),), actors=cfg.actors,
                       hooks=hooks_from_env(), stall_timeout_s=cfg.stall_timeout)
    generation = {"api": model.api_dict(), "chat": model.chat, "settings": as_dict(setup.settings),
                  "kinds": list(setup.kinds), "tokenizer": cfg.tokenizer, "paraphrases": setup.paraphrases,
                  "caps": {i: p["requests"] for i, p in survey.plans.items()}}
    stages = generation_stages(spec, {"dest": dest.uri, "methods": list(methods)}, generation)
    stats = {"parts": len(survey.parts), "reused": 0, "scored": 0, "streamed": 0, "detect_write_s": 0.0}
    work = [(p, survey.drops.get(p.index, [])) for p in survey.parts if p.index in work_ids]
    run_id = new_run_id()

    def on_commit(summary: dict) -> None:
        stats["streamed"] += 1
        stats["detect_write_s"] = round(stats["detect_write_s"] + summary["detect_write_s"], 3)
        add_api_stats(stats, summary)

    summaries = run_parts(work, index=lambda w: w[0].index, digests=survey.digests, store=store,
                          pool=lambda items: run_pipeline(spec, part_items(items), stages, cfg.progress),
                          stats=stats, run_id=run_id, resume=cfg.resume, on_commit=on_commit,
                          not_isolated="a text-only part quarantines a row whose requests fail in the part itself")
    ledger = Ledger.of_parts(summaries, rows_in="rows_in", rows_out="scored", what="part")
    not_scored: dict = {}
    answers = {"decop_asked": 0, "decop_unparsable": 0}
    every = {}  # what every part cost, in this run or the run that committed it
    for s in summaries.values():
        add_api_stats(every, s)
        for col, reasons in (s.get("not_scored") or {}).items():
            for reason, n in reasons.items():
                not_scored.setdefault(col, {})[reason] = not_scored.get(col, {}).get(reason, 0) + n
        for k in answers:
            answers[k] += (s.get("answers") or {}).get(k, 0)
    q = read_parts(dest, "quarantine.parquet", ["id", "stage"])
    failed = [] if q is None else [i for i, st in zip(q.column("id").to_pylist(), q.column("stage").to_pylist())
                                   if st == "generate"]
    return {"ledger": ledger, "stats": stats, "run_id": run_id, "not_scored": not_scored, "answers": answers,
            "spent_all_runs": every.get("api", {}),
            "quarantined_ids": failed}


def combine_left(pending, admitted) -> dict:
    from scoring.generation.plan import combine

    chosen = set(admitted)
    return combine(p for i, p in pending if i not in chosen)


def _limits(cfg) -> str:
    limits = [f"--max-requests {cfg.max_requests:,}" if cfg.max_requests is not None else "",
              f"--max-tokens {cfg.max_tokens:,}" if cfg.max_tokens is not None else ""]
    return " and ".join(x for x in limits if x)


def _input_identity(cfg) -> list:
    from jobs.parts.benchmark_parts import input_identity

    return input_identity(cfg.benchmark, cfg.requester_pays)


def dry_run_report(out, plan, model, methods, phases) -> dict:
    """--dry-run: the plan as report.md (nothing else sent, nothing scored)."""
    from curation.io.atomic import atomic_write_text
    from scoring.generation.plan import describe

    text = (f"# Plan (dry run)\n\n{describe(plan)}\n\nServer: {model.api.base}/{model.endpoint}; detectors: "
            f"{', '.join(m.column for m in methods)}.\nWhat it honours: {model.probe}\n")
    path = out / "plan.md"
    atomic_write_text(path, text)
    return {"report": str(path), "metrics": [], "counts": {}, "seconds": 0.0, "blind": None, "phases_s": phases.laps}
