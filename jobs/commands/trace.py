"""`tidemark trace`: from a model's words back to the corpus documents they occur in.

    tidemark trace --index IDX (--generations EVAL_OUT | --texts FILE | --text "...") --out OUT

    driver: read the texts (a text-only evaluate run's generations, a jsonl/Parquet of `id` and `text`, or one
            text), quarantine those with nothing to trace (jobs/parts/trace_inputs.py)
    workers: per index part and batch of texts, the longest corpus match at every word; then per kept span, its
            count and first documents with snippets (jobs/parts/trace_index.py)
    driver: maximal spans of at least --min-words, ranked by rarity (scoring/trace/spans.py); each text's documents
            ranked by BM25 against it (scoring/trace/ranking.py); spans.parquet, documents.parquet, report.json,
            report.md, report.html, longest.png, quarantine.parquet, run.json, `_SUCCESS` last.

Words are lowercased `\\w+` words, as `tidemark overlap` and the index count them: a span may cross punctuation.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Optional

import typer

from jobs.kit.options import command, option, progress_option, runner_option
from jobs.kit.report_out import run_and_print_report

STAGE = "trace"
SUMMARY_WORDS = (13, 25, 50)  # the summary's "share of texts with a span of at least N words" (and --min-words)


@dataclass
class TraceConfig:
    index: str = option(help="a corpus index from `tidemark index-corpus` (local or s3://)")
    out: Optional[str] = option(None, "output directory or s3:// prefix (spans.parquet, documents.parquet, "
                                "report.json, report.md, report.html); optional with --text")
    generations: Optional[str] = option(None, "a text-only `tidemark evaluate` OUT (or its generations.parquet): "
                                        "every generated sample is traced")
    texts: Optional[str] = option(None, "jsonl or Parquet with `id` and `text` (local or s3://)")
    text: Optional[str] = option(None, "one text to trace (printed; written too when --out is given)")
    min_words: int = option(8, "keep maximal spans of at least this many words", min=1)
    docs_per_span: int = option(10, "documents retrieved per span (its first occurrences, in corpus order)", min=1)
    context_words: int = option(40, "words of context either side of a match in a snippet", min=0)
    batch_texts: int = option(500, "texts per task (each task asks one index part)", min=1)
    runner: str = runner_option()
    progress: bool = progress_option()

    def settings(self):
        from jobs.parts.trace_tables import TraceSettings

        return TraceSettings(min_words=self.min_words, docs_per_span=self.docs_per_span,
                             context_words=self.context_words, batch_texts=self.batch_texts)


def checked(**options) -> TraceConfig:
    cfg = TraceConfig(**options)
    given = [x for x in (cfg.generations, cfg.texts, cfg.text) if x is not None]
    if len(given) != 1:
        raise typer.BadParameter("give one of --generations, --texts or --text")
    if cfg.text is None and not cfg.out:
        raise typer.BadParameter("--out is needed with --generations or --texts")
    return cfg


def run_trace(cfg: TraceConfig) -> dict:
    """Trace the texts; write OUT when given. Returns the report's paths, the summary and the tables."""
    from curation.io.ledger import quarantine_table, reason_counts
    from jobs.kit.identity import open_output, publish
    from jobs.kit.log import PhaseClock, log
    from jobs.kit.runtime import start_runner
    from jobs.parts.index_reader import local_index
    from jobs.parts.trace_inputs import read_texts
    from jobs.parts.trace_tables import trace
    from jobs.plane.local_plane import local_plane

    t0, phases = time.perf_counter(), PhaseClock()
    local, meta = local_index(cfg.index)
    rows, bad = read_texts(cfg.generations, cfg.texts, cfg.text)
    phases.lap("texts")
    runner, why = start_runner(cfg.runner, meta.get("index_bytes"), actors=0, gpus_per_actor=0.0)
    with local_plane(runner == "local"):
        spans, docs, stats = trace(rows, cfg.index, local, meta, cfg.settings(), progress=cfg.progress)
    phases.lap("trace (workers)" if runner == "ray" else "trace (local runner)")
    seconds = round(time.perf_counter() - t0, 3)
    counts = {"rows_in": len(rows) + len(bad), "traced": len(rows), "quarantined": len(bad),
              "reasons": reason_counts(bad)}
    report = summarise(cfg, meta, rows, spans, docs, stats, counts, seconds, {"used": runner, "why": why})
    log(f"traced {len(rows):,} texts ({len(bad):,} quarantined): {stats['spans']:,} spans of at least "
        f"{cfg.min_words} words, {report['summary']['texts_with_span']:,} texts with one; {seconds} s")
    res = {"report": None, "summary": report, "spans": spans, "documents": docs, "seconds": seconds}
    if not cfg.out:
        return res
    import pyarrow.parquet as pq

    dest, out = open_output(cfg.out)
    pq.write_table(spans, out / "spans.parquet")
    pq.write_table(docs, out / "documents.parquet")
    pq.write_table(quarantine_table(bad), out / "quarantine.parquet")
    _write_report(out, report, rows, spans, docs)
    phases.lap("report")
    (out / "run.json").write_text(json.dumps(_run_record(cfg, report, phases), indent=2, default=str))
    publish(dest, out, {"job": STAGE, "texts": len(rows), "spans": stats["spans"]})
    return {**res, "report": str(out / "report.md")}


