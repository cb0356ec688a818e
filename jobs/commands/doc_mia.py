"""`tidemark doc-mia`: was this whole document (a book, a paper) in the training data? Meeus et al.'s
document-level membership inference: windowed token stats over whole documents (scored part by part on the shared
scoring pool, jobs/parts/doc_mia/documents.py), normalised per token, turned into document features on the workers
(jobs/parts/doc_mia/grid.py), classified by a random forest under k-fold CV on the driver, over the grid
normalisation × features × context C. The driver holds per-document scores and one feature matrix at a time,
never token stats. The method lives in scoring/audits/docmia/.
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
class DocMiaConfig:
    members: str = option(help="folder or glob of documents known to be in the training data (.txt; jsonl/Parquet "
                          "rows count as one document each)")
    nonmembers: str = option(help="folder or glob of documents known not to be (e.g. published later)")
    model: str = option(help="HF causal LM: local dir, hub id, FILE.gguf, DIR::FILE.gguf, or `smollm2`")
    out: str = option(help="output directory (metrics.json, scores.parquet, report.md, report.html)")
    contexts: str = option("128", "comma-separated contexts C (stride C−1); the paper's best is 128")
    normalizations: str = option("all", "all, or a comma list of NoNorm, RatioNorm-TF, RatioNorm-GP, MaxNorm-TF, "
                                 "MaxNorm-GP")
    features: str = option("AggFE,HistFE", "feature extractors: AggFE, HistFE")
    folds: int = option(5, "k for stratified k-fold CV")
    n_trees: int = option(500, "trees in the random forest (paper: 500)")
    hist_bins: int = option(1000, "HistFE equal-width bins (paper: 1000)")
    min_words: int = option(50, "documents with fewer words are quarantined")
    seed: int = option(0, "seed for folds and forests")
    actors: int = option(1, "scorer actors (model replicas)")
    gpus_per_actor: float = option(0.0, "GPUs per scorer actor (0 = CPU)")
    batch_size: Optional[int] = option(None, "windows per forward pass (default: 64 on GPU; on CPU up to 16 within "
                                       "2,048 tokens)")
    progress: bool = progress_option()


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

        from scoring.lm.model import resolve_spec

        spec = resolve_spec(model)
        cfg = AutoConfig.from_pretrained(spec.path, **({"gguf_file": spec.gguf_file} if spec.gguf_file else {}))
    except Exception:  # noqa: BLE001 - the check is a courtesy; scoring reports real failures per document
        return None
    return getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)


def doc_mia_spec(cfg: DocMiaConfig):
    """What doc-mia asks of the scoring pool: one model, its original text, the batch policy and resources."""
    from jobs.plane.scoring_pool import ModelBranch, ScoringSpec

    return ScoringSpec((ModelBranch(cfg.model, ("original",)),), max_batch_size=cfg.batch_size, actors=cfg.actors,
                       gpus_per_actor=cfg.gpus_per_actor)


def doc_mia_fingerprint(cfg: DocMiaConfig, contexts: list[int], with_gp: bool) -> str:
    """Everything that changes a part's files (which documents each part holds is in its input digest)."""
    from jobs.kit.identity import json_digest, model_identity, tool_version

    return json_digest({"model": model_identity(cfg.model), "contexts": contexts, "with_gp": with_gp,
                    "batch_size": cfg.batch_size, "min_words": cfg.min_words,
                    "device": "cuda" if cfg.gpus_per_actor > 0 else "cpu", "tool": tool_version()})


