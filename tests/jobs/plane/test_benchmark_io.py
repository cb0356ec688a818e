"""Reading a benchmark never crashes on a bad row: it quarantines it with a reason, and counts reconcile."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.plane.benchmark_reader import read_benchmark


def test_bad_jsonl_rows_are_quarantined_with_reasons(tmp_path):
    path = tmp_path / "bench.jsonl"
    lines = [
        json.dumps({"id": "ok1", "input": "a fine text", "label": 1}).encode(),
        json.dumps({"id": "empty", "input": "   ", "label": 0}).encode(),
        json.dumps({"id": "nolabel", "input": "text without a label"}).encode(),
        json.dumps({"id": "badlabel", "input": "text", "label": 2}).encode(),
        b'{"id": "latin1", "input": "caf\xe9", "label": 0}',
        b"{not json",
        b"[1, 2]",
        json.dumps({"id": "ok1", "input": "duplicate id", "label": 0}).encode(),
        json.dumps({"input": "no id, label as string", "label": "0", "bucket": 32}).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n\n")
    rows, bad = read_benchmark(path)
    assert [r["id"] for r in rows] == ["ok1", "bench:9"]
    assert rows[1]["label"] == 0 and rows[1]["bucket"] == "32"
    reasons = {q["id"]: q["reason"] for q in bad}
    assert reasons == {"empty": "empty_input", "nolabel": "bad_label", "badlabel": "bad_label",
                       "bench:5": "not_utf8", "bench:6": "bad_json", "bench:7": "bad_json", "ok1": "duplicate_id"}
    assert len(rows) + len(bad) == 9  # every non-blank line is accounted for
    assert all(set(q) == {"id", "stage", "reason", "detail"} for q in bad)


def test_parquet_and_release_directories(tmp_path):
    data = tmp_path / "release" / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"id": "a", "input": "x y", "label": 1, "bucket": 32},
                                         {"id": "b", "input": None, "label": 0, "bucket": 32}]), data / "p0.parquet")
    rows, bad = read_benchmark(tmp_path / "release")
    assert [r["id"] for r in rows] == ["a"] and [q["reason"] for q in bad] == ["empty_input"]


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_benchmark(tmp_path / "nope.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no \\*.parquet"):
        read_benchmark(tmp_path / "empty")


def test_overlap_reads_rows_without_labels_from_a_named_field(tmp_path: Path):
    """`tidemark overlap` reads GSM8K-like rows: no label, the text under `question`, `split` kept."""
    path = tmp_path / "gsm.jsonl"
    path.write_text('{"id": "a", "question": "How many apples?", "split": "test"}\n'
                    '{"id": "b", "question": ""}\n{"id": "c", "question": "Two.", "label": 1, "bucket": 32}\n')
    rows, bad = read_benchmark(path, text_field="question", require_label=False)
    assert [(r["id"], r["input"], r["label"], r["bucket"], r["split"]) for r in rows] == [
        ("a", "How many apples?", None, None, "test"), ("c", "Two.", 1, "32", None)]
    assert [(q["id"], q["reason"]) for q in bad] == [("b", "empty_input")]