def summarise(cfg: TraceConfig, meta: dict, rows, spans, docs, stats, counts, seconds, runner) -> dict:
    """report.json: counts, the share of texts with a span of at least N words, the longest spans, the documents
    cited by most texts, the index, the settings and the time per text."""
    from collections import Counter

    longest = stats["longest"]
    n = max(len(rows), 1)
    shares = [{"words": w, "texts": sum(x >= w for x in longest), "share": sum(x >= w for x in longest) / n}
              for w in sorted({cfg.min_words, *SUMMARY_WORDS})]
    top = sorted(spans.select(["id", "words", "span", "count", "rarity"]).to_pylist(),
                 key=lambda r: (-r["words"], -r["rarity"]))[:10]
    cited = Counter()
    for doc_id, ids in _texts_per_document(docs).items():
        cited[doc_id] = len(ids)
    c = meta.get("counts", {})
    return {"job": STAGE, "counts": counts,
            "summary": {"texts_with_span": sum(x >= cfg.min_words for x in longest), "spans": stats["spans"],
                        "words": stats["words"], "share_with_span": shares,
                        "longest_spans": top,
                        "documents_cited_most": [{"doc_id": d, "texts": k} for d, k in cited.most_common(10)]},
            "index": {"path": cfg.index, "documents": c.get("documents"), "tokens": c.get("tokens"),
                      "index_bytes": meta.get("index_bytes"), "parts": stats["parts"],
                      "text_store": bool(meta.get("text_store"))},
            "settings": {"min_words": cfg.min_words, "docs_per_span": cfg.docs_per_span,
                         "context_words": cfg.context_words, "batch_texts": cfg.batch_texts,
                         "words": "lowercased \\w+ (as tidemark overlap)"},
            "runner": runner, "seconds": seconds,
            "seconds_per_text": round(seconds / n, 5) if rows else None}


def _texts_per_document(docs) -> dict[str, set]:
    out: dict[str, set] = {}
    for d, t in zip(docs.column("doc_id").to_pylist(), docs.column("id").to_pylist()):
        out.setdefault(d, set()).add(t)
    return out


def _write_report(out, report: dict, rows, spans, docs) -> None:
    from jobs.kit.report_out import write_html
    from scoring.reports.trace_page import plot_longest, report_markdown, report_page

    (out / "longest.png").write_bytes(plot_longest(report, [r["id"] for r in rows], spans))
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "report.md").write_text(report_markdown(report))
    write_html(out, report_page(report, rows, spans, docs, out))


def _run_record(cfg, report: dict, phases) -> dict:
    from jobs.kit.redact import redact
    from jobs.kit.report_out import command_line

    return redact({"job": STAGE, "config": asdict(cfg), "counts": report["counts"], "phases_s": phases.laps,
                   "runner": report["runner"], "seconds": report["seconds"], "command": command_line()})


def _print_text(res: dict) -> None:
    spans = res["spans"].to_pylist()
    if not spans:
        typer.echo("no span of the text occurs in the corpus at the --min-words length")
    for s in sorted(spans, key=lambda r: r["rank"]):
        docs = ", ".join(s["doc_ids"][:5]) + (" ..." if len(s["doc_ids"]) > 5 else "")
        typer.echo(f"[{s['start']}, {s['end']}) {s['words']} words, {s['count']:,} in the corpus, rarity "
                   f"{s['rarity']:.1f}: {s['span']!r}\n    in: {docs}")


def _run(cfg: TraceConfig) -> None:
    if cfg.text is not None and not cfg.out:
        try:
            res = run_trace(cfg)
        except (FileNotFoundError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        _print_text(res)
        return
    run_and_print_report(run_trace, cfg, errors=(FileNotFoundError, ValueError))


def register(app: typer.Typer) -> None:
    app.command("trace")(command(
        TraceConfig, _run, make=checked,
        doc="Trace texts (a model's outputs) back to a corpus index: the maximal spans that occur verbatim in the "
            "corpus, ranked by rarity, and the documents that hold them, ranked by relevance (BM25), with snippets."))
