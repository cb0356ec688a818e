"""doc-mia's k-fold grid over part files: the workers make every feature, the driver fits only the forests.

    doc_stats parts ──▶ pass 1, per part: per-fold TF counts and GP sums (k × vocabulary each) ──▶ driver: adds
                        them up and forms the k training-fold references per context (scoring/audits/docmia/grid.py)
                    ──▶ pass 2, per part: AggFE of every document for every (C, normalisation, fold), written to
                        OUT/_grid/AggFE/part-NNNNN.parquet, one row group per config
                    ──▶ driver: HistFE edges per config from the training documents' AggFE min/max columns
                    ──▶ pass 3, per part: HistFE, written likewise to OUT/_grid/HistFE/
                    ──▶ driver: per config, one feature matrix (documents × features) read from the row groups,
                        a forest per fold (scoring/audits/docmia/protocol.py run_forests)

The driver holds k reference vectors per context and one feature matrix at a time, never token stats. `mapper`
runs the per-part calls: Ray tasks in the job, a plain loop in tests and on a machine without Ray.
"""
from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from jobs.plane.part_store import part_name
from curation.io.outputs import Location
from scoring.audits.docmia.grid import (add_sums, configs, fold_references, fold_sums, hist_edges_from_agg,
                                 part_features)
from scoring.audits.docmia.normalization import Normalization
from scoring.audits.docmia.protocol import GridConfig, run_forests

STATS_DIR = "doc_stats.parquet"
GRID_DIR = "_grid"

# mapper(fn, calls, shared) → the results of fn(shared, **call) for every call, in any order
Mapper = Callable[[Callable, Sequence[dict], dict], Iterable]


def local_mapper(fn: Callable, calls: Sequence[dict], shared: dict) -> Iterable:
    return (fn(shared, **call) for call in calls)


def _stats(dest: str, index: int) -> pa.Table:
    return Location(dest).read_parquet(f"{STATS_DIR}/{part_name(index)}.parquet")


def part_sums_task(shared: dict, index: int, fold_of: dict) -> dict:
    return fold_sums(_stats(shared["dest"], index), fold_of, shared["k"], shared["vocab"], shared["refs"])


def part_features_task(shared: dict, index: int, fold_of: dict) -> dict:
    """Write one part's features, one row group per config (configs() order)."""
    import pyarrow.parquet as pq

    mats = part_features(_stats(shared["dest"], index), fold_of, shared["references"], shared["contexts"],
                         shared["norms"], shared["k"], shared["kind"], shared.get("edges"), shared["bins"])
    width = mats[0].shape[1]
    schema = pa.schema([("x", pa.list_(pa.float64(), width))])
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, schema) as writer:
        for m in mats:
            if m.shape[0] != len(fold_of):
                raise ValueError(f"part {index}: {m.shape[0]} feature rows for {len(fold_of)} documents")
            x = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(m).ravel(), pa.float64()), width)
            writer.write_table(pa.table({"x": x}, schema=schema))
    Location(shared["dest"]).write_bytes(f"{GRID_DIR}/{shared['kind']}/{part_name(index)}.parquet", sink.getvalue())
    return {"index": index, "rows": len(fold_of), "row_groups": len(mats)}


class FeatureReader:
    """One config's feature matrix over every part, read a row group at a time (from a local copy when the output
    is on S3, so each file is downloaded once)."""

    def __init__(self, dest: Location, kind: str, indices: Sequence[int], n_configs: int, scratch: Path):
        self.files = []
        for i in indices:
            rel = f"{GRID_DIR}/{kind}/{part_name(i)}.parquet"
            path = dest.download(rel, scratch / kind / f"{part_name(i)}.parquet") if dest.s3 else dest.root / rel
            self.files.append(path)
        self.n_configs = n_configs

    def matrix(self, config: int) -> np.ndarray:
        import pyarrow.parquet as pq

        blocks = []
        for path in self.files:
            pf = pq.ParquetFile(path)
            if pf.metadata.num_row_groups != self.n_configs:
                raise ValueError(f"{path}: {pf.metadata.num_row_groups} row groups for {self.n_configs} configs")
            col = pf.read_row_group(config, columns=["x"]).column("x").combine_chunks()
            blocks.append(col.flatten().to_numpy().reshape(len(col), col.type.list_size))
        return np.concatenate(blocks)


def run_grid_on_parts(dest: Location, parts: Mapping[int, Mapping[str, int]], labels: np.ndarray, folds: np.ndarray,
                      baseline: Mapping[int, np.ndarray], cfg: GridConfig, contexts: Sequence[int], vocab: int,
                      mapper: Mapper = local_mapper, progress: Callable | None = None
                      ) -> tuple[list[dict], dict[str, np.ndarray]]:
    """`parts[index]` maps each of the part's grid documents (in stats order) to its fold; parts in index order
    list the documents in label order. Returns run_forests' (records, out-of-fold scores)."""
    norms: list[Normalization] = list(cfg.normalizations)
    refs = sorted({n.ref for n in norms if n.ref})
    calls = [{"index": i, "fold_of": dict(f)} for i, f in sorted(parts.items()) if f]
    shared = {"dest": dest.uri, "k": cfg.k, "vocab": int(vocab), "refs": refs, "contexts": list(contexts),
              "norms": norms, "bins": cfg.hist_bins}
    totals: dict = {}
    for part in mapper(part_sums_task, calls, shared):
        add_sums(totals, part)
    shared["references"] = fold_references(totals, cfg.k)
    del totals
    grid = configs(contexts, norms, cfg.k)
    index_of = {c: j for j, c in enumerate(grid)}
    indices = [c["index"] for c in calls]
    with tempfile.TemporaryDirectory(prefix="tidemark-docmia-") as scratch:
        readers = {}
        for kind in ("AggFE", "HistFE"):
            if kind == "HistFE" and "HistFE" not in cfg.features:
                break
            if kind == "HistFE":  # edges from the training documents' AggFE min/max, per config
                agg = readers["AggFE"]
                shared["edges"] = {c: hist_edges_from_agg(agg.matrix(j)[folds != c[2]], cfg.hist_bins)
                                   for j, c in enumerate(grid)}
            list(mapper(part_features_task, calls, {**shared, "kind": kind}))
            readers[kind] = FeatureReader(dest, kind, indices, len(grid), Path(scratch))

        def matrix(feat: str, context: int, norm: str, fold: int) -> np.ndarray:
            return readers[feat].matrix(index_of[(context, norm, fold)])

        return run_forests(labels, folds, baseline, cfg, matrix, progress)
