"""build-benchmark's dedup on the workers, as plain Ray tasks over hash partitions of each key:

    per annotated block:   survivors' keys split by hash(id) into P pieces                      (P returns)
    per partition, id:     duplicate_ids, the kept keys split by hash(exact key) into P pieces  (P + 1 returns)
    per partition, exact:  exact_duplicates, the kept rows' LSH band entries split by hash(band) (P + 1 returns)
    per partition, band:   the similar pairs (near_edges)
    one task:              resolve_near over every pair, then every drop in one table

The decisions are curation/stages/dedup.py's; each check compares only rows that share its key, so a partition
holding every row of each key it holds decides as the whole corpus would (tests/curation/release/
test_release_passes.py). Why tasks and not Ray Data groupbys (the first version): each groupby was a streaming
execution with a hash shuffle of its own, ~7-9 s of fixed cost on 2 cores at any size and ~1,700 blocks at 500k
posts, for a few MB of keys. Tasks hand each piece straight to the partition that needs it through the object
store; the driver holds only object references.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

TASK_CPUS = 0.5
_EDGE_FIELDS = [("a_us", "int64"), ("a_id", "string"), ("a_row", "int64"), ("b_us", "int64"), ("b_id", "string"),
                ("b_row", "int64"), ("sim", "float64")]


def _entry_schema():
    import pyarrow as pa

    return pa.schema([("band", pa.binary()), ("created_us", pa.int64()), ("id", pa.string()),
                      ("row_no", pa.int64()), ("minhash", pa.binary())])


def split(table, field: str, partitions: int) -> list:
    """`table`'s rows in `partitions` pieces by hash_partition of `field` (curation/release/passes.py)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from curation.release.passes import hash_partition

    parts = pa.array([hash_partition(v, partitions) for v in table.column(field).to_pylist()], pa.int32())
    pieces = [table.filter(pc.equal(parts, p)) for p in range(partitions)]
    return pieces if partitions > 1 else pieces[0]  # one return is the value itself, not a list of one


def survivor_pieces(block, partitions: int):
    """One annotated block's survivors' keys (KEY_SCHEMA), in pieces by hash of id."""
    from curation.release.passes import KEY_SCHEMA, survivor_keys

    return split(survivor_keys(block).cast(KEY_SCHEMA), "id", partitions)


def _band_table(rows: list[dict], bands: int):
    import pyarrow as pa

    from curation.stages.dedup import band_entries

    return pa.Table.from_pylist(list(band_entries(rows, bands)), schema=_entry_schema())


def decide(check: str, following: str | None, partitions: int, bands: int, *pieces):
    """One partition of the id or exact check: its drops, after the kept rows' next keys in pieces — by hash of the
    exact key (`following` "exact_key"), by hash of LSH band ("band"), or none (None: the drops alone)."""
    import pyarrow as pa

    from curation.release.passes import KEY_SCHEMA, drops_table
    from curation.stages import dedup

    rows = pa.concat_tables([p.cast(KEY_SCHEMA) for p in pieces]).to_pylist() if pieces else []
    kept, drops = getattr(dedup, check)(rows)
    drops = drops_table(drops)
    if following is None:
        return drops
    kept_table = _band_table(kept, bands) if following == "band" else \
        pa.Table.from_pylist(kept, schema=KEY_SCHEMA)
    out = split(kept_table, following, partitions)
    return [*out, drops] if partitions > 1 else [out, drops]


def edges(threshold: float, *pieces):
    """One band partition's similar pairs (near_edges)."""
    import pyarrow as pa

    from curation.stages.dedup import near_edges

    rows = pa.concat_tables(pieces).to_pylist() if pieces else []
    schema = pa.schema([(n, getattr(pa, t)()) for n, t in _EDGE_FIELDS])
    return pa.Table.from_pylist(near_edges(rows, threshold), schema=schema)


def resolve(*edge_tables):
    from curation.release.passes import drops_table
    from curation.stages.dedup import resolve_near

    return drops_table(resolve_near(e for t in edge_tables for e in t.to_pylist()))


def concat_drops(*tables):
    import pyarrow as pa

    from curation.release.passes import DROPS_SCHEMA

    tables = [t.select(DROPS_SCHEMA.names).cast(DROPS_SCHEMA) for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else DROPS_SCHEMA.empty_table()


def dedup_on_workers(blocks: list, cfg: Mapping[str, Any], partitions: int, log: Callable[[str], None]):
    """The dedup drops of the annotated `blocks` (object references) as one table in the object store (a
    reference)."""
    import ray

    dd = cfg["dedup"]
    p, bands = int(partitions), int(dd["bands"])
    task = ray.remote(num_cpus=TASK_CPUS, max_retries=2)
    steps = ["duplicate_ids"] + (["exact_duplicates"] if dd["exact"] else [])
    nexts = {"duplicate_ids": "exact_key" if dd["exact"] else ("band" if dd["near"] else None),
             "exact_duplicates": "band" if dd["near"] else None}
    pieces = [task(survivor_pieces).options(num_returns=p).remote(block, p) for block in blocks]
    pieces = [x if p > 1 else [x] for x in pieces]
    drop_refs = []
    for check in steps:
        following = nexts[check]
        returns = p + 1 if following else 1
        out = [task(decide).options(num_returns=returns).remote(check, following, p, bands,
                                                                 *[piece[k] for piece in pieces])
               for k in range(p)]
        if following is None:
            drop_refs += out
            break
        drop_refs += [o[-1] for o in out]
        pieces = [o[:-1] for o in out]  # pieces[producer][partition], as the blocks' were
    if dd["near"]:
        pairs = [task(edges).remote(float(dd["threshold"]), *[piece[k] for piece in pieces]) for k in range(p)]
        drop_refs.append(task(resolve).remote(*pairs))
    drops = task(concat_drops).remote(*drop_refs)
    log(f"dedup: {' -> '.join(steps + (['near_duplicates'] if dd['near'] else []))} over {p} hash partitions")
    return drops
