"""A benchmark scored by a model that answers only in text (`tidemark evaluate --api-logprobs none`, whose driver
is jobs/commands/evaluate_text_only.py, and `tidemark cutoff --api-logprobs none`):

    probe (what the server honours) → plan parts → survey (ids, and each part's request plan) → the plan printed
    and checked against --max-requests / --max-tokens → the pool asks each admitted part's requests
    (jobs/parts/text_only/generation.py: journal, generations, scores, quarantine per part) → metrics over the score
    columns, the blind baseline, the set test → report.

The driver holds plans and score columns, never generations; the report's examples are read back for a few ids.
Parts the budget does not admit are not started: the job commits what it did and stops (exit 2), and a rerun
with a raised budget does only the rest.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from jobs.kit.log import log
from jobs.kit.text_only import TextOnlyRun
from scoring.generation.runner import BudgetExceeded


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
    def probe(cls, opts: TextOnlyRun, methods) -> "TextOnlySetup":
        from jobs.kit.text_only import check_methods, text_only_model
        from scoring.generation.prompts import load_prompts
        from scoring.generation.scores import kinds_of

        model = text_only_model(opts)
        check_methods(methods, model)
        prompts = load_prompts(opts.prompts)
        log(f"server: {model.api.base}/{model.endpoint} honours n={model.probe.get('n')}, seed="
            f"{model.probe.get('seed_accepted')} (reproducible: {model.probe.get('seed_reproducible')}), top_p="
            f"{model.probe.get('top_p')}, stop={model.probe.get('stop')}, generated-token logprobs="
            f"{model.probe.get('generated_logprobs')}")
        return cls(model, prompts, model.settings(opts, prompts), tuple(kinds_of(methods)),
                   opts.decop_paraphrases not in (None, "served"), opts.decop_paraphrases)

    def fingerprint(self, methods, input_identity) -> str:
        """What a part's generations and scores depend on (the job's identity and the part store's)."""
        from jobs.kit import identity as ids

        return ids.json_digest({"settings": asdict(self.settings), "model": self.model.identity(),
                                "methods": [m.column for m in methods], "input": input_identity,
                                "paraphrases": self.paraphrases, "tool": ids.tool_version(), "plane": "generate-1"})

    def served_record(self) -> dict:
        m = self.model
        return {"api_base": m.api.base, "model": m.api.model, "mode": "none", "endpoint": m.endpoint,
                "concurrency_per_actor": m.api.concurrency}


@dataclass
class GenerationPlan:
    """A text-only run's parts after the survey: each part's request plan, which are done, which the budget admits."""

    survey: object  # jobs.plane.survey.Survey
    store: object  # jobs.plane.part_store.PartStore
    finished: set
    pending: list
    admitted: list
    left: dict  # the plan of the parts left
    whole: dict  # the plan of every part

    @property
    def all_admitted(self) -> bool:
        return len(self.admitted) == len(self.pending)


def plan_generation(opts: TextOnlyRun, setup: TextOnlySetup, benchmark: str, dest, job_fp: str, phases, *, runner,
                    requester_pays: bool = False) -> GenerationPlan:
    """Plan `benchmark`'s parts, survey them on `runner` (ids and each part's request plan), print the plan and hold
    it against --max-requests / --max-tokens."""
    from jobs.parts.text_only.generation import GEN_PART_DIRS, RequestPlanner
    from jobs.plane.benchmark_parts import plan_parts
    from jobs.plane.part_store import PartStore
    from jobs.plane.survey import run_survey
    from scoring.generation import plan as planning

    parts = plan_parts(benchmark, opts.shard_size, requester_pays)
    planner = RequestPlanner(setup.kinds, setup.settings, opts.tokenizer, setup.local_paraphrases)
    survey = run_survey(parts, count_tokens_of=None, prefix_shots=0, seed=opts.seed, progress=opts.progress,
                        runner=runner, planner=planner)
    store = PartStore(dest, job_fp, GEN_PART_DIRS)
    finished = {p.index for p in survey.parts if opts.resume and store.marker(p.index, survey.digests[p.index])}
    pending = [(p.index, survey.plans[p.index]) for p in survey.parts if p.index not in finished]
    admitted, _, left = planning.admit(pending, opts.max_requests, opts.max_tokens)
    log(f"plan: {planning.describe(left)}" + (f" for the {len(pending)} part(s) left ({len(finished)} already done)"
                                             if finished else ""))
    phases.lap("survey and plan")
    return GenerationPlan(survey, store, finished, pending, admitted, left, planning.combine(survey.plans.values()))


