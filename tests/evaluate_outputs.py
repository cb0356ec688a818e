"""Checks on an evaluate OUT shared by the fault-tolerance and node-loss tests: two runs' outputs equal bit for bit
(token stats, every float, and scores), and the row accounting of one run reconciles with its files."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq


def assert_same_outputs(a: Path, b: Path, skip_ids: frozenset = frozenset()):
    ta, tb = (pq.read_table(p / "token_stats.parquet").to_pylist() for p in (a, b))
    ta = [r for r in ta if r["id"] not in skip_ids]
    tb = [r for r in tb if r["id"] not in skip_ids]
    assert [(r["id"], r["view"]) for r in ta] == [(r["id"], r["view"]) for r in tb]
    assert ta == tb  # token ids and every float stat, bit for bit
    sa, sb = (pq.read_table(p / "scores.parquet").to_pylist() for p in (a, b))
    assert [r for r in sa if r["id"] not in skip_ids] == [r for r in sb if r["id"] not in skip_ids]


def assert_accounting(out: Path, n_in: int) -> dict:
    run = json.loads((out / "run.json").read_text())
    counts = run["counts"]
    assert counts["in"] == n_in == counts["scored"] + counts["quarantined"]
    assert pq.read_table(out / "scores.parquet").num_rows == counts["scored"]
    assert pq.read_table(out / "quarantine.parquet").num_rows == counts["quarantined"]
    assert json.loads((out / "_SUCCESS").read_text())["counts"] == counts
    return run
