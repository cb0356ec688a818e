"""jobs/parts/index/embeddings.py without Ray: an index part's files are read in order and cut as windows.py cuts,
and its windows embedded into shards of at most max_shard_windows: vectors as the embedder gives them (float32) or
rounded to float16, each window's row at the same place, an IVF index where the shard is large enough (forced
here), and shards.json saying where each shard starts."""
from __future__ import annotations

import json
import random

import numpy as np
import pyarrow.parquet as pq
import pytest

from sentence_models import build_sentence_model

pytest.importorskip("faiss")

WORDS = "the farmer walked to market with a basket of apples and came home before rain started".split()


@pytest.fixture(scope="module")
def part(tmp_path_factory):
    from jobs.parts.index.build import IndexPart
    from jobs.parts.index.embeddings import EmbeddingPlan, PrepareIndexWindows, part_item

    rng = random.Random(4)
    root = tmp_path_factory.mktemp("index-embeddings")
    (root / "c").mkdir()
    docs = [{"id": f"d{j}", "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60)))} for j in range(16)]
    (root / "c" / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[:8]) + "{not json\n")
    (root / "c" / "b.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[8:]))
    model = str(build_sentence_model(root / "model", [" ".join(WORDS)]))
    p = IndexPart(3, (str(root / "c" / "a.jsonl"), str(root / "c" / "b.jsonl")), str(root / "c"), 0)
    settings = {"text_field": "text", "id_field": "id", "opts": {}}
    plan = EmbeddingPlan(model, "tiny", 12, 6, "float32", max_shard_windows=20, ann_min_windows=15)
    prepared = PrepareIndexWindows().prepare(part_item(p, settings, plan)["part"])
    return {"root": root, "docs": docs, "model": model, "plan": plan, "prepared": prepared}


def embed(part, dtype: str, tmp_path) -> tuple[dict, list]:
    from dataclasses import asdict, replace

    from jobs.parts.index.embeddings import EmbedIndexWindows
    from jobs.plane.scoring_pool import ModelBranch, ScoringSpec

    spec = ScoringSpec((ModelBranch(part["model"], ("original",)),))
    stage = EmbedIndexWindows(spec, 0, 1, {"dest": str(tmp_path)}, plan=asdict(replace(part["plan"], dtype=dtype)))
    summary = stage.score(dict(part["prepared"]))
    return summary, stage


def test_the_parts_files_are_read_in_order_and_cut_as_windows_py_cuts(part):
    from jobs.plane.scoring_pool import from_ipc
    from scoring.semantic.windows import WindowPlan, window_offsets

    p = part["prepared"]
    assert p["index"] == 3 and [q["reason"] for q in from_ipc(p["quarantine"]).to_pylist()] == ["bad_json"]
    docs = from_ipc(p["docs"]).to_pylist()
    assert docs == part["docs"]
    expected = [(i, *w) for i, d in enumerate(docs) for w in window_offsets(d["text"], WindowPlan(12, 6))]
    assert [tuple(w.values()) for w in from_ipc(p["windows"]).to_pylist()] == expected


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_windows_are_embedded_into_shards_with_their_rows(part, tmp_path, dtype):
    from jobs.plane.scoring_pool import from_ipc

    summary, stage = embed(part, dtype, tmp_path)
    where = tmp_path / "part-00003"
    shards = json.loads((where / "shards.json").read_text())
    docs = from_ipc(part["prepared"]["docs"]).to_pylist()
    win = from_ipc(part["prepared"]["windows"]).to_pylist()
    texts = [docs[w["doc"]]["text"][w["char_start"]:w["char_end"]] for w in win]
    assert [s["start"] for s in shards] == list(range(0, len(win), 20)) and sum(s["windows"] for s in shards) == len(
        win)
    assert summary["windows"] == len(win) and summary["shards"] == len(shards) and summary["documents"] == 16
    assert summary["records"] == 17 and summary["quarantined"] == 1 and set(summary["files"]) == {
        f.name for f in where.iterdir()}
    expected = stage.embedder.embed(texts)
    for s in shards:
        k, a, b = s["k"], s["start"], s["start"] + s["windows"]
        vectors = np.load(where / f"vectors.{k:03d}.npy")
        assert vectors.dtype == np.dtype(dtype)
        np.testing.assert_allclose(vectors.astype(np.float32), expected[a:b], atol=1e-6 if dtype == "float32" else
                                   1e-3)
        rows = pq.read_table(where / f"windows.{k:03d}.parquet").to_pylist()
        assert [r["text"] for r in rows] == texts[a:b]
        assert [r["doc_id"] for r in rows] == [docs[w["doc"]]["id"] for w in win[a:b]]
        assert (where / f"ann.{k:03d}.faiss").exists() == (s["windows"] >= 15) == (s["ann"]["kind"] == "ivf")
    assert summary["ann_shards"] == sum(s["windows"] >= 15 for s in shards) >= 1