def score_document_parts(cfg: DocMiaConfig, dest, contexts: list[int], with_gp: bool) -> tuple[dict, dict]:
    """Score every document part on the pool through the one part loop (jobs/plane/part_loop.run_parts: resume,
    node-loss replanning, the stall bound); returns ({part index: summary}, stats)."""
    from curation.io.outputs import new_run_id
    from jobs.kit.runtime import start_driver
    from jobs.parts.doc_mia.documents import DOC_PART_DIRS, NOT_ISOLATED, PrepareDocuments, ScoreDocuments, part_digest, \
        plan_doc_parts
    from jobs.plane.part_loop import run_parts
    from jobs.plane.part_store import PartStore
    from jobs.plane.scoring_pool import PoolStages

    parts = plan_doc_parts(cfg.members, cfg.nonmembers, cfg.min_words)
    digests = {p.index: part_digest(p) for p in parts}
    store = PartStore(dest, doc_mia_fingerprint(cfg, contexts, with_gp), DOC_PART_DIRS)
    stages = PoolStages(PrepareDocuments, {"spec": doc_mia_spec(cfg)}, ScoreDocuments, {"dest": dest.uri},
                        {"contexts": tuple(contexts), "with_gp": with_gp})

    def pool(items):
        return RAY.pipeline(doc_mia_spec(cfg), [{"part": p.to_json()} for p in items], stages, cfg.progress)

    stats: dict = {}  # run_parts fills parts, reused and scored
    summaries = run_parts(parts, index=lambda p: p.index, digests=digests, store=store, pool=pool, runner=RAY,
                          stats=stats, run_id=new_run_id(), not_isolated=NOT_ISOLATED, start=start_driver)
    return summaries, stats


def ray_mapper(progress: bool):
    """jobs/parts/doc_mia/grid.py's per-part calls as Ray tasks (jobs/plane/task_map.py)."""
    def run(fn, calls, shared):
        from jobs.kit.runtime import start_driver
        from jobs.plane.task_map import ray_task_map

        start_driver()
        desc = f"grid: {shared.get('kind', 'reference sums')} (parts)"
        yield from ray_task_map(fn, calls, shared, desc=desc, progress=progress)
    return run


