"""`tidemark trace`: from a model's words back to the corpus documents they occur in.

    tidemark trace --index IDX (--generations EVAL_OUT | --texts FILE | --text "...") --out OUT

    driver: read the texts (a text-only evaluate run's generations, a jsonl/Parquet of `id` and `text`, or one
            text), quarantine those with nothing to trace (jobs/parts/trace/inputs.py)
    workers: per index part and batch of texts, the longest corpus match at every word; then per kept span, its
            count and first documents with snippets (jobs/parts/trace/index_rounds.py)
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
    chunk_texts: int = option(2000, "texts traced and written at a time (the driver holds one chunk's spans and "
                              "snippets)", min=1)
    requester_pays: bool = option(False, "read an s3:// --index, --texts or --generations from a requester-pays "
                                  "bucket")
    runner: str = runner_option()
    progress: bool = progress_option()

    def settings(self):
        from jobs.parts.trace.tables import TraceSettings

        return TraceSettings(min_words=self.min_words, docs_per_span=self.docs_per_span,
                             context_words=self.context_words, batch_texts=self.batch_texts,
                             chunk_texts=self.chunk_texts, requester_pays=self.requester_pays)


def checked(**options) -> TraceConfig:
    cfg = TraceConfig(**options)
    given = [x for x in (cfg.generations, cfg.texts, cfg.text) if x is not None]
    if len(given) != 1:
        raise typer.BadParameter("give one of --generations, --texts or --text")
    if cfg.text is None and not cfg.out:
        raise typer.BadParameter("--out is needed with --generations or --texts")
    return cfg


def run_trace(cfg: TraceConfig) -> dict:
    """Trace the texts; with OUT, a chunk of texts at a time, its tables written as they come (the driver holds
    one chunk's texts, spans and snippets); without, everything is returned in memory. Returns the report's path,
    the summary and (without OUT) the tables."""
    from jobs.kit.log import PhaseClock, log
    from jobs.kit.runtime import start_runner
    from jobs.parts.index.reader import local_index
    from jobs.parts.trace.inputs import read_texts
    from jobs.parts.trace.tables import trace

    t0, phases = time.perf_counter(), PhaseClock()
    local, meta = local_index(cfg.index, cfg.requester_pays)
    runner, why = start_runner(cfg.runner, meta.get("index_bytes"), actors=0, gpus_per_actor=0.0)
    summary = Summary(cfg.min_words)
    if not cfg.out:
        rows, bad = read_texts(cfg.generations, cfg.texts, cfg.text, cfg.requester_pays)
        spans, docs, stats = trace(rows, cfg.index, local, meta, cfg.settings(), runner=runner,
                                   progress=cfg.progress)
        summary.add(rows, spans, docs, stats)
        summary.quarantined(bad)
        res = {"report": None, "spans": spans, "documents": docs}
    else:
        res = _trace_to(cfg, local, meta, summary, phases, runner)
    seconds = round(time.perf_counter() - t0, 3)
    report = summary.report(cfg, meta, seconds, {"used": runner.name, "why": why})
    c = report["counts"]
    log(f"traced {c['traced']:,} texts ({c['quarantined']:,} quarantined): {report['summary']['spans']:,} spans of "
        f"at least {cfg.min_words} words, {report['summary']['texts_with_span']:,} texts with one; {seconds} s")
    if cfg.out:
        _finish(cfg, res.pop("out"), res.pop("dest"), report, summary, phases)
    return {**res, "summary": report, "seconds": seconds}


def _trace_to(cfg: TraceConfig, local, meta, summary, phases, runner) -> dict:
    import pyarrow.parquet as pq

    from curation.io.ledger import quarantine_table
    from jobs.kit.identity import open_output
    from jobs.parts.trace.inputs import text_chunks
    from jobs.parts.trace.tables import trace_chunks
    from jobs.plane.part_store import part_name

    dest, out = open_output(cfg.out)
    for name in ("spans.parquet", "documents.parquet"):
        (out / name).mkdir(parents=True, exist_ok=True)
        for old in (out / name).glob("*.parquet"):
            old.unlink()
    bad: list[dict] = []

    def good_rows():  # the input's chunks, their quarantined rows kept aside (ids and reasons, no text)
        for rows, rejected in text_chunks(cfg.generations, cfg.texts, cfg.text, cfg.chunk_texts, cfg.requester_pays):
            bad.extend(rejected)
            if rows:
                yield rows

    for k, (chunk, spans, docs, stats) in enumerate(trace_chunks(good_rows(), cfg.index, local, meta,
                                                                  cfg.settings(), runner=runner,
                                                                  progress=cfg.progress)):
        pq.write_table(spans, out / "spans.parquet" / f"{part_name(k)}.parquet")
        pq.write_table(docs, out / "documents.parquet" / f"{part_name(k)}.parquet")
        summary.add(chunk, spans, docs, stats)
    summary.quarantined(bad)
    pq.write_table(quarantine_table(bad), out / "quarantine.parquet")
    phases.lap("trace (workers)")
    return {"report": str(out / "report.md"), "out": out, "dest": dest}


class Summary:
    """What report.json says of every chunk together: each text's longest span, the longest spans, the documents
    cited by most texts (counts, not the chunks' tables)."""

    def __init__(self, min_words: int):
        from collections import Counter

        self.min_words = min_words
        self.longest: dict[str, int] = {}
        self.top: list[dict] = []
        self.cited: Counter = Counter()
        self.spans = self.words = self.parts = 0
        self.shown: list[tuple[int, int, dict]] = []  # the page's texts: a heap of (longest, -order, row)
        self.counts = {"rows_in": 0, "traced": 0, "quarantined": 0, "reasons": {}}

    def quarantined(self, bad: list[dict]) -> None:
        from curation.io.ledger import reason_counts

        self.counts.update(quarantined=len(bad), reasons=reason_counts(bad),
                           rows_in=self.counts["traced"] + len(bad))

    def add(self, rows, spans, docs, stats) -> None:
        import heapq

        from scoring.reports.trace_page import TEXTS_SHOWN

        self.counts["traced"] += len(rows)
        for r, n in zip(rows, stats["longest"]):
            self.longest[r["id"]] = n
            if n:
                item = (n, -len(self.longest), r)
                (heapq.heappush if len(self.shown) < TEXTS_SHOWN else heapq.heappushpop)(self.shown, item)
        self.spans += stats["spans"]
        self.words += stats["words"]
        self.parts = stats["parts"]
        cols = spans.select(["id", "words", "span", "count", "rarity"]).to_pylist()
        self.top = sorted(self.top + cols, key=lambda r: (-r["words"], -r["rarity"]))[:10]
        pairs = set(zip(docs.column("doc_id").to_pylist(), docs.column("id").to_pylist()))
        self.cited.update(d for d, _ in pairs)

    def shown_rows(self) -> list[dict]:
        """The texts the page shows: those with the longest spans, in input order among equals."""
        return [r for _, _, r in sorted(self.shown, key=lambda x: (-x[0], -x[1]))]

    def report(self, cfg: TraceConfig, meta: dict, seconds: float, runner: dict) -> dict:
        counts = self.counts
        n = max(len(self.longest), 1)
        vals = list(self.longest.values())
        shares = [{"words": w, "texts": sum(x >= w for x in vals), "share": sum(x >= w for x in vals) / n}
                  for w in sorted({cfg.min_words, *SUMMARY_WORDS})]
        c = meta.get("counts", {})
        return {"job": STAGE, "counts": counts,
                "summary": {"texts_with_span": sum(x >= cfg.min_words for x in vals), "spans": self.spans,
                            "words": self.words, "share_with_span": shares, "longest_spans": self.top,
                            "documents_cited_most": [{"doc_id": d, "texts": k} for d, k in
                                                     sorted(self.cited.items(), key=lambda x: (-x[1], x[0]))[:10]]},
                "index": {"path": cfg.index, "documents": c.get("documents"), "tokens": c.get("tokens"),
                          "index_bytes": meta.get("index_bytes"), "parts": self.parts,
                          "text_store": bool(meta.get("text_store"))},
                "settings": {"min_words": cfg.min_words, "docs_per_span": cfg.docs_per_span,
                             "context_words": cfg.context_words, "batch_texts": cfg.batch_texts,
                             "chunk_texts": cfg.chunk_texts, "words": "lowercased \\w+ (as tidemark overlap)"},
                "runner": runner, "seconds": seconds,
                "seconds_per_text": round(seconds / n, 5) if self.longest else None}


def _finish(cfg: TraceConfig, out, dest, report: dict, summary: Summary, phases) -> None:
    """report.json, report.md, report.html (the texts with the longest spans, read back from the parts),
    longest.png, run.json, then `_SUCCESS`."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from jobs.kit.identity import publish
    from jobs.kit.report_out import write_html
    from scoring.reports.trace_page import plot_longest, report_markdown, report_page

    (out / "longest.png").write_bytes(plot_longest(report, list(summary.longest.values())))
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "report.md").write_text(report_markdown(report))
    keep = summary.shown_rows()
    shown = {r["id"] for r in keep}
    wanted = pa.array(sorted(shown), type=pa.string())  # typed: an empty list would be an array of nulls
    spans = ds.dataset(out / "spans.parquet").to_table(filter=ds.field("id").isin(wanted))
    docs = ds.dataset(out / "documents.parquet").to_table(filter=ds.field("id").isin(wanted))
    write_html(out, report_page(report, keep, spans, docs, out))
    phases.lap("report")
    (out / "run.json").write_text(json.dumps(_run_record(cfg, report, phases), indent=2, default=str))
    publish(dest, out, {"job": STAGE, "texts": report["counts"]["traced"], "spans": report["summary"]["spans"]})


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
