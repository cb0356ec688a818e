"""`tidemark overlap`: which benchmark rows occur verbatim (or nearly) in a corpus, and where. Model-free.

    tidemark overlap --benchmark gsm8k_test.jsonl --corpus 's3://bucket/dolma/*.json.gz' --out OUT

    driver: read the benchmark (as evaluate does; labels optional), hash its word n-grams (scoring/overlap);
            one part per corpus file
    workers: stream each corpus file against the benchmark's n-grams (jobs/parts/overlap/corpus_scan.py), through the
            one part loop (resume by corpus part: OUT/_parts/; node-loss replanning; stall bound)
    driver: merge the parts' matches (benchmark-sized), answer per row, write rows.parquet, report.json, report.md,
            report.html, shares.png, and `_SUCCESS` last.

With --semantic, also the rephrased items (docs/overlap.md): the items embedded on the driver, the corpus's windows
embedded on the workers through the one scoring pool and part loop (jobs/parts/overlap/semantic_parts.py), each
item's nearest windows merged, verified and decided on the driver (jobs/parts/overlap/semantic_run.py):
semantic.parquet and report.json's `semantic` block. With --n 0 it is the only pass (no rows.parquet). With --index,
the windows an `index-corpus --embeddings` stored are searched instead (jobs/parts/overlap/semantic_index.py).
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from typing import Optional

import pyarrow as pa
import typer

from jobs.kit.options import command, option, progress_option
from jobs.kit.report_out import run_and_print_report

STAGE = "overlap"
# The benchmark's distinct n-grams are broadcast to every worker (8 bytes each, plus a lookup table of up to 256 MB).
# Past this many, a hash-partitioned join of both sides would be needed, which is not built: refuse, do not swap.
MAX_BENCHMARK_NGRAMS = 50_000_000
ROWS_SCHEMA_EXTRA = ("label", "bucket", "split")  # carried from the benchmark, for per-group shares and joins
ROWS_SCHEMA = pa.schema([("id", pa.string()), ("n_words", pa.int64()), ("n_ngrams", pa.int64()),
                         ("n_matched", pa.int64()), ("share", pa.float64()), ("longest_match_words", pa.int64()),
                         ("contaminated", pa.bool_()), ("corpus_occurrences", pa.int64()),
                         ("sources", pa.list_(pa.string())), ("snippet", pa.string()), ("label", pa.int8()),
                         ("bucket", pa.string()), ("split", pa.string())])


@dataclass
class OverlapConfig:
    benchmark: Optional[str] = option(None, "the benchmark: jsonl or Parquet (`input` or `text`, optional `id`, "
                                      "`label`, `bucket`, `split`), a release directory, or s3://")
    corpus: Optional[str] = option(None, "the corpus to scan: a file, directory, glob ('dolma/*.json.gz') or s3:// "
                                   "prefix of jsonl, jsonl.gz, jsonl.zst, Parquet or txt files")
    index: Optional[str] = option(None, "instead of --corpus: an index built by `tidemark index-corpus` (the same "
                                  "answers without reading the corpus again)")
    query: Optional[str] = option(None, "with --index: print how often this text occurs in the corpus, and where "
                                  "(no --benchmark, no --out)")
    out: Optional[str] = option(None, "output directory or s3:// prefix: rows.parquet, report.json, report.md, "
                                "report.html, shares.png, matches.parquet/, quarantine.parquet/, then _SUCCESS")
    n: int = option(13, "n-gram length in words (13: GPT-3 and lm-evaluation-harness); 0: no n-gram pass, with "
                    "--semantic only", min=0)
    text_field: str = option("text", "the corpus records' text field (jsonl key or Parquet column)")
    id_field: str = option("id", "the corpus records' id field; without one, ids are <file>:<line>")
    benchmark_field: Optional[str] = option(None, "the benchmark rows' text field (default: `input`, else `text`; "
                                            "e.g. `question` for GSM8K)")
    threshold: float = option(0.0, "a row is contaminated when its share of n-grams found exceeds this (0: any "
                              "n-gram)", min=0.0, max=1.0)
    max_sources: int = option(10, "corpus document ids kept per row (and per n-gram per part)", min=1)
    resume: bool = option(True, "reuse corpus parts an earlier run with the same settings finished",
                          flags=("--resume/--no-resume",))
    requester_pays: bool = option(False, "read s3:// inputs (benchmark, corpus, --index, --null) from "
                                  "requester-pays buckets")
    progress: bool = progress_option()
    semantic: bool = option(False, "also find rephrased items: corpus windows embedded on the workers, each item's "
                            "nearest windows checked for its numbers, names, rare words and code (semantic.parquet, "
                            "report.json's `semantic`; docs/overlap.md)", flags=("--semantic",))
    embedder: str = option("minilm", "with --semantic: a sentence-transformers model directory, or `minilm` "
                           "(all-MiniLM-L6-v2, which `make minilm` installs)")
    top_k: int = option(100, "with --semantic: the corpus windows nearest to each item (cosine) that are verified "
                        "(the study: a rephrase's window is in the top 10 for ~3/4 of items, the top 100 for 98%)",
                        min=1)
    window_words: Optional[int] = option(None, "with --semantic: words per corpus window (default: twice the items' "
                                         "median length, within [16, 256])", min=1)
    window_stride: Optional[int] = option(None, "with --semantic: words between window starts (default: half a "
                                          "window)", min=1)
    null: Optional[str] = option(None, "with --semantic: a benchmark of items that cannot be in the corpus (e.g. "
                                 "written after it was collected); the threshold is set on their scores")
    false_flag_rate: float = option(0.01, "with --semantic --null: the share of the null's items the threshold may "
                                    "flag", min=0.0, max=1.0)
    answer_field: Optional[str] = option(None, "with --semantic: the rows' answer field, whose final answer the "
                                         "verifier also looks for (default: `target` when the rows have it)")
    actors: int = option(0, "with --semantic: the embedder's actors (model replicas); 0: as many as suit the "
                         "cluster (one a CPU, single-threaded, or one a GPU)", min=0)
    gpus_per_actor: float = option(0.0, "with --semantic: GPUs per embedder actor (0 = CPU)", min=0.0)
    prefilter: Optional[float] = option(None, "with --semantic: embed only the corpus windows that hold at least this "
                                        "share of some item's anchor weight (numbers, names, code; any anchor of an "
                                        "item with few): no flag is lost while the threshold is at least this "
                                        "(scoring/semantic/prefilter.py). 0.5 is a safe choice", min=0.01, max=1.0)
    judge_model: Optional[str] = option(None, "with --semantic: also ask this served chat model (an OpenAI-compatible "
                                        "server at --judge-api-base) whether each item's decided passage holds the "
                                        "same problem; its verdict decides (docs/overlap.md)")
    judge_api_base: Optional[str] = option(None, "with --judge-model: the judge's server, e.g. "
                                           "http://127.0.0.1:8000/v1 (the key, if any, in --judge-api-key-env)")
    judge_kind: str = option("auto", "with --judge-model: the prompt, `math`, `code` or `knowledge` for every item, "
                             "or `auto`: chosen per item (code syntax or identifiers: code; numbers and a question: "
                             "math; else knowledge)")
    judge_budget: Optional[int] = option(None, "with --judge-model: the most pairs judged (the most likely rephrases "
                                         "first); the rest keep the verifier's decision. Answers already paid for "
                                         "under OUT cost nothing on a rerun", min=0)
    judge_api_key_env: str = option("OPENAI_API_KEY", "with --judge-model: the environment variable holding the "
                                    "judge server's API key (sent as a bearer token, never written)")


# reported under report.json's `semantic` (its `settings`, the judge's under `judge`), so a verbatim run's report is as
# before
SEMANTIC_FIELDS = ("semantic", "embedder", "top_k", "window_words", "window_stride", "null", "false_flag_rate",
                   "answer_field", "prefilter", "actors", "gpus_per_actor", "judge_model", "judge_api_base",
                   "judge_kind", "judge_budget", "judge_api_key_env")
ANSWER_FIELD = "target"


def checked(**options) -> OverlapConfig:
    """The command line's config, refused in one line (exit 2) when its inputs do not go together."""
    cfg = OverlapConfig(**options)
    if cfg.query is not None:
        if not cfg.index:
            raise typer.BadParameter("--query needs --index (a corpus index from `tidemark index-corpus`)")
        return cfg
    if bool(cfg.corpus) == bool(cfg.index):
        raise typer.BadParameter("give one of --corpus (scan it) or --index (ask its index)")
    if cfg.semantic and cfg.index and cfg.prefilter is not None:
        raise typer.BadParameter("--prefilter chooses the corpus windows to embed; an index's are embedded already")
    if cfg.n == 0 and not cfg.semantic:
        raise typer.BadParameter("--n 0 (no n-gram pass) needs --semantic")
    if cfg.prefilter is not None and not cfg.semantic:
        raise typer.BadParameter("--prefilter needs --semantic (it chooses the windows to embed)")
    check_judge(cfg)
    if cfg.window_words and cfg.window_stride and cfg.window_stride > cfg.window_words:
        raise typer.BadParameter("--window-stride must not exceed --window-words (no word may fall between windows)")
    if not cfg.benchmark or not cfg.out:
        raise typer.BadParameter("--benchmark and --out are needed (or --index with --query)")
    return cfg


