"""jobs/parts/overlap/semantic_index.py without Ray: a search part reads exactly the stored rows of its chosen
windows across shards and row groups, and an index is checked against the run's embedder (by its files, wherever
they are), window plan and token limit."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


def test_the_chosen_windows_rows_are_read_across_shards_and_row_groups(tmp_path):
    from jobs.parts.overlap.semantic_index import _window_rows

    shards, rows = [], []
    for k, (start, n, group) in enumerate([(0, 100, 7), (100, 50, 16)]):
        t = pa.table({"doc_id": [f"d{start + j}" for j in range(n)], "start_word": np.arange(start, start + n),
                      "n_words": np.full(n, 5), "char_start": np.zeros(n, np.int64), "char_end": np.full(n, 9),
                      "text": [f"window {start + j}" for j in range(n)]})
        pq.write_table(t, tmp_path / f"windows.{k:03d}.parquet", row_group_size=group)
        shards.append({"k": k, "start": start, "windows": n})
        rows += t.to_pylist()
    local = np.array([0, 3, 8, 9, 50, 99, 100, 120, 149])
    got = _window_rows(tmp_path, shards, local)
    assert pa.table(got).to_pylist() == [rows[j] for j in local]


def test_an_index_is_checked_against_the_runs_embedder_plan_and_token_limit(tmp_path):
    from jobs.parts.overlap.semantic_index import check_index, files_digest

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    copy = tmp_path / "elsewhere"
    copy.mkdir()
    for f in model.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    block = {"embedder": {"name": "m", "path": str(model), "files_digest": files_digest(str(model))},
             "window": {"size": 64, "stride": 32}, "max_tokens": 256}
    assert check_index(block, "IDX", str(copy), None, None, 256) == (64, 32)  # the same files elsewhere: fine
    assert check_index(block, "IDX", str(model), 64, 32, 256) == (64, 32)
    (copy / "tokenizer.json").write_text("{}")  # one more file: another embedder
    with pytest.raises(ValueError, match="was embedded with m"):
        check_index(block, "IDX", str(copy), None, None, 256)
    with pytest.raises(ValueError, match="windows of 64 words, stride 32"):
        check_index(block, "IDX", str(model), None, 16, 256)
    with pytest.raises(ValueError, match="cut at 256 tokens"):
        check_index(block, "IDX", str(model), None, None, 128)
