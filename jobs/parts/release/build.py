"""build-benchmark on Ray: workers parse, filter, deduplicate, sample and write; the driver plans and adds up.

    parse:   a part per shard (site/file/tar/byte range) on the one part loop: documents through the row-level
             stages, one annotated table per shard in the object store (texts included; they never leave it),
             committed under OUT/_build so that a cut-off build resumes (jobs/parts/release/parsed_shards.py)
    dedup:   survivors' keys --tasks per hash(id) partition--> duplicate ids --per hash(exact key)--> exact copies
             --per hash(LSH band)--> similar pairs --one task--> near duplicates (jobs/parts/release/dedup_tasks.py, the
             decisions of curation/stages/dedup.py; the drops, duplicates only, are one table in the object store)
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
from typing import Any, Callable, Mapping, Sequence

TASK_CPUS = 0.5
BLOCK_CHUNKS_PER_CPU = 2  # tasks per CPU in each pass over the annotated blocks


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
            progress: bool = True, rephrased: Sequence = ()) -> dict:
    """Build into `stage`; the parse pass keeps its parts under `dest` (OUT/_build) so that a cut-off build
    resumes (jobs/parts/release/parsed_shards.py). `rephrased`: --drop-rephrased's overlaps
    (curation/release/rephrased.py), applied after sampling."""
    import ray

    from curation import sources
    from jobs.parts.release.parsed_shards import own_staging as staging_under_out

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
        return _run_ray(cfg, source_cfg, stage, dest, log, resume=resume, progress=progress, rephrased=rephrased)
    finally:
        if own_staging:
            shutil.rmtree(own_staging, ignore_errors=True)


def _run_ray(cfg: Mapping[str, Any], source_cfg: dict, stage: Path, dest, log: Callable[[str], None], *,
             resume: bool, progress: bool, rephrased: Sequence = ()) -> dict:
    import time

    import ray

    started = time.perf_counter()
    log = _timed(log, started)

    from curation import sources
    from curation.stages.counts import Tally
    from curation.release.output import SamplePlan, finish_release
    from jobs.parts.release.dedup_tasks import dedup_on_workers
    from jobs.parts.release.parsed_shards import parse_parts
    from jobs.plane.task_map import gather

    # Planning runs as a task: staging a .7z decompresses the whole dump, which is a worker's job, not the driver's.
    shards = ray.get(ray.remote(num_cpus=TASK_CPUS, max_retries=1)(sources.shards).remote(source_cfg))
    log(f"{len(shards)} shard(s) to parse")
    computed, inputs, overlap = {}, None, None
    if source_cfg["kind"] == "corpus":  # the training n-grams in the held-out passages, before any shard parses
        import hashlib

        from curation.sources.corpus import OVERLAP_KEY
        from jobs.parts.release.training_overlap import training_overlap

        found, stats = training_overlap(source_cfg, dest, log, progress)
        computed, inputs = {OVERLAP_KEY: [ray.put(found.hashes)]}, hashlib.sha256(found.hashes.tobytes()).hexdigest()
        overlap = {"found": found, "stats": stats}
    # the annotated tables stay in the object store: the driver holds their references
    blocks, parsed = parse_parts(cfg, source_cfg, shards, dest, resume=resume, log=log, progress=progress,
                                 computed=computed, inputs=inputs)
    log(f"parsed and annotated {parsed['documents']} documents")
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    drops = dedup_on_workers(blocks, cfg, partitions=max(2, 2 * cpus), log=log)
    ray.wait([drops], fetch_local=False)
    log("dedup decided")
    chunks = _chunks(blocks, BLOCK_CHUNKS_PER_CPU * cpus)
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
                         plan.excluded_parts, executor=RayExecutor(), log=log, rephrased=rephrased)
    if overlap:
        out["training_overlap"] = overlap
    return out