def check_judge(cfg: OverlapConfig) -> None:
    """The judge's options go together, and with --semantic only (the judge reads the semantic pass's pairs)."""
    from scoring.semantic.judge import KINDS

    given = [f"--{f.replace('_', '-')}" for f in ("judge_model", "judge_api_base", "judge_budget")
             if getattr(cfg, f) is not None]
    if cfg.judge_kind != "auto":
        given.append("--judge-kind")
    if given and not cfg.semantic:
        raise typer.BadParameter(f"{', '.join(given)} need --semantic (the judge reads its pairs)")
    if bool(cfg.judge_model) != bool(cfg.judge_api_base) or (given and not cfg.judge_model):
        raise typer.BadParameter("the LLM judge needs both --judge-model and --judge-api-base")
    if cfg.judge_kind not in ("auto", *KINDS):
        raise typer.BadParameter(f"--judge-kind must be auto or one of {', '.join(KINDS)}; got {cfg.judge_kind!r}")
    if cfg.judge_api_base and not cfg.judge_api_base.startswith(("http://", "https://")):
        raise typer.BadParameter(f"--judge-api-base must be an http(s) URL such as http://HOST:PORT/v1; got "
                                 f"{cfg.judge_api_base!r}")


def read_rows(cfg: OverlapConfig, path: str | None = None, keep: tuple = ()) -> tuple[list[dict], list[dict]]:
    """The benchmark's rows (or those of `path`, the null) and its quarantine (a local copy first for s3://)."""
    from curation.io.outputs import local_copy
    from jobs.plane.benchmark_reader import read_benchmark

    path = path or cfg.benchmark
    if path.startswith("s3://"):
        with local_copy(path, requester_pays=cfg.requester_pays) as local:
            return read_benchmark(local, text_field=cfg.benchmark_field, require_label=False, keep=keep)
    return read_benchmark(path, text_field=cfg.benchmark_field, require_label=False, keep=keep)


