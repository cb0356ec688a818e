"""`tidemark unlearning-audit`: did "unlearning" really remove a corpus from a model? (Shi et al.)

Cut every document into consecutive 512-word chunks, score each chunk with Min-K% under the original and under
the unlearned model (the shared scoring pool: the unlearned model runs as the `ref` branch, and both Min-K% scores
are computed on the workers),
and flag the chunks whose score ratio unlearned/original lies in (1/τ, τ), τ = 1.15: the unlearned model still
finds them about as likely as before, so unlearning probably failed there. The report's content (Markdown, page and
plot) is scoring/reports/unlearning_audit_page.py's.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np
import typer

from curation.io.ledger import quarantine_table
from jobs.kit.options import command, option, progress_option
from jobs.kit.report_out import run_and_print_report, write_html
from jobs.plane.runners import RAY


@dataclass
class UnlearningConfig:
    original: str = option(help="the model before unlearning (HF dir, hub id, GGUF, `smollm2`)")
    unlearned: str = option(help="the model after unlearning")
    corpus: str = option(help="what should have been forgotten: folder/glob of .txt, or jsonl rows")
    out: str = option(help="output directory (report.json, report.md, report.html, chunks.parquet, ratios_hist.png)")
    k: float = option(0.2, "Min-K% fraction k")
    tolerance: float = option(1.15, "flag when the ratio lies in (1/τ, τ)")
    chunk_words: int = option(512, "words per chunk (consecutive)")
    min_chunk_words: int = option(64, "a last chunk shorter than this is dropped (a document's first chunk is always "
                                  "kept)")
    ci: str = option("wilson", "binomial CI: wilson or clopper-pearson")
    actors: int = option(1, "scorer actors per model")
    gpus_per_actor: float = option(0.0, "GPUs per scorer actor (0 = CPU)")
    batch_size: Optional[int] = option(None, "sequences per forward pass")
    context: Optional[int] = option(None, "window length in tokens (default: model max, ≤2048)")
    stride: Optional[int] = option(None, "window stride (default: context/2)")
    max_listed: int = 100
    shard_size: int = 1000  # chunks per scoring part
    progress: bool = progress_option()


def flag_ratio(original: np.ndarray, unlearned: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """(ratio unlearned/original, flagged = ratio in (1/τ, τ)). Min-K% scores are mean log-probs (< 0), so the
    ratio is positive; it grows when the unlearned model finds the chunk less likely."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.asarray(unlearned, dtype=np.float64) / np.asarray(original, dtype=np.float64)
    return ratio, (ratio > 1.0 / tolerance) & (ratio < tolerance)


