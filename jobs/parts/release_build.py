"""build-benchmark on Ray: workers parse, filter, deduplicate, sample and write; the driver plans and adds up.

    parse:   a part per shard (site/file/tar/byte range) on the one part loop: documents through the row-level
             stages, one annotated table per shard in the object store (texts included; they never leave it),
             committed under OUT/_build so that a cut-off build resumes (jobs/parts/parsed_shards.py)
    dedup:   survivors' keys --groupby(hash of id)--> duplicate ids --groupby(hash of exact key)--> exact copies
             --explode LSH bands, groupby(hash of band)--> similar pairs --one task--> near duplicates
             (curation/stages/dedup.py; the drops, duplicates only, are one table in the object store)
    counts:  a task per chunk of blocks counts candidate rows per sampling group; the driver plans the sample
    ranks:   a task per chunk returns each group's smallest ranks; the driver merges them into thresholds
    release: a task per chunk decides every document and returns its exclusions, sampled rows and tally
    write:   tasks on this node write data/length<N>.parquet and the excluded/ parts into the staging directory
             (curation/release/output.py), debias and audit the release rows when asked

What reaches the driver: shard descriptions, per-group counts, ranks up to the release's size, tallies and file
digests. Ray tasks ask for half a CPU, so that a 2-core machine runs parse and filter tasks side by side.
"""
from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping

TASK_CPUS = 0.5
BLOCK_CHUNKS_PER_CPU = 2  # tasks per CPU in each pass over the annotated blocks


# ---------------------------------------------------------------- dedup as groupbys over hash partitions

def _with_partition(batch, field: str, partitions: int):
    """The keys (one fixed schema: every block of a shuffle must match) and their hash partition."""
    import pyarrow as pa

    from curation.release.passes import KEY_SCHEMA, hash_partition

    batch = batch.select(KEY_SCHEMA.names).cast(KEY_SCHEMA)
    keys = [hash_partition(v, partitions) for v in batch.column(field).to_pylist()]
    return batch.append_column("_part", pa.array(keys, pa.int32()))


def _decided_schema():
    import pyarrow as pa

    from curation.release.passes import KEY_SCHEMA

    return pa.schema([*KEY_SCHEMA, pa.field("reason", pa.string()), pa.field("detail", pa.string()),
                      pa.field("_drop", pa.bool_())])


def _decide_partition(table, check: str):
    """One hash partition of a dedup step: the kept rows' keys, and the drops, in one table (`_drop` marks)."""
    import pyarrow as pa

    from curation.stages import dedup
    from curation.release.passes import KEY_SCHEMA

    kept, drops = getattr(dedup, check)(table.select(KEY_SCHEMA.names).to_pylist())
    out = {"_drop": [False] * len(kept) + [True] * len(drops)}
    for name in KEY_SCHEMA.names:
        out[name] = [r[name] for r in kept] + [d.get(name) for d in drops]
    out["reason"] = [""] * len(kept) + [d["reason"] for d in drops]
    out["detail"] = [""] * len(kept) + [d["detail"] for d in drops]
    return pa.table(out, schema=_decided_schema())


def _band_entries(batch, bands: int, partitions: int):
    import pyarrow as pa

    from curation.stages.dedup import band_entries
    from curation.release.passes import hash_partition

    entries = list(band_entries(batch.to_pylist(), bands))
    table = pa.Table.from_pylist(entries, schema=pa.schema([
        ("band", pa.binary()), ("created_us", pa.int64()), ("id", pa.string()), ("row_no", pa.int64()),
        ("minhash", pa.binary())]))
    return table.append_column("_part", pa.array([hash_partition(e["band"], partitions) for e in entries],
                                                pa.int32()))


_EDGE_FIELDS = [("a_us", "int64"), ("a_id", "string"), ("a_row", "int64"), ("b_us", "int64"), ("b_id", "string"),
                ("b_row", "int64"), ("sim", "float64")]


def _edges_of_partition(table, threshold: float):
    import pyarrow as pa

    from curation.stages.dedup import near_edges

    schema = pa.schema([(n, getattr(pa, t)()) for n, t in _EDGE_FIELDS])
    return pa.Table.from_pylist(near_edges(table.to_pylist(), threshold), schema=schema)


def _resolve_near(*edge_tables):
    from curation.stages.dedup import resolve_near
    from curation.release.passes import drops_table

    return drops_table(resolve_near(e for t in edge_tables for e in t.to_pylist()))