def semantic_request(cfg: OverlapConfig, rows: list[dict]) -> tuple:
    """(SemanticRequest, null rows or None, null quarantine), resolved on the driver before OUT is touched: the
    embedder's absolute directory, the answer field the rows carry, the null read with the benchmark's reader, the
    judge's server probed (semantic_judge.probe_judge) when there is a judge."""
    from jobs.parts.overlap.semantic_judge import JudgeRequest
    from jobs.parts.overlap.semantic_run import SemanticRequest
    from scoring.semantic.embed import resolve_embedder

    answer = cfg.answer_field or ANSWER_FIELD
    if not any(r.get(answer) is not None for r in rows):
        if cfg.answer_field:
            raise ValueError(f"--answer-field {cfg.answer_field}: no benchmark row has it")
        answer = None
    null_rows, null_bad = read_rows(cfg, cfg.null) if cfg.null else (None, [])
    if cfg.null and not null_rows:
        raise RuntimeError(f"--null {cfg.null}: no readable row ({len(null_bad)} quarantined)")
    embedder, words, stride = str(resolve_embedder(cfg.embedder).resolve()), cfg.window_words, cfg.window_stride
    if cfg.index:  # the index's stored windows: its embedder and plan, or a refusal (semantic_index.check_index)
        from jobs.parts.overlap.semantic_index import check_index, index_embeddings

        block = index_embeddings(cfg.index, cfg.requester_pays)
        words, stride = check_index(block, cfg.index, embedder, words, stride, SemanticRequest.max_tokens)
    req = SemanticRequest(corpus=cfg.corpus, index=cfg.index, embedder=embedder,
                          embedder_name=cfg.embedder, top_k=cfg.top_k, window_words=words,
                          window_stride=stride, text_field=cfg.text_field, id_field=cfg.id_field or None,
                          opts={"requester_pays": cfg.requester_pays}, answer_field=answer,
                          false_flag_rate=cfg.false_flag_rate, null_path=cfg.null, resume=cfg.resume,
                          progress=cfg.progress, prefilter=cfg.prefilter, actors=cfg.actors,
                          gpus_per_actor=cfg.gpus_per_actor, judge=JudgeRequest(
                              cfg.judge_api_base, cfg.judge_model, cfg.judge_kind, cfg.judge_budget,
                              cfg.judge_api_key_env) if cfg.judge_model else None)
    if req.judge is not None:  # the judge asks only after the corpus pass: an unusable server fails now, not then
        from curation.io.outputs import Location
        from jobs.parts.overlap.semantic_judge import check_judge
        from jobs.parts.overlap.semantic_parts import SEMANTIC_DIR

        check_judge(req.judge, Location(Location(cfg.out).child(SEMANTIC_DIR)), cfg.resume)
    return req, null_rows, null_bad


