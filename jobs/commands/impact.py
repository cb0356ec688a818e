"""`tidemark impact`: by how much did contamination inflate a benchmark score, and what is the score on the items
the model has not seen?

    --results (lm-evaluation-harness --log_samples, or id/input/score files; one Ray task per file, jobs/parts/
    impact/results.py) + --evidence (overlap / evaluate / audit OUTs, jobs/parts/impact/evidence.py) ──▶ per task,
    the evidence joined to the items by id or text, each item's split (jobs/parts/impact/join.py) ──▶ per task and
    model: the clean-subset score beside the full score, each split's score, the leaked-minus-clean gap with its
    test, the difference-in-differences against --reference-results, ConStat against --reference-benchmark-results
    (scoring/impact/, pure) ──▶ report.json, items.parquet, report.md, report.html, a figure per task.

The driver holds per-item keys and scores (a few numbers an item), never texts.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Optional

import typer

from jobs.kit.options import command, option, progress_option, runner_option
from jobs.kit.report_out import run_and_print_report

METHODS = ("auto", "splits", "constat", "both")


@dataclass
class ImpactConfig:
    results: list[str] = option(help="per-item results, repeatable: an lm-evaluation-harness --output_path (its "
                                "samples_<task>_<date>.jsonl files, several tasks and models), or jsonl/Parquet "
                                "with `id`, `input`, optional `target` and `score` (0/1 or real)")
    out: str = option(help="output directory (report.json, items.parquet, report.md, report.html)")
    evidence: Optional[list[str]] = option(
        None, "per-item evidence, repeatable: an OUT of `tidemark overlap` (the share of the item's n-grams found in "
        "a corpus; a run over the answers is answer evidence; with --semantic, its rephrased items too: the "
        "`rephrased_leaked` split), `evaluate` or `audit` (a detector, thresholded at --detector-fpr on the run's "
        "items the model cannot have seen); `answer=OUT` or `input=OUT` names the role")
    reference_results: Optional[list[str]] = option(
        None, "the same tasks' results for reference models (older models, or models trained on decontaminated "
        "data): the difference-in-differences, so that leaked items that are merely easier are not called inflation")
    reference_benchmark_results: Optional[list[str]] = option(
        None, "ConStat: every model's results (targets and references) on a reference benchmark (rephrased items, "
        "e.g. `tidemark paraphrase` of the benchmark run through your harness; a synthetic sibling; a similar task)")
    reference_models: Optional[str] = option(None, "comma-separated reference models (default: every model of "
                                             "--reference-results)")
    task_map: Optional[list[str]] = option(None, "TASK=REFERENCE_TASK, repeatable: pairs a task of --results with "
                                           "one of --reference-results or ConStat's reference benchmark (default: "
                                           "the same name, or the only task of each)")
    method: str = option("auto", "splits (needs --evidence), constat (needs --reference-benchmark-results), both, or "
                         "auto: whichever the inputs allow")
    metric: Optional[str] = option(None, "the harness's metric field (default: the first of each line's `metrics`)")
    filter: Optional[str] = option(None, "the harness's filter (default: the first that is not `none`)")
    input_field: Optional[str] = option(None, "the item's input text field, for joining by text (default: question, "
                                        "input, text, ...; else the prompt)")
    answer_field: Optional[str] = option(None, "the item's answer field (default: answer, target, ...)")
    input_threshold: float = option(0.0, "overlap: an input leaked where more than this share of its n-grams is "
                                    "in the corpus (0: any n-gram, GPT-3's and lm-evaluation-harness's rule)", min=0.0,
                                    max=1.0)
    answer_threshold: float = option(0.0, "overlap: the same for answer evidence", min=0.0, max=1.0)
    detector: Optional[str] = option(None, "evaluate evidence: the score column (default: the run's first)")
    detector_fpr: float = option(0.05, "evaluate/audit evidence: the detector's threshold flags at most this share "
                                 "of the items the model cannot have seen", min=0.0, max=1.0)
    join: str = option("auto", "how evidence finds items: id, text (lowercased words), or auto (whichever matches "
                       "more, per task and source)")
    bootstrap: int = option(2000, "bootstrap resamples for the CIs", min=100)
    permutations: int = option(10000, "permutations for a real-valued gap's p (0/1 scores: exact)", min=999)
    constat_bootstrap: int = option(1000, "ConStat's bootstrap rounds", min=100)
    seed: int = option(0, "seed of every resampling")
    runner: str = runner_option()
    progress: bool = progress_option()

    def reader_settings(self) -> dict:
        return {"metric": self.metric, "filter": self.filter, "input_field": self.input_field,
                "answer_field": self.answer_field}

    def evidence_settings(self) -> dict:
        return {"input_threshold": self.input_threshold, "answer_threshold": self.answer_threshold,
                "detector": self.detector, "detector_fpr": self.detector_fpr}


def chosen_methods(cfg: ImpactConfig) -> set[str]:
    if cfg.method not in METHODS:
        raise typer.BadParameter(f"--method must be one of {', '.join(METHODS)}", param_hint="--method")
    want = {"auto": {"splits"} if cfg.evidence else set(), "splits": {"splits"}, "constat": {"constat"},
            "both": {"splits", "constat"}}[cfg.method]
    if cfg.method == "auto" and cfg.reference_benchmark_results:
        want.add("constat")
    if "splits" in want and not cfg.evidence:
        raise typer.BadParameter("the splits need --evidence (an overlap, evaluate or audit OUT)")
    if "constat" in want and not cfg.reference_benchmark_results:
        raise typer.BadParameter("ConStat needs --reference-benchmark-results (every model on a reference benchmark)")
    if not want:
        raise typer.BadParameter("nothing to measure: give --evidence (splits) or --reference-benchmark-results "
                                 "(ConStat)")
    return want


def run_impact(cfg: ImpactConfig) -> dict:
    from jobs.kit.identity import open_output, publish
    from jobs.kit.log import PhaseClock
    from jobs.kit.runtime import start_runner
    from jobs.parts.impact.evidence import read_evidence
    from jobs.parts.impact.records import measure_tasks, write_items
    from jobs.parts.impact.results import read_results

    t0, phases = time.perf_counter(), PhaseClock()
    methods = chosen_methods(cfg)
    try:  # evidence that cannot be read is refused before OUT is created
        sources = [src for e in (cfg.evidence or []) for src in read_evidence(e, cfg.evidence_settings())] \
            if "splits" in methods else []
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--evidence") from None
    phases.lap("evidence")
    dest, out = open_output(cfg.out)
    sizes = _input_bytes([*cfg.results, *(cfg.reference_results or []), *(cfg.reference_benchmark_results or [])])
    runner, why = start_runner(cfg.runner, sizes, actors=0, gpus_per_actor=0.0)
    settings = cfg.reader_settings()
    read = {name: read_results(specs, settings, runner=runner, progress=cfg.progress) if specs else None
            for name, specs in (("results", cfg.results), ("reference", cfg.reference_results),
                                ("reference_benchmark", cfg.reference_benchmark_results))}
    phases.lap("results (workers)" if runner.name == "ray" else "results (local runner)")
    records, items, matching = measure_tasks(cfg, read, sources, methods)
    phases.lap("statistics")
    write_items(items, out / "items.parquet")
    report = _report(cfg, read, sources, records, matching, methods, runner, why, t0)
    _write(out, report)
    phases.lap("report and plots")
    (out / "run.json").write_text(json.dumps(_run_record(cfg, report, phases), indent=2, default=str))
    publish(dest, out, {"job": "impact", "tasks": len(records)})
    return {"report": str(out / "report.md"), "json": str(out / "report.json"), "tasks": records,
            "seconds": report["seconds"]}


def _input_bytes(specs: list[str]) -> int | None:
    from pathlib import Path

    try:
        return sum(f.stat().st_size for s in specs for f in ([Path(s)] if Path(s).is_file() else Path(s).rglob("*"))
                   if f.is_file())
    except OSError:
        return None


def _report(cfg, read, sources, records, matching, methods, runner, why, t0) -> dict:
    res = read["results"]
    counts = {"results_items": int(res[0].num_rows), "results_quarantined": int(res[1].num_rows),
              "files": res[2]}
    return {"tasks": records, "method": sorted(methods), "matching": matching, "counts": counts,
            "thresholds": {"input_share": cfg.input_threshold, "answer_share": cfg.answer_threshold,
                           "detector_fpr": cfg.detector_fpr, "join": cfg.join},
            "evidence": [{"name": s["name"], "job": s["job"], "role": s["role"], "path": s["path"], **s["facts"]}
                         for s in sources],
            "inputs": {"results": cfg.results, "reference_results": cfg.reference_results,
                       "reference_benchmark_results": cfg.reference_benchmark_results},
            "settings": {"bootstrap": cfg.bootstrap, "permutations": cfg.permutations,
                         "constat_bootstrap": cfg.constat_bootstrap, "seed": cfg.seed},
            "runner": {"used": runner.name, "why": why}, "seconds": round(time.perf_counter() - t0, 2)}


def _write(out, report: dict) -> None:
    from jobs.kit.report_out import write_html
    from scoring.reports.impact_page import plot_task, report_markdown, report_page

    for k, rec in enumerate(report["tasks"]):
        name = f"task_{k:02d}.png"
        (out / name).write_bytes(plot_task(rec))
        rec["figure"] = name
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    (out / "report.md").write_text(report_markdown(report))
    write_html(out, report_page(report, out))


def _run_record(cfg, report: dict, phases) -> dict:
    from jobs.kit.redact import redact
    from jobs.kit.report_out import command_line

    return redact({"job": "impact", "config": asdict(cfg), "counts": report["counts"], "phases_s": phases.laps,
                   "runner": report["runner"], "seconds": report["seconds"], "command": command_line()})


def register(app: typer.Typer) -> None:
    app.command("impact")(command(
        ImpactConfig, lambda cfg: run_and_print_report(run_impact, cfg, errors=(FileNotFoundError, RuntimeError,
                                                                                 ValueError)),
        doc="How much did contamination inflate a benchmark score? Per-item results (lm-evaluation-harness "
            "--log_samples, or id/input/score files) joined with Tidemark's evidence (overlap, evaluate, audit): the "
            "clean-subset score beside the full one, each split's score (clean / input leaked / input and answer "
            "leaked / rephrased) and its gap to clean, the leaked-minus-clean gap and its test, the "
            "difference-in-differences against reference models, and ConStat against a reference benchmark."))
