"""`tidemark unlearning-audit`: did "unlearning" really remove a corpus from a model? (Shi et al.)

Cut every document into consecutive 512-word chunks, score each chunk with Min-K% under the original and under
the unlearned model (the shared scoring pool: the unlearned model runs as the `ref` branch, and both Min-K% scores
are computed on the workers),
and flag the chunks whose score ratio unlearned/original lies in (1/τ, τ), τ = 1.15: the unlearned model still
finds them about as likely as before, so unlearning probably failed there.
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


@dataclass
class UnlearningConfig:
    original: str
    unlearned: str
    corpus: str
    out: str
    k: float = 0.2
    tolerance: float = 1.15
    chunk_words: int = 512
    min_chunk_words: int = 64
    ci: str = "wilson"
    actors: int = 1
    gpus_per_actor: float = 0.0
    batch_size: Optional[int] = None
    context: Optional[int] = None
    stride: Optional[int] = None
    max_listed: int = 100
    shard_size: int = 1000  # chunks per scoring part
    progress: bool = True


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
        _plot_ratios(ratios, cfg.tolerance, out / "ratios_hist.png")
    (out / "report.md").write_text(_markdown(report, cfg))
    write_html(out, _page(report, cfg, out))
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
    from jobs.kit.output_store import Location
    from scoring.lm.tasks import hooks_from_env

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
                          rows_per_part=cfg.shard_size, dest=scoring, spec_for=lambda _: spec, methods=methods,
                          seed=0, fingerprint_for=lambda *_: fp, progress=cfg.progress)
    run.ledger.check("unlearning-audit scoring")
    table = read_parts(scoring, "scores.parquet", ["id", *[m.column for m in methods]])
    cols = table.to_pydict() if table is not None else {"id": []}
    scores = {i: tuple(cols[m.column][j] for m in methods) for j, i in enumerate(cols["id"])}
    q = read_parts(scoring, "quarantine.parquet", ["id", "reason", "detail"])
    failed = {r["id"]: f"{r['reason']}: {r['detail']}" for r in (q.to_pylist() if q is not None else [])}
    dest.delete_tree("_staging")
    return scores, failed


def _markdown(report: dict, cfg: UnlearningConfig) -> str:
    c = report["counts"]
    lo, hi = report["flagged_share_ci"]
    md = [f"# Tidemark unlearning audit: {cfg.corpus}", "",
          f"- original `{cfg.original}`, unlearned `{cfg.unlearned}`",
          f"- {report['rule']}: the unlearned model still finds the chunk about as likely → unlearning likely failed",
          f"- documents in {c['documents_in']} = scored {c['documents_scored']} + quarantined "
          f"{c['documents_quarantined']}; chunks ({cfg.chunk_words} words) planned {c['chunks_planned']} = scored "
          f"{c['chunks_scored']} + quarantined {c['chunks_quarantined']}", "",
          f"**Flagged: {100 * report['flagged_share']:.1f}%** [{100 * lo:.1f}%, {100 * hi:.1f}%] "
          f"({report['n_flagged']} of {c['chunks_scored']} chunks; {report['ci_method']} 95% CI). "
          f"Ratio quantiles 10/50/90%: " + ", ".join(f"{v:.3f}" for v in report["ratio_quantiles"].values()), "",
          "## Documents", "", "| document | chunks | flagged | share [95% CI] |", "|---|---|---|---|"]
    for d in sorted(report["documents"], key=lambda d: -d["share"]):
        md.append(f"| `{d['id']}` | {d['chunks']} | {d['flagged']} | {100 * d['share']:.1f}% "
                  f"[{100 * d['share_ci'][0]:.1f}%, {100 * d['share_ci'][1]:.1f}%] |")
    flagged = report["flagged_chunks"]
    md += ["", f"## Flagged chunks ({len(flagged)}" + (f", first {cfg.max_listed} listed; all in chunks.parquet"
                                                      if len(flagged) > cfg.max_listed else "") + ")", "",
           "| document | chunk | words | Min-K% original | Min-K% unlearned | ratio | excerpt |",
           "|---|---|---|---|---|---|---|"]
    for s in flagged[:cfg.max_listed]:
        md.append(f"| `{s['doc_id']}` | {s['index']} | {s['start_word']}–{s['start_word'] + s['n_words']} | "
                  f"{s['min_k_original']:.3f} | {s['min_k_unlearned']:.3f} | {s['ratio']:.3f} | {s['excerpt']} … |")
    md += ["", "Plot: `ratios_hist.png`", ""]
    return "\n".join(md)


def _page(report: dict, cfg: UnlearningConfig, out: Path):
    """report.html's content (scoring/reports/html.py): the share of the forget set unlearning left in place first."""
    from scoring.reports.html import Code, Figure, Page, Section, Table, left_out, num, pct_ci

    c = report["counts"]
    head = (f"Unlearning likely failed on an estimated {pct_ci(report['flagged_share'], report['flagged_share_ci'], 0)}"
            " of the forget set: the unlearned model still finds those passages about as likely as the original did.")
    summary = (f"{report['n_flagged']:,} of {c['chunks_scored']:,} chunks of {cfg.chunk_words} words were flagged "
               f"({report['ci_method']} 95% interval). Rule: {report['rule']}.")
    docs = sorted(report["documents"], key=lambda d: -d["share"])
    flagged = report["flagged_chunks"]
    listed = f"first {cfg.max_listed} of {len(flagged):,}; all in chunks.parquet" if len(flagged) > cfg.max_listed \
        else f"{len(flagged):,}"
    sections = [
        Section("Documents", [Table(["document", "chunks", "flagged", "share flagged [95% CI]"],
                                    [[Code(str(d["id"])), d["chunks"], d["flagged"], pct_ci(d["share"], d["share_ci"])]
                                     for d in docs])]),
        Section("Score ratios", [
            "Ratio = Min-K% score under the unlearned model / under the original. Near 1, unlearning changed "
            "nothing for that chunk; " + "quantiles 10/50/90%: "
            + ", ".join(num(v) for v in report["ratio_quantiles"].values()) + ".",
            Figure(out / "ratios_hist.png", "Chunks' score ratios; the flagged band lies between the dashed lines")]),
        Section(f"Flagged chunks ({listed})", [Table(
            ["document", "chunk", "words", "Min-K% original", "Min-K% unlearned", "ratio", "text"],
            [[Code(str(s["doc_id"])), s["index"], f"{s['start_word']}–{s['start_word'] + s['n_words']}",
              num(s["min_k_original"]), num(s["min_k_unlearned"]), num(s["ratio"]), s["excerpt"] + " …"]
             for s in flagged[:cfg.max_listed]])]),
    ]
    facts = [("forget set", Code(cfg.corpus)), ("original model", Code(cfg.original)),
             ("unlearned model", Code(cfg.unlearned)),
             ("documents", f"{c['documents_in']:,} in, {c['documents_scored']:,} scored, "
                           f"{c['documents_quarantined']:,} quarantined"),
             ("chunks", f"{c['chunks_planned']:,} planned, {c['chunks_scored']:,} scored, "
                        f"{c['chunks_quarantined']:,} quarantined")]
    warnings = [left_out(c[f"{unit}_quarantined"], c[f"{unit}_{whole}"], unit)
                for unit, whole in (("documents", "in"), ("chunks", "planned")) if c[f"{unit}_quarantined"]]
    files = [("report.md", "this report's numbers as Markdown"), ("report.json", "every number here"),
             ("chunks.parquet", "every scored chunk: both scores, the ratio, flagged, its text"),
             ("quarantine.parquet", "documents and chunks that could not be used, each with its reason")]
    return Page(kind="unlearning audit", headline=head, summary=summary, facts=facts, sections=sections,
                warnings=warnings, files=files)


