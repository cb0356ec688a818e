"""Paraphrase parts: a benchmark part read with the one benchmark reader, each row rewritten, the part's data and
quarantine files written, and one summary (counts per bucket, examples, the data file's digest) returned. The
pool runs through the one part loop (jobs/plane/part_loop.run_parts): resume, node-loss replanning, stall bound."""
from __future__ import annotations

import json
from typing import Iterator

import pyarrow as pa

STAGE = "paraphrase"
N_EXAMPLES = 3
EXAMPLE_CHARS = 400
NO_BUCKET = "(no bucket)"
DATA_SCHEMA = pa.schema([("id", pa.string()), ("input", pa.string()), ("label", pa.int8()), ("bucket", pa.string()),
                         ("words", pa.int32()), ("content_words", pa.int32()), ("changed", pa.int32())])
PART_DIRS = ("data", "quarantine.parquet")
# Why the part loop does not row-isolate paraphrase parts: a row whose rewrite fails is already quarantined by its
# part (rewrite_failed), so a failed pipeline is an actor or node failure, not one row's fault.
NOT_ISOLATED = ("a row whose rewrite fails is quarantined by its part (rewrite_failed); a failed pipeline is an "
                "actor or node failure, which a rerun resumes")


class ParaphraseParts:
    """map_batches callable: `part` (PartSpec JSON), `drop` (JSON list of in-part lines that repeat an earlier id)
    → one `summary` (JSON) per part, after its data and quarantine files are written."""

    def __init__(self, rewriter: str, rate: float, seed: int, wordnet_dir: str | None, dest: str,
                 device: str = "cpu", actors: int = 1):
        from curation.paraphrase.rewriters import make_rewriter
        from jobs.plane.scoring_pool import PrepareParts, ScoringSpec
        from curation.io.outputs import Location
        from jobs.plane.tasks import default_threads

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
            b = buckets.setdefault(NO_BUCKET if r["bucket"] is None else str(r["bucket"]), zero_counts())
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


def zero_counts() -> dict:
    """A bucket's counters, all zero."""
    return dict.fromkeys(("rows", "rows_changed", "words", "content_words", "changed", "targeted"), 0)


def run_pool(work, *, rewriter: str, rate: float, seed: int, wordnet_dir: str | None, dest_uri: str,
             actors: int | None, gpus_per_actor: float, progress: bool) -> Iterator[dict]:
    """One actor pool (the rewriter loads once per actor) over (part, drops) work items; yields each part's
    summary as its files land. No part finishing within the stall bound raises StalledPool."""
    import ray

    from jobs.plane.retry_policy import SCORER_MAX_RESTARTS, SCORER_MAX_TASK_RETRIES, STALL_TIMEOUT_S
    from jobs.plane.pool_sizing import cluster_cpus
    from jobs.plane.scoring_pool import part_items
    from jobs.plane.watch import capacity_line, watch

    ray.data.DataContext.get_current().enable_progress_bars = progress
    actors = max(1, actors or int(cluster_cpus()))
    ds = ray.data.from_items(part_items(work), override_num_blocks=max(1, len(work)))
    ds = ds.map_batches(ParaphraseParts, fn_constructor_kwargs={
        "rewriter": rewriter, "rate": rate, "seed": seed, "wordnet_dir": wordnet_dir, "dest": dest_uri,
        "device": "cuda" if gpus_per_actor > 0 else "cpu", "actors": actors},
        batch_size=1, batch_format="pyarrow", num_cpus=1, num_gpus=gpus_per_actor or None,
        compute=ray.data.ActorPoolStrategy(min_size=1, max_size=actors),
        max_restarts=SCORER_MAX_RESTARTS, max_task_retries=SCORER_MAX_TASK_RETRIES)
    batches = ds.iter_batches(batch_format="pyarrow", batch_size=None)
    for batch in watch(batches, STALL_TIMEOUT_S, lambda: capacity_line({"CPU": 1, "GPU": gpus_per_actor})):
        for s in batch.column("summary").to_pylist():
            yield json.loads(s)