def _concat_drops(*tables):
    import pyarrow as pa

    from curation.release.passes import DROPS_SCHEMA

    tables = [t.select(DROPS_SCHEMA.names).cast(DROPS_SCHEMA) for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else DROPS_SCHEMA.empty_table()


def dedup_on_workers(annotated, cfg: Mapping[str, Any], partitions: int, log: Callable[[str], None]):
    """The dedup drops as one table in the object store (an object reference)."""
    import pyarrow.compute as pc
    import ray

    from curation.release.passes import survivor_keys

    dd = cfg["dedup"]
    steps = ["duplicate_ids"] + (["exact_duplicates"] if dd["exact"] else [])
    keys = annotated.map_batches(survivor_keys, batch_format="pyarrow", num_cpus=TASK_CPUS)
    drop_refs = []
    for check, field in zip(steps, ("id", "exact_key")):
        decided = keys.map_batches(_with_partition, fn_kwargs={"field": field, "partitions": partitions},
                                   batch_format="pyarrow", num_cpus=TASK_CPUS) \
            .groupby("_part", num_partitions=partitions).map_groups(_decide_partition, fn_kwargs={"check": check}, batch_format="pyarrow",
                                         num_cpus=TASK_CPUS).materialize()
        drop_refs += decided.map_batches(lambda b: b.filter(b.column("_drop")), batch_format="pyarrow").to_arrow_refs()
        keys = decided.map_batches(lambda b: b.filter(pc.invert(b.column("_drop"))), batch_format="pyarrow")
    if dd["near"]:
        entries = keys.map_batches(_band_entries, fn_kwargs={"bands": int(dd["bands"]), "partitions": partitions},
                                   batch_format="pyarrow", num_cpus=TASK_CPUS)
        edges = entries.groupby("_part", num_partitions=partitions).map_groups(_edges_of_partition, fn_kwargs={
            "threshold": float(dd["threshold"])}, batch_format="pyarrow", num_cpus=TASK_CPUS)
        resolve = ray.remote(num_cpus=TASK_CPUS, max_retries=2)(_resolve_near)
        drop_refs.append(resolve.remote(*edges.to_arrow_refs()))
    drops = ray.remote(num_cpus=TASK_CPUS, max_retries=2)(_concat_drops).remote(*drop_refs)
    log(f"dedup: {' -> '.join(steps + (['near_duplicates'] if dd['near'] else []))} over {partitions} "
        "hash partitions")
    return drops


# ---------------------------------------------------------------- the passes over blocks

def _count_task(cfg, drops, *blocks):
    from curation.release.passes import count_groups

    total: Counter = Counter()
    for block in blocks:
        total.update(count_groups(block, drops, cfg))
    return total


def _ranks_task(cfg, needed, drops, *blocks):
    from curation.stages import sampling
    from curation.release.passes import smallest_ranks_of_block

    out: dict = {}
    for block in blocks:
        sampling.merge_smallest(out, smallest_ranks_of_block(block, drops, cfg, needed), needed)
    return out


def _release_task(cfg, plans, limits, parts, drops, *blocks):
    import pyarrow as pa

    from curation.stages.counts import Tally
    from curation.release.passes import EXCLUDED_SCHEMA, SAMPLED_SCHEMA, release_block

    tally, excluded, sampled = Tally(), [], []
    for block in blocks:
        e, s, t = release_block(block, drops, cfg, plans, limits, parts)
        excluded.append(e)
        sampled.append(s)
        tally += t
    return (pa.concat_tables(excluded) if excluded else EXCLUDED_SCHEMA.empty_table(),
            pa.concat_tables(sampled) if sampled else SAMPLED_SCHEMA.empty_table(), tally)


class RayExecutor:
    """Runs finish_release's tasks on this node (it holds the staging directory); rows go by reference."""

    def __init__(self):
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.strategy = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)

    def submit(self, fn, *args, num_returns: int = 1):
        import ray

        # No CPU reservation: a head node started with num-cpus 0 (common on KubeRay) must still run them; there
        # are only a handful (one per bucket and excluded/ part, debias, the audit) and nothing else runs then.
        return ray.remote(fn).options(num_cpus=0, num_returns=num_returns, max_retries=2,
                                      scheduling_strategy=self.strategy).remote(*args)

    def get(self, ref):
        import ray

        return ray.get(ref)


def _timed(log: Callable[[str], None], started: float) -> Callable[[str], None]:
    """Messages prefixed with the seconds since the build started: where a long build spends its time."""
    import time

    return lambda message: log(f"[{time.perf_counter() - started:7.1f}s] {message}")


