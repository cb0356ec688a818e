"""`tidemark dataset-inference --method codec`: a set-level contamination score that needs no held-out set (CoDeC,
Zawalski et al., ICLR 2026).

    suspect documents → passages (the audit's staging, on the workers) → the survey picks a seeded context pool
    (`--pool` passages, the same rows however the job is cut) → the shared scoring pool scores every passage with
    and without `--shots` pool samples before it (views original and codec:<shots>:<seed>) → per passage delta →
    the driver streams the score parts once: rows.parquet (id, delta, context ids) and the summary
    (scoring/audits/codec.py) → report.json / report.md / report.html / deltas.png.

The driver holds the pool (at most `--pool` passages of at most 2,048 characters) and one part's scores at a time.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict


def run_codec(cfg) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curation.io.outputs import Location
    from jobs.kit.identity import json_digest, model_identity, open_output, publish, tool_version
    from jobs.kit.log import PhaseClock
    from jobs.kit.report_out import write_html
    from jobs.kit.runtime import start_runner
    from jobs.kit.served_model import run_record
    from jobs.parts.audit.snippets import plan_tasks, run_staging
    from jobs.parts.doc_inputs import ROW_SUFFIXES, document_files
    from jobs.plane.part_loop import score_benchmark
    from jobs.plane.scoring_pool import ModelBranch
    from scoring.audits.codec import MEANING, DeltaSummary
    from scoring.detectors.base import parse_method
    from scoring.lm.views import ORIGINAL, codec_contexts, codec_view
    from scoring.reports.codec_page import plot_deltas, report_markdown, report_page

    t0, phases = time.perf_counter(), PhaseClock()
    served = cfg.served()
    method = parse_method(f"codec@shots={cfg.shots}@seed={cfg.seed}")
    views = (ORIGINAL, codec_view(cfg.shots, cfg.seed))
    dest, out = open_output(cfg.out)
    files, _ = document_files(cfg.suspect)
    whole = all(f.suffix.lower() in ROW_SUFFIXES for f in files)
    tasks = plan_tasks("target", cfg.suspect, id_prefix="", label=1, whole=whole, snippets=cfg.snippets,
                       snippet_words=cfg.snippet_words, min_words=cfg.min_words, seed=cfg.seed)
    runner, why = start_runner(cfg.runner, sum(f.stat().st_size for f in files), actors=cfg.actors,
                               gpus_per_actor=cfg.gpus_per_actor)
    dest.delete_tree("_staging")
    staged = run_staging(tasks, dest.uri, None, cfg.progress, runner=runner)
    phases.lap("passages (workers)")
    branch = served.branch(views) if served else ModelBranch(cfg.model, views)
    identity = {"model": served.identity() if served else model_identity(cfg.model), "method": method.column,
                "pool": cfg.pool, "tool": tool_version(),
                "settings": {"snippets": cfg.snippets, "snippet_words": cfg.snippet_words,
                             "min_words": cfg.min_words, "seed": cfg.seed}}
    scoring = Location(dest.child("scoring"))
    run = score_benchmark(
        benchmark=dest.child("_staging/snippets"), requester_pays=False, rows_per_part=cfg.shard_size,
        dest=scoring, spec=cfg.pool_spec([branch]), runner=runner, methods=[method], seed=cfg.seed,
        pool_size=cfg.pool,
        fingerprint_for=lambda text, ids, freq: json_digest(identity), progress=cfg.progress)
    run.ledger.check("dataset-inference (codec) scoring")
    phases.lap("score (workers)")
    summary = DeltaSummary()
    pool = run.pool_ids
    writer = None
    for name in (n for n in scoring.list("scores.parquet") if n.endswith(".parquet")):
        t = scoring.read_parquet(name).select(["id", method.column])
        ids, deltas = t.column("id").to_pylist(), [-x for x in t.column(method.column).to_numpy()]
        summary.add(deltas)
        part = pa.table({"id": ids, "delta": pa.array(deltas, pa.float64()),
                         "context_ids": [[pool[j] for j in codec_contexts(i, pool, cfg.shots, cfg.seed)] for i in ids]})
        writer = writer or pq.ParquetWriter(out / "rows.parquet", part.schema)
        writer.write_table(part)
    if writer is None:
        raise RuntimeError(f"no passage could be scored; see {scoring.child('quarantine.parquet')}")
    writer.close()
    try:
        res = summary.result()
    except ValueError as exc:
        raise RuntimeError(f"codec: {exc}") from None
    phases.lap("summary")
    passages = sum(s["snippets"] for s in staged)
    report = {**res, "method": "codec", "meaning": MEANING,
              "settings": {"shots": cfg.shots, "pool": cfg.pool, "pool_used": len(pool), "seed": cfg.seed,
                           "join": "blank lines between samples", "pool_text_chars": 2048,
                           "contexts": "per passage, `shots` pool samples (never itself) drawn by a generator "
                                       "seeded with its id"},
              "inputs": {"suspect": cfg.suspect, "passages": passages,
                         "documents_quarantined": sum(s["documents_quarantined"] for s in staged)},
              "counts": {"in": run.ledger.rows_in, "scored": run.ledger.rows_out, "quarantined": run.ledger.quarantined,
                         "reasons": dict(run.ledger.reasons)},
              "model": cfg.model, "served_model": run_record(served, run.stats.get("api")), "config": asdict(cfg),
              "seconds": round(time.perf_counter() - t0, 2), "phases_s": phases.laps,
              "runner": {"used": runner.name, "why": why}}
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    (out / "deltas.png").write_bytes(plot_deltas(report))
    (out / "report.md").write_text(report_markdown(report))
    write_html(out, report_page(report, out))
    publish(dest, out, {"job": "dataset-inference", "method": "codec",
                        "contamination_score": res["contamination_score"]})
    return {"report": str(out / "report.md"), "json": str(out / "report.json"),
            "contamination_score": res["contamination_score"], "seconds": report["seconds"]}
