"""Sharded scoring without Ray: a fake pipeline that returns token-stats rows in scrambled blocks stands in for the
Ray Data one, so the bookkeeping (completion markers, ordering, accounting, resume, fingerprints) is tested fast."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pytest

from jobs import shards as sh
from jobs.storage_io import Location
from scoring.tasks import SCORED_SCHEMA


@dataclass
class Cfg:  # the EvaluateConfig fields the sharder reads
    model: str = "m"
    ref_model: Optional[str] = None
    shard_size: int = 3
    context: Optional[int] = None
    stride: Optional[int] = None
    batch_size: Optional[int] = None
    gpus_per_actor: float = 0.0
    actors: int = 1


class FakeDataset:
    def __init__(self, rows, views, drop=None, seed=0):
        recs = [{"id": r["id"], "view": v, "model": "m", "text": r["input"], "token_ids": [1, 2, 3],
                 "offsets": None, "first_predicted": 1, "n_windows": 1, "lp": [-float(len(r["input"]))],
                 "lp_max": [0.0], "mu": [0.0], "sigma": [0.0], "entropy": [0.0], "error": None, "prefix_len": None}
                for r in rows for v in views if (r["id"], v) != drop]
        random.Random(seed).shuffle(recs)
        self.blocks = [pa.Table.from_pylist(recs[i:i + 4], schema=SCORED_SCHEMA) for i in range(0, len(recs), 4)]

    def iter_batches(self, **kw):
        yield from self.blocks


def rows(n):
    return [{"id": f"r{i:02d}", "input": "x" * (i + 1)} for i in range(n)]


def make(dest, data, views=("original", "lowercase"), calls=None, drop=None, fingerprint="fp1", **cfg):
    def dataset_fn(rs, c, v, p):
        if calls is not None:
            calls.append([r["id"] for r in rs])
        return FakeDataset(rs, v, drop=drop)

    return sh.ShardedScorer(data, Cfg(**cfg), views, None, dest, dataset_fn=dataset_fn,
                            specs_fn=lambda *a: pytest.fail("no fallback expected"), fingerprint=fingerprint)


def test_shards_are_written_in_order_with_markers(tmp_path):
    dest = Location(tmp_path / "out")
    table = make(dest, rows(8)).run()
    assert [(r["id"], r["view"]) for r in table.to_pylist()] == [
        (f"r{i:02d}", v) for i in range(8) for v in ("original", "lowercase")]
    markers = sorted((tmp_path / "out" / "shards").glob("*.done.json"))
    infos = [json.loads(m.read_text()) for m in markers]
    assert [(i["shard"], i["rows"], i["token_rows"]) for i in infos] == [(0, 3, 6), (1, 3, 6), (2, 2, 4)]
    assert all(i["fingerprint"] == "fp1" for i in infos)


def test_resume_scores_only_missing_shards_and_a_finished_job_scores_nothing(tmp_path, monkeypatch):
    dest = Location(tmp_path / "out")
    monkeypatch.setenv(sh.ABORT_ENV, "1")
    with pytest.raises(sh.InjectedAbort):
        make(dest, rows(8)).run()
    monkeypatch.delenv(sh.ABORT_ENV)
    calls = []
    s = make(dest, rows(8), calls=calls)
    table = s.run()
    assert calls == [[f"r{i:02d}" for i in range(3, 8)]] and s.stats["reused"] == 1
    assert table.equals(make(Location(tmp_path / "clean"), rows(8)).run())
    calls.clear()
    make(dest, rows(8), calls=calls).run()
    assert calls == []


def test_a_changed_fingerprint_or_changed_rows_are_rescored(tmp_path):
    dest = Location(tmp_path / "out")
    make(dest, rows(6)).run()
    calls = []
    make(dest, rows(6), calls=calls, fingerprint="fp2").run()
    assert calls == [[f"r{i:02d}" for i in range(6)]]
    edited = rows(6)
    edited[4]["input"] = "changed"
    calls.clear()
    make(dest, edited, calls=calls, fingerprint="fp2").run()
    assert calls == [["r03", "r04", "r05"]]  # only the shard whose rows changed


def test_a_shard_file_that_does_not_match_its_marker_is_an_error(tmp_path):
    dest = Location(tmp_path / "out")
    make(dest, rows(3)).run()
    path = tmp_path / "out" / "shards" / "token_stats-00000.parquet"
    path.write_bytes(path.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(RuntimeError, match="does not match its completion marker"):
        make(dest, rows(3)).run()


def test_a_lost_row_fails_the_job_loudly(tmp_path):
    with pytest.raises(RuntimeError, match="row accounting does not reconcile"):
        make(Location(tmp_path / "out"), rows(5), drop=("r04", "lowercase")).run()
    assert len(list((tmp_path / "out" / "shards").glob("*.done.json"))) == 1  # the complete shard was kept


def test_model_identity_sees_retrained_weights_not_timestamps(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    weights = bytearray(b"\0" * (5 << 20))
    (model / "model.safetensors").write_bytes(bytes(weights))
    first = sh.model_identity(str(model))
    import os

    os.utime(model / "model.safetensors", (1, 1))
    assert sh.model_identity(str(model)) == first
    weights[(5 << 20) // 2] = 1  # a retrained checkpoint of the same size
    (model / "model.safetensors").write_bytes(bytes(weights))
    assert sh.model_identity(str(model)) != first
    assert sh.model_identity("HuggingFaceTB/SmolLM2-135M") == {"model": "HuggingFaceTB/SmolLM2-135M"}


def test_plan_shards():
    assert [len(s.rows) for s in sh.plan_shards(rows(7), 3)] == [3, 3, 1]
    assert sh.plan_shards([], 3) == []
    with pytest.raises(ValueError):
        sh.plan_shards(rows(2), 0)


def test_scrambled_blocks_across_shards(tmp_path):
    """Blocks that mix rows of several shards still complete each shard exactly once."""
    dest = Location(tmp_path / "out")
    s = make(dest, rows(10), shard_size=2)
    s.run()
    assert s.stats["scored"] == 5 and s.stats["rows_scored_now"] == 10
    assert sorted(p.name for p in Path(tmp_path / "out" / "shards").glob("*.parquet")) == [
        f"token_stats-{i:05d}.parquet" for i in range(5)]