def grid_documents(dest, summaries: dict, contexts: list[int]) -> tuple[dict, list[dict]]:
    """The scored documents in reading order (id, label, path, n_tokens, mean_lp per context, part) as arrays, and
    quarantine rows for ids that repeat an earlier document's (row files may share ids across parts)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from curation.io.ledger import first_occurrences, quarantine_record
    from jobs.plane.part_store import part_name

    tables = []
    for i in sorted(summaries):
        t = dest.read_parquet(f"documents.parquet/{part_name(i)}.parquet")
        tables.append(t.append_column("part", pa.array([i] * t.num_rows, pa.int64())))
    docs = pa.concat_tables(tables) if tables else None
    if docs is None or docs.num_rows == 0:
        return {"id": np.array([], dtype=object)}, []
    keep = first_occurrences(docs.column("id"))
    dups = [quarantine_record(rid, "read", "duplicate_id", "an earlier document has the same id")
            for rid in pc.filter(docs.column("id"), pa.array(~keep)).to_pylist()]
    docs = docs.filter(pa.array(keep))
    mean_lp = np.asarray(docs.column("mean_lp").to_pylist(), dtype=np.float64).reshape(docs.num_rows, len(contexts))
    return {"id": np.asarray(docs.column("id").to_pylist(), dtype=object),
            "label": docs.column("label").to_numpy().astype(np.int64), "path": docs.column("path").to_pylist(),
            "n_tokens": docs.column("n_tokens").to_numpy(), "part": docs.column("part").to_numpy(),
            "mean_lp": mean_lp}, dups


def run_doc_mia(cfg: DocMiaConfig) -> dict:
    """Plan on the driver; documents are read, tokenised and scored part by part on the pool (jobs/parts/doc_mia/documents.py),
    the grid's features are made on the workers (jobs/parts/doc_mia/grid.py); the driver fits the forests."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tqdm import tqdm

    from jobs.parts.doc_mia.grid import GRID_DIR, run_grid_on_parts
    from jobs.kit.log import PhaseClock
    from curation.io.ledger import ReconcileError, Ledger
    from jobs.kit.identity import open_output, publish
    from scoring.audits.docmia.features import make_extractor
    from scoring.audits.docmia.normalization import parse_normalizations
    from scoring.audits.docmia.protocol import GridConfig, make_folds
    from scoring.reports.doc_mia_page import report_markdown, report_page

    t0 = time.perf_counter()
    phases = PhaseClock()
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
    with_gp = any(n.ref == "gp" for n in norms)
    summaries, part_stats = score_document_parts(cfg, dest, contexts, with_gp)
    phases.lap("score")

    ledger = Ledger()
    for i in sorted(summaries):
        part = Ledger(summaries[i]["rows_in"], summaries[i]["scored"], summaries[i]["reasons"])
        part.check(f"part {i}")
        ledger.add(part)
    docs, dups = grid_documents(dest, summaries, contexts)
    dest.write_parquet("quarantine.parquet/duplicates.parquet", quarantine_table(dups))
    n_used = len(docs["id"])
    counts = {"documents_in": ledger.rows_in, "documents_used": n_used,
              "documents_quarantined": ledger.quarantined + len(dups),
              "members_used": int(docs["label"].sum()) if n_used else 0,
              "nonmembers_used": int(n_used - docs["label"].sum()) if n_used else 0}
    if counts["documents_in"] != counts["documents_used"] + counts["documents_quarantined"]:
        raise ReconcileError(f"document accounting does not reconcile: {counts}")
    if not n_used:
        raise RuntimeError("no readable documents")
    labels = docs["label"]
    try:
        folds = make_folds(labels, cfg.folds, cfg.seed)
    except ValueError as exc:
        raise RuntimeError(str(exc)) from None
    parts: dict[int, dict[str, int]] = {}
    for rid, part, fold in zip(docs["id"], docs["part"], folds):
        parts.setdefault(int(part), {})[rid] = int(fold)
    baseline = {c: docs["mean_lp"][:, j] for j, c in enumerate(contexts)}
    vocab = max(int(s.get("vocab", 0)) for s in summaries.values())

    grid = GridConfig(normalizations=norms, features=feats, k=cfg.folds, seed=cfg.seed, n_trees=cfg.n_trees,
                      hist_bins=cfg.hist_bins)
    total = len(contexts) * len(norms) * len(feats) * cfg.folds
    with tqdm(total=total, desc="forests (C × norm × features × fold)", disable=not cfg.progress) as bar:
        records, oof = run_grid_on_parts(dest, parts, labels, folds, baseline, grid, contexts, vocab,
                                         ray_mapper(cfg.progress),
                                         progress=lambda: bar.update(1))
    phases.lap("grid")

    n_tokens = docs["n_tokens"].tolist()
    scores = {"id": docs["id"].tolist(), "label": labels.tolist(), "fold": folds.tolist(), "path": docs["path"],
              "n_tokens": n_tokens, **{k: v.tolist() for k, v in oof.items()}}
    pq.write_table(pa.table(scores), out / "scores.parquet")
    best = max((r for r in records if r["normalization"] != "-"), key=lambda r: r["auc_mean"]
               if np.isfinite(r["auc_mean"]) else -1)
    meta = {"members": cfg.members, "nonmembers": cfg.nonmembers, "model": cfg.model, "contexts": contexts,
            "config": asdict(cfg), "counts": counts, "parts": part_stats,
            "tokens_per_document": {"min": int(np.min(n_tokens)), "median": float(np.median(n_tokens)),
                                    "max": int(np.max(n_tokens))},
            "best": {k: best[k] for k in ("normalization", "features", "context", "auc_mean", "auc_std")},
            "phases_s": phases.laps, "seconds": round(time.perf_counter() - t0, 2)}
    (out / "metrics.json").write_text(json.dumps({**meta, "results": records}, indent=2, default=float))
    (out / "report.md").write_text(report_markdown(meta, records))
    write_html(out, report_page(meta, records))
    dest.delete_tree(GRID_DIR)  # the features are intermediate; doc_stats.parquet keeps what they came from
    publish(dest, out, {"job": "doc-mia", "counts": counts})
    return {"report": str(out / "report.md"), "metrics": str(out / "metrics.json"), "records": records,
            "counts": counts, "seconds": meta["seconds"]}


def register(app: typer.Typer) -> None:
    app.command("doc-mia")(command(
        DocMiaConfig, lambda cfg: run_and_print_report(run_doc_mia, cfg),
        doc="Document-level membership inference (Meeus et al.): k-fold random-forest AUC over normalisation × "
            "features × context, from whole-document token statistics."))
