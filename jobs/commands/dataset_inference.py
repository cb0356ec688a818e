"""`tidemark dataset-inference`: was this *set* of texts trained on? (Maini et al., 2024)

The suspect set (what a rights holder says was trained on) and a validation set (the same kind of text, known to
be unseen) are read by the audit's document reader and cut into passages on the workers (jobs/parts/audit_snippets.py:
suspect = the `target` role, label 1; validation = the `calibration` role, label 0), scored with every detector on
the shared scoring pool (jobs/plane/part_loop.py), and the driver runs the set-level test on the score columns only
(scoring/audits/dataset_inference.py). Outputs: report.json, report.md, report.html, test_scores.png, scores.parquet/
and the quarantine of every passage or document that could not be used.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import typer

from jobs.kit.report_out import run_and_print_report, write_html
from jobs.kit.served_model import ServedFields, run_record, with_served_options


@dataclass
class DatasetInferenceConfig(ServedFields):
    suspect: str
    validation: str
    model: str
    out: str
    methods: str = "all"
    ref_model: Optional[str] = None
    snippets: int = 10  # passages per .txt document (a jsonl/Parquet row is one passage)
    snippet_words: int = 128
    min_words: int = 8
    recall_shots: int = 3
    seed: int = 0
    shard_size: int = 1000
    progress: bool = True


def _features(cfg: DatasetInferenceConfig, served):
    """The detectors used as features: every one the inputs allow (ref only with --ref-model)."""
    from jobs.commands.evaluate import resolve_methods

    try:
        return resolve_methods(cfg.methods, cfg.ref_model, served)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--methods") from None


def run_dataset_inference(cfg: DatasetInferenceConfig) -> dict:
    import pyarrow.compute as pc

    from jobs.parts.audit_snippets import plan_tasks, run_staging
    from jobs.parts.doc_inputs import ROW_SUFFIXES, document_files
    from jobs.commands.evaluate import PhaseClock
    from jobs.kit.runtime import start_driver
    from jobs.plane.part_loop import score_benchmark
    from jobs.plane.part_store import read_parts
    from jobs.plane.scoring_pool import ModelBranch
    from jobs.kit.identity import json_digest, model_identity, open_output, publish, tool_version
    from jobs.kit.output_store import Location
    from scoring.audits.dataset_inference import MEANING, dataset_inference
    from scoring.lm.views import ORIGINAL, PREFIXED

    t0 = time.perf_counter()
    phases = PhaseClock()
    served = cfg.served()
    methods = _features(cfg, served)
    needs = sorted({v for m in methods for v in m.needs})
    views = (ORIGINAL, *[v for v in needs if v not in ("ref", "token_freq")])
    dest, out = open_output(cfg.out)
    common = {"snippets": cfg.snippets, "snippet_words": cfg.snippet_words, "min_words": cfg.min_words,
              "seed": cfg.seed}
    tasks = []
    for role, spec, label in (("target", cfg.suspect, 1), ("calibration", cfg.validation, 0)):
        files, _ = document_files(spec)
        whole = all(f.suffix.lower() in ROW_SUFFIXES for f in files)
        tasks += [dict(t, task=t["task"] + 100_000 * label) for t in
                  plan_tasks(role, spec, id_prefix="", label=label, whole=whole, **common)]
    phases.lap("plan")
    start_driver()
    dest.delete_tree("_staging")
    staged = run_staging(tasks, dest.uri, None, cfg.progress)
    phases.lap("passages (workers)")
    branches = [served.branch(views) if served else ModelBranch(cfg.model, views)]
    if cfg.ref_model:
        branches.append(ModelBranch(cfg.ref_model, ("original",), rename_original="ref"))

    identity = {"model": served.identity() if served else model_identity(cfg.model),
                "ref_model": model_identity(cfg.ref_model), "methods": [m.column for m in methods],
                "views": list(views), "settings": common, "tool": tool_version()}
    scoring = Location(dest.child("scoring"))
    run = score_benchmark(
        benchmark=dest.child("_staging/snippets"), requester_pays=False, rows_per_part=cfg.shard_size, dest=scoring,
        spec_for=lambda text: cfg.pool_spec(branches, text), methods=methods, seed=cfg.seed,
        prefix_shots=cfg.recall_shots if PREFIXED in views else 0,
        count_tokens_of=cfg.tokenizer_path if "token_freq" in needs else None,
        fingerprint_for=lambda text, ids, freq: json_digest({**identity, "prefix": [text, list(ids)]}), progress=cfg.progress)
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
        "p_value": res["p_value"], "t": res["t"], "df": res["df"], "conclusion": _conclusion(res["p_value"]),
        "meaning": MEANING, "weights": res["weights"], "intercept": res["intercept"],
        "features_used": res["features_used"], "sizes": res["sizes"], "test_means": res["test_means"],
        "inputs": {"suspect": cfg.suspect, "validation": cfg.validation,
                   "suspect_passages": counts["target"]["snippets"],
                   "validation_passages": counts["calibration"]["snippets"],
                   "documents_quarantined": {"suspect": counts["target"]["documents_quarantined"],
                                             "validation": counts["calibration"]["documents_quarantined"]},
                   "recall_prefix_passages": len(run.prefix_ids)},
        "scoring": {"rows_in": run.ledger.rows_in, "scored": run.ledger.rows_out,
                    "quarantined": run.ledger.quarantined, "reasons": dict(run.ledger.reasons)},
        "counts": {"in": run.ledger.rows_in, "scored": run.ledger.rows_out, "quarantined": run.ledger.quarantined,
                   "recall_prefix": len(run.prefix_ids), "tested": int(sum(res["sizes"].values()))},
        "model": cfg.model, "served_model": run_record(served, run.stats.get("api")), "config": asdict(cfg),
        "seconds": round(time.perf_counter() - t0, 2), "phases_s": phases.laps,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    _plot(res, out / "test_scores.png")
    (out / "report.md").write_text(_markdown(report))
    write_html(out, _page(report, out))
    publish(dest, out, {"job": "dataset-inference", "p_value": res["p_value"]})
    return {"report": str(out / "report.md"), "json": str(out / "report.json"), "p_value": res["p_value"],
            "seconds": report["seconds"]}


def _conclusion(p: float) -> str:
    if p < 0.01:
        return f"p = {p:.2g}: the model scores the suspect set as training data (significant at 1%)"
    if p < 0.05:
        return f"p = {p:.2g}: weak evidence that the suspect set was trained on (significant at 5%, not at 1%)"
    return f"p = {p:.2g}: no evidence that the suspect set was trained on (which is not evidence that it was not)"


def _plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    s, v = np.asarray(res["test_scores"]["suspect"]), np.asarray(res["test_scores"]["validation"])
    bins = np.histogram_bin_edges(np.concatenate([s, v]), bins=30)
    ax.hist(v, bins=bins, alpha=0.6, label=f"validation (n={len(v)})", color="#4477aa")
    ax.hist(s, bins=bins, alpha=0.6, label=f"suspect (n={len(s)})", color="#cc6677")
    ax.set_xlabel("linear model's score on the held-out halves (higher = more member-like)")
    ax.set_ylabel("passages")
    ax.set_title(f"Dataset inference: one-sided Welch t = {res['t']:.2f}, p = {res['p_value']:.2g}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _markdown(r: dict) -> str:
    sz = r["sizes"]
    lines = ["# Tidemark dataset inference", "", f"**{r['conclusion']}.**", "",
             f"- suspect: `{r['inputs']['suspect']}` ({r['inputs']['suspect_passages']} passages); validation: "
             f"`{r['inputs']['validation']}` ({r['inputs']['validation_passages']} passages); model `{r['model']}`",
             f"- learned on {sz['suspect_learn']} + {sz['validation_learn']} passages, tested on "
             f"{sz['suspect_test']} + {sz['validation_test']}: t = {r['t']:.3f}, df = {r['df']:.1f}, "
             f"p = {r['p_value']:.3g} (one-sided Welch)",
             f"- scoring: {r['scoring']['rows_in']} passages in, {r['scoring']['scored']} scored, "
             f"{r['scoring']['quarantined']} quarantined (`scoring/quarantine.parquet/`); documents or rows "
             f"quarantined while reading: {r['inputs']['documents_quarantined']['suspect']} suspect, "
             f"{r['inputs']['documents_quarantined']['validation']} validation (`_staging/quarantine/`)", "",
             "## What the p-value means", "", r["meaning"], "",
             "## Detector weights (standardised features; + means more member-like for the suspect set)", "",
             "| detector | weight |", "|---|---|"]
    for name, w in sorted(r["weights"].items(), key=lambda kv: -abs(kv[1])):
        lines.append(f"| {name} | {w:+.4f} |")
    lines += ["", "Plot: `test_scores.png` (the held-out halves' scores).", ""]
    return "\n".join(lines)


def _page(r: dict, out: Path):
    """report.html's content (scoring/reports/html.py): the test's answer first, then what it rests on."""
    from scoring.reports.html import Code, Figure, Page, Section, Table, left_out, num

    sz, inputs = r["sizes"], r["inputs"]
    verdict = r["conclusion"].split(": ", 1)[-1]  # _conclusion's words without its leading "p = …"
    head = f"{verdict[0].upper()}{verdict[1:]}: p = {r['p_value']:.2g} (one-sided Welch t-test)."
    summary = (f"Tested on held-out halves of {sz['suspect_test']:,} suspect and {sz['validation_test']:,} validation "
               f"passages, with a linear model of {len(r['features_used'])} detectors' scores learned on the other "
               "halves; the validation set is what the suspect set is compared with, so it must be the same kind of "
               "text.")
    weights = sorted(r["weights"].items(), key=lambda kv: -abs(kv[1]))
    sections = [
        Section("What the p-value means", [r["meaning"]]),
        Section("The test", [
            Table(["", "suspect", "validation"],
                  [["passages read", inputs["suspect_passages"], inputs["validation_passages"]],
                   ["passages that learned the linear model", sz["suspect_learn"], sz["validation_learn"]],
                   ["passages tested", sz["suspect_test"], sz["validation_test"]],
                   ["mean score of the tested passages", num(r["test_means"]["suspect"], 4),
                    num(r["test_means"]["validation"], 4)],
                   ["documents or rows unreadable", inputs["documents_quarantined"]["suspect"],
                    inputs["documents_quarantined"]["validation"]]],
                  f"t = {r['t']:.3f}, degrees of freedom {r['df']:.1f}, p = {r['p_value']:.3g}."),
            Figure(out / "test_scores.png", "The held-out passages' scores under the learned model")]),
        Section("Which detectors carry the signal", [
            "Weights of the linear model on standardised detector scores: a positive weight means a higher score "
            "makes a passage look more like the suspect set.",
            Table(["detector", "weight"], [[Code(n), f"{w:+.4f}"] for n, w in weights])]),
    ]
    sc = r["scoring"]
    warnings = [left_out(sc["quarantined"], sc["rows_in"], "passages", "could not be scored",
                         where="scoring/quarantine.parquet")] if sc["quarantined"] else []
    unread = inputs["documents_quarantined"]
    if unread["suspect"] or unread["validation"]:
        warnings.append(f"{unread['suspect']:,} suspect and {unread['validation']:,} validation documents or rows "
                        "could not be read (too short, empty or not UTF-8) and are not in the test "
                        "(_staging/quarantine/).")
    facts = [("suspect set", Code(inputs["suspect"])), ("validation set", Code(inputs["validation"])),
             ("model", Code(str(r["model"]))),
             ("passages", f"{sc['rows_in']:,} in, {sc['scored']:,} scored, {sc['quarantined']:,} quarantined; "
                          f"{inputs['recall_prefix_passages']} validation passages used as ReCaLL's prefix, "
                          "not tested")]
    files = [("report.md", "this report's numbers as Markdown"),
             ("report.json", "p, t, the weights, sizes and counts"),
             ("scoring", "every passage's detector scores (scores.parquet/) and the quarantine")]
    return Page(kind="dataset inference", headline=head, summary=summary, facts=facts, sections=sections,
                warnings=warnings, files=files)


def register(app: typer.Typer) -> None:
    @app.command("dataset-inference")
    @with_served_options
    def dataset_inference_cmd(
        suspect: str = typer.Option(..., help="texts claimed to be in the training data: a folder/glob of .txt, or "
                                    "jsonl/Parquet (question/answer, text or input)"),
        validation: str = typer.Option(..., help="texts of the same kind known NOT to be (e.g. written after the "
                                       "model's cutoff); same formats"),
        model: str = typer.Option(..., help="HF causal LM (local dir, hub id, .gguf, smollm2); with --api-base, the "
                                  "served model's name"),
        out: str = typer.Option(..., help="output directory (report.json, report.md, report.html, test_scores.png)"),
        methods: str = typer.Option("all", help="detectors used as features (all = every one the inputs allow)"),
        ref_model: Optional[str] = typer.Option(None, help="reference model: adds the `ref` feature"),
        snippets: int = typer.Option(10, min=1, help="passages per .txt document (seeded; a row is one passage)"),
        snippet_words: int = typer.Option(128, min=1, help="words per passage"),
        min_words: int = typer.Option(8, min=1, help="shorter documents/rows are quarantined (too_short)"),
        recall_shots: int = typer.Option(3, min=0, help="validation passages used as ReCaLL's prefix (excluded "
                                         "from the test)"),
        seed: int = typer.Option(0, help="seed for passages and the learn/test split"),
        actors: int = typer.Option(1, help="scorer actors"),
        gpus_per_actor: float = typer.Option(0.0, help="GPUs per scorer actor"),
        batch_size: Optional[int] = typer.Option(None, help="sequences per forward pass"),
        context: Optional[int] = typer.Option(None, help="window length in tokens"),
        stride: Optional[int] = typer.Option(None, help="window stride"),
        shard_size: int = typer.Option(1000, min=1, help="passages per scoring part (the unit of resume)"),
        quiet: bool = typer.Option(False, help="no progress bars"),
        served: dict = None,
    ):
        """Set-level membership test (Maini et al., 2024): every detector's score as a feature, a linear model
        learned on half of each set, a one-sided Welch t-test on the other half. Reports p, t, the weights."""
        cfg = DatasetInferenceConfig(
            suspect=suspect, validation=validation, model=model, out=out, methods=methods, ref_model=ref_model,
            snippets=snippets, snippet_words=snippet_words, min_words=min_words, recall_shots=recall_shots, seed=seed,
            actors=actors, gpus_per_actor=gpus_per_actor, batch_size=batch_size, context=context, stride=stride,
            shard_size=shard_size, progress=not quiet, **served)
        run_and_print_report(run_dataset_inference, cfg)