def scan(cfg: OverlapConfig, bench, dest) -> tuple:
    """The streaming scan (jobs/parts/overlap/corpus_scan.scan_corpus): (merged Matches, corpus counts, part stats)."""
    from jobs.kit.identity import json_digest, tool_version
    from jobs.kit.runtime import start_driver
    from jobs.parts.overlap.corpus_scan import scan_corpus

    settings = {"n": cfg.n, "text_field": cfg.text_field, "id_field": cfg.id_field or None,
                "max_sources": cfg.max_sources, "opts": {"requester_pays": cfg.requester_pays}}
    fingerprint = json_digest({"job": STAGE, **{k: v for k, v in settings.items() if k != "opts"},
                               "benchmark_ngrams": hashlib.sha256(bench.distinct.tobytes()).hexdigest(),
                               "tool": tool_version()})
    # start: Ray is joined only when a part is left to scan, so a finished run resumes without a cluster
    res = scan_corpus(cfg.corpus, bench.distinct, settings=settings, where=dest, fingerprint=fingerprint,
                      what="corpus part", resume=cfg.resume, progress=cfg.progress, start=start_driver)
    c = res.ledger
    counts = {"corpus_files": len(res.parts), "corpus_bytes": sum(p.bytes for p in res.parts),
              "corpus_records": c.rows_in, "corpus_documents": c.rows_out, "corpus_quarantined": c.quarantined,
              "corpus_reasons": dict(sorted(c.reasons.items())),
              "corpus_ngrams": sum(s["ngrams"] for s in res.summaries.values())}
    parts_stats = {k: res.stats.get(k, 0) for k in ("parts", "reused", "scored", "replans", "nodes_lost")}
    return res.matches, counts, parts_stats


def ask_index(cfg: OverlapConfig, bench) -> tuple:
    """The same answers from a corpus index: (Matches, corpus counts from the index, {})."""
    from jobs.parts.index.query import index_matches, index_shards
    from jobs.parts.index.reader import local_index

    local, meta = local_index(cfg.index, cfg.requester_pays)
    c = meta["counts"]
    counts = {"corpus_files": c["files"], "corpus_bytes": c["bytes"], "corpus_records": c["records"],
              "corpus_documents": c["documents"], "corpus_quarantined": c["quarantined"],
              "corpus_reasons": c["reasons"], "corpus_ngrams": None, "corpus_tokens": c["tokens"]}
    return index_matches(index_shards(local), bench, cfg.max_sources), counts, {}


