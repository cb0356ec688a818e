"""The one part loop (`run_parts`): reuse committed parts → the pool → commit each part → replan on node loss →
isolate what a failed pipeline left, with one stall bound and one abort hook. `score_benchmark` drives it for
every job that scores a benchmark (evaluate, audit, unlearning-audit, dataset-inference); doc-mia's document parts
(jobs/parts/doc_mia/documents.py) and paraphrase's parts (jobs/parts/release/paraphrased.py) plug in their own pool and say why
their parts are not row-isolated (NOT_ISOLATED: a row or document that fails is quarantined by its own part).
build-benchmark's parse pass runs here too, one part per shard (jobs/parts/release/parsed_shards.py); its later passes
(dedup, sampling, release) decide across every shard at once (a row is kept or dropped by what other parts hold),
so they run once over all parsed shards and the release is published atomically (curation/io/publish.py).
The driver holds part summaries and counts, never rows or token stats.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Sequence

import numpy as np

from jobs.plane.benchmark_parts import plan_parts
from jobs.kit.log import log
from curation.io.ledger import ReconcileError, Ledger
from jobs.plane.part_store import PartStore
from jobs.plane.survey import (context_pool, labelled_prefix_texts, prefix_text as read_prefix, run_survey,
                               survey_json)
from jobs.plane.runners import Runner
from jobs.plane.watch import StalledPool
from jobs.plane.scoring_pool import PartFinisher, PrepareParts, ScoringSpec, benchmark_stages, from_ipc, part_items
from curation.io.outputs import Location, new_run_id
from scoring.lm.views import labelled_prefix_view, parse_labelled_prefix_view
from scoring.api.client import ApiFatal, api_fatal_reason

ABORT_ENV = "TIDEMARK_FAULT_ABORT_AFTER_PARTS"  # fault injection: stop the job after committing N parts


class InjectedAbort(RuntimeError):
    """Raised by the TIDEMARK_FAULT_ABORT_AFTER_PARTS hook: a job cut off between two parts."""


@dataclass
class PartRun:
    """What scoring left for the driver: counts, per-part stats, the ReCaLL prefix and DC-PDD's frequencies."""

    ledger: Ledger
    stats: dict
    run_id: str
    prefix_ids: list[str] = field(default_factory=list)  # every row scored but not evaluated (the prefixes')
    token_freq: np.ndarray | None = None
    survey: dict = field(default_factory=dict)
    labelled_prefix_ids: dict = field(default_factory=dict)  # Con-ReCall's {member, nonmember: [ids]}
    recall_prefix_ids: list[str] = field(default_factory=list)  # ReCaLL's prefix alone
    pool_ids: list[str] = field(default_factory=list)  # CoDeC's context pool


@dataclass
class BenchmarkPlan:
    """A benchmark's parts after the survey: what every part's scoring shares (the ReCaLL prefix, Con-ReCall's
    labelled prefixes, CoDeC's context pool, DC-PDD's token counts), chosen the same however the job is cut."""

    survey: object  # jobs.plane.survey.Survey
    prefix_text: str | None
    recall_ids: list[str]
    prefix_ids: list[str]  # every row scored but not evaluated (the prefixes')
    prefixes: tuple
    labelled_ids: dict
    contexts: list
    token_freq: np.ndarray | None


def plan_benchmark(*, benchmark: str, requester_pays: bool, rows_per_part: int, methods: Sequence, seed: int,
                   runner: Runner, prefix_shots: int = 0, count_tokens_of: str | None = None,
                   token_freq: np.ndarray | None = None, progress: bool = True, pool_size: int = 0) -> BenchmarkPlan:
    """Cut the benchmark into parts and survey them (ids, prefixes, token counts) on `runner`. Detectors that read
    Con-ReCall's labelled prefixes or CoDeC's context pool (`pool_size` rows) get them chosen by the survey."""
    parts = plan_parts(benchmark, rows_per_part, requester_pays)
    labelled = sorted({parse_labelled_prefix_view(v)[1] for m in methods for v in m.needs if v.startswith("prefixed:")})
    if len(labelled) > 1:
        raise ValueError(f"one Con-ReCall prefix size per run: shots {labelled} were asked")
    codec = any(v.startswith("codec:") for m in methods for v in m.needs)
    survey = run_survey(parts, count_tokens_of=None if token_freq is not None else count_tokens_of,
                        prefix_shots=prefix_shots, seed=seed, progress=progress, runner=runner,
                        labelled_shots=labelled[0] if labelled else 0, pool_size=pool_size if codec else 0)
    text, recall_ids = read_prefix(survey)
    prefix_ids = list(recall_ids)
    named = labelled_prefix_texts(survey)
    prefixes = tuple((labelled_prefix_view(label, labelled[0]), t) for label, (t, _) in sorted(named.items()))
    labelled_ids = {label: ids for label, (_, ids) in named.items()}
    prefix_ids = sorted(set(prefix_ids).union(*labelled_ids.values())) if labelled_ids else prefix_ids
    if token_freq is None and count_tokens_of:
        token_freq = survey.token_counts
    return BenchmarkPlan(survey, text, list(recall_ids), prefix_ids, prefixes, labelled_ids, context_pool(survey),
                         token_freq)


