"""`tidemark doc-mia`: was this whole document (a book, a paper) in the training data? Meeus et al.'s
document-level membership inference: windowed token stats over whole documents (actor pool), normalised per token,
turned into document features, classified by a random forest under k-fold CV, over the grid
normalisation × features × context C. The method lives in scoring/docmia/.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np
import typer

from jobs.ledger import quarantine_table
from jobs.report_cli import run_and_print_report


@dataclass
class DocMiaConfig:
    members: str
    nonmembers: str
    model: str
    out: str
    contexts: str = "128"
    normalizations: str = "all"
    features: str = "AggFE,HistFE"
    folds: int = 5
    n_trees: int = 500
    hist_bins: int = 1000
    min_words: int = 50
    seed: int = 0
    actors: int = 1
    gpus_per_actor: float = 0.0
    batch_size: Optional[int] = None
    progress: bool = True


def parse_contexts(spec: str) -> list[int]:
    try:
        out = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"--contexts must be comma-separated integers, got {spec!r}") from None
    if not out or min(out) < 2:
        raise typer.BadParameter("--contexts: every C must be at least 2 (stride is C − 1)")
    return sorted(set(out))


def model_max_positions(model: str) -> int | None:
    """The model's position limit from its config, or None when it cannot be read without loading weights."""
    try:
        from transformers import AutoConfig

        from scoring.model import resolve_spec

        spec = resolve_spec(model)
        cfg = AutoConfig.from_pretrained(spec.path, **({"gguf_file": spec.gguf_file} if spec.gguf_file else {}))
    except Exception:  # noqa: BLE001 - the check is a courtesy; scoring reports real failures per document
        return None
    return getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)


def score_documents(docs: list[dict], model: str, contexts: list[int], with_gp: bool, *, actors: int = 1,
                    gpus_per_actor: float = 0.0, batch_size: int | None = None, progress: bool = True):
    """Whole-document stats for every context on a Ray actor pool (one model load per actor)."""
    import pyarrow as pa

    from jobs.evaluate import _ensure_ray
    from scoring.docmia.stats import DocStatsTask
    from scoring.tasks import default_threads

    ray = _ensure_ray()
    ray.data.DataContext.get_current().enable_progress_bars = progress
    cpus = ray.cluster_resources().get("CPU", 1)
    on_gpu = gpus_per_actor > 0
    actor_cpus = 1.0 if on_gpu else max(0.25, min(1.0, (cpus - 0.25) / max(1, actors)))
    texts = pa.Table.from_pylist([{"id": d["id"], "input": d["text"]} for d in docs])
    step = max(1, math.ceil(len(docs) / max(actors * 4, 1)))  # several blocks, so every actor gets work
    ds = ray.data.from_arrow([texts.slice(i, step) for i in range(0, len(docs), step)])
    ds = ds.map_batches(DocStatsTask, fn_constructor_kwargs={
        "model": model, "contexts": tuple(contexts), "with_gp": with_gp,
        "threads": 2 if on_gpu else default_threads(actors), "device": "cuda" if on_gpu else "cpu",
        "batch_size": batch_size}, batch_format="pyarrow", batch_size=2,
        compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=actor_cpus, num_gpus=gpus_per_actor or None,
        max_restarts=2, max_task_retries=2)
    return pa.concat_tables(ray.get(ds.to_arrow_refs()))


