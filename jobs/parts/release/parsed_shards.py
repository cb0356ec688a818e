"""build-benchmark's parse pass, in parts on the one part loop (jobs/plane/part_loop.run_parts).

    shard (a site file or byte range, a dump stream, a tar, a batch of titles) ──▶ parse task (any worker): the
        shard's documents, numbered (shard, position), through the row-level stages (annotate_documents) ──▶ one
        annotated table in the object store
    ──▶ commit task: OUT/_build/parsed/part-NNNNN.parquet (on the driver's node when OUT is a local directory, the
        disk OUT names; on the worker's for s3://), returning the part's summary
    ──▶ the driver writes the part's marker (OUT/_build/_parts/part-NNNNN.done.json, jobs/plane/part_store.py)

So a build cut off mid-parse (a crash, a preempted cluster, a stall) resumes from the shards it parsed: a rerun
with the same config and inputs reads them back instead of parsing again. The passes after this one (dedup,
sampling, release: jobs/parts/release/build.py) decide across every part at once, so they run over all the
annotated tables together; `OUT/_build` goes once the release is published. The local runner
(curation/stages/pipeline.run_local) parses in its own process and keeps no parts.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping
from jobs.plane.runners import RAY

BUILD_DIR = "_build"  # under OUT; Parquet readers and the release publisher skip it
PARSED = "parsed"
STAGING = "staging"  # the source's own staging area (a .7z decompressed) when OUT is a local directory
TASK_CPUS = 0.5  # a 2-core machine runs parse tasks side by side with the driver's other work
# Why a failed parse pipeline is not isolated row by row: a bad document is quarantined by its reader and the row
# stages (each with its reason); a shard whose task fails is a reader or node failure, which a rerun resumes.
NOT_ISOLATED = ("a bad document is excluded with its reason by the reader and the row stages; a failing shard is a "
                "reader or node failure, which a rerun resumes from the shards already parsed")


def work_location(dest):
    """OUT/_build, where the parse parts and their markers live while a release is being built."""
    from curation.io.outputs import Location

    return Location(dest.child(BUILD_DIR), requester_pays=dest.requester_pays, endpoint_url=dest.endpoint_url)


def parse_fingerprint(cfg: Mapping[str, Any], inputs: str | None = None) -> str:
    """Everything that changes a shard's annotated rows: the whole config (a key that only sampling reads costs a
    reparse, never a wrong reuse), the tool's version and, when the job computed one before parsing, the digest of
    a global input the shards read (the corpus recipe's training-overlap set)."""
    from jobs.kit.identity import json_digest, tool_version

    facts = {"config": cfg, "tool": tool_version()}
    if inputs:
        facts["inputs"] = inputs
    return json_digest(facts)


def shard_digest(shard: Mapping[str, Any]) -> str:
    """What identifies a shard's input: its description (path, byte range, titles, ...) and the digest of every
    local file it names (jobs/kit/identity.file_digest: size and three samples, cheap on a multi-GB dump). An s3://
    object is named by its key; the source snapshot in the manifest records its listing."""
    from jobs.kit.identity import file_digest, json_digest

    files = {}
    for value in shard.values():
        if isinstance(value, str) and not value.startswith("s3://") and Path(value).is_file():
            files[value] = file_digest(Path(value))
    return json_digest([dict(shard), files])


# ---------------------------------------------------------------- the tasks

def parse_shard(item: Mapping[str, Any], aggregated: Mapping[str, list] | None, cfg_json: str):
    """One shard's documents through the row-level stages, in batches: one annotated table (ANNOTATED_SCHEMA). A
    shard that needs an aggregation (`site_key`) gets its partition arrays, read zero-copy from the object store.
    A source that can make a document's text on request does so only for the documents the time cutoff keeps
    (curation/stages/pipeline.annotate_documents)."""
    import pyarrow as pa
    import ray

    from curation import sources
    from curation.stages.pipeline import ANNOTATED_SCHEMA, annotate_documents

    cfg = json.loads(cfg_json)
    shard = json.loads(item["shard"])
    refs = (aggregated or {}).get(shard.get("site_key"))
    documents = sources.iter_documents(shard, ray.get(list(refs)) if refs else None, deferred=True)
    tables = list(annotate_documents(documents, cfg, first_row_no=int(item["shard_no"]) << 32))
    return pa.concat_tables(tables) if tables else ANNOTATED_SCHEMA.empty_table()


def commit_shard(table, dest_uri: str, index: int) -> dict:
    """Write one parsed shard under OUT/_build and return its summary (the driver writes the marker)."""
    import pyarrow.compute as pc

    from curation.io.outputs import Location
    from jobs.plane.part_store import part_name

    info = Location(dest_uri).write_parquet(f"{PARSED}/{part_name(index)}.parquet", table)
    dropped = int(pc.sum(pc.not_equal(table.column("reason"), "")).as_py() or 0) if table.num_rows else 0
    return {"index": index, "documents": table.num_rows, "dropped": dropped, "files": {"parsed": info}}


def read_shard(dest_uri: str, index: int):
    """A committed shard's annotated table, read back for a resumed build."""
    from curation.io.outputs import Location
    from curation.stages.pipeline import ANNOTATED_SCHEMA
    from jobs.plane.part_store import part_name

    return Location(dest_uri).read_parquet(f"{PARSED}/{part_name(index)}.parquet").cast(ANNOTATED_SCHEMA)


def run_aggregations(source_cfg: Mapping[str, Any], shards: list[dict], log: Callable[[str], None]) -> dict:
    """Each aggregation the source declares (Stack Exchange's answers pass), on the workers: a scan task per item
    returning one piece per partition (module.aggregation_scan), a merge task per partition
    (module.aggregation_merge). Returns {key: [partition object refs]}; the driver never fetches them."""
    import ray

    from curation import sources

    module = sources.source_module(source_cfg["kind"])
    out = {}
    for agg in sources.aggregations(source_cfg, shards):
        p = agg["partitions"]
        scan = ray.remote(num_cpus=TASK_CPUS, max_retries=2)(module.aggregation_scan).options(num_returns=p)
        merge = ray.remote(num_cpus=TASK_CPUS, max_retries=2)(module.aggregation_merge)
        pieces = [scan.remote(item, p) for item in agg["items"]]
        pieces = [x if p > 1 else [x] for x in pieces]
        out[agg["key"]] = [merge.remote(*[piece[k] for piece in pieces]) for k in range(p)]
        log(f"answers pass: {len(agg['items'])} range(s) of {agg['key']}, {p} partition(s)")
    return out


def _where_out_is(work) -> dict:
    """Task options for writing or reading OUT/_build: on the driver's node for a local directory (the disk it
    names is there, as for the release itself), anywhere for s3://."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if work.s3:
        return {"num_cpus": TASK_CPUS, "max_retries": 2}
    node = ray.get_runtime_context().get_node_id()
    # No CPU reservation: a head node started with num-cpus 0 (common on KubeRay) must still write its disk.
    return {"num_cpus": 0, "max_retries": 2,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=False)}


# ---------------------------------------------------------------- the pass

def parse_parts(cfg: Mapping[str, Any], source_cfg: Mapping[str, Any], shards: list[dict], dest, *,
                resume: bool, log: Callable[[str], None], progress: bool = True,
                computed: Mapping[str, list] | None = None, inputs: str | None = None) -> tuple[list, dict]:
    """Parse every shard through the part loop; returns the annotated tables (object refs, in shard order) and the
    loop's stats (parts, reused, scored, replans, nodes_lost). Shards parsed by an earlier run of the same build
    are read back, not parsed again. `computed` adds aggregations the job computed itself ({site_key: [refs]}),
    `inputs` their digest."""
    import ray

    from curation.io.ledger import ReconcileError
    from curation.io.outputs import new_run_id
    from jobs.plane.part_loop import run_parts
    from jobs.plane.part_store import PartStore
    from jobs.plane.retry_policy import STALL_TIMEOUT_S
    from jobs.plane.task_map import gather
    from jobs.plane.watch import capacity_line, watch

    work = work_location(dest)
    items = [{"shard": json.dumps(s, default=str), "shard_no": i} for i, s in enumerate(shards)]
    digests = {i: shard_digest(s) for i, s in enumerate(shards)}
    store = PartStore(work, parse_fingerprint(cfg, inputs), dirs=(PARSED,))
    cfg_json = json.dumps(cfg, default=str)
    tables: dict[int, Any] = {}
    aggregated: dict[str, dict] = {}
    at_out = _where_out_is(work)

    def pool(pending: list) -> Iterator[dict]:
        if "refs" not in aggregated:  # only a build with shards left to parse needs the answers pass
            aggregated["refs"] = {**run_aggregations(source_cfg, shards, log), **(computed or {})}
        parse = ray.remote(num_cpus=TASK_CPUS, max_retries=2)(parse_shard)
        commit = ray.remote(commit_shard).options(**at_out)
        summaries = []
        for item in pending:
            tables[item["shard_no"]] = parse.remote(item, aggregated["refs"], cfg_json)
            summaries.append(commit.remote(tables[item["shard_no"]], work.uri, item["shard_no"]))
        yield from watch(gather(summaries, desc="parse", progress=progress), STALL_TIMEOUT_S,
                         lambda: capacity_line({"CPU": TASK_CPUS}))

    stats: dict = {}
    summaries = run_parts(items, index=lambda it: it["shard_no"], digests=digests, store=store, pool=pool,
                          runner=RAY, stats=stats, run_id=new_run_id(), resume=resume, not_isolated=NOT_ISOLATED)
    read = ray.remote(read_shard).options(**at_out)
    refs = [tables[i] if i in tables else read.remote(work.uri, i) for i in range(len(items))]
    documents = sum(int(summaries[i]["documents"]) for i in range(len(items)))
    if stats.get("reused"):
        log(f"parse: {stats['reused']} of {len(items)} shard(s) reused from {work.uri}, {stats['scored']} parsed")
    if len(summaries) != len(items):
        raise ReconcileError(f"{len(items)} shards were planned; {len(summaries)} were parsed")
    stats["documents"] = documents
    return refs, stats


def own_staging(dest) -> str | None:
    """Where a build stages a source (a .7z decompressed) when the config names no `source.staging`: under OUT/_build
    for a local OUT, so that a resumed build finds the staged dump too (removed with _build once published); None
    for s3:// (the runner then uses a temporary directory)."""
    return None if dest.s3 else str(dest.root / BUILD_DIR / STAGING)
