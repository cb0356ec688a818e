"""`tidemark audit`: what share of a corpus (books, papers, a benchmark) did a model train on?

Calibrate a detector's threshold on known members and non-members, cut every target document into seeded
random snippets on the workers (jobs/parts/audit/snippets.py), score them part by part on the scoring pool that
`evaluate` uses (jobs/plane/part_loop.py), aggregate the score columns on the driver (jobs/parts/audit/results.py), then
report per-document contamination rates with binomial CIs, the corpus mean, the flagged share,
the FPR-corrected share and evidence. The arithmetic lives in scoring/audits/corpus.py and scoring/stats/proportions.py.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import typer

from curation.io.ledger import quarantine_table
from jobs.kit.report_out import run_and_print_report, write_html
from jobs.kit.options import command, option, progress_option
from jobs.kit.served_model import ServedFields, drop_full_distribution, run_record
from jobs.plane.runners import RAY



@dataclass
class AuditConfig(ServedFields):
    target: str = option(help="what to audit: a folder (recursive) or glob of .txt documents, or a jsonl/Parquet "
                         "benchmark (GSM8K-style question/answer, or text/input; one row = one example)",
                         flags=("--target", "--corpus"))
    model: str = option(help="HF causal LM: local dir, hub id, FILE.gguf, DIR::FILE.gguf, or `smollm2`; with "
                        "--api-base, the served model's name")
    out: str = option(help="output directory (report.json, report.md, report.html, plots, snippets.parquet)")
    calibration: Optional[str] = option(None, "labelled calibration benchmark (jsonl/Parquet/release; `label` 1 = "
                                        "member); one row = one snippet")
    calib_members: Optional[str] = option(None, "folder/glob of documents known to be in the training data")
    calib_nonmembers: Optional[str] = option(None, "folder/glob of documents known not to be (e.g. newer)")
    detector: str = option("min_k@k=0.2", "one detector spec, e.g. min_k@k=0.2, min_k_pp, loss")
    objective: str = option("accuracy", "threshold: accuracy (max accuracy) or fpr (see --target-fpr)")
    target_fpr: float = option(0.05, "calibrate at this FPR instead (implies --objective fpr)", cli_default=None)
    snippets: int = option(100, "random snippets per document (seeded per document id)")
    snippet_words: int = option(512, "words per snippet; a shorter document is one snippet")
    min_words: int = option(8, "documents/rows with fewer words are quarantined (too_short)")
    reference_corpus: Optional[str] = option(None, "text/jsonl file or folder: exact n-gram overlap evidence")
    ngram: int = option(13, "n for the exact n-gram overlap")
    top_k: int = option(3, "top-scoring snippets listed per document as evidence")
    ci: str = option("wilson", "binomial CI for rates: wilson or clopper-pearson")
    n_bootstrap: int = option(2000, "bootstrap resamples for corpus-level intervals")
    seed: int = option(0, "seed for snippets and bootstraps")
    ref_model: Optional[str] = option(None, "reference model, for the `ref` detector")
    ref_corpus: Optional[str] = option(None, "token-frequency corpus, for the `dc_pdd` detector")
    shard_size: int = option(1000, "about this many snippets per scoring part (each part is scored and written on "
                             "the workers and committed under OUT/scoring/_parts/, so a restarted audit resumes)",
                             min=1)
    report_documents: int = option(1000, "documents listed with evidence in report.json (the highest max scores "
                                   "when there are more; documents.parquet has all)", min=1)
    progress: bool = progress_option()


def resolve_detector(spec: str, ref_model: str | None):
    from scoring.detectors import parse_method

    try:
        method = parse_method(spec)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--detector") from None
    if "prefixed" in method.needs:
        raise typer.BadParameter("ReCaLL needs a non-member prefix per text; it is not supported in audits",
                                 param_hint="--detector")
    if "ref" in method.needs and not ref_model:
        raise typer.BadParameter(f"{spec} needs --ref-model", param_hint="--detector")
    return method


def audit_spec(cfg: AuditConfig, method, served=None):
    """What the audit asks of the scoring pool: the target model's views, and the reference model's if needed."""
    from jobs.plane.scoring_pool import ModelBranch

    views = ("original", *[v for v in method.needs if v not in ("ref", "token_freq")])
    branches = [served.branch(views) if served else ModelBranch(cfg.model, views)]
    if "ref" in method.needs:
        branches.append(ModelBranch(cfg.ref_model, ("original",), rename_original="ref"))
    return cfg.pool_spec(branches)


def staging_tasks(cfg: AuditConfig, benchmark: bool) -> list[dict]:
    from jobs.parts.audit.snippets import plan_tasks

    common = {"snippets": cfg.snippets, "snippet_words": cfg.snippet_words, "min_words": cfg.min_words,
              "seed": cfg.seed}
    tasks = plan_tasks("target", cfg.target, id_prefix="", label=-1, whole=benchmark, **common)
    if cfg.calibration:
        # A release directory: its rows are under data/ (excluded/ holds the dropped rows, which have no label).
        spec = Path(cfg.calibration)
        spec = spec / "data" if spec.is_dir() and (spec / "data").is_dir() else spec
        tasks += plan_tasks("calibration", str(spec), id_prefix="calib:", label=None, whole=True, **common)
    else:
        for label, spec in ((1, cfg.calib_members), (0, cfg.calib_nonmembers)):
            tasks += [dict(t, task=t["task"] + 100_000 * label) for t in
                      plan_tasks("calibration", spec, id_prefix=f"calib{label}:", label=label, whole=False, **common)]
    return tasks


def _validate(cfg: AuditConfig):
    if bool(cfg.calibration) == bool(cfg.calib_members or cfg.calib_nonmembers):
        raise typer.BadParameter("give either --calibration FILE or both --calib-members and --calib-nonmembers")
    if not cfg.calibration and not (cfg.calib_members and cfg.calib_nonmembers):
        raise typer.BadParameter("--calib-members and --calib-nonmembers go together")
    if cfg.objective not in ("accuracy", "fpr"):
        raise typer.BadParameter("--objective must be accuracy or fpr")
    if cfg.snippets < 1 or cfg.snippet_words < 1:
        raise typer.BadParameter("--snippets and --snippet-words must be positive")
    return resolve_detector(cfg.detector, cfg.ref_model)


def stage_snippets(cfg: AuditConfig, dest, benchmark: bool, phases):
    """With a reference corpus, the audited documents' n-grams found in it (the overlap engine on the workers:
    jobs/parts/audit/reference_overlap.py), then the snippets cut on the workers, each document's overlap measured as it
    is read. Returns (the reference scan's counts or None, staged task summaries, snippets per role)."""
    from jobs.kit.runtime import start_driver
    from jobs.parts.audit.snippets import run_staging
    from jobs.parts.audit.reference_overlap import found_ngrams

    tasks = staging_tasks(cfg, benchmark)
    phases.lap("plan")
    start_driver()
    dest.delete_tree("_staging")
    found, reference = None, None
    if cfg.reference_corpus:
        found, reference = found_ngrams(tasks, cfg.reference_corpus, cfg.ngram, dest, cfg.progress)
        phases.lap("reference corpus (workers)")
    staged = run_staging(tasks, dest.uri, found, cfg.progress, runner=RAY)
    phases.lap("snippets (workers)")
    n_staged = {r: sum(s["snippets"] for s in staged if s["role"] == r) for r in ("target", "calibration")}
    if not n_staged["target"]:
        raise RuntimeError(f"no readable target document in {cfg.target} "
                           f"({sum(s['documents_quarantined'] for s in staged if s['role'] == 'target')} quarantined)")
    return reference, staged, n_staged


def run_audit(cfg: AuditConfig) -> dict:
    """Plan on the driver; snippets are cut (jobs/parts/audit/snippets.py) and scored (jobs/plane/part_loop.py) on the
    workers; the driver aggregates score columns (jobs/parts/audit/results.py)."""
    import pyarrow.parquet as pq

    from jobs.parts.audit import results
    from jobs.parts.audit.accounting import account, audit_warnings, document_rows, reason_counts
    from jobs.parts.audit.snippets import fetch_texts
    from jobs.plane.driver_memory import trim
    from jobs.parts.doc_inputs import ROW_SUFFIXES, document_files
    from jobs.commands.evaluate import token_freq_from_corpus
    from jobs.kit.log import PhaseClock
    from jobs.plane.part_loop import score_benchmark
    from jobs.plane.part_store import read_parts
    from jobs.kit.identity import json_digest, model_identity, open_output, publish, tool_version
    from curation.io.outputs import Location
    from scoring.audits.corpus import calibrate, corpus_summary, top_snippets
    from scoring.stats.metrics import roc_auc

    t0 = time.perf_counter()
    phases = PhaseClock()
    method = _validate(cfg)
    served = cfg.served()  # a served model is probed once, before anything else (a few requests)
    drop_full_distribution([method], method.column, served)  # refused over an API unless topk= accepts it
    dest, out = open_output(cfg.out)  # a local directory or an s3:// prefix; `_SUCCESS` is written last
    files, _ = document_files(cfg.target)
    benchmark = all(f.suffix.lower() in ROW_SUFFIXES for f in files)
    reference, staged, n_staged = stage_snippets(cfg, dest, benchmark, phases)

    scoring = Location(dest.child("scoring"))
    ref_freq = token_freq_from_corpus(cfg.tokenizer_path, cfg.ref_corpus) if (
        "token_freq" in method.needs and cfg.ref_corpus) else None
    settings = {k: v for k, v in asdict(cfg).items() if k in (
        "detector", "snippets", "snippet_words", "min_words", "seed", "context", "stride", "batch_size",
        "actors", "gpus_per_actor")}

    def fingerprint(prefix_text, prefix_ids, token_freq):
        from jobs.kit.identity import sha256_bytes

        freq = None if token_freq is None else sha256_bytes(np.ascontiguousarray(token_freq).tobytes())
        return json_digest({"settings": settings,
                        "model": served.identity() if served else model_identity(cfg.model),
                        "ref_model": model_identity(cfg.ref_model), "token_freq": freq, "tool": tool_version()})

    run = score_benchmark(benchmark=dest.child("_staging/snippets"), requester_pays=False,
                          rows_per_part=cfg.shard_size, dest=scoring, spec=audit_spec(cfg, method, served), runner=RAY,
                          methods=[method], seed=cfg.seed, count_tokens_of=cfg.tokenizer_path if "token_freq" in method.needs
                          else None, token_freq=ref_freq, fingerprint_for=fingerprint, progress=cfg.progress)
    run.ledger.check("audit scoring")
    phases.lap("score (workers)")

    scores = read_parts(scoring, "scores.parquet", ["id", "label", method.column])
    if scores is None:
        raise RuntimeError(f"no snippet could be scored; see {scoring.child('quarantine.parquet')}")
    tgt = results.role_scores(scores, method.column, "target")
    cal = results.role_scores(scores, method.column, "calibration")
    del scores  # each role keeps its own arrays; the driver holds each score once
    try:  # the threshold, and TPR/FPR at it with documents as clusters
        calib = calibrate(cal.labels, cal.scores, cal.codes, objective=cfg.objective, target_fpr=cfg.target_fpr)
    except ValueError as exc:
        raise RuntimeError(f"calibration failed: {exc}") from None
    th = calib.threshold.value
    documents, unscored, duplicates = results.documents_table(dest, "target", tgt, th, cfg.ci)
    listed = results.report_rows(documents, cfg.report_documents)
    want_codes = np.asarray(pc_index(tgt.doc_ids, listed["id"]), dtype=np.int64)
    top = top_snippets(tgt.codes, tgt.scores, cfg.top_k, wanted=want_codes)
    top_ids = {code: [tgt.ids[j].as_py() for j in js] for code, js in top.items()}
    score_of = {tgt.ids[j].as_py(): float(tgt.scores[j]) for js in top.values() for j in js}
    wanted = {sid for sids in top_ids.values() for sid in sids}
    phases.lap("rates")

    names = [n for s in staged for n in s["files"]]
    snip = results.snippet_pass(dest, names, {"target": tgt, "calibration": cal}, th, wanted,
                                out / "snippets.parquet")
    by_file: dict[str, set[str]] = {}
    for sid, w in snip["where"].items():
        by_file.setdefault(w["file"], set()).add(sid)
    texts = fetch_texts(dest.uri, by_file)
    phases.lap("snippets table and evidence")

    doc_rows = document_rows(listed, want_codes, top_ids, snip["where"], score_of, th, texts,
                             bool(cfg.reference_corpus))

    rates = documents["rate"].to_numpy()
    corpus = corpus_summary(tgt.scores, tgt.codes, rates, calib, benchmark=benchmark, ci_method=cfg.ci,
                            n_bootstrap=cfg.n_bootstrap, seed=cfg.seed,
                            calib_flags=((cal.scores[cal.labels == 1] >= th, cal.codes[cal.labels == 1]),
                                         (cal.scores[cal.labels == 0] >= th, cal.codes[cal.labels == 0])))
    if cfg.reference_corpus:
        share = np.asarray(documents["ngram_share"].to_numpy(zero_copy_only=False), dtype=np.float64)
        matched = np.asarray(documents["ngram_n_matched"].to_numpy(zero_copy_only=False), dtype=np.float64)
        corpus["ngram_overlap"] = {"n": cfg.ngram, "reference": cfg.reference_corpus,
                                   "reference_texts": reference["documents"],
                                   "documents_with_any_match": int((matched > 0).sum()),
                                   "mean_share": float(np.mean(share[np.isfinite(share)]))
                                   if np.isfinite(share).any() else float("nan")}
        if reference["quarantined"]:  # only then: a clean corpus's outputs keep their bytes
            corpus["ngram_overlap"]["reference_quarantined"] = reference["reasons"]

    # ---- accounting: every document and snippet in is scored or quarantined, per role
    quarantine = results.snippet_quarantine(scoring, tgt, cal, method.column)
    cal_docs = results.documents_table(dest, "calibration", cal, th, cfg.ci)
    counts = account(staged, n_staged, {"target": tgt, "calibration": cal},
                     {"target": documents.num_rows, "calibration": cal_docs[0].num_rows}, quarantine, (
                         (duplicates, "target", "duplicate_id", "an earlier document has the same id"),
                         (unscored, "target", "score_failed", "no snippet of this document could be scored"),
                         (cal_docs[2], "calibration", "duplicate_id", "an earlier document has the same id"),
                         (cal_docs[1], "calibration", "score_failed", "no snippet of this document could be scored")))
    auc = roc_auc(cal.labels, cal.scores)
    warnings = audit_warnings(snip["words"], auc, calib, documents.num_rows, listed.num_rows)

    trim()  # the aggregation's temporaries are freed: return them before the plots allocate (the driver's peak)
    plots = write_plots(out, tgt, cal, th, method.column, None if benchmark else (rates, corpus["mean_rate"]))
    pq.write_table(documents.drop_columns(["role"]), out / "documents.parquet")
    pred = (cal.scores >= th).astype(int)
    report = {
        "target": cfg.target, "model": cfg.model, "detector": method.column,
        "mode": "benchmark" if benchmark else "documents",
        "calibration": {"source": f"benchmark {cfg.calibration}" if cfg.calibration else
                        f"members {cfg.calib_members}, non-members {cfg.calib_nonmembers}",
                        "objective": calib.threshold.objective,
                        "target_fpr": cfg.target_fpr if cfg.objective == "fpr" else None,
                        "threshold": th, "n_members": calib.n_members, "n_non_members": calib.n_non_members,
                        "tpr": calib.tpr, "fpr": calib.fpr, "accuracy": float((pred == cal.labels).mean()),
                        "auc": auc},
        "corpus": corpus, "counts": counts, "documents": doc_rows,
        "documents_listed": f"{len(doc_rows)} of {documents.num_rows} (all in documents.parquet)",
        "warnings": warnings, "plots": plots, "quarantine_reasons": reason_counts(quarantine, staged),
        "parts": run.stats, "config": asdict(cfg), "seconds": round(time.perf_counter() - t0, 2),
        "phases_s": phases.laps, "served_model": run_record(served, run.stats.get("api")),
    }
    write_report(dest, out, report, quarantine)
    publish(dest, out, {"job": "audit", "counts": counts})
    return {"report": str(out / "report.md"), "json": str(out / "report.json"), "corpus": corpus,
            "counts": counts, "seconds": report["seconds"]}


def write_plots(out: Path, tgt, cal, threshold: float, detector: str, rates) -> list[str]:
    """scores_hist.png, and rates_hist.png in document mode (`rates`: (per-document rates, their mean))."""
    from scoring.reports.audit_page import plot_rates, plot_scores

    (out / "scores_hist.png").write_bytes(
        plot_scores(tgt.scores, cal.scores[cal.labels == 1], cal.scores[cal.labels == 0], threshold, detector))
    if rates is None:
        return ["scores_hist.png"]
    (out / "rates_hist.png").write_bytes(plot_rates(*rates))
    return ["scores_hist.png", "rates_hist.png"]


def write_report(dest, out: Path, report: dict, quarantine: list[dict]) -> None:
    """report.json, report.md, report.html and quarantine.parquet/; the snippets' texts were only the scorer's
    input and are removed (their metadata stays)."""
    from scoring.reports.audit_page import audit_page
    from scoring.reports.audit_report import report_markdown

    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    (out / "report.md").write_text(report_markdown(report))
    write_html(out, audit_page(report, out))
    _write_quarantine(dest, out / "quarantine.parquet", quarantine)
    dest.delete_tree("_staging/snippets")


def pc_index(values, ids):
    """Positions of `ids` in the sorted array `values`."""
    import pyarrow.compute as pc

    return pc.index_in(ids, value_set=values).to_numpy(zero_copy_only=False)


def _write_quarantine(dest, path: Path, records: list[dict]) -> None:
    """quarantine.parquet/ as parts: the staging tasks' document rows (copied a part at a time) and this run's."""
    import pyarrow.parquet as pq

    path.mkdir(parents=True, exist_ok=True)
    for name in [n for n in dest.list("_staging/quarantine") if n.endswith(".parquet")]:
        pq.write_table(dest.read_parquet(name), path / f"part-staged-{name.rsplit('/', 1)[-1]}")
    pq.write_table(quarantine_table(records, context=("role", "unit")), path / "part-scored.parquet")


def audit_config(*, target_fpr: Optional[float], objective: str, ci: str, **options) -> AuditConfig:
    """The command line's config: a --target-fpr implies --objective fpr (else the config's 0.05 is unused)."""
    if target_fpr is not None:
        if not 0 < target_fpr < 1:
            raise typer.BadParameter("--target-fpr must be in (0, 1)")
        objective = "fpr"
    if ci not in ("wilson", "clopper-pearson"):
        raise typer.BadParameter("--ci must be wilson or clopper-pearson")
    return AuditConfig(target_fpr=0.05 if target_fpr is None else target_fpr, objective=objective, ci=ci, **options)


def register(app: typer.Typer) -> None:
    app.command("audit")(command(
        AuditConfig, lambda cfg: run_and_print_report(run_audit, cfg), make=audit_config,
        doc="Estimate how much of a corpus or benchmark a model trained on: calibrated per-document contamination "
            "rates with CIs, the corpus mean, the FPR-corrected share, and evidence (top snippets, 13-gram overlap)."))
