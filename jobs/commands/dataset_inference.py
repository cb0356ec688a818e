"""`tidemark dataset-inference`: was this *set* of texts trained on? (Maini et al., 2024)

The suspect set (what a rights holder says was trained on) and a validation set (the same kind of text, known to
be unseen) are read by the audit's document reader and cut into passages on the workers (jobs/parts/audit/snippets.py:
suspect = the `target` role, label 1; validation = the `calibration` role, label 0), scored with every detector on
the shared scoring pool (jobs/plane/part_loop.py), and the driver runs the set-level test on the score columns only
(scoring/audits/dataset_inference.py). Outputs: report.json, report.md, report.html, test_scores.png, scores.parquet/
and the quarantine of every passage or document that could not be used; the report's content (Markdown, page and
plot) is scoring/reports/dataset_inference_page.py's. Before the scoring, the shift guard (jobs/kit/shift_guard.py)
checks that a model-free classifier cannot tell the two sets apart; where it can, the job stops unless
--allow-shift. `--method codec` needs no validation set: jobs/parts/audit/codec.py.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np
import typer

from jobs.kit import shift_guard
from jobs.kit.report_out import run_and_print_report, write_html
from jobs.kit.options import command, option, progress_option, runner_option
from jobs.kit.served_model import ServedFields, run_record


@dataclass
class DatasetInferenceConfig(ServedFields):
    suspect: str = option(help="texts claimed to be in the training data: a folder/glob of .txt, or jsonl/Parquet "
                          "(question/answer, text or input)")
    model: str = option(help="HF causal LM (local dir, hub id, .gguf, smollm2); with --api-base, the served model's "
                        "name")
    out: str = option(help="output directory (report.json, report.md, report.html, test_scores.png)")
    method: str = option("maini", "maini: the suspect set against --validation (Maini et al.: every detector as a "
                         "feature, a t-test on held-out halves; refused when a model-free classifier tells the two "
                         "sets apart, see --allow-shift); codec: the suspect set alone, no held-out set (CoDeC: the "
                         "share of passages whose likelihood drops with other passages of the set in context)")
    validation: Optional[str] = option(None, "maini: texts of the same kind known NOT to be in training (drawn like "
                                       "the suspect set: same source and time); same formats")
    allow_shift: bool = option(False, "maini: run even where the blind check finds the suspect and validation sets "
                               "distinguishable without the model (the report then leads with that warning)")
    shots: int = option(3, "codec: other passages of the set put before each passage", min=1)
    pool: int = option(1000, "codec: the seeded pool of passages the contexts are drawn from (CoDeC's demo used at "
                       "most 1,000 samples)", min=2)
    methods: str = option("all", "detectors used as features (all = every one the inputs allow)")
    ref_model: Optional[str] = option(None, "reference model: adds the `ref` feature")
    snippets: int = option(10, "passages per .txt document (seeded; a row is one passage)", min=1)
    snippet_words: int = option(128, "words per passage", min=1)
    min_words: int = option(8, "shorter documents/rows are quarantined (too_short)", min=1)
    recall_shots: int = option(3, "validation passages used as ReCaLL's prefix (excluded from the test)", min=0)
    seed: int = option(0, "seed for passages and the learn/test split")
    shard_size: int = option(1000, "passages per scoring part (the unit of resume)", min=1)
    runner: str = runner_option()
    progress: bool = progress_option()


def _features(cfg: DatasetInferenceConfig, served):
    """The detectors used as features: every one the inputs allow (ref only with --ref-model)."""
    from jobs.commands.evaluate import resolve_methods

    try:
        return resolve_methods(cfg.methods, cfg.ref_model, served)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--methods") from None


def run_dataset_inference(cfg: DatasetInferenceConfig) -> dict:
    if cfg.method == "codec":
        from jobs.parts.audit.codec import run_codec

        if cfg.validation:
            raise typer.BadParameter("--method codec needs no --validation: it scores the suspect set alone")
        return run_codec(cfg)
    if cfg.method != "maini":
        raise typer.BadParameter(f"--method must be maini or codec; got {cfg.method!r}")
    if not cfg.validation:
        raise typer.BadParameter("--method maini needs --validation (texts drawn like the suspect set, known not to "
                                 "be in training); without one, --method codec")
    return run_maini(cfg)


def run_maini(cfg: DatasetInferenceConfig) -> dict:
    import pyarrow.compute as pc

    from jobs.parts.audit.snippets import plan_tasks, run_staging
    from jobs.parts.doc_inputs import ROW_SUFFIXES, document_files
    from jobs.kit.log import PhaseClock
    from jobs.kit.runtime import start_runner
    from jobs.plane.part_loop import score_benchmark
    from jobs.plane.part_store import read_parts
    from jobs.plane.scoring_pool import ModelBranch
    from jobs.kit.identity import json_digest, model_identity, open_output, publish, tool_version
    from curation.io.outputs import Location
    from scoring.audits.dataset_inference import MEANING, dataset_inference
    from scoring.lm.views import ORIGINAL, PREFIXED
    from scoring.reports.dataset_inference_page import conclusion, plot_test_scores, report_markdown, report_page

    t0 = time.perf_counter()
    phases = PhaseClock()
    served = cfg.served()
    methods = _features(cfg, served)
    needs = sorted({v for m in methods for v in m.needs})
    views = (ORIGINAL, *[v for v in needs if v not in ("ref", "token_freq")])
    dest, out = open_output(cfg.out)
    common = {"snippets": cfg.snippets, "snippet_words": cfg.snippet_words, "min_words": cfg.min_words,
              "seed": cfg.seed}
    tasks, n_bytes = [], 0
    for role, spec, label in (("target", cfg.suspect, 1), ("calibration", cfg.validation, 0)):
        files, _ = document_files(spec)
        n_bytes += sum(f.stat().st_size for f in files)
        whole = all(f.suffix.lower() in ROW_SUFFIXES for f in files)
        tasks += [dict(t, task=t["task"] + 100_000 * label) for t in
                  plan_tasks(role, spec, id_prefix="", label=label, whole=whole, **common)]
    phases.lap("plan")
    runner, why = start_runner(cfg.runner, n_bytes, actors=cfg.actors, gpus_per_actor=cfg.gpus_per_actor)
    dest.delete_tree("_staging")
    staged = run_staging(tasks, dest.uri, None, cfg.progress, runner=runner)
    phases.lap("passages (workers)")
    # the shift guard: model-free, before any scoring, so sets it refuses cost no model time
    shift = shift_guard.check(shift_guard.start(dest.child("_staging/snippets"), cfg.seed), cfg.allow_shift)
    phases.lap("shift check")
    branches = [served.branch(views) if served else ModelBranch(cfg.model, views)]
    if cfg.ref_model:
        branches.append(ModelBranch(cfg.ref_model, ("original",), rename_original="ref"))

    identity = {"model": served.identity() if served else model_identity(cfg.model),
                "ref_model": model_identity(cfg.ref_model), "methods": [m.column for m in methods],
                "views": list(views), "settings": common, "tool": tool_version()}
    scoring = Location(dest.child("scoring"))
    run = score_benchmark(
        benchmark=dest.child("_staging/snippets"), requester_pays=False, rows_per_part=cfg.shard_size,
        dest=scoring, spec=cfg.pool_spec(branches), runner=runner, methods=methods, seed=cfg.seed,
        prefix_shots=cfg.recall_shots if PREFIXED in views else 0,
        count_tokens_of=cfg.tokenizer_path if "token_freq" in needs else None,
        fingerprint_for=lambda text, ids, freq: json_digest({**identity, "prefix": [text, list(ids)]}),
        progress=cfg.progress)
    run.ledger.check("dataset-inference scoring")
    phases.lap("score (workers)")
    columns = [m.column for m in methods]
    scores = read_parts(scoring, "scores.parquet", ["id", "label", "in_eval", *columns])
    if scores is None:
        raise RuntimeError(f"no passage could be scored; see {scoring.child('quarantine.parquet')}")
    scores = scores.filter(scores.column("in_eval"))  # the ReCaLL prefix passages are scored, never tested
    scores = scores.take(pc.sort_indices(scores, [("id", "ascending")]))  # a stable order whatever the parts
    label = scores.column("label").to_numpy()
    x = np.column_stack([scores.column(c).to_numpy(zero_copy_only=False).astype(np.float64) for c in columns])
    try:
        res = dataset_inference(x[label == 1], x[label == 0], columns, seed=cfg.seed)
    except ValueError as exc:
        raise RuntimeError(f"dataset inference: {exc}") from None
    phases.lap("test")
    counts = {role: {k: sum(s[k] for s in staged if s["role"] == role) for k in ("snippets", "documents_quarantined")}
              for role in ("target", "calibration")}
    report = {
        "p_value": res["p_value"], "t": res["t"], "df": res["df"], "conclusion": conclusion(res["p_value"]),
        "shift_check": shift, "shift_warning": shift_guard.warning(shift),
        "meaning": MEANING, "weights": res["weights"], "intercept": res["intercept"],
        "features_used": res["features_used"], "sizes": res["sizes"], "test_means": res["test_means"],
        "inputs": {"suspect": cfg.suspect, "validation": cfg.validation,
                   "suspect_passages": counts["target"]["snippets"],
                   "validation_passages": counts["calibration"]["snippets"],
                   "documents_quarantined": {"suspect": counts["target"]["documents_quarantined"],
                                             "validation": counts["calibration"]["documents_quarantined"]},
                   "recall_prefix_passages": len(run.recall_prefix_ids)},
        "scoring": {"rows_in": run.ledger.rows_in, "scored": run.ledger.rows_out,
                    "quarantined": run.ledger.quarantined, "reasons": dict(run.ledger.reasons)},
        "counts": {"in": run.ledger.rows_in, "scored": run.ledger.rows_out, "quarantined": run.ledger.quarantined,
                   "recall_prefix": len(run.prefix_ids), "tested": int(sum(res["sizes"].values()))},
        "model": cfg.model, "served_model": run_record(served, run.stats.get("api")), "config": asdict(cfg),
        "seconds": round(time.perf_counter() - t0, 2), "phases_s": phases.laps,
        "runner": {"used": runner.name, "why": why},
    }
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    (out / "test_scores.png").write_bytes(plot_test_scores(res))
    (out / "report.md").write_text(report_markdown(report))
    write_html(out, report_page(report, out))
    publish(dest, out, {"job": "dataset-inference", "p_value": res["p_value"]})
    return {"report": str(out / "report.md"), "json": str(out / "report.json"), "p_value": res["p_value"],
            "seconds": report["seconds"]}


def register(app: typer.Typer) -> None:
    app.command("dataset-inference")(command(
        DatasetInferenceConfig, lambda cfg: run_and_print_report(run_dataset_inference, cfg),
        doc="Set-level membership tests. --method maini (default): the suspect set against --validation (Maini et "
            "al., 2024: every detector's score as a feature, a linear model learned on half of each set, a one-sided "
            "Welch t-test on the other half; refused where a model-free classifier tells the two sets apart, unless "
            "--allow-shift). --method codec: the suspect set alone (CoDeC: the share of passages whose likelihood "
            "drops with other passages of the set in context)."))