def run_unlearning_audit(cfg: UnlearningConfig) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs.parts.doc_inputs import read_documents
    from jobs.kit.identity import open_output, publish
    from scoring.audits.corpus import chunk_document
    from scoring.detectors import parse_method
    from scoring.detectors.base import OnView
    from scoring.reports.unlearning_audit_page import plot_ratios, report_markdown, report_page
    from scoring.stats.proportions import binomial_ci

    t0 = time.perf_counter()
    if not cfg.tolerance > 1:
        raise typer.BadParameter("--tolerance must be > 1")
    if not 0 < cfg.k <= 1:
        raise typer.BadParameter("--k must be in (0, 1]")
    dest, out = open_output(cfg.out)  # a local directory or an s3:// prefix; `_SUCCESS` is written last
    docs, quarantine = read_documents(cfg.corpus)
    for q in quarantine:
        q["unit"] = "document"
    n_docs_in = len(docs) + len(quarantine)
    chunks = []
    for d in docs:
        cs = chunk_document(d, cfg.chunk_words, cfg.min_chunk_words)
        chunks += cs
    for i, c in enumerate(chunks):
        c["cid"] = f"u{i}"
    if not chunks:
        raise RuntimeError(f"no chunk to score in {cfg.corpus}")

    method = parse_method(f"min_k@k={cfg.k}")
    on_unlearned = OnView(method, "ref", "min_k_unlearned")
    scores, failed = _score_chunks(cfg, dest, chunks, [method, on_unlearned])
    ok = [c for c in chunks if c["cid"] not in failed]
    s_orig = np.asarray([scores[c["cid"]][0] for c in ok], dtype=np.float64)
    s_unl = np.asarray([scores[c["cid"]][1] for c in ok], dtype=np.float64)
    ratio, flagged = flag_ratio(s_orig, s_unl, cfg.tolerance)
    scored = []
    for c, a, b, r, f in zip(ok, s_orig, s_unl, ratio, flagged):
        if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(r)):
            failed[c["cid"]] = "no_score: Min-K% is NaN or the ratio is undefined"
            continue
        scored.append({**{k: c[k] for k in ("doc_id", "index", "start_word", "n_words")}, "min_k_original": float(a),
                       "min_k_unlearned": float(b), "ratio": float(r), "flagged": bool(f), "text": c["text"]})
    for c in chunks:
        if c["cid"] in failed:
            quarantine.append({"id": f"{c['doc_id']}#chunk{c['index']}", "stage": "score",
                               "reason": failed[c["cid"]].split(":")[0], "detail": failed[c["cid"]][:300],
                               "unit": "chunk"})
    docs_scored = list(dict.fromkeys(s["doc_id"] for s in scored))
    for d in docs:
        if d["id"] not in set(docs_scored):
            quarantine.append({"id": d["id"], "stage": "score", "reason": "no_chunk_scored",
                               "detail": "the document gave no scorable chunk", "unit": "document"})
    counts = {"documents_in": n_docs_in, "documents_scored": len(docs_scored),
              "documents_quarantined": sum(q["unit"] == "document" for q in quarantine),
              "chunks_planned": len(chunks), "chunks_scored": len(scored),
              "chunks_quarantined": sum(q["unit"] == "chunk" for q in quarantine)}
    if counts["documents_in"] != counts["documents_scored"] + counts["documents_quarantined"] or \
            counts["chunks_planned"] != counts["chunks_scored"] + counts["chunks_quarantined"]:
        raise RuntimeError(f"accounting does not reconcile: {counts}")

    n_flag = sum(s["flagged"] for s in scored)
    per_doc = []
    for doc_id in docs_scored:
        group = [s for s in scored if s["doc_id"] == doc_id]
        k = sum(s["flagged"] for s in group)
        per_doc.append({"id": doc_id, "chunks": len(group), "flagged": k, "share": k / len(group),
                        "share_ci": list(binomial_ci(k, len(group), cfg.ci))})
    ratios = np.asarray([s["ratio"] for s in scored])
    report = {
        "original": cfg.original, "unlearned": cfg.unlearned, "corpus": cfg.corpus,
        "rule": f"flag a chunk when min_k@k={cfg.k:g} unlearned/original lies in (1/{cfg.tolerance:g}, {cfg.tolerance:g})",
        "flagged_share": n_flag / len(scored) if scored else float("nan"),
        "flagged_share_ci": list(binomial_ci(n_flag, len(scored), cfg.ci)) if scored else [float("nan")] * 2,
        "ci_method": cfg.ci, "n_flagged": n_flag,
        "ratio_quantiles": {q: float(np.quantile(ratios, float(q))) for q in ("0.1", "0.5", "0.9")} if scored else {},
        "counts": counts, "documents": per_doc,
        "flagged_chunks": [{k: v for k, v in s.items() if k != "text"} | {"excerpt": " ".join(s["text"].split()[:40])}
                           for s in scored if s["flagged"]],
        "config": asdict(cfg), "seconds": round(time.perf_counter() - t0, 2),
    }
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    pq.write_table(pa.Table.from_pylist(scored) if scored else pa.table({}), out / "chunks.parquet")
    pq.write_table(quarantine_table(quarantine, context=("unit",)), out / "quarantine.parquet")
    if scored:
        (out / "ratios_hist.png").write_bytes(plot_ratios(ratios, cfg.tolerance))
    (out / "report.md").write_text(report_markdown(report))
    write_html(out, report_page(report, out))
    publish(dest, out, {"job": "unlearning-audit", "counts": counts})
    return {"report": str(out / "report.md"), "flagged_share": report["flagged_share"], "counts": counts,
            "seconds": report["seconds"]}