def score_planned(plan: BenchmarkPlan, *, dest: Location, spec: ScoringSpec, methods: Sequence, fingerprint: str,
                  runner: Runner, resume: bool = True, progress: bool = True) -> PartRun:
    """Score, detect and write every part of a surveyed benchmark on `runner`'s pool (reusing committed parts whose
    marker holds `fingerprint`: everything that changes a part's outputs). `spec` is the pool's without the
    plan's prefixes, which are added here."""
    survey = plan.survey
    spec = replace(spec, prefix_text=plan.prefix_text, prefixes=plan.prefixes, context_pool=plan.contexts)
    store = PartStore(dest, fingerprint)
    stats = {"parts": len(survey.parts), "reused": 0, "scored": 0, "streamed": 0, "isolated": 0,
             "rows_worker_failed": 0, "pipeline_failures": 0, "replans": 0, "nodes_lost": 0,
             "isolated_batch_failures": 0, "detect_write_s": 0.0}
    resources = {"token_freq": plan.token_freq} if plan.token_freq is not None and any(
        "token_freq" in m.needs for m in methods) else {}
    finish = {"dest": dest.uri, "methods": list(methods), "resources": resources}

    def on_commit(summary: dict) -> None:
        stats[summary["how"]] += 1
        stats["rows_worker_failed"] += summary["worker_failed"]
        stats["detect_write_s"] = round(stats["detect_write_s"] + summary["detect_write_s"], 3)
        add_api_stats(stats, summary)

    def pool(items):
        return runner.pipeline(spec, part_items(items), benchmark_stages(spec, finish, plan.prefix_ids), progress)

    def isolate(left, commit):
        _isolate(runner, spec, left, finish, plan.prefix_ids, commit, stats)

    work = [(p, survey.drops.get(p.index, [])) for p in survey.parts]
    run_id = new_run_id()
    summaries = run_parts(work, index=lambda w: w[0].index, digests=survey.digests, store=store, pool=pool,
                          runner=runner, stats=stats, run_id=run_id, resume=resume, on_commit=on_commit,
                          isolate=isolate)
    ledger = Ledger.of_parts(summaries, rows_in="rows_in", rows_out="scored", what="part")
    if ledger.rows_in != survey.n_good + survey.n_bad:
        raise ReconcileError(f"the parts account for {ledger.rows_in} rows; the survey read "
                              f"{survey.n_good + survey.n_bad}")
    return PartRun(ledger, stats, run_id, plan.prefix_ids, plan.token_freq, survey_json(survey),
                   labelled_prefix_ids=plan.labelled_ids, recall_prefix_ids=plan.recall_ids,
                   pool_ids=[rid for rid, _ in plan.contexts])


def score_benchmark(*, benchmark: str, requester_pays: bool, rows_per_part: int, dest: Location, spec: ScoringSpec,
                    methods: Sequence, seed: int, runner: Runner, fingerprint_for: Callable[..., str],
                    prefix_shots: int = 0, count_tokens_of: str | None = None, token_freq: np.ndarray | None = None,
                    resume: bool = True, progress: bool = True, pool_size: int = 0) -> PartRun:
    """`plan_benchmark` then `score_planned`, for a job that needs nothing between the two:
    `fingerprint_for(prefix_text, prefix_ids, token_freq)` names everything that changes a part's outputs."""
    plan = plan_benchmark(benchmark=benchmark, requester_pays=requester_pays, rows_per_part=rows_per_part,
                          methods=methods, seed=seed, runner=runner, prefix_shots=prefix_shots,
                          count_tokens_of=count_tokens_of, token_freq=token_freq, progress=progress,
                          pool_size=pool_size)
    return score_planned(plan, dest=dest, spec=spec, methods=methods, runner=runner, resume=resume,
                         progress=progress, fingerprint=fingerprint_for(plan.prefix_text, plan.prefix_ids,
                                                                        plan.token_freq))


