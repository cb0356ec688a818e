"""Where a scoring job's parts live in its output, and how a part is committed.

    OUT/token_stats.parquet/part-NNNNN.parquet   per-token statistics (a Parquet dataset: pq.read_table(dir) reads it)
    OUT/scores.parquet/part-NNNNN.parquet        one row per scored text, one float column per detector
    OUT/quarantine.parquet/part-NNNNN.parquet    the part's quarantined rows (curation/io/ledger.py schema)
    OUT/neighbours.parquet/part-NNNNN.parquet    with the `neighbour` detector: every neighbour's text and loss
    OUT/_parts/part-NNNNN.done.json              the completion marker

Workers write the three files; the driver commits the part by writing its marker when the worker's summary
arrives, so a part is done exactly when its marker exists (a job cut off leaves no marker for a part whose files
were still being written). The marker records the part fingerprint (everything that changes the part's outputs),
the sha256 of the part's raw input (from the survey) and the digests of the files. A restarted job skips a part
whose marker matches without reading its files; `_parts` starts with an underscore so Parquet readers skip it.
"""
from __future__ import annotations

import io
import json

import pyarrow as pa

from curation.io.outputs import Location

PART_DIRS = ("token_stats.parquet", "scores.parquet", "quarantine.parquet", "neighbours.parquet")
MARKERS = "_parts"


def part_name(index: int) -> str:
    return f"part-{index:05d}"


class PartStore:
    """Markers and clean-up for one job's parts; `dirs` names the part directories the job writes (doc-mia's
    differ from the benchmark scorers')."""

    def __init__(self, dest: Location, fingerprint: str, dirs: tuple[str, ...] = PART_DIRS):
        self.dest, self.fingerprint, self.dirs = dest, fingerprint, tuple(dirs)

    def marker(self, index: int, digest: str) -> dict | None:
        """The part's marker when it is done for this fingerprint and this input, else None."""
        rel = f"{MARKERS}/{part_name(index)}.done.json"
        try:
            info = self.dest.read_json(rel) if self.dest.exists(rel) else None
        except (json.JSONDecodeError, OSError):
            return None
        if not info or info.get("fingerprint") != self.fingerprint or info.get("input_sha256") != digest:
            return None
        return info

    def commit(self, summary: dict, digest: str, run_id: str) -> None:
        self.dest.write_json(f"{MARKERS}/{part_name(summary['index'])}.done.json",
                             {**summary, "fingerprint": self.fingerprint, "input_sha256": digest, "run_id": run_id})

    def clean(self, keep: set[int]) -> None:
        """Remove part files and markers of parts that are not kept (an earlier plan's, or unfinished)."""
        keep_names = {part_name(i) for i in keep}
        for under in (*self.dirs, MARKERS):
            for rel in self.dest.list(under):
                if rel.rsplit("/", 1)[-1].split(".")[0] not in keep_names:
                    self.dest.delete(rel)


def read_parts(dest: Location, under: str, columns=None, prefix: str = "") -> pa.Table | None:
    """A part directory (`scores.parquet`, ...) as one table in part order, only `columns` when given and only
    files whose name starts with `prefix`; None when it holds no part."""
    import pyarrow.parquet as pq

    names = [n for n in dest.list(under) if n.endswith(".parquet") and n.rsplit("/", 1)[-1].startswith(prefix)]
    tables = [pq.read_table(io.BytesIO(dest.read_bytes(n)) if dest.s3 else dest.root / n, columns=columns)
              for n in names]
    return pa.concat_tables(tables) if tables else None


def read_rows(dest: Location, under: str, ids, columns=None) -> pa.Table | None:
    """The rows of a part directory whose `id` is in `ids` (a report's few examples: each file is filtered as it is
    read, so the driver never holds a whole table)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    wanted = pa.array(sorted(set(ids)), pa.string())
    tables = []
    for name in (n for n in dest.list(under) if n.endswith(".parquet")):
        t = pq.read_table(io.BytesIO(dest.read_bytes(name)) if dest.s3 else dest.root / name, columns=columns)
        tables.append(t.filter(pc.is_in(t.column("id"), value_set=wanted)))
    return pa.concat_tables(tables) if tables else None