def run_doc_mia(cfg: DocMiaConfig) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tqdm import tqdm

    from jobs.doc_inputs import read_documents
    from jobs.shards import open_output, publish
    from scoring.docmia.features import make_extractor
    from scoring.docmia.normalization import parse_normalizations
    from scoring.docmia.protocol import GridConfig, report_table, run_grid

    t0 = time.perf_counter()
    contexts = parse_contexts(cfg.contexts)
    try:
        norms = parse_normalizations(cfg.normalizations)
        feats = [f.strip() for f in cfg.features.split(",") if f.strip()]
        for f in feats:
            make_extractor(f)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    limit = model_max_positions(cfg.model)
    if limit and max(contexts) > limit:
        raise typer.BadParameter(f"C={max(contexts)} exceeds the model's {limit} positions", param_hint="--contexts")
    dest, out = open_output(cfg.out)  # a local directory or an s3:// prefix; `_SUCCESS` is written last

    members, q_m = read_documents(cfg.members, min_words=cfg.min_words, id_prefix="member:")
    nonmembers, q_n = read_documents(cfg.nonmembers, min_words=cfg.min_words, id_prefix="nonmember:")
    quarantine = q_m + q_n
    docs = [dict(d, label=1) for d in members] + [dict(d, label=0) for d in nonmembers]
    n_in = len(docs) + len(quarantine)
    if not docs:
        raise RuntimeError("no readable documents")

    with_gp = any(n.ref == "gp" for n in norms)
    stats = score_documents(docs, cfg.model, contexts, with_gp, actors=cfg.actors, gpus_per_actor=cfg.gpus_per_actor,
                            batch_size=cfg.batch_size, progress=cfg.progress).to_pylist()
    by_key = {(r["id"], r["context"]): r for r in stats}
    good = []
    for d in docs:  # a document enters the grid only if every context scored it
        rows = [by_key.get((d["id"], c)) for c in contexts]
        err = next((f"C={c}: {r['error'] if r else 'missing'}" for c, r in zip(contexts, rows)
                    if r is None or r["error"] or len(r["lp"]) < 2), None)
        if err:
            quarantine.append({"id": d["id"], "stage": "score", "reason": "score_failed", "detail": err[:300]})
        else:
            good.append((d, rows))
    counts = {"documents_in": n_in, "documents_used": len(good), "documents_quarantined": len(quarantine),
              "members_used": sum(d["label"] for d, _ in good),
              "nonmembers_used": sum(1 - d["label"] for d, _ in good)}
    if counts["documents_in"] != counts["documents_used"] + counts["documents_quarantined"]:
        raise RuntimeError(f"document accounting does not reconcile: {counts}")
    labels = np.asarray([d["label"] for d, _ in good])
    docs_by_context = {c: [rows[j] for _, rows in good] for j, c in enumerate(contexts)}

    grid = GridConfig(normalizations=norms, features=feats, k=cfg.folds, seed=cfg.seed, n_trees=cfg.n_trees,
                      hist_bins=cfg.hist_bins)
    total = len(contexts) * len(norms) * len(feats) * cfg.folds
    with tqdm(total=total, desc="forests (C × norm × features × fold)", disable=not cfg.progress) as bar:
        try:
            records, oof, folds = run_grid(docs_by_context, labels, grid, progress=lambda: bar.update(1))
        except ValueError as exc:
            raise RuntimeError(str(exc)) from None

    n_tokens = [len(rows[0]["token_ids"]) for _, rows in good]
    scores = {"id": [d["id"] for d, _ in good], "label": labels.tolist(), "fold": folds.tolist(),
              "path": [d["path"] for d, _ in good], "n_tokens": n_tokens,
              **{k: v.tolist() for k, v in oof.items()}}
    pq.write_table(pa.table(scores), out / "scores.parquet")
    pq.write_table(quarantine_table(quarantine), out / "quarantine.parquet")
    best = max((r for r in records if r["normalization"] != "-"), key=lambda r: r["auc_mean"]
               if np.isfinite(r["auc_mean"]) else -1)
    meta = {"members": cfg.members, "nonmembers": cfg.nonmembers, "model": cfg.model, "contexts": contexts,
            "config": asdict(cfg), "counts": counts,
            "tokens_per_document": {"min": int(np.min(n_tokens)), "median": float(np.median(n_tokens)),
                                    "max": int(np.max(n_tokens))},
            "best": {k: best[k] for k in ("normalization", "features", "context", "auc_mean", "auc_std")},
            "seconds": round(time.perf_counter() - t0, 2)}
    (out / "metrics.json").write_text(json.dumps({**meta, "results": records}, indent=2, default=float))
    md = [f"# Tidemark document-level membership: `{cfg.model}`", "",
          f"- members `{cfg.members}`, non-members `{cfg.nonmembers}`",
          f"- documents in {n_in} = used {len(good)} ({counts['members_used']} members, {counts['nonmembers_used']} "
          f"non-members) + quarantined {len(quarantine)}; tokens per document: median "
          f"{meta['tokens_per_document']['median']:.0f} (min {meta['tokens_per_document']['min']}, "
          f"max {meta['tokens_per_document']['max']})",
          f"- {cfg.folds}-fold stratified CV (seed {cfg.seed}); random forest {cfg.n_trees} trees, max depth 5, "
          f"min 3 samples per leaf; reference dictionaries and {cfg.hist_bins} HistFE bins fitted on training folds only",
          "- cells: AUC mean ± std over folds (TPR at 1% / 10% FPR, fold means). With few documents per fold, "
          "TPR@1% FPR is the TPR at zero false positives.", "",
          report_table(records), "",
          f"Best: {best['normalization']} + {best['features']} at C={best['context']}: AUC {best['auc_mean']:.3f} ± "
          f"{best['auc_std']:.3f}", ""]
    if len(good) < 100:
        md.append(f"Note: {len(good)} documents in all; the paper used 1000 + 1000. Fold-level numbers are coarse.")
    (out / "report.md").write_text("\n".join(md) + "\n")
    publish(dest, out, {"job": "doc-mia", "counts": counts})
    return {"report": str(out / "report.md"), "metrics": str(out / "metrics.json"), "records": records,
            "counts": counts, "seconds": meta["seconds"]}