def run_overlap(cfg: OverlapConfig) -> dict:
    from curation.io.ledger import Ledger, quarantine_table
    from curation.io.outputs import Location
    from jobs.kit.identity import open_output, publish, tool_version
    from jobs.kit.report_out import command_line, write_page
    from scoring.overlap.matching import BenchmarkGrams, row_results
    from scoring.overlap.summary import summarise
    from scoring.reports.overlap_report import plot_shares, report_markdown, report_page
    from scoring.reports.semantic_report import with_semantic

    t0 = time.perf_counter()
    rows, bad_rows = read_rows(cfg, keep=(cfg.answer_field or ANSWER_FIELD,) if cfg.semantic else ())
    if not rows:
        raise RuntimeError(f"{cfg.benchmark}: no readable benchmark row ({len(bad_rows)} quarantined)")
    if cfg.corpus:
        from jobs.parts.overlap.corpus_scan import plan_corpus_parts

        plan_corpus_parts(cfg.corpus, {"requester_pays": cfg.requester_pays})  # a missing corpus fails before OUT
    sem = semantic_request(cfg, rows) if cfg.semantic else None  # an unusable embedder, null or judge fails before OUT
    bench = BenchmarkGrams.of(rows, cfg.n) if cfg.n else None
    if bench is not None and bench.distinct.size > MAX_BENCHMARK_NGRAMS:
        raise ValueError(f"{cfg.benchmark}: {bench.distinct.size:,} distinct {cfg.n}-grams, more than the "
                         f"{MAX_BENCHMARK_NGRAMS:,} this command broadcasts to its workers; split the benchmark and "
                         "run it in pieces")
    dest, out = open_output(cfg.out)
    if bench is not None:
        matches, corpus_counts, parts_stats = scan(cfg, bench, dest) if cfg.corpus else ask_index(cfg, bench)
        results = row_results(bench, matches, cfg.threshold, cfg.max_sources)
    benchmark = Ledger(len(rows) + len(bad_rows), len(results) if bench is not None else len(rows), {})
    for q in bad_rows:
        benchmark.reasons[q["reason"]] = benchmark.reasons.get(q["reason"], 0) + 1
    benchmark.check("benchmark")
    if bench is not None:
        dest.write_parquet("rows.parquet", pa.Table.from_pylist(
            [{**res, **{k: row.get(k) for k in ROWS_SCHEMA_EXTRA}} for res, row in zip(results, rows)],
            schema=ROWS_SCHEMA))
    dest.write_parquet("benchmark_quarantine.parquet", quarantine_table(bad_rows))
    report = {
        "job": STAGE, "tool": tool_version(), "command": command_line(),
        "inputs": {"benchmark": cfg.benchmark, "corpus": cfg.corpus or cfg.index, "mode": "scan" if cfg.corpus
                   else "index"},
        "settings": {k: v for k, v in asdict(cfg).items()
                     if k not in ("benchmark", "corpus", "index", "query", "out", "progress", *SEMANTIC_FIELDS)},
        "counts": {"rows_in": benchmark.rows_in, "rows_scored": benchmark.rows_out,
                   "rows_quarantined": benchmark.quarantined, "rows_reasons": dict(sorted(benchmark.reasons.items())),
                   **(corpus_counts if bench is not None else {})},
        "parts": parts_stats if bench is not None else {},
        "contamination": summarise(results, rows) if bench is not None else None,
    }
    if bench is None:
        report["verbatim"] = "not run: --n 0 (no n-gram pass, so no rows.parquet)"
    if sem:
        from jobs.parts.overlap.semantic_run import semantic_pass

        report["semantic"] = semantic_pass(*sem, rows, dest, out)
    report["seconds"] = round(time.perf_counter() - t0, 2)
    local = Location(str(out))
    local.write_json("report.json", report)
    markdown = report_markdown(report) if bench is not None else ""
    page = report_page(report, out) if bench is not None else None
    if bench is not None:
        (out / "shares.png").write_bytes(plot_shares(report))
    if sem:
        markdown, page = with_semantic(markdown, page, report, out)
    local.write_text("report.md", markdown)
    write_page(out, page)
    publish(dest, out, {"job": STAGE, "rows": benchmark.rows_out, "seconds": report["seconds"]})
    return {"report": str(out / "report.md"), "rows": dest.child("rows.parquet") if bench is not None else None,
            "seconds": report["seconds"], "counts": report["counts"],
            "contamination": report["contamination"]["overall"] if bench is not None else None,
            **({"semantic": {k: report["semantic"][k] for k in ("n", "flagged", "share", "threshold")}}
               if sem else {})}


def run(cfg: OverlapConfig) -> None:
    """`--query`: one span's count and places, printed; otherwise the benchmark's report."""
    if cfg.query is None:
        run_and_print_report(run_overlap, cfg, errors=(FileNotFoundError, RuntimeError, ValueError))
        return
    from jobs.parts.index.query import index_shards, span_report
    from jobs.parts.index.reader import local_index

    try:
        shards = index_shards(local_index(cfg.index, cfg.requester_pays)[0])
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    res = span_report(shards, cfg.query, cfg.max_sources)
    typer.echo(f"{res['count']:,} occurrence(s) of the {res['words']}-word span in {cfg.index}")
    for d in res["documents"]:
        typer.echo(f"  {d['id']}  (from word {d['word_offset']})")


def register(app: typer.Typer) -> None:
    app.command("overlap")(command(
        OverlapConfig, run, make=checked, doc=
        "Find which benchmark rows occur verbatim in a corpus (word n-gram overlap, as GPT-3 and "
        "lm-evaluation-harness decontaminate): per row, the share of its n-grams found, the longest match and the "
        "corpus documents; the contaminated share with a 95% CI. With --index (from `tidemark index-corpus`), the "
        "same from an index; with --index --query TEXT, how often and where a span occurs. With --semantic, also the "
        "items a corpus holds in other words (nearest windows by a sentence embedder, checked by the items' numbers, "
        "names and rare words): semantic.parquet."))