def run_parts(work: Sequence, *, index: Callable[[object], int], digests: dict[int, str], store: PartStore,
              pool: Callable[[list], Iterable[dict]], runner: Runner, stats: dict, run_id: str, resume: bool = True,
              on_commit: Callable[[dict], None] | None = None,
              isolate: Callable[[list, Callable[[dict], None]], None] | None = None,
              not_isolated: str = "", start: Callable[[], object] | None = None) -> dict[int, dict]:
    """The one part loop of every job that works in parts (evaluate, audit, unlearning-audit, dataset-inference,
    doc-mia, paraphrase, build-benchmark's parse pass). Parts whose marker matches this fingerprint and input are reused (resume); the rest go
    to `pool` (a pipeline that yields one summary, with `index`, per part as its files land); on Ray, a lost
    node's parts go to a new pool on what is alive (`runner.replanning`); no part finishing within the stall bound
    stops the job with what is saved; a served model that refuses every request stops it too. Any other failure
    of the pipeline hands the parts not committed to `isolate(left, commit)` (row isolation), or, for a kind of
    part that cannot be isolated, re-raises with `not_isolated` (why) appended. `start` (e.g. joining Ray) runs
    once, only when a part is left to do: a finished job resumes without a cluster. Returns {index: summary}."""
    markers = {i: store.marker(i, digests[i]) for i in map(index, work)} if resume else {}
    done = {i: m for i, m in markers.items() if m}
    store.clean(keep=set(done))
    pending = [w for w in work if index(w) not in done]
    stats["parts"], stats["reused"] = len(work), len(done)
    stats.setdefault("scored", 0)
    if done:
        log(f"resuming: {len(done)} of {len(work)} part(s) already done, {len(pending)} to go")
    summaries = dict(done)
    abort_after = int(os.environ.get(ABORT_ENV) or 0)

    def commit(summary: dict) -> None:
        store.commit(summary, digests[summary["index"]], run_id)
        summaries[summary["index"]] = summary
        stats["scored"] += 1
        if on_commit:
            on_commit(summary)
        if abort_after and stats["scored"] >= abort_after:
            raise InjectedAbort(f"{ABORT_ENV}={abort_after}: stopping after {stats['scored']} part(s)")

    if not pending:
        return summaries
    if start:
        start()
    try:
        for summary in runner.replanning(pool, pending, lambda w: index(w) in summaries, stats, log):
            commit(summary)
    except (InjectedAbort, ReconcileError):
        raise
    except StalledPool as exc:
        raise StalledPool(f"{exc} ({stats['scored']} part(s) saved, {len(work) - len(summaries)} left; "
                          "rerun the same command to resume)") from None
    except Exception as exc:  # noqa: BLE001 - isolate what failed; committed parts are kept
        fatal = api_fatal_reason(exc)
        if fatal:  # no row is to blame: stop, keep the committed parts, let a rerun resume
            raise ApiFatal(f"{fatal} ({stats['scored']} part(s) saved; rerun the same command to resume)") from None
        if isolate is None:
            raise RuntimeError(f"{type(exc).__name__}: {str(exc)[:300]} ({stats['scored']} part(s) saved; rerun "
                               f"the same command to resume; parts are not row-isolated: {not_isolated})") from exc
        stats["pipeline_failures"] = stats.get("pipeline_failures", 0) + 1
        left = [w for w in pending if index(w) not in summaries]
        log(f"the scoring pipeline failed ({type(exc).__name__}: {str(exc)[:300]}); "
            f"{len(pending) - len(left)} part(s) were saved, isolating the {len(left)} left")
        isolate(left, commit)
    return summaries


def add_api_stats(stats: dict, summary: dict) -> None:
    """Sum a part's served-model counters (requests, retries, tokens, positions) into the run's; gauges combine by
    their own rule (the largest bound, the lowest concurrency)."""
    from scoring.api.scorer import GAUGES

    if not summary.get("api"):
        return
    total = stats.setdefault("api", {})
    for k, v in summary["api"].items():
        total[k] = (GAUGES[k](total[k], v) if k in total else v) if k in GAUGES else round(total.get(k, 0) + v, 6)


def _isolate(runner: Runner, spec: ScoringSpec, left, finish: dict, prefix_ids, commit, stats: dict) -> None:
    """Parts a failed pipeline did not commit, one at a time, rows isolated (jobs/plane/isolation.py)."""
    spec, isolator = runner.isolator(spec)
    prepare = PrepareParts(spec, prefix_ids)
    finisher = PartFinisher(spec, **finish)
    try:
        for part, drops in left:
            t0 = time.perf_counter()
            prepared = prepare.prepare(part.to_json(), json.dumps(drops))
            rows = from_ipc(prepared["rows"])
            scored = isolator.score_rows(rows)
            stats["isolated_batch_failures"] = isolator.batch_failures
            summary = finisher.finish(part.index, rows, from_ipc(prepared["quarantine"]), scored, "isolated")
            summary["isolate_s"] = round(time.perf_counter() - t0, 3)
            commit(summary)
    finally:
        isolator.close()