def _chunks(refs: list, n: int) -> list[list]:
    size = max(1, -(-len(refs) // max(1, n)))
    return [refs[i:i + size] for i in range(0, len(refs), size)]


def run_ray(cfg: Mapping[str, Any], stage: Path, dest, log: Callable[[str], None], *, resume: bool = True,
            progress: bool = True) -> dict:
    """Build into `stage`; the parse pass keeps its parts under `dest` (OUT/_build) so that a cut-off build
    resumes (jobs/parts/parsed_shards.py)."""
    import ray

    from curation import sources
    from jobs.parts.parsed_shards import own_staging as staging_under_out

    source_cfg = sources.source_config(cfg)
    own_staging = None
    if not source_cfg.get("staging"):
        if len([n for n in ray.nodes() if n.get("Alive")]) == 1:  # every worker sees this machine's disk
            # This build's own area: under OUT/_build for a local OUT (a resumed build reuses the staged dump; it
            # goes with _build once the release is published), else a temporary directory removed when the run
            # ends. A staged dump can be as large as the XML inside it. Set source.staging to keep staged copies.
            source_cfg["staging"] = staging_under_out(dest)
            if source_cfg["staging"] is None:
                own_staging = source_cfg["staging"] = tempfile.mkdtemp(prefix="tidemark-staging-")
        else:
            log("several nodes and no source.staging: a .7z dump is parsed by one task; set source.staging to an "
                "s3:// prefix (or a shared directory) to decompress it once and parse it in parallel")
    try:
        return _run_ray(cfg, source_cfg, stage, dest, log, resume=resume, progress=progress)
    finally:
        if own_staging:
            shutil.rmtree(own_staging, ignore_errors=True)


def _run_ray(cfg: Mapping[str, Any], source_cfg: dict, stage: Path, dest, log: Callable[[str], None], *,
             resume: bool, progress: bool) -> dict:
    import time

    import ray

    started = time.perf_counter()
    log = _timed(log, started)

    from curation import sources
    from curation.stages.counts import Tally
    from curation.release.output import SamplePlan, finish_release
    from jobs.parts.parsed_shards import parse_parts
    from jobs.plane.task_map import gather

    # Planning runs as a task: staging a .7z decompresses the whole dump, which is a worker's job, not the driver's.
    shards = ray.get(ray.remote(num_cpus=TASK_CPUS, max_retries=1)(sources.shards).remote(source_cfg))
    log(f"{len(shards)} shard(s) to parse")
    computed, inputs, overlap = {}, None, None
    if source_cfg["kind"] == "corpus":  # the training n-grams in the held-out passages, before any shard parses
        import hashlib

        from curation.sources.corpus import OVERLAP_KEY
        from jobs.parts.training_overlap import training_overlap

        found, stats = training_overlap(source_cfg, dest, log, progress)
        computed, inputs = {OVERLAP_KEY: [ray.put(found.hashes)]}, hashlib.sha256(found.hashes.tobytes()).hexdigest()
        overlap = {"found": found, "stats": stats}
    blocks, parsed = parse_parts(cfg, source_cfg, shards, dest, resume=resume, log=log, progress=progress,
                                 computed=computed, inputs=inputs)
    annotated = ray.data.from_arrow_refs(blocks)  # the annotated tables stay in the object store
    log(f"parsed and annotated {parsed['documents']} documents")
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    drops = dedup_on_workers(annotated, cfg, partitions=max(2, 2 * cpus), log=log)
    ray.wait([drops], fetch_local=False)
    log("dedup decided")
    chunks = _chunks(annotated.to_arrow_refs(), BLOCK_CHUNKS_PER_CPU * cpus)
    task = ray.remote(num_cpus=TASK_CPUS, max_retries=2)

    counts: Counter = Counter()
    documents_in = parsed["documents"]
    for part in gather([task(_count_task).remote(cfg, drops, *c) for c in chunks], desc="sampling: counts"):
        counts.update(part)
    plan = SamplePlan.from_counts(counts, cfg, documents_in)
    if plan.needed:
        needed = ray.put(plan.needed)
        for part in gather([task(_ranks_task).remote(cfg, needed, drops, *c) for c in chunks],
                           desc="sampling: ranks"):
            plan.add_ranks(part)
    release = task(_release_task).options(num_returns=3)
    plans, limits = ray.put(plan.plans), ray.put(plan.limits())
    outputs = [release.remote(cfg, plans, limits, plan.excluded_parts, drops, *c) for c in chunks]
    tally = Tally()
    for part in gather([o[2] for o in outputs], desc="release: decide"):
        tally += part
    log(f"decided {tally.documents_in} documents: {tally.candidates} bucket rows, {tally.rows_out} sampled")
    out = finish_release(cfg, stage, tally, [o[1] for o in outputs], [o[0] for o in outputs],
                         plan.excluded_parts, executor=RayExecutor(), log=log)
    if overlap:
        out["training_overlap"] = overlap
    return out