def _plot_ratios(ratios: np.ndarray, tolerance: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    # Bins over the data and the band together: ratios bunched near 1 would otherwise make bars too thin to see.
    lo, hi = min(float(np.min(ratios)), 1 / tolerance), max(float(np.max(ratios)), tolerance)
    ax.hist(ratios, bins=np.linspace(lo - 0.02 * (hi - lo), hi + 0.02 * (hi - lo), 41), color="#4477aa",
            edgecolor="white")
    for x in (1 / tolerance, tolerance):
        ax.axvline(x, color="#cc3311", ls="--", lw=1)
    ax.set(xlabel="Min-K% ratio unlearned / original", ylabel="chunks",
           title=f"Flagged band (1/{tolerance:g}, {tolerance:g}) between the dashed lines")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def register(app: typer.Typer) -> None:
    @app.command("unlearning-audit")
    def unlearning_audit(
        original: str = typer.Option(..., help="the model before unlearning (HF dir, hub id, GGUF, `smollm2`)"),
        unlearned: str = typer.Option(..., help="the model after unlearning"),
        corpus: str = typer.Option(..., help="what should have been forgotten: folder/glob of .txt, or jsonl rows"),
        out: str = typer.Option(..., help="output directory (report.json, report.md, report.html, chunks.parquet, "
                                "ratios_hist.png)"),
        k: float = typer.Option(0.2, help="Min-K% fraction k"),
        tolerance: float = typer.Option(1.15, help="flag when the ratio lies in (1/τ, τ)"),
        chunk_words: int = typer.Option(512, help="words per chunk (consecutive)"),
        min_chunk_words: int = typer.Option(64, help="a last chunk shorter than this is dropped (a document's first "
                                                     "chunk is always kept)"),
        ci: str = typer.Option("wilson", help="binomial CI: wilson or clopper-pearson"),
        actors: int = typer.Option(1, help="scorer actors per model"),
        gpus_per_actor: float = typer.Option(0.0, help="GPUs per scorer actor (0 = CPU)"),
        batch_size: Optional[int] = typer.Option(None, help="sequences per forward pass"),
        context: Optional[int] = typer.Option(None, help="window length in tokens (default: model max, ≤2048)"),
        stride: Optional[int] = typer.Option(None, help="window stride (default: context/2)"),
        quiet: bool = typer.Option(False, help="no progress bars"),
    ):
        """Score 512-word chunks with Min-K% under the original and the unlearned model; flag chunks whose score
        ratio stays in (1/1.15, 1.15), i.e. where unlearning likely failed. Lists the flagged chunks."""
        if ci not in ("wilson", "clopper-pearson"):
            raise typer.BadParameter("--ci must be wilson or clopper-pearson")
        cfg = UnlearningConfig(original=original, unlearned=unlearned, corpus=corpus, out=out, k=k, tolerance=tolerance,
                               chunk_words=chunk_words, min_chunk_words=min_chunk_words, ci=ci, actors=actors,
                               gpus_per_actor=gpus_per_actor, batch_size=batch_size, context=context, stride=stride,
                               progress=not quiet)
        run_and_print_report(run_unlearning_audit, cfg)