def _score_chunks(cfg: UnlearningConfig, dest, chunks: list[dict], methods: list) -> tuple[dict, dict]:
    """Score the chunks on the shared scoring pool (jobs/plane/part_loop.py): the original model's view and the
    unlearned model's as `ref`, both detectors run on the workers. Returns ({chunk id: (original, unlearned)},
    {chunk id: error}); the driver reads only the two score columns back. (The chunks themselves are held here:
    an unlearning audit's forget set is documents, not a corpus.)"""
    from jobs.kit.runtime import start_driver
    from jobs.plane.part_loop import score_benchmark
    from jobs.plane.part_store import read_parts
    from jobs.plane.scoring_pool import ModelBranch, ScoringSpec
    from jobs.kit.identity import json_digest, model_identity, tool_version
    from curation.io.outputs import Location
    from jobs.plane.tasks import hooks_from_env

    start_driver()
    dest.write_bytes("_staging/chunks.jsonl", "".join(
        json.dumps({"id": c["cid"], "input": c["text"], "label": 0}, ensure_ascii=False) + "\n"
        for c in chunks).encode())
    spec = ScoringSpec((ModelBranch(cfg.original, ("original",)),
                        ModelBranch(cfg.unlearned, ("original",), rename_original="ref")),
                       context=cfg.context, stride=cfg.stride, max_batch_size=cfg.batch_size, actors=cfg.actors,
                       gpus_per_actor=cfg.gpus_per_actor, hooks=hooks_from_env())
    fp = json_digest({"original": model_identity(cfg.original), "unlearned": model_identity(cfg.unlearned),
                  "settings": {k: getattr(cfg, k) for k in ("k", "chunk_words", "min_chunk_words", "context",
                                                             "stride", "batch_size", "actors", "gpus_per_actor")},
                  "tool": tool_version()})
    scoring = Location(dest.child("scoring"))
    run = score_benchmark(benchmark=dest.child("_staging/chunks.jsonl"), requester_pays=False,
                          rows_per_part=cfg.shard_size, dest=scoring, spec=spec, runner=RAY, methods=methods,
                          seed=0, fingerprint_for=lambda *_: fp, progress=cfg.progress)
    run.ledger.check("unlearning-audit scoring")
    table = read_parts(scoring, "scores.parquet", ["id", *[m.column for m in methods]])
    cols = table.to_pydict() if table is not None else {"id": []}
    scores = {i: tuple(cols[m.column][j] for m in methods) for j, i in enumerate(cols["id"])}
    q = read_parts(scoring, "quarantine.parquet", ["id", "reason", "detail"])
    failed = {r["id"]: f"{r['reason']}: {r['detail']}" for r in (q.to_pylist() if q is not None else [])}
    dest.delete_tree("_staging")
    return scores, failed


def unlearning_config(*, ci: str, **options) -> UnlearningConfig:
    if ci not in ("wilson", "clopper-pearson"):
        raise typer.BadParameter("--ci must be wilson or clopper-pearson")
    return UnlearningConfig(ci=ci, **options)


def register(app: typer.Typer) -> None:
    app.command("unlearning-audit")(command(
        UnlearningConfig, lambda cfg: run_and_print_report(run_unlearning_audit, cfg), make=unlearning_config,
        doc="Score 512-word chunks with Min-K% under the original and the unlearned model; flag chunks whose score "
            "ratio stays in (1/1.15, 1.15), i.e. where unlearning likely failed. Lists the flagged chunks."))
