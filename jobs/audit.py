"""`tidemark audit`: what share of a corpus (books, papers, a benchmark) did a model train on?

Calibrate a detector's threshold on known members and non-members, cut every target document into seeded
random snippets, score all snippets on the Ray actor pool (`jobs.evaluate.score_on_ray`, the same pipeline as
`evaluate`), then report per-document contamination rates with binomial CIs, the corpus mean, the flagged share,
the FPR-corrected share and evidence. The arithmetic lives in scoring/audit.py and scoring/proportions.py.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import typer

from jobs.ledger import quarantine_table
from jobs.report_cli import run_and_print_report



@dataclass
class AuditConfig:
    target: str
    model: str
    out: str
    calibration: Optional[str] = None  # a labelled benchmark file/release: one example = one snippet
    calib_members: Optional[str] = None  # or two folders of documents, snippeted like the target
    calib_nonmembers: Optional[str] = None
    detector: str = "min_k@k=0.2"
    objective: str = "accuracy"  # accuracy | fpr (then target_fpr)
    target_fpr: float = 0.05
    snippets: int = 100
    snippet_words: int = 512
    min_words: int = 8
    reference_corpus: Optional[str] = None
    ngram: int = 13
    top_k: int = 3
    ci: str = "wilson"
    n_bootstrap: int = 2000
    seed: int = 0
    actors: int = 1
    gpus_per_actor: float = 0.0
    batch_size: Optional[int] = None
    context: Optional[int] = None
    stride: Optional[int] = None
    ref_model: Optional[str] = None
    ref_corpus: Optional[str] = None
    progress: bool = True


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


def score_rows_on_pool(rows: list[dict], *, model: str, views: tuple[str, ...], ref_model: str | None = None,
                       actors: int = 1, gpus_per_actor: float = 0.0, batch_size: int | None = None,
                       context: int | None = None, stride: int | None = None, progress: bool = True):
    """Score text rows {id, input} on the Ray actor pool of `evaluate`. Returns (token-stats table, {id: error})
    where the error map names rows whose original (or ref) view failed."""
    from jobs.evaluate import EvaluateConfig, score_on_ray
    from scoring.tokenstats import TOKEN_STATS_SCHEMA

    cfg = EvaluateConfig(benchmark="(audit)", model=model, out="", ref_model=ref_model, actors=actors,
                         gpus_per_actor=gpus_per_actor, batch_size=batch_size, context=context, stride=stride,
                         progress=progress)
    scored = score_on_ray(rows, cfg, views, None)
    # No ReCaLL prefix here, so only the scorer's `prefix_len` column goes; the per-token lists stay in Arrow.
    token_stats = scored.select(TOKEN_STATS_SCHEMA.names).cast(TOKEN_STATS_SCHEMA)
    meta = scored.select(["id", "view", "error"]).to_pydict()
    failed = {i: f"{v}: {e}" for i, v, e in zip(meta["id"], meta["view"], meta["error"])
              if v in ("original", "ref") and e}
    seen = set(meta["id"])
    failed.update({r["id"]: "missing: the pipeline returned no row" for r in rows if r["id"] not in seen})
    return token_stats, failed


def _read_calibration(cfg: AuditConfig, q: list[dict]) -> tuple[list[dict], dict]:
    """Labelled calibration snippets (label, doc_id as the cluster) and their counts."""
    from jobs.doc_inputs import read_documents
    from scoring.audit import plan_snippets

    snippets, n_in = [], 0
    if cfg.calibration:
        # A release directory: its rows are under data/ (excluded/ holds the dropped rows, which have no label).
        spec = Path(cfg.calibration)
        spec = spec / "data" if spec.is_dir() and (spec / "data").is_dir() else spec
        docs, bad = read_documents(str(spec), min_words=cfg.min_words, id_prefix="calib:")
        n_in = len(docs) + len(bad)
        for d in docs:
            try:
                label = int(d["label"])
                if label not in (0, 1) or float(d["label"]) != label:
                    raise ValueError
            except (TypeError, ValueError):
                bad.append({"id": d["id"], "stage": "read", "reason": "bad_label",
                            "detail": f"label={d['label']!r} (need 1 = member or 0 = non-member)"})
                continue
            snippets += [dict(s, label=label) for s in plan_snippets(d, 1, cfg.snippet_words, cfg.seed, whole=True)]
        source = f"benchmark {cfg.calibration}"
    else:
        bad = []
        for label, spec in ((1, cfg.calib_members), (0, cfg.calib_nonmembers)):
            docs, b = read_documents(spec, min_words=cfg.min_words, id_prefix=f"calib{label}:")
            bad += b
            n_in += len(docs) + len(b)
            for d in docs:
                snippets += [dict(s, label=label) for s in plan_snippets(d, cfg.snippets, cfg.snippet_words, cfg.seed)]
        source = f"members {cfg.calib_members}, non-members {cfg.calib_nonmembers}"
    q += [dict(b, role="calibration", unit="document") for b in bad]
    return snippets, {"documents_in": n_in, "source": source}


def run_audit(cfg: AuditConfig) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tqdm import tqdm

    from jobs.corpus_io import iter_texts
    from jobs.doc_inputs import ROW_SUFFIXES, read_documents
    from jobs.shards import open_output, publish
    from scoring.audit import (NgramIndex, calibrate, corpus_summary, document_rates, plan_snippets,
                               plot_rates, plot_scores, report_markdown)
    from scoring.evaluation import compute_scores
    from scoring.metrics import roc_auc

    t0 = time.perf_counter()
    if bool(cfg.calibration) == bool(cfg.calib_members or cfg.calib_nonmembers):
        raise typer.BadParameter("give either --calibration FILE or both --calib-members and --calib-nonmembers")
    if not cfg.calibration and not (cfg.calib_members and cfg.calib_nonmembers):
        raise typer.BadParameter("--calib-members and --calib-nonmembers go together")
    if cfg.objective not in ("accuracy", "fpr"):
        raise typer.BadParameter("--objective must be accuracy or fpr")
    if cfg.snippets < 1 or cfg.snippet_words < 1:
        raise typer.BadParameter("--snippets and --snippet-words must be positive")
    method = resolve_detector(cfg.detector, cfg.ref_model)
    dest, out = open_output(cfg.out)  # a local directory or an s3:// prefix; `_SUCCESS` is written last

    quarantine: list[dict] = []
    docs, bad = read_documents(cfg.target, min_words=cfg.min_words)
    quarantine += [dict(b, role="target", unit="document") for b in bad]
    target_in = len(docs) + len(bad)
    if not docs:
        raise RuntimeError(f"no readable target document in {cfg.target} ({len(bad)} quarantined)")
    benchmark = all(Path(d["path"]).suffix.lower() in ROW_SUFFIXES for d in docs)
    target_snips = [s for d in tqdm(docs, desc="snippets", disable=not cfg.progress)
                    for s in plan_snippets(d, cfg.snippets, cfg.snippet_words, cfg.seed, whole=benchmark)]
    calib_snips, calib_counts = _read_calibration(cfg, quarantine)

    # One pipeline for both sets: the model loads once per actor.
    for i, s in enumerate(target_snips):
        s["sid"], s["role"], s["label"] = f"t{i}", "target", -1
    for i, s in enumerate(calib_snips):
        s["sid"], s["role"] = f"c{i}", "calibration"
    all_snips = target_snips + calib_snips
    views = ("original", *[v for v in method.needs if v not in ("ref", "token_freq")])
    token_stats, failed = score_rows_on_pool(
        [{"id": s["sid"], "input": s["text"]} for s in all_snips], model=cfg.model, views=views,
        ref_model=cfg.ref_model if "ref" in method.needs else None, actors=cfg.actors,
        gpus_per_actor=cfg.gpus_per_actor, batch_size=cfg.batch_size, context=cfg.context, stride=cfg.stride,
        progress=cfg.progress)
    resources = {}
    if "token_freq" in method.needs:
        from jobs.evaluate import EvaluateConfig, token_freq_resource

        resources["token_freq"] = token_freq_resource(token_stats, EvaluateConfig(
            benchmark="", model=cfg.model, out="", ref_corpus=cfg.ref_corpus))
    ok = [s for s in all_snips if s["sid"] not in failed]
    scores = compute_scores(token_stats, [{"id": s["sid"], "label": s["label"]} for s in ok], [method], resources)
    by_sid = dict(zip(scores.column("id").to_pylist(), scores.column(method.column).to_pylist()))
    for s in all_snips:
        if s["sid"] in failed:
            reason, detail = "score_failed", failed[s["sid"]]
        elif not np.isfinite(by_sid[s["sid"]]):
            reason, detail = "no_score", f"{method.column} is NaN (too few tokens?)"
        else:
            s["score"] = float(by_sid[s["sid"]])
            continue
        quarantine.append({"id": f"{s['doc_id']}#snippet{s['index']}", "stage": "score", "reason": reason,
                           "detail": detail[:300], "role": s["role"], "unit": "snippet"})
    t_scored = [s for s in target_snips if "score" in s]
    c_scored = [s for s in calib_snips if "score" in s]

    # Calibrate: threshold, and TPR/FPR at it with documents as clusters.
    c_labels = [s["label"] for s in c_scored]
    try:
        calib = calibrate(c_labels, [s["score"] for s in c_scored], [s["doc_id"] for s in c_scored],
                          objective=cfg.objective, target_fpr=cfg.target_fpr)
    except ValueError as exc:
        raise RuntimeError(f"calibration failed: {exc}") from None
    th = calib.threshold.value
    c_flags = np.asarray([s["score"] >= th for s in c_scored], dtype=np.int64)
    c_y = np.asarray(c_labels)
    c_clusters = np.asarray([s["doc_id"] for s in c_scored], dtype=object)

    documents = document_rates(t_scored, th, cfg.ci, cfg.top_k)
    scored_ids = {d["id"] for d in documents}
    for d in docs:
        if d["id"] not in scored_ids:
            quarantine.append({"id": d["id"], "stage": "score", "reason": "score_failed",
                               "detail": "no snippet of this document could be scored", "role": "target",
                               "unit": "document"})
    meta = {d["id"]: d for d in docs}
    for d in documents:
        d["path"], d["n_words"] = meta[d["id"]]["path"], meta[d["id"]]["n_words"]
    if cfg.reference_corpus:
        index = NgramIndex(tqdm(iter_texts(cfg.reference_corpus), desc="reference n-grams", disable=not cfg.progress),
                           n=cfg.ngram)
        for d in documents:
            d["ngram_overlap"] = index.overlap(meta[d["id"]]["text"])

    corpus = corpus_summary(t_scored, documents, calib, benchmark=benchmark, ci_method=cfg.ci,
                            n_bootstrap=cfg.n_bootstrap, seed=cfg.seed,
                            calib_flags=((c_flags[c_y == 1], c_clusters[c_y == 1]),
                                         (c_flags[c_y == 0], c_clusters[c_y == 0])))
    if cfg.reference_corpus:
        shares = [d["ngram_overlap"]["share"] for d in documents if np.isfinite(d["ngram_overlap"]["share"])]
        corpus["ngram_overlap"] = {"n": cfg.ngram, "reference": cfg.reference_corpus, "reference_texts": index.n_texts,
                                   "documents_with_any_match": int(sum(d["ngram_overlap"]["n_matched"] > 0 for d in documents)),
                                   "mean_share": float(np.mean(shares)) if shares else float("nan")}

    def n_q(role: str, unit: str) -> int:
        return sum(1 for x in quarantine if x["role"] == role and x["unit"] == unit)

    calib_docs_used = {s["doc_id"] for s in c_scored}
    for doc_id in dict.fromkeys(s["doc_id"] for s in calib_snips):
        if doc_id not in calib_docs_used:
            quarantine.append({"id": doc_id, "stage": "score", "reason": "score_failed", "role": "calibration",
                               "unit": "document", "detail": "no snippet of this document could be scored"})
    counts = {
        "target": {"documents_in": target_in, "documents_scored": len(documents),
                   "documents_quarantined": n_q("target", "document"), "snippets_planned": len(target_snips),
                   "snippets_scored": len(t_scored), "snippets_quarantined": n_q("target", "snippet")},
        "calibration": {"documents_in": calib_counts["documents_in"], "documents_scored": len(calib_docs_used),
                        "documents_quarantined": n_q("calibration", "document"),
                        "snippets_planned": len(calib_snips), "snippets_scored": len(c_scored),
                        "snippets_quarantined": n_q("calibration", "snippet")},
    }
    for part, c in counts.items():  # every input is accounted for, or the run fails loudly
        if c["documents_in"] != c["documents_scored"] + c["documents_quarantined"] or \
                c["snippets_planned"] != c["snippets_scored"] + c["snippets_quarantined"]:
            raise RuntimeError(f"{part} accounting does not reconcile: {c}")

    warnings = []
    med_t = float(np.median([s["n_words"] for s in t_scored])) if t_scored else float("nan")
    med_c = float(np.median([s["n_words"] for s in c_scored]))
    if np.isfinite(med_t) and max(med_t, med_c) > 1.5 * min(med_t, med_c):
        warnings.append(f"calibration snippets (median {med_c:.0f} words) and target snippets (median {med_t:.0f} "
                        "words) differ in length; detector scores depend on length, so the threshold may not transfer")
    auc = roc_auc(c_labels, [s["score"] for s in c_scored])
    if not auc > 0.6:
        warnings.append(f"calibration AUC is {auc:.3f}: the detector barely separates known members from non-members "
                        "for this model, so rates are mostly noise")
    n_small = min(calib.n_members, calib.n_non_members)
    if n_small < 20:
        warnings.append(f"only {n_small} calibration snippets in the smaller class: TPR/FPR are rough")

    plots = ["scores_hist.png"]
    plot_scores([s["score"] for s in t_scored], [s["score"] for s in c_scored if s["label"] == 1],
                [s["score"] for s in c_scored if s["label"] == 0], th, method.column, out / "scores_hist.png")
    if not benchmark:
        plot_rates([d["rate"] for d in documents], corpus["mean_rate"], out / "rates_hist.png")
        plots.append("rates_hist.png")
    pred = (np.asarray([s["score"] for s in c_scored]) >= th).astype(int)
    report = {
        "target": cfg.target, "model": cfg.model, "detector": method.column,
        "mode": "benchmark" if benchmark else "documents",
        "calibration": {"source": calib_counts["source"], "objective": calib.threshold.objective,
                        "target_fpr": cfg.target_fpr if cfg.objective == "fpr" else None,
                        "threshold": th, "n_members": calib.n_members, "n_non_members": calib.n_non_members,
                        "tpr": calib.tpr, "fpr": calib.fpr, "accuracy": float((pred == np.asarray(c_labels)).mean()),
                        "auc": auc},
        "corpus": corpus, "counts": counts, "documents": documents, "warnings": warnings, "plots": plots,
        "quarantine_reasons": _reason_counts(quarantine),
        "config": asdict(cfg), "seconds": round(time.perf_counter() - t0, 2),
    }
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    (out / "report.md").write_text(report_markdown(report))
    pq.write_table(quarantine_table(quarantine, context=("role", "unit")), out / "quarantine.parquet")
    pq.write_table(pa.Table.from_pylist(
        [{"doc_id": s["doc_id"], "role": s["role"], "label": s["label"], "index": s["index"],
          "start_word": s["start_word"], "n_words": s["n_words"], "score": s.get("score"),
          "flagged": (s["score"] >= th) if "score" in s else None} for s in all_snips]), out / "snippets.parquet")
    publish(dest, out, {"job": "audit", "counts": counts})
    return {"report": str(out / "report.md"), "json": str(out / "report.json"), "corpus": corpus,
            "counts": counts, "seconds": report["seconds"]}


def _reason_counts(quarantine: list[dict]) -> dict:
    out: dict[str, int] = {}
    for x in quarantine:
        key = f"{x['role']}/{x['unit']}/{x['reason']}"
        out[key] = out.get(key, 0) + 1
    return out


def register(app: typer.Typer) -> None:
    @app.command("audit")
    def audit(
        target: str = typer.Option(..., "--target", "--corpus",
                                   help="what to audit: a folder (recursive) or glob of .txt documents, or a jsonl/Parquet "
                                        "benchmark (GSM8K-style question/answer, or text/input; one row = one example)"),
        model: str = typer.Option(..., help="HF causal LM: local dir, hub id, FILE.gguf, DIR::FILE.gguf, or `smollm2`"),
        out: str = typer.Option(..., help="output directory (report.json, report.md, plots, snippets.parquet)"),
        calibration: Optional[str] = typer.Option(
            None, help="labelled calibration benchmark (jsonl/Parquet/release; `label` 1 = member); one row = one snippet"),
        calib_members: Optional[str] = typer.Option(None, help="folder/glob of documents known to be in the training data"),
        calib_nonmembers: Optional[str] = typer.Option(None, help="folder/glob of documents known not to be (e.g. newer)"),
        detector: str = typer.Option("min_k@k=0.2", help="one detector spec, e.g. min_k@k=0.2, min_k_pp, loss"),
        objective: str = typer.Option("accuracy", help="threshold: accuracy (max accuracy) or fpr (see --target-fpr)"),
        target_fpr: Optional[float] = typer.Option(None, help="calibrate at this FPR instead (implies --objective fpr)"),
        snippets: int = typer.Option(100, help="random snippets per document (seeded per document id)"),
        snippet_words: int = typer.Option(512, help="words per snippet; a shorter document is one snippet"),
        min_words: int = typer.Option(8, help="documents/rows with fewer words are quarantined (too_short)"),
        reference_corpus: Optional[str] = typer.Option(None, help="text/jsonl file or folder: exact n-gram overlap evidence"),
        ngram: int = typer.Option(13, help="n for the exact n-gram overlap"),
        top_k: int = typer.Option(3, help="top-scoring snippets listed per document as evidence"),
        ci: str = typer.Option("wilson", help="binomial CI for rates: wilson or clopper-pearson"),
        n_bootstrap: int = typer.Option(2000, help="bootstrap resamples for corpus-level intervals"),
        seed: int = typer.Option(0, help="seed for snippets and bootstraps"),
        actors: int = typer.Option(1, help="scorer actors (model replicas)"),
        gpus_per_actor: float = typer.Option(0.0, help="GPUs per scorer actor (0 = CPU)"),
        batch_size: Optional[int] = typer.Option(None, help="sequences per forward pass (default: 1 on CPU, 64 on GPU)"),
        context: Optional[int] = typer.Option(None, help="window length in tokens (default: model max, ≤2048)"),
        stride: Optional[int] = typer.Option(None, help="window stride for long snippets (default: context/2)"),
        ref_model: Optional[str] = typer.Option(None, help="reference model, for the `ref` detector"),
        ref_corpus: Optional[str] = typer.Option(None, help="token-frequency corpus, for the `dc_pdd` detector"),
        quiet: bool = typer.Option(False, help="no progress bars"),
    ):
        """Estimate how much of a corpus or benchmark a model trained on: calibrated per-document contamination
        rates with CIs, the corpus mean, the FPR-corrected share, and evidence (top snippets, 13-gram overlap)."""
        if target_fpr is not None:
            if not 0 < target_fpr < 1:
                raise typer.BadParameter("--target-fpr must be in (0, 1)")
            objective = "fpr"
        if ci not in ("wilson", "clopper-pearson"):
            raise typer.BadParameter("--ci must be wilson or clopper-pearson")
        cfg = AuditConfig(target=target, model=model, out=out, calibration=calibration, calib_members=calib_members,
                          calib_nonmembers=calib_nonmembers, detector=detector, objective=objective,
                          target_fpr=target_fpr if target_fpr is not None else 0.05, snippets=snippets,
                          snippet_words=snippet_words, min_words=min_words, reference_corpus=reference_corpus,
                          ngram=ngram, top_k=top_k, ci=ci, n_bootstrap=n_bootstrap, seed=seed, actors=actors,
                          gpus_per_actor=gpus_per_actor, batch_size=batch_size, context=context, stride=stride,
                          ref_model=ref_model, ref_corpus=ref_corpus, progress=not quiet)
        run_and_print_report(run_audit, cfg)