def register(app: typer.Typer) -> None:
    @app.command("doc-mia")
    def doc_mia(
        members: str = typer.Option(..., help="folder or glob of documents known to be in the training data (.txt; "
                                              "jsonl/Parquet rows count as one document each)"),
        nonmembers: str = typer.Option(..., help="folder or glob of documents known not to be (e.g. published later)"),
        model: str = typer.Option(..., help="HF causal LM: local dir, hub id, FILE.gguf, DIR::FILE.gguf, or `smollm2`"),
        out: str = typer.Option(..., help="output directory (metrics.json, scores.parquet, report.md)"),
        contexts: str = typer.Option("128", help="comma-separated contexts C (stride C−1); the paper's best is 128"),
        normalizations: str = typer.Option("all", help="all, or a comma list of NoNorm, RatioNorm-TF, RatioNorm-GP, "
                                                       "MaxNorm-TF, MaxNorm-GP"),
        features: str = typer.Option("AggFE,HistFE", help="feature extractors: AggFE, HistFE"),
        folds: int = typer.Option(5, help="k for stratified k-fold CV"),
        n_trees: int = typer.Option(500, help="trees in the random forest (paper: 500)"),
        hist_bins: int = typer.Option(1000, help="HistFE equal-width bins (paper: 1000)"),
        min_words: int = typer.Option(50, help="documents with fewer words are quarantined"),
        seed: int = typer.Option(0, help="seed for folds and forests"),
        actors: int = typer.Option(1, help="scorer actors (model replicas)"),
        gpus_per_actor: float = typer.Option(0.0, help="GPUs per scorer actor (0 = CPU)"),
        batch_size: Optional[int] = typer.Option(None, help="windows per forward pass (default: 64 on GPU; on CPU up to 16 within 2,048 tokens)"),
        quiet: bool = typer.Option(False, help="no progress bars"),
    ):
        """Document-level membership inference (Meeus et al.): k-fold random-forest AUC over
        normalisation × features × context, from whole-document token statistics."""
        cfg = DocMiaConfig(members=members, nonmembers=nonmembers, model=model, out=out, contexts=contexts,
                           normalizations=normalizations, features=features, folds=folds, n_trees=n_trees,
                           hist_bins=hist_bins, min_words=min_words, seed=seed, actors=actors,
                           gpus_per_actor=gpus_per_actor, batch_size=batch_size, progress=not quiet)
        run_and_print_report(run_doc_mia, cfg)