def generate_planned(opts: TextOnlyRun, setup: TextOnlySetup, methods, plan: GenerationPlan, dest, *,
                     runner) -> dict:
    """Generate, score and write every part the budget admits; returns {"run", "survey", "plan"}. Raises
    BudgetExceeded, after saving the parts that fit, when the budget does not cover them all."""
    from scoring.generation import plan as planning

    survey = plan.survey
    if not plan.all_admitted:  # generate what fits, save it, and stop before the limit
        if plan.admitted:
            _generate(opts, setup, methods, survey, plan.store, plan.finished | set(plan.admitted), dest, runner)
        raise BudgetExceeded(
            f"budget: the plan for the parts left is {planning.describe(plan.left)}; {_limits(opts)} covers "
            f"{len(plan.admitted)} of {len(plan.pending)} part(s), which were generated and saved; "
            f"{planning.describe(combine_left(plan.pending, plan.admitted))} remain: rerun with a limit that covers "
            "them (saved parts and answers are not paid again)")
    run = _generate(opts, setup, methods, survey, plan.store, {p.index for p in survey.parts}, dest, runner)
    ledger = run["ledger"]
    ledger.check("evaluate (text-only)")
    if ledger.rows_in != survey.n_good + survey.n_bad:
        from curation.io.ledger import ReconcileError

        raise ReconcileError(f"the parts account for {ledger.rows_in} rows; the survey read "
                             f"{survey.n_good + survey.n_bad}")
    return {"run": run, "survey": survey, "plan": plan.whole}


def generate_benchmark(opts: TextOnlyRun, setup: TextOnlySetup, methods, benchmark: str, dest, job_fp: str,
                       phases, *, runner, requester_pays: bool = False) -> dict:
    """`plan_generation` then `generate_planned` (evaluate's text-only run and `tidemark cutoff --api-logprobs none`
    share them). Returns {"run", "survey", "plan"}, or {"dry_run": plan} with --dry-run."""
    plan = plan_generation(opts, setup, benchmark, dest, job_fp, phases, runner=runner,
                           requester_pays=requester_pays)
    if opts.dry_run:
        return {"dry_run": plan.left}
    return generate_planned(opts, setup, methods, plan, dest, runner=runner)


def generation_record(setup: TextOnlySetup, gen: dict) -> dict:
    """run.json's `generation`: what the server honours, the settings and prompts, the plan and what was spent."""
    run = gen["run"]
    return {"probe": setup.model.probe, "endpoint": setup.model.endpoint,
            "settings": {k: v for k, v in asdict(setup.settings).items() if k != "prompts"},
            "prompts": setup.prompts, "kinds": list(setup.kinds), "plan": gen["plan"],
            "spent": run["stats"].get("api", {}), "spent_all_runs": run["spent_all_runs"],
            "not_scored": run["not_scored"], "decop_answers": run["answers"],
            "decop_paraphrases": setup.paraphrases, "journal": "_requests/"}


def text_only_methods(spec: str, set_test: str | None) -> list:
    """--methods of a text-only run (`all`: every generation detector); a log-probability detector named here, or a
    --set-test column that is not among them, is refused by name before anything is sent."""
    import typer

    from scoring.detectors.base import InputError, parse_methods
    from scoring.stats.set_test import resolve_column

    try:
        methods = parse_methods(spec, input="generations")
        if set_test:
            resolve_column(set_test, methods)
    except (InputError, ValueError) as exc:
        raise typer.BadParameter(str(exc)) from None
    return methods


def _generate(opts: TextOnlyRun, setup: TextOnlySetup, methods, survey, store, work_ids: set, dest, runner) -> dict:
    """The part loop over the parts that are done or admitted; returns the ledger, stats and what the report
    needs from the part summaries."""
    from dataclasses import asdict as as_dict

    from curation.io.ledger import Ledger
    from curation.io.outputs import new_run_id
    from jobs.parts.text_only.generation import generation_stages
    from jobs.plane.part_loop import add_api_stats, run_parts
    from jobs.plane.part_store import read_parts
    from jobs.plane.scoring_pool import ModelBranch, ScoringSpec, part_items
    from jobs.plane.tasks import hooks_from_env

    model = setup.model
    spec = ScoringSpec((ModelBranch(opts.model, (), api=model.api.to_dict()),), actors=opts.actors,
                       hooks=hooks_from_env(), stall_timeout_s=opts.stall_timeout)
    generation = {"api": model.api_dict(), "chat": model.chat, "settings": as_dict(setup.settings),
                  "kinds": list(setup.kinds), "tokenizer": opts.tokenizer, "paraphrases": setup.paraphrases,
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
                          pool=lambda items: runner.pipeline(spec, part_items(items), stages, opts.progress),
                          runner=runner, stats=stats, run_id=run_id, resume=opts.resume, on_commit=on_commit,
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


def _limits(opts: TextOnlyRun) -> str:
    limits = [f"--max-requests {opts.max_requests:,}" if opts.max_requests is not None else "",
              f"--max-tokens {opts.max_tokens:,}" if opts.max_tokens is not None else ""]
    return " and ".join(x for x in limits if x)


def dry_run_report(out, plan, model, methods, phases) -> dict:
    """--dry-run: the plan as report.md (nothing else sent, nothing scored)."""
    from curation.io.atomic import atomic_write_text
    from scoring.generation.plan import describe

    text = (f"# Plan (dry run)\n\n{describe(plan)}\n\nServer: {model.api.base}/{model.endpoint}; detectors: "
            f"{', '.join(m.column for m in methods)}.\nWhat it honours: {model.probe}\n")
    path = out / "plan.md"
    atomic_write_text(path, text)
    return {"report": str(path), "metrics": [], "counts": {}, "seconds": 0.0, "blind": None, "phases_s": phases.laps}
